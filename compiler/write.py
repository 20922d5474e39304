"""Stage 6: write a profile's files atomically into <root>/<profile>/, keeping what is unchanged.

Everything goes into a staging directory beside the target first; unchanged files and files the
compiler never wrote are hard-linked across (same inode, same mtime); then the two directories are
swapped with renameat2(RENAME_EXCHANGE), so a crash at any point leaves the old or the new tree whole.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from spark_compile.errors import InputError
from spark_compile.render import Artifact

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
KILL_AFTER_ENV = "SPARK_COMPILE_TEST_KILL_AFTER"  # fault injection for the crash test: die after N files


@dataclass
class WriteReport:
    """What a write did: files written, kept unchanged, removed, and foreign files left alone."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)


def _previous_manifest(target: Path) -> set[str]:
    try:
        data = json.loads((target / "MANIFEST.json").read_text())
        return {*data.get("files", {}), "MANIFEST.json"}
    except (OSError, ValueError, AttributeError):
        return set()


def _existing_files(target: Path) -> set[str]:
    if not target.is_dir():
        return set()
    return {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file() or p.is_symlink()}


def _same(path: Path, artifact: Artifact) -> bool:
    try:
        return (path.stat().st_mode & 0o777) == artifact.mode and path.read_bytes() == artifact.content
    except OSError:
        return False


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False when the kernel or libc cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


def _clean_stale(root: Path, name: str) -> None:
    for stale in root.glob(f".{name}.staging-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def _maybe_die(count: int) -> None:
    limit = os.environ.get(KILL_AFTER_ENV)
    if limit is not None and count >= int(limit):
        os.kill(os.getpid(), 9)


def _write_new(path: Path, artifact: Artifact) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, artifact.mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(artifact.content)
    os.chmod(path, artifact.mode)  # the umask may have narrowed the mode open() was given


def _stage(staging: Path, target: Path, files: list[Artifact], report: WriteReport) -> None:
    made: set[Path] = set()
    for count, artifact in enumerate(files, 1):
        _maybe_die(count)
        old, new = target / artifact.path, staging / artifact.path
        if new.parent not in made:
            new.parent.mkdir(parents=True, exist_ok=True)
            made.add(new.parent)
        if _same(old, artifact):
            os.link(old, new)
            report.unchanged.append(artifact.path)
            continue
        _write_new(new, artifact)
        report.written.append(artifact.path)


def write_tree(root: Path, name: str, files: list[Artifact]) -> WriteReport:
    """Write ``files`` into root/name atomically; keep foreign files, drop files only we wrote before."""
    target = root / name
    report = WriteReport()
    try:
        root.mkdir(parents=True, exist_ok=True)
        _clean_stale(root, name)
        staging = root / f".{name}.staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        _stage(staging, target, files, report)
        ours = {a.path for a in files}
        previous = _previous_manifest(target)
        for path in sorted(_existing_files(target) - ours):
            if path in previous:
                report.removed.append(path)
                continue
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            os.link(target / path, staging / path)
            report.foreign.append(path)
        if not report.written and not report.removed:
            shutil.rmtree(staging)
            return report
        _swap(staging, target)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    return report


def _swap(staging: Path, target: Path) -> None:
    if target.exists() and _exchange(staging, target):
        shutil.rmtree(staging)  # now holds the old tree
        return
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(old)
        staging.rename(target)
        shutil.rmtree(old)
    else:
        staging.rename(target)
