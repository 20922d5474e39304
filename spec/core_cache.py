"""The per-user cache of the frozen core schema (spec/core_schema.py): files named by a content key.

The cache holds data, never code, and is trusted only as far as its owner: a directory or file that is a
symlink, not the user's own, or writable by group or others is neither read nor written. Each file starts
with the SHA-256 of its body; a torn or edited file fails that check and is rebuilt. Any failure here means
"no cache": the caller builds from the model instead, so the cache can make a run faster, never different.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

PREFIX = "core-schema-"
KEEP = 16  # files kept per user: one per model version and pydantic install in use, oldest dropped first
MAX_BYTES = 8 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def cache_dir() -> Path | None:
    """$XDG_CACHE_HOME/spark-compile, or ~/.cache/spark-compile; None with no usable home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    except (RuntimeError, KeyError):
        return None
    return root / "spark-compile"


def file_name(key: str) -> str:
    return f"{PREFIX}{key}.json"


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


def read(directory: Path, key: str) -> str | None:
    """The body stored under ``key``, if the file is private and intact."""
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return None
    try:
        fd = os.open(file_name(key), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        with os.fdopen(fd, "rb") as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode) or not _private(status):
                return None
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    digest, newline, body = data.partition(b"\n")
    if not newline or digest.decode("ascii", "replace") != hashlib.sha256(body).hexdigest():
        return None
    return body.decode("utf-8", "replace")


def write(directory: Path, key: str, body: str) -> None:
    """Store ``body`` under ``key`` atomically (best effort: a cache that cannot be written is skipped)."""
    data = body.encode("utf-8")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return
    temp = f".{file_name(key)}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(hashlib.sha256(data).hexdigest().encode("ascii") + b"\n" + data)
        os.replace(temp, file_name(key), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        _prune(dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _prune(dir_fd: int) -> None:
    """Drop the oldest cache files beyond KEEP."""
    entries = []
    for name in os.listdir(dir_fd):
        if name.startswith(PREFIX):
            entries.append((os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime_ns, name))
    for _, name in sorted(entries, reverse=True)[KEEP:]:
        os.unlink(name, dir_fd=dir_fd)
