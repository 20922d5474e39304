"""``systemd-analyze verify`` against a throwaway root, for generated units.

What it showed on this machine (Debian 12, systemd 252, no systemd as PID 1), see the self-tests:

* It exits 0 for unknown directives (``Unknown key 'Restrat' in section [Service], ignoring.``) and for
  unparseable values (``Failed to parse sec value, ignoring: 10 fortnights``): stderr is the signal, so
  :func:`systemd_verify` returns stderr and callers assert it is empty.
* Without ``--root`` it checks executables on this machine (``/usr/bin/docker`` is missing here: docker
  lives in /usr/local/bin). With ``--root`` it needs ``sysinit.target`` & co under the root ("Unit
  sysinit.target not found" otherwise), hence the copy of /lib/systemd/system.
* A perfect unit gives NO output at all here: no noise line needed filtering. Two guards, each for a
  machine-dependent message that would say nothing about our unit:
  - ``--man=no``: by default a ``Documentation=man:foo(8)`` entry runs ``man`` on THIS machine ("Command
    'man foo(8)' failed with code 16" where the page is not installed) — the fleet host is what matters.
  - lines about the copied ``/lib/systemd/system`` units (their path under the root) are dropped: with the
    default ``--recursive-errors=yes`` a dependency such as sysinit.target is parsed too, and a quirk in
    this machine's own unit files is not ours. ``--recursive-errors=no`` would also hide "Requires=
    missing.service: Unit not found", which we want, so the filter is by path.
* Not caught (by design of the tool): Wants=/After= on missing units, a missing EnvironmentFile=, an
  unknown User=.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

UNIT_SUFFIXES = (
    ".service",
    ".socket",
    ".target",
    ".timer",
    ".path",
    ".mount",
    ".automount",
    ".slice",
    ".scope",
    ".swap",
    ".device",
)
SYSTEM_UNIT_DIRS = ("/usr/lib/systemd/system", "/lib/systemd/system")
_EXEC_KEYS = re.compile(
    r"^\s*Exec(?:Start|StartPre|StartPost|Stop|StopPost|Reload|Condition)\s*=\s*(.*)$", re.MULTILINE
)
_STUB = "#!/bin/sh\nexit 0\n"


def _find_analyze() -> str:
    from .tools import require_tool

    return require_tool("systemd-analyze")


def unit_executables(unit_text: str) -> list[str]:
    """Absolute executable paths named by the Exec*= lines of a unit (prefixes ``-@:+!|`` removed);
    commands with specifiers or variables (``%i``, ``$X``) are skipped: they cannot be stubbed."""
    paths: list[str] = []
    for m in _EXEC_KEYS.finditer(unit_text):
        value = m.group(1).strip().lstrip("-@:+!|").strip()
        try:
            words = shlex.split(value.split(" ;")[0], posix=True)
        except ValueError:
            continue  # unbalanced quoting: systemd-analyze reports it
        if words and words[0].startswith("/") and not re.search(r"[%$]", words[0]):
            paths.append(words[0])
    return paths


@functools.cache
def _machine_units() -> str:
    """A private copy of this machine's /lib/systemd/system (removed at exit), to hard-link from."""
    src = next((d for d in SYSTEM_UNIT_DIRS if os.path.isdir(d)), None)
    if src is None:
        raise FileNotFoundError("no /lib/systemd/system on this machine")
    tmp = tempfile.mkdtemp(prefix="sdunits-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    dst = os.path.join(tmp, "system")
    shutil.copytree(src, dst, symlinks=True)
    return dst


def build_root(root: Path, unit_files: Mapping[str, str], executables: Iterable[str]) -> list[Path]:
    """Fill ``root``: machine units, stub executables, our units under etc/systemd/system. Returns the
    paths of our top-level unit files (drop-ins such as ``x.service.d/a.conf`` are written, not listed)."""
    (root / "usr/lib/systemd").mkdir(parents=True)
    try:  # hard links to a per-process copy: copying 235 small files took ~300 ms a call here
        shutil.copytree(
            _machine_units(), root / "usr/lib/systemd/system", symlinks=True, copy_function=os.link
        )
    except OSError:
        shutil.rmtree(root / "usr/lib/systemd/system", ignore_errors=True)
        shutil.copytree(_machine_units(), root / "usr/lib/systemd/system", symlinks=True)
    for link, target in (("lib", "usr/lib"), ("bin", "usr/bin"), ("sbin", "usr/sbin")):
        (root / target).mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(target)  # merged /usr, as on Debian 12 and Ubuntu 24.04
    for exe in executables:
        if not exe.startswith("/"):
            raise ValueError(f"executable paths must be absolute: {exe!r}")
        stub = Path(root, exe.lstrip("/"))
        stub.parent.mkdir(parents=True, exist_ok=True)
        if not stub.exists():
            stub.write_text(_STUB)
            stub.chmod(0o755)
    unit_dir = root / "etc/systemd/system"
    unit_dir.mkdir(parents=True, exist_ok=True)
    units: list[Path] = []
    for name, text in unit_files.items():
        if name.startswith("/") or ".." in Path(name).parts:
            raise ValueError(f"unit file names are relative to /etc/systemd/system: {name!r}")
        path = unit_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if "/" not in name and name.endswith(UNIT_SUFFIXES):
            units.append(path)
    return units


def systemd_verify(
    unit_files: dict[str, str],
    *,
    extra_executables: list[str],
    stub_unit_executables: bool = True,
) -> str:
    """Run ``systemd-analyze verify --root=ROOT`` on ``unit_files`` (file name -> text, written to
    ROOT/etc/systemd/system; drop-in paths such as ``x.service.d/10-a.conf`` allowed) and return its
    stderr+stdout, with ROOT removed from paths (``/etc/systemd/system/x.service:12: Unknown key ...``).
    Empty means the units are clean.

    Executables: stubs at ``extra_executables`` and, when ``stub_unit_executables``, at every absolute
    path the units' Exec*= lines name (docker, the docker-run.sh the unit starts...). With
    ``stub_unit_executables=False`` only ``extra_executables`` exist, so a unit calling anything else is
    reported ("Command /x is not executable").
    """
    analyze = _find_analyze()
    exes = list(extra_executables)
    if stub_unit_executables:
        for text in unit_files.values():
            exes += unit_executables(text)
    with tempfile.TemporaryDirectory(prefix="sdroot-") as tmp:
        root = Path(tmp).resolve()
        units = build_root(root, unit_files, exes)
        if not units:
            raise ValueError(f"no unit file among {sorted(unit_files)}")
        argv = [analyze, "verify", "--man=no", f"--root={root}", *map(str, units)]
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LANG": "C.UTF-8",
                "SYSTEMD_LOG_COLOR": "0",
            },
        )
    machine_units = tuple(f"{root}{d}/" for d in SYSTEM_UNIT_DIRS)
    kept = [line for line in (proc.stderr + proc.stdout).splitlines() if not line.startswith(machine_units)]
    out = "\n".join(line.replace(str(root), "") for line in kept)
    if proc.returncode != 0 and not out:
        raise RuntimeError(f"systemd-analyze verify failed silently: exit {proc.returncode}")
    return out
