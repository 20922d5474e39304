"""Did-you-mean suggestions, shared by the model, the rules and the catalogs."""

from __future__ import annotations

import difflib

from pydantic_core import PydanticCustomError


def did_you_mean(word: str, choices: list[str], cutoff: float = 0.6) -> str:
    """`did you mean 'x'?` for the closest choice (similarity at least ``cutoff``), or an empty string."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return f"did you mean {close[0]!r}?" if close else ""


def unknown_choice(what: str, value: str, choices: list[str]) -> PydanticCustomError:
    """A validation error for a value that names nothing in a catalog."""
    hint = did_you_mean(value, choices)
    return PydanticCustomError(
        "unknown_choice",
        "unknown {what} {value}; known: {known}" + (f"; {hint}" if hint else ""),
        {"what": what, "value": repr(value), "known": ", ".join(choices), "hint": hint},
    )
