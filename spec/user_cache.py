"""The per-user cache of spark-compile: files named by a key of their content's sources, in
$XDG_CACHE_HOME/spark-compile (default ~/.cache/spark-compile).

It holds the compiled templates (compiler/stages/template_store.py) and the catalogs split for lookup
(spec/catalog_store.py), and is trusted only as far as its owner: a directory or file that is a symlink, not
the user's own, or writable by group or others is neither read nor written, so no other user can put code or
data in a run. Each file starts with the SHA-256 of its body; a torn or edited file fails that check and
reads as missing. Any failure here means "no cache": the caller builds from the source instead, so the
cache can make a run faster, never different.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
from pathlib import Path
from typing import Any

MAX_BYTES = 8 << 20
_DIGEST_LINE = 65  # a file's first line: the SHA-256 of the rest in hex, and a newline
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def cache_dir() -> Path | None:
    """$XDG_CACHE_HOME/spark-compile, or ~/.cache/spark-compile; None with no usable home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    except (RuntimeError, KeyError):
        return None
    return root / "spark-compile"


def stamp(path: str) -> str:
    """What names one version of the file at ``path`` in a cache key: its absolute path, inode, size, and
    modification and change times. No write leaves them all as they were (the change time cannot be set
    back), and a stat costs a fraction of reading and hashing the file. Raises OSError."""
    status = os.stat(path)
    return f"{os.path.abspath(path)} {status.st_ino} {status.st_size} {status.st_mtime_ns} {status.st_ctime_ns}"


def _private(status: os.stat_result) -> bool:
    """Owned by this user and writable by no one else."""
    return status.st_uid == os.geteuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_dir(directory: Path) -> int | None:
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError:
        return None
    if _private(os.fstat(fd)):
        return fd
    os.close(fd)
    return None


def read(directory: Path, name: str) -> bytes | None:
    """The body of the file ``name``, if the file is private and intact."""
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        with os.fdopen(fd, "rb", buffering=0) as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode) or not _private(status):
                return None
            # The digest line, then the body straight into its own buffer: splitting one read copied the
            # body again, and a fresh buffer costs page faults (a catalog's body is 180 KB). The body is
            # asked for by what fstat counts (one more byte shows a file that grew), not MAX_BYTES: a
            # buffer of MAX_BYTES is allocated for every read otherwise, 8 MiB for each compiled template.
            digest = handle.read(_DIGEST_LINE)
            body = handle.read(max(min(status.st_size, MAX_BYTES) + 1 - len(digest), 0))
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    if digest[-1:] != b"\n" or digest[:-1].decode("ascii", "replace") != hashlib.sha256(body).hexdigest():
        return None
    return body


def load(directory: Path | None, name: str) -> object:
    """The marshal data of the file ``name`` (read as read() reads it), or None: no cache, no such file, or
    bytes marshal cannot read. The value is the caller's to check: any value marshal makes can come back."""
    data = read(directory, name) if directory else None
    try:
        return marshal.loads(data) if data is not None else None
    except (ValueError, EOFError, TypeError):
        return None


def dump(directory: Path | None, name: str, value: Any, *, prefix: str, keep: int) -> None:
    """Store ``value`` as marshal data under ``name`` (write(); nothing without a cache directory)."""
    if directory:
        write(directory, name, marshal.dumps(value), prefix=prefix, keep=keep)


def write(directory: Path, name: str, data: bytes, *, prefix: str, keep: int) -> None:
    """Store ``data`` as ``name`` atomically, keeping the newest ``keep`` files whose names start with
    ``prefix`` (best effort: a cache that cannot be written is skipped)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return
    temp = f".{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(hashlib.sha256(data).hexdigest().encode("ascii") + b"\n" + data)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        _prune(dir_fd, prefix, keep)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _prune(dir_fd: int, prefix: str, keep: int) -> None:
    """Drop the oldest files of ``prefix`` beyond ``keep``."""
    entries = []
    for name in os.listdir(dir_fd):
        if name.startswith(prefix):
            entries.append((os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime_ns, name))
    for _, name in sorted(entries, reverse=True)[keep:]:
        os.unlink(name, dir_fd=dir_fd)
