"""What the engine and NCCL catalogs share: an entry's JSON list as a tuple, the names a misspelling is
close to, and the ``a, b or c`` of their messages."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any


def or_list(items: Sequence[object]) -> str:
    """``a, b or c``: the choices a message names."""
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def as_tuple(items: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """A JSON list as the tuple an entry holds (None stays None)."""
    return None if items is None else tuple(items)


def close_matches(word: str, candidates: Sequence[str]) -> list[str]:
    """The candidates ``word`` is most likely a misspelling of (the same word in another case first)."""
    other_case = [c for c in candidates if c.casefold() == word.casefold() and c != word]
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.75)  # 0.6 pairs NCCL_NET, NCCL_MNNVL
    return other_case + [c for c in close if c not in other_case]
