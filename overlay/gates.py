"""Which hooks a set of flag values enables: the hook-by-flag rules, in one table.

Pure functions of parsed values (settings.py), so the compiler can ask the same question of a
profile that the container asks of its environment. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .registry import HOOKS

Values = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Gate:
    """When a hook is armed: the flags that decide it (named in messages) and the test on them."""

    flags: tuple[str, ...]
    test: Callable[[Values], bool]


def _on(name: str) -> Callable[[Values], bool]:
    return lambda values: values[name] is True


def _positive(name: str) -> Callable[[Values], bool]:
    def test(values: Values) -> bool:
        value = values[name]
        return isinstance(value, int) and value > 0

    return test


def _wide(values: Values) -> bool:
    return values["SPARK_LOOKUP_DRAFT"] is True and values["SPARK_LOOKUP_MODE"] == "wide"


GATES: dict[str, Gate] = {
    # The two Engram implementations share the layer; the mode picks exactly one of them.
    "engram_store": Gate(("SPARK_ENGRAM_MODE",), lambda v: v["SPARK_ENGRAM_MODE"] == "hostnode"),
    "engram_staged": Gate(("SPARK_ENGRAM_MODE",), lambda v: v["SPARK_ENGRAM_MODE"] == "staged"),
    "engram_prefetch": Gate(("SPARK_ENGRAM_PREFETCH",), _on("SPARK_ENGRAM_PREFETCH")),
    # cutlass is the stock route: nothing to patch.
    "mxfp8": Gate(("SPARK_MXFP8_BACKEND",), lambda v: v["SPARK_MXFP8_BACKEND"] != "cutlass"),
    "real_heads": Gate(("SPARK_SM120_REAL_HEADS",), _on("SPARK_SM120_REAL_HEADS")),
    "prefill_flush": Gate(("SPARK_PREFILL_FLUSH_TOKENS",), _positive("SPARK_PREFILL_FLUSH_TOKENS")),
    "page_cache_release": Gate(("SPARK_PAGE_CACHE_RELEASE",), _on("SPARK_PAGE_CACHE_RELEASE")),
    "roce_collectives": Gate(
        ("SPARK_ROCE_AR", "SPARK_ROCE_AG"), lambda v: v["SPARK_ROCE_AR"] is True or v["SPARK_ROCE_AG"] is True
    ),
    "roce_health": Gate(
        ("SPARK_ROCE_AR", "SPARK_ROCE_AG"), lambda v: v["SPARK_ROCE_AR"] is True or v["SPARK_ROCE_AG"] is True
    ),
    "served_aliases": Gate(("SPARK_SERVED_ALIASES",), lambda v: bool(v["SPARK_SERVED_ALIASES"])),
    # SKIP_ALL needs SKIP (settings.py refuses it alone), so SKIP and TIMERS decide.
    "late_tail": Gate(
        ("SPARK_LATE_TAIL_SKIP", "SPARK_LATE_TAIL_TIMERS"),
        lambda v: v["SPARK_LATE_TAIL_SKIP"] is True or v["SPARK_LATE_TAIL_TIMERS"] is True,
    ),
    "kernel_load_guard": Gate(("SPARK_KERNEL_LOAD_RETRIES",), _positive("SPARK_KERNEL_LOAD_RETRIES")),
    "inline_system": Gate(("SPARK_INLINE_SYSTEM_IN_PLACE",), _on("SPARK_INLINE_SYSTEM_IN_PLACE")),
    "wo_a_w8a16": Gate(("SPARK_WO_A_W8A16",), _on("SPARK_WO_A_W8A16")),
    "step_timers": Gate(("SPARK_STEP_TIMERS",), lambda v: v["SPARK_STEP_TIMERS"] != "0"),
    "lookup_draft": Gate(("SPARK_LOOKUP_DRAFT",), _on("SPARK_LOOKUP_DRAFT")),
    "lookup_wide": Gate(("SPARK_LOOKUP_DRAFT", "SPARK_LOOKUP_MODE"), _wide),
    # No flag: armed whenever the overlay is.
    "sm_family_gate": Gate((), lambda v: True),
    "indexer_schedule": Gate((), lambda v: True),
    "sm120_prefill_pages": Gate((), lambda v: True),
    "request_guard": Gate((), lambda v: True),
}


def armable_hooks() -> list[str]:
    """Every hook that patches something (the master switch's pseudo-hook has no target), in order."""
    return [name for name, hook in HOOKS.items() if hook.targets]


def patch_order(hooks: list[str]) -> list[tuple[str, str]]:
    """(hook, target) in the order they patch: per target, hooks placed first there, then registry order."""
    pairs = [(hook, target) for hook in hooks for target in HOOKS[hook].targets]
    return sorted(pairs, key=lambda pair: pair[1] not in HOOKS[pair[0]].first_on)


def enabled_hooks(values: Values) -> list[str]:
    """The hooks ``values`` enable, in registry order (the order they run on a shared module)."""
    return [name for name in armable_hooks() if GATES[name].test(values)]
