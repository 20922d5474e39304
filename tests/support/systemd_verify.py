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
import threading
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
TEMPLATE_SUFFIXES = tuple("@" + suffix for suffix in UNIT_SUFFIXES)
SYSTEM_UNIT_DIRS = ("/usr/lib/systemd/system", "/lib/systemd/system")
_EXEC_KEYS = re.compile(
    r"^\s*Exec(?:Start|StartPre|StartPost|Stop|StopPost|Reload|Condition)\s*=\s*(.*)$", re.MULTILINE
)
_STUB = "#!/bin/sh\nexit 0\n"
_LOCK = threading.Lock()  # one shared root per process: one verify at a time


def _find_analyze() -> str:
    from .tools import require_tool

    return require_tool("systemd-analyze")


def unit_executables(unit_text: str, *, instance: str | None = None) -> list[str]:
    """Absolute executable paths named by the Exec*= lines of a unit (prefixes ``-@:+!|`` removed).
    ``%i``/``%I`` become ``instance`` when given; commands with other specifiers or variables (``%n``,
    ``$X``) are skipped: they cannot be stubbed."""
    paths: list[str] = []
    for m in _EXEC_KEYS.finditer(unit_text):
        value = m.group(1).strip().lstrip("-@:+!|").strip()
        if instance is not None:
            value = value.replace("%i", instance).replace("%I", instance)
        try:
            words = shlex.split(value.split(" ;")[0], posix=True)
        except ValueError:
            continue  # unbalanced quoting: systemd-analyze reports it
        if words and words[0].startswith("/") and not re.search(r"[%$]", words[0]):
            paths.append(words[0])
    return paths


@functools.cache
def _base_root() -> Path:
    """One root per process (removed at exit): a copy of this machine's /lib/systemd/system and the merged
    /usr symlinks. Each call adds its units and stubs and removes them again: building and deleting a root
    per call cost 250-400 ms here (rmdir of the copy's 100 directories was the slowest part)."""
    src = next((d for d in SYSTEM_UNIT_DIRS if os.path.isdir(d)), None)
    if src is None:
        raise FileNotFoundError("no /lib/systemd/system on this machine")
    root = Path(tempfile.mkdtemp(prefix="sdroot-")).resolve()
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (root / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree(src, root / "usr/lib/systemd/system", symlinks=True)
    for link, target in (("lib", "usr/lib"), ("bin", "usr/bin"), ("sbin", "usr/sbin")):
        (root / target).mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(target)  # merged /usr, as on Debian 12 and Ubuntu 24.04
    (root / "etc/systemd/system").mkdir(parents=True)
    return root


def _write(path: Path, text: str, created: list[Path], mode: int = 0o644) -> None:
    """Write a file, recording it and every directory made for it (deepest last) in ``created``."""
    missing = [d for d in reversed(path.parents) if not d.exists()]
    for d in missing:
        d.mkdir()
        created.append(d)
    path.write_text(text)
    path.chmod(mode)
    created.append(path)


def populate_root(
    root: Path, unit_files: Mapping[str, str], executables: Iterable[str], created: list[Path]
) -> list[Path]:
    """Add stub executables and our units (under etc/systemd/system) to ``root``, recording every file
    and directory made in ``created``. Returns our top-level unit files (drop-ins such as
    ``x.service.d/a.conf`` are written, not listed)."""
    for exe in executables:
        if not exe.startswith("/"):
            raise ValueError(f"executable paths must be absolute: {exe!r}")
        stub = Path(root, exe.lstrip("/"))
        if not stub.exists():
            _write(stub, _STUB, created, 0o755)
    unit_dir = root / "etc/systemd/system"
    units: list[Path] = []
    for name, text in unit_files.items():
        if name.startswith("/") or ".." in Path(name).parts:
            raise ValueError(f"unit file names are relative to /etc/systemd/system: {name!r}")
        _write(unit_dir / name, text, created)
        if "/" not in name and name.endswith(UNIT_SUFFIXES):
            units.append(unit_dir / name)
    return units


def _remove(created: list[Path]) -> None:
    for path in reversed(created):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def _analyze(analyze: str, root: Path, units: list[Path]) -> subprocess.CompletedProcess[str]:
    argv = [analyze, "verify", "--man=no", f"--root={root}", *map(str, units)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "SYSTEMD_LOG_COLOR": "0"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=env)


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

    Templates: systemd-analyze 252 verifies ``x@.service`` as ``x@i.service`` (``%i`` is "i"); to check
    one instance, name the file ``x@rank0.service`` (the template text, loaded as that instance).
    """
    analyze = _find_analyze()
    exes = list(extra_executables)
    if stub_unit_executables:
        for name, text in unit_files.items():
            # systemd-analyze 252 verifies a template (x@.service) as the instance "i" (x@i.service).
            exes += unit_executables(text, instance="i" if name.endswith(TEMPLATE_SUFFIXES) else None)
    if not any("/" not in name and name.endswith(UNIT_SUFFIXES) for name in unit_files):
        raise ValueError(f"no unit file among {sorted(unit_files)}")
    with _LOCK:
        root = _base_root()
        created: list[Path] = []
        try:
            units = populate_root(root, unit_files, exes, created)
            proc = _analyze(analyze, root, units)
        finally:
            _remove(created)
    machine_units = tuple(f"{root}{d}/" for d in SYSTEM_UNIT_DIRS)
    kept = [line for line in (proc.stderr + proc.stdout).splitlines() if not line.startswith(machine_units)]
    out = "\n".join(line.replace(str(root), "") for line in kept)
    if proc.returncode != 0 and not out:
        raise RuntimeError(f"systemd-analyze verify failed silently: exit {proc.returncode}")
    return out
