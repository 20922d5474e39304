"""The log of an internal error: its traceback, redacted, in the user's cache, where the one-line message points.

The file is spark-compile.log in $XDG_CACHE_HOME/spark-compile (default ~/.cache/spark-compile), never in the
working tree. It is written only into a directory that is the user's own and writable by no one else, opened
without following a symlink and without blocking on a FIFO, and replaced only when it is the user's regular
file with one link, so a name planted there cannot redirect the write.
"""

from __future__ import annotations

import os
import stat
import traceback
from pathlib import Path

from spark_compile.common.secrets import redact

LOG_NAME = "spark-compile.log"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def cache_dir() -> Path | None:
    """$XDG_CACHE_HOME/spark-compile (an absolute XDG_CACHE_HOME only, as the XDG spec says), or
    ~/.cache/spark-compile; None with no usable home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    except (RuntimeError, KeyError):
        return None
    return root / "spark-compile"


def traceback_text(exc: BaseException) -> str:
    """The traceback of ``exc`` as Python prints it, with every secret-shaped value redacted."""
    return redact("".join(traceback.format_exception(exc)))


def _private(status: os.stat_result) -> bool:
    return status.st_uid == os.geteuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def write_log(text: str) -> Path | None:
    """Write ``text`` as the log file; its path, or None when there is no safe place for it."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        dir_fd = os.open(directory, _DIR_FLAGS)
        try:
            if not _private(os.fstat(dir_fd)):
                return None
            fd = os.open(LOG_NAME, _FILE_FLAGS, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "w", encoding="utf-8") as log:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or not _private(status) or status.st_nlink != 1:
                return None
            os.fchmod(fd, 0o600)
            log.truncate()
            log.write(text)
    except OSError:
        return None
    return directory / LOG_NAME
