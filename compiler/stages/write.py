"""Stage 6: write a profile's files atomically into <root>/<profile>/, keeping what is unchanged; and the
one atomic write of a single output file (write_file: `report -o`, the catalogs).

Everything goes into a staging directory beside the target first; unchanged files and files the
compiler never wrote are hard-linked across (same inode, same mtime), foreign directories keep their
modes; then the two directories are swapped with renameat2(RENAME_EXCHANGE), so a crash at any point
leaves the old or the new tree whole. The write never adopts a directory it did not write (no
spark-compile MANIFEST.json), never writes through a symlink, and never deletes a file it does not know:
whatever appeared in the old tree during the compile is moved into the new one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from spark_compile.common.errors import InputError
from spark_compile.stages.render import Artifact

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
KILL_AFTER_ENV = "SPARK_COMPILE_TEST_KILL_AFTER"  # fault injection for the crash test: die after N files


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def write_file(path: Path, data: bytes, *, ours: bytes | None = None, force: bool = False) -> None:
    """Write ``path`` atomically: a new temporary file (a random name, created exclusively, so a planted
    file or symlink is never followed) renamed over it. Refuses a target that is not a regular file (a
    symlink, a device, a directory) and a path naming no file; keeps an existing file's mode. With ``ours``,
    an existing file is replaced only when it starts with those bytes (we wrote it) or ``force`` is given."""
    if path.name in ("", ".", ".."):
        raise InputError(f"{str(path)!r} names no file: give the path of a file to write, e.g. review.html")
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise InputError(f"{path} is {kind}: spark-compile only replaces regular files; choose another path")
    if info is not None and ours is not None and not force and _head(path, len(ours)) != ours:
        raise InputError(f"{path} exists and spark-compile did not write it: refusing to overwrite it "
                         "(give --force to replace it, or choose another -o)")
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a regular file (not through a symlink, never blocking); b"" if unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return b""
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@dataclass(slots=True)
class WriteReport:
    """What a write did: files written, kept unchanged, removed, and foreign files left alone."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)


MANIFEST = "MANIFEST.json"
MAX_MANIFEST = 64 << 20  # a 1,024-rank fleet's manifest is a few MB


@dataclass(slots=True)
class _Scan:
    """What the target held before the compile: files with their inode, directories with their mode."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    dirs: dict[str, int] = field(default_factory=dict)


def read_regular(path: str | Path, limit: int) -> bytes:
    """A regular file's bytes, opened without blocking (a FIFO in its place never hangs us), at most
    ``limit``; anything else raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise OSError(errno.EINVAL, "not a regular file of a sane size")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(limit)
    finally:
        os.close(fd)


def _manifest_data(target: Path) -> dict[str, object] | None:
    try:
        data = json.loads(read_regular(target / MANIFEST, MAX_MANIFEST))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not str(data.get("compiler", "")).startswith("spark-compile"):
        return None
    return data


def previous_manifest(target: Path) -> set[str]:
    """The files the last compile into ``target`` wrote, by its MANIFEST.json (empty when there is none)."""
    data = _manifest_data(target)
    files = data.get("files") if data else None
    return {*files, MANIFEST} if isinstance(files, dict) else set()


def previous_profile(target: Path) -> str | None:
    """The profile the last compile into ``target`` came from (its MANIFEST.json's first source), if any."""
    data = _manifest_data(target)
    sources = data.get("sources") if data else None
    first = sources[0] if isinstance(sources, list) and sources else None
    path = first.get("path") if isinstance(first, dict) else None
    return path if isinstance(path, str) else None


def check_target(target: Path) -> None:
    """Refuse a target we must not write: a symlink, a non-directory, or a directory with files but no
    spark-compile MANIFEST.json (something we did not write)."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise InputError(f"{target} is a symlink: spark-compile does not write through one; remove it or "
                         "choose another --out")
    if not stat.S_ISDIR(mode):
        raise InputError(f"{target} exists and is not a directory: spark-compile will not replace it; "
                         "move it away or choose another --out")
    with os.scandir(target) as entries:
        empty = next(entries, None) is None
    if not empty and _manifest_data(target) is None:
        raise InputError(f"{target} holds files spark-compile did not write (it has no spark-compile "
                         f"{MANIFEST}): refusing to overwrite them; choose another --out or another profile name")


def _scan(target: Path) -> _Scan:
    scan = _Scan()
    if not target.is_dir():
        return scan
    for top, dirs, files in os.walk(target):
        rel_top = os.path.relpath(top, target)
        scan.dirs[rel_top] = stat.S_IMODE(os.lstat(top).st_mode)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            info = os.lstat(os.path.join(top, name))
            scan.files[os.path.normpath(os.path.join(rel_top, name))] = (info.st_dev, info.st_ino)
    return scan


def _same(path: str, artifact: Artifact) -> bool:
    try:
        info = os.lstat(path)
        return (stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == artifact.mode
                and info.st_size == len(artifact.content)
                and read_regular(path, len(artifact.content)) == artifact.content)
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


STAGING_MARK = ".spark-compile-staging"  # in every staging directory, so only ours are ever cleaned away


def _clean_stale(root: Path, name: str) -> None:
    """Remove the staging directories a killed compile left (its mark inside, its process gone); a user's
    folder of the same name, without the mark, is never touched."""
    prefix = f".{name}.staging-"
    try:
        entries = os.listdir(root)  # not Path.glob: its pattern compiles a regex on every compile
    except OSError:
        return
    for stale in (root / entry for entry in entries if entry.startswith(prefix)):
        pid = stale.name.rsplit("-", 1)[-1]
        if _marked(stale) and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def _marked(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and stat.S_ISREG(os.lstat(path / STAGING_MARK).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on the output root: two compiles into one folder take turns (otherwise each
    would adopt the other's fresh files as late arrivals)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _maybe_die(count: int) -> None:
    """The crash test's fault: SIGKILL once ``count`` files are written; a value that is no small number is none."""
    limit = os.environ.get(KILL_AFTER_ENV, "")
    if limit.isascii() and limit.isdigit() and len(limit) <= 18 and count >= int(limit):
        os.kill(os.getpid(), 9)


def _write_new(path: str, artifact: Artifact) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, artifact.mode)
    try:
        left = memoryview(artifact.content)
        while left:
            left = left[os.write(fd, left):]
        os.fchmod(fd, artifact.mode)  # the umask may have narrowed the mode open() was given
    finally:
        os.close(fd)


def _stage(staging: Path, target: Path, files: list[Artifact], report: WriteReport) -> None:
    # Strings and os.path, not Path objects: four paths per file on every compile.
    made: set[str] = set()
    staging_dir, target_dir = os.fspath(staging), os.fspath(target)
    for count, artifact in enumerate(files, 1):
        _maybe_die(count)
        old, new = os.path.join(target_dir, artifact.path), os.path.join(staging_dir, artifact.path)
        parent = os.path.dirname(new)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        if _same(old, artifact):
            os.link(old, new)
            report.unchanged.append(artifact.path)
            continue
        _write_new(new, artifact)
        report.written.append(artifact.path)


def _keep_foreign(staging: Path, target: Path, scan: _Scan, ours: set[str], report: WriteReport) -> None:
    """Link every file we did not write into staging; give every kept directory its old mode."""
    previous = previous_manifest(target)
    for path in sorted(set(scan.files) - ours):
        if path in previous:
            report.removed.append(path)
            continue
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        os.link(target / path, staging / path, follow_symlinks=False)
        report.foreign.append(path)
    removed = set(report.removed)
    holds_files, holds_kept = _parents(scan.files), _parents(f for f in scan.files if f not in removed)
    kept = [d for d in sorted(scan.dirs) if d in holds_kept or d not in holds_files]  # not emptied by removals
    for path in kept:
        (staging / path).mkdir(parents=True, exist_ok=True)
    for path in reversed(kept):  # children first: a parent made read-only last still lets them be made
        os.chmod(staging / path, scan.dirs[path])


def _parents(files: Iterable[str]) -> set[str]:
    """Every directory (relative, "." for the top) that holds one of ``files`` at any depth."""
    found = {"."}
    for path in files:
        parent = os.path.dirname(path)
        while parent and parent not in found:
            found.add(parent)
            parent = os.path.dirname(parent)
    return found


def write_tree(root: Path, name: str, files: list[Artifact]) -> WriteReport:
    """Write ``files`` into root/name atomically; keep foreign files, drop files only we wrote before."""
    target = root / name
    staging = root / f".{name}.staging-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with _locked(root):
            return _write_locked(root, target, staging, files)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None


def _write_locked(root: Path, target: Path, staging: Path, files: list[Artifact]) -> WriteReport:
    report = WriteReport()
    ours = {a.path for a in files}
    try:
        check_target(target)
        _clean_stale(root, target.name)
        if _marked(staging):  # a staging directory of ours from a process that had our pid before
            shutil.rmtree(staging)
        staging.mkdir()
        (staging / STAGING_MARK).touch()
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        scan = _scan(target)
        _stage(staging, target, files, report)
        _keep_foreign(staging, target, scan, ours, report)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)  # ENOSPC and the like: leave nothing half-made behind
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    if not report.written and not report.removed:
        shutil.rmtree(staging, ignore_errors=True)
        return report
    try:
        (staging / STAGING_MARK).unlink()
        _swap(staging, target, scan, ours)
    except OSError as exc:
        raise InputError(f"cannot finish writing {target}: {exc.strerror or exc} (nothing was deleted; "
                         f"{staging} may hold the previous files)") from None
    return report


def _swap(staging: Path, target: Path, scan: _Scan, ours: set[str]) -> None:
    if not target.exists():
        staging.rename(target)
        return
    if _exchange(staging, target):
        old = staging  # now holds the old tree
    else:
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(old)
        staging.rename(target)
    _retire(old, target, scan, ours)


def _retire(old: Path, target: Path, scan: _Scan, ours: set[str]) -> None:
    """Remove the old tree, but first move into the new one whatever appeared in it during the compile
    (or was replaced since the scan); only files the scan saw are deleted."""
    for _ in range(3):
        for top, dirs, names in os.walk(old):
            for name in names + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
                rel = os.path.normpath(os.path.relpath(os.path.join(top, name), old))
                info = os.lstat(os.path.join(top, name))
                if scan.files.get(rel) == (info.st_dev, info.st_ino):
                    os.unlink(os.path.join(top, name))
                else:
                    _adopt_late(old / rel, target / rel, replace=rel not in ours)
        for top, _dirs, _names in sorted(os.walk(old), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(top)
        if not old.exists():
            return


def _adopt_late(source: Path, dest: Path, *, replace: bool) -> None:
    """Move a file that appeared during the compile into the new tree: over a foreign file's older copy,
    beside a generated file of the same name (as NAME.kept-PID)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(dest) and not replace:
        dest = dest.with_name(f"{dest.name}.kept-{os.getpid()}")
    try:
        os.rename(source, dest)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
