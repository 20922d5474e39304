"""Parse and format SPARK_* values exactly as the overlay reads them; standard library only."""

from __future__ import annotations

import re

from .registry import Flag

SIZE_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
}
# Strings, matched whole (re.fullmatch: a value may not end in a line break) and compiled on first use: a
# compile reads few overlay values, and compiling all four cost it half a millisecond.
_SIZE = r"([0-9]+)([a-zA-Z]*)"
_ROW = r"([0-9]+):([0-9]+):([0-9]+)"
_INT = r"-?[0-9]+"
_FLOAT = r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?"


class FlagValueError(ValueError):
    """A SPARK_* value the overlay would not read as meant."""


def parse_size(text: str) -> int:
    """Bytes meant by a size such as ``1MB`` or ``16mib`` (binary units)."""
    match = re.fullmatch(_SIZE, text)
    if match is None or match.group(2).lower() not in SIZE_UNITS:
        raise FlagValueError(f"{text!r} is not a size: expected an integer with an optional unit "
                             "b, k, kb, kib, m, mb, mib, g, gb or gib (binary), e.g. 1MB")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).lower()]


def parse_rows(text: str) -> dict[int, tuple[int, int]]:
    """Engram row spec ``L:lo:hi,...`` as {layer: (lo, hi)}."""
    rows: dict[int, tuple[int, int]] = {}
    for part in text.split(","):
        match = re.fullmatch(_ROW, part.strip())
        if match is None:
            raise FlagValueError(f"{part!r} is not a row range: expected L:lo:hi with whole numbers, e.g. 1:0:96001542")
        layer, lo, hi = (int(group) for group in match.groups())
        if lo > hi:
            raise FlagValueError(f"row range {part!r} ends before it starts (lo {lo} > hi {hi})")
        if layer in rows:
            raise FlagValueError(f"layer {layer} appears twice in {text!r}")
        rows[layer] = (lo, hi)
    return rows


def format_rows(rows: dict[int, tuple[int, int]]) -> str:
    """The ``L:lo:hi,...`` text of a row map, layers in ascending order."""
    return ",".join(f"{layer}:{lo}:{hi}" for layer, (lo, hi) in sorted(rows.items()))


def _check_range(flag: Flag, number: float, text: str) -> None:
    if flag.minimum is not None and number < flag.minimum:
        raise FlagValueError(f"{flag.name}={text} is below its minimum {flag.minimum:g}")
    if flag.maximum is not None and number > flag.maximum:
        raise FlagValueError(f"{flag.name}={text} is above its maximum {flag.maximum:g}")


def parse_value(flag: Flag, text: str) -> object:
    """The value ``text`` means for ``flag``; FlagValueError names what was expected."""
    if flag.kind in ("switch", "enum"):
        if text not in flag.choices:
            raise FlagValueError(f"{flag.name}={text!r}: expected one of {', '.join(flag.choices)}")
        return text == "1" if flag.kind == "switch" else text
    if flag.kind == "int":
        if not re.fullmatch(_INT, text):
            raise FlagValueError(f"{flag.name}={text!r}: expected a whole number")
        _check_range(flag, int(text), text)
        return int(text)
    if flag.kind == "float":
        if not re.fullmatch(_FLOAT, text):
            raise FlagValueError(f"{flag.name}={text!r}: expected a number")
        _check_range(flag, float(text), text)
        return float(text)
    if flag.kind == "size":
        return parse_size(text)
    if flag.kind == "rows":
        return parse_rows(text)
    if flag.kind == "list":
        return [item for item in text.split(",") if item]
    return text
