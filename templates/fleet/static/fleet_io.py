"""The Python fleet scripts' one way to take a number, a host or a file from the operator or a node.

A static file of spark-compile, imported (never run) by smoke.py, gate.py, verdict.py and engram.py beside it.
Standard library only. Numbers are argparse types with bounds (a usage error naming the bounds, never a
traceback, an overflow or a wrapped value); a file is read only when it is a regular file no larger than a
bound (a FIFO never hangs a script, /dev/zero never fills its memory); a write replaces only a regular file,
through a temporary in the same folder, never through a symlink.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

MAX_FIGURE = 1e9  # past any bench's tokens/s or seconds
MAX_TEXT = 16 << 20  # a gate output, a memory log, a verdict or a config.json is kilobytes
_DIGITS = re.compile(r"-?[0-9]{1,19}")
_DECIMAL = re.compile(r"[0-9]{1,17}(?:\.[0-9]{1,17})?(?:e[-+]?[0-9]{1,3})?")  # what repr() of a float prints
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\]")


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: ASCII digits (a leading - only when low < 0) from low to high."""
    def parse(text: str) -> int:
        if _DIGITS.fullmatch(text) and low <= int(text) <= high and (low < 0 or not text.startswith("-")):
            return int(text)
        raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, not {text[:40]!r}")
    return parse


def wholes(low: int, high: int, most: int) -> Callable[[str], list[int]]:
    """An argparse type: at most ``most`` comma-separated whole numbers from low to high (empty: none)."""
    one = whole(low, high)

    def parse(text: str) -> list[int]:
        words = [word for word in text.split(",", most) if word]
        if len(words) > most:
            raise argparse.ArgumentTypeError(f"expected at most {most} comma-separated numbers")
        return [one(word) for word in words]
    return parse


def decimal(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a decimal number (digits, an optional fraction and exponent) from low to high."""
    def parse(text: str) -> float:
        value = float(text) if _DECIMAL.fullmatch(text) else math.nan
        if low <= value <= high:
            return value
        raise argparse.ArgumentTypeError(f"expected a number from {low:g} to {high:g}, not {text[:40]!r}")
    return parse


def host(text: str) -> str:
    """An argparse type: a host name, an IPv4 address or a bracketed IPv6 one (it goes into a URL)."""
    if _HOST.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(f"expected a host name or address, not {text[:40]!r}")


def read_text(path: str | Path, limit: int = MAX_TEXT) -> str:
    """A regular file's text (bytes that are not UTF-8 replaced), at most ``limit`` bytes; OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, limit + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew after its size was taken
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(fd)


def replace_text(target: Path, text: str) -> None:
    """Write ``target`` whole: a temporary in its folder renamed over it; refused (OSError) when the target is
    there and not a regular file (a symlink, a FIFO, a device)."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        raise OSError(errno.EEXIST, "not a regular file: not replaced", str(target))
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
