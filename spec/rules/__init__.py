"""The rule registry: every finding spark-compile can report, with its id, severity and documentation.

SC1xx schema and file, SC2xx cross-field, SC3xx catalogs, SC4xx fleet and hardware, SC5xx Kubernetes.
Checks are plain functions over the Context (the profile and the plan built from it); a Hit names the profile
path at fault, and the rules stage (`spark_compile.rules`) places it in the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from spark_compile.launch_plan import LaunchPlan
    from spark_compile.spec.model import Profile

Severity = Literal["error", "warning"]
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Rule:
    """One rule: what it checks, why, and a bad and a good example."""

    id: str
    severity: Severity
    summary: str
    doc: str
    bad: str
    good: str


@dataclass(frozen=True)
class Hit:
    """A rule violation before it is located: the YAML path at fault and what to say."""

    rule: str
    path: Path
    message: str
    hint: str = ""
    at_key: bool = False
    redact: str = ""  # a value the printed source line must not show


@dataclass(frozen=True)
class Context:
    """What a check sees: the validated profile, its launch plan, and which paths the profile wrote."""

    profile: Profile
    plan: LaunchPlan
    present: Callable[[Path], bool]  # whether a path was written in the profile (not a model default)


Check = Callable[[Context], Iterator[Hit]]

RULES: dict[str, Rule] = {}
CHECKS: list[tuple[str, Check]] = []


def define(id: str, severity: Severity, summary: str, doc: str, bad: str, good: str) -> Rule:
    """Register a rule's documentation (for rules raised by the loader or the schema stage)."""
    if id in RULES:
        raise ValueError(f"rule {id} defined twice")
    RULES[id] = Rule(id, severity, summary, doc.strip(), bad.strip("\n"), good.strip("\n"))
    return RULES[id]


def rule(id: str, severity: Severity, summary: str, doc: str, bad: str, good: str) -> Callable[[Check], Check]:
    """Register a rule and the check function that raises it."""

    def register(check: Check) -> Check:
        define(id, severity, summary, doc, bad, good)
        CHECKS.append((id, check))
        return check

    return register


def load_all() -> dict[str, Rule]:
    """Import every rule module (they register on import) and return the registry."""
    from spark_compile.spec.rules import (  # noqa: F401
        catalogs,
        deployment,
        engine,
        fleet,
        k8s,
        overlay,
        resolution,
        schema,
        secrets,
    )

    return RULES
