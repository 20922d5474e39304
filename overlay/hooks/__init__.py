"""Hook implementations: one module per registry hook, named after it.

A hook module defines ``apply(module, flags)``: called once, right after ``module`` (one of the
hook's registry targets) executes, with every SPARK_* flag parsed (settings.py). It patches the
module's real functions or classes and returns; an exception stops the process (bootstrap.py).
Hook modules import only the standard library at import time: they are imported at interpreter
start, long before SGLang, and reach SGLang's objects through the module they are handed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
MARK = "__spark_overlay_hook__"


def mark(function: F, hook: str) -> F:
    """Tag a replacement with the hook that installed it (the tests look for it)."""
    setattr(function, MARK, hook)
    return function

