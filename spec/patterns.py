"""Operator regular expressions (window gate checks): what makes one unsafe to run on a model's reply.

Python's engine backtracks: a quantifier over a group that itself repeats (`(a+)+`, `(a*b?)*`) takes time
exponential in the reply's length on a near-miss, and a huge repeat count (`a{4294967296}`) overflows the
compiler. Both are refused at check time; gate.py also stops any match after a time limit.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

MAX_REPEAT_COUNT = 1000  # an answer check needs no more; larger counts cost memory and time for nothing
_PARSER: Any = importlib.import_module("re._parser")
_CONSTANTS: Any = importlib.import_module("re._constants")
_REPEATS = {_CONSTANTS.MAX_REPEAT, _CONSTANTS.MIN_REPEAT, getattr(_CONSTANTS, "POSSESSIVE_REPEAT", None)}


def _items(pattern: Any) -> list[tuple[Any, Any]]:
    return list(pattern.data if hasattr(pattern, "data") else pattern)


def _subpatterns(op: Any, av: Any) -> list[Any]:
    """The parsed sub-expressions under one node."""
    if op in _REPEATS:
        return [av[2]]
    if op == _CONSTANTS.SUBPATTERN:
        return [av[-1]]
    if op == _CONSTANTS.BRANCH:
        return list(av[1])
    if op in (_CONSTANTS.ASSERT, _CONSTANTS.ASSERT_NOT):
        return [av[1]]
    if op == getattr(_CONSTANTS, "ATOMIC_GROUP", None):
        return [av]
    if op == _CONSTANTS.GROUPREF_EXISTS:
        return [part for part in av[1:] if part is not None]
    return []


def _repeats(pattern: Any) -> bool:
    """True when ``pattern`` holds a quantifier that can match more than once."""
    for op, av in _items(pattern):
        if op in _REPEATS and av[1] > 1:
            return True
        if any(_repeats(sub) for sub in _subpatterns(op, av)):
            return True
    return False


def _problem(pattern: Any) -> str | None:
    for op, av in _items(pattern):
        if op in _REPEATS:
            low, high = av[0], av[1]
            if low > MAX_REPEAT_COUNT or (high != _CONSTANTS.MAXREPEAT and high > MAX_REPEAT_COUNT):
                return f"a repeat count over {MAX_REPEAT_COUNT}"
            if high > 1 and _repeats(av[2]):
                return ("a quantifier over a group that repeats itself (like (a+)+), which takes exponential "
                        "time on a near-miss")
        for sub in _subpatterns(op, av):
            problem = _problem(sub)
            if problem:
                return problem
    return None


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be an operator check's pattern (not a regular expression, or unsafe), or None."""
    try:
        parsed = _PARSER.parse(pattern)
        problem = _problem(parsed)
        if problem is None:
            re.compile(pattern)
    except re.error as err:
        return f"not a regular expression: {err}"
    except (OverflowError, RecursionError, ValueError) as err:
        return f"not a usable regular expression: {str(err)[:100] or type(err).__name__}"
    return f"unsafe: {problem}; write a simpler pattern" if problem else None
