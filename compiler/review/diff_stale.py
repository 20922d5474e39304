"""Free text that still states a value the diff changes (a description saying "DSpark block 5" after the block
size went 5 → 15): nothing renders it differently, so only the diff can point it out."""

from __future__ import annotations

import re
from typing import Any

from spark_compile.common.findings import dotted
from spark_compile.review.artifact_diff import ProfileChange
from spark_compile.stages.resolve import Resolved

# The profile's free-text fields (spec/model.py's FreeText).
TEXT_FIELDS: tuple[tuple[str, ...], ...] = (("description",),)
_TOKENS = re.compile(r"[\s/,;()]+")
_EDGE = ".:'\"`"
# A value at least this long is stale wherever it is spelled out; a shorter one only next to its key's name.
_SPELLED = 8


def _key_words(path: str) -> set[str]:
    """``engine.speculative.dspark_block_size`` → {dspark, block, size}."""
    last = re.sub(r"\[\d+\]", "", path).rsplit(".", 1)[-1]
    return {word for word in last.lower().split("_") if len(word) >= 2}


def _mention(text: str, change: ProfileChange) -> str | None:
    """The words of ``text`` that state ``change``'s old value, or None."""
    value = str(change.old)
    if not value:
        return None
    if len(value) >= _SPELLED and value in text:
        return value
    tokens = [t.strip(_EDGE) for t in _TOKENS.split(text) if t.strip(_EDGE)]
    words = _key_words(change.path)
    for index, token in enumerate(tokens):
        if any(token.lower() == word + value.lower() for word in words):  # TP4
            return token
        named = [j for j in range(max(0, index - 2), index) if tokens[j].lower() in words]
        if token == value and named:  # block 5, DSpark block 5
            return " ".join(tokens[named[0]:index + 1])
    return None


def _scalar(change: ProfileChange) -> bool:
    """A change whose old value was written (a default is shown as ``60 (default)``, a Default str)."""
    return type(change.old) in (int, float, str)


def stale_mentions(new: Resolved, changes: list[ProfileChange]) -> list[str]:
    """Each free-text field of the new side that still states an old value, as one sentence."""
    out = []
    for path in TEXT_FIELDS:
        text: Any = new.data.get(path[0]) if isinstance(new.data, dict) else None
        if not isinstance(text, str):
            continue
        origin = new.origins.get(path)
        where = f"  ({origin.spot.value.file}:{origin.spot.value.line})" if origin else ""
        for change in changes:
            mention = _mention(text, change) if _scalar(change) and change.path != dotted(path) else None
            if mention is not None:
                out.append(f"{dotted(path)} still says {mention!r}, but {change.path} is now {change.new}{where}")
    return out
