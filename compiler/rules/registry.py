"""The rule registry and what a check sees: every finding spark-compile can report, with its id, severity
and documentation (SC1xx schema and file, SC2xx cross-field, SC3xx catalogs, SC4xx fleet and hardware, SC44x
memory, SC5xx Kubernetes).

A check is a generator over the Context registered with @rule; it raises only that rule, so a Hit carries no
id: it names the profile path at fault, and the rules stage (rules/stage.py) places it in the source.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from spark_compile.capacity.budget import Capacity
from spark_compile.common.findings import dotted
from spark_compile.spec.catalog import CatalogNotFound, EngineCatalog, EnvCatalog, engine_catalog, env_catalog
from spark_compile.spec.checkpoint import Checkpoint
from spark_compile.spec.hardware import FAMILIES, HARDWARE, Hardware, ModelFamily
from spark_compile.spec.model import Profile
from spark_compile.stages.checkpoint import committed_checkpoint, committed_draft
from spark_compile.stages.launch_plan import LaunchPlan
from spark_compile.stages.resolve import Resolved
from spark_compile.targets import k8s

Severity = Literal["error", "warning"]
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: what it checks, why, and a bad and a good example."""

    id: str
    severity: Severity
    summary: str
    doc: str
    bad: str
    good: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A violation of the check's own rule before it is located: the YAML path at fault and what to say."""

    path: Path
    message: str
    hint: str = ""
    at_key: bool = False
    redact: str = ""  # a value the printed source line must not show


class Context:
    """What a check sees: the validated profile, its launch plan, which paths the profile wrote, and every
    object derived from them, each built once per profile on first use."""

    def __init__(self, profile: Profile, plan: LaunchPlan, present: Callable[[Path], bool],
                 model_config: dict[str, Any] | str | None = None, capacity: Capacity | None = None,
                 resolved: Resolved | None = None) -> None:
        self.profile = profile
        self.plan = plan
        self.present = present  # whether a path was written in the profile (not a model default)
        self._committed = model_config  # the config.json model.config_json names, or why it cannot be read
        self.capacity = capacity  # every rank's memory budget (spark_compile.capacity.budget), built with the plan
        self.resolved = resolved  # where the profile's files are: committed config.json files are read beside them

    @property
    def model_config(self) -> dict[str, Any] | None:
        """The committed config.json model.config_json names, when it could be read."""
        return self._committed if isinstance(self._committed, dict) else None

    @property
    def text_model_config(self) -> dict[str, Any] | None:
        """:attr:`model_config` with a multimodal checkpoint's text_config keys over it: what SGLang reads
        (hf_text_config)."""
        config = self.model_config
        text = config.get("text_config") if config is not None else None
        return {**config, **text} if config is not None and isinstance(text, dict) else config

    @functools.cached_property
    def _checkpoints(self) -> tuple[Checkpoint | None, Checkpoint | None, str]:
        if self.resolved is None:
            return None, None, ""
        target, problem = committed_checkpoint(self.resolved, self.plan.checkpoint, self._committed)
        draft, draft_problem = committed_draft(self.resolved, self.plan.checkpoint)
        return target, draft, "; ".join(p for p in (problem, draft_problem) if p)

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The facts of the target's committed config.json (model.config_json); None when there is none."""
        return self._checkpoints[0]

    @property
    def draft_checkpoint(self) -> Checkpoint | None:
        """The facts of a separate draft model's committed config.json; None when there is none."""
        return self._checkpoints[1]

    @property
    def checkpoint_problem(self) -> str:
        """Why a named config.json could not be read; empty when it could (or none is named)."""
        return self._checkpoints[2]

    @functools.cached_property
    def written(self) -> tuple[tuple[Path, Any, Any], ...]:
        """Every node of the profile's sections that the profile writes, as (path, node, parent), depth first;
        a subtree it does not write (defaults only) is not entered. The rules that look at every value share
        this one walk."""
        found: list[tuple[Path, Any, Any]] = []
        stack: list[tuple[Path, Any, Any]] = [((), self.profile, None)]
        while stack:
            path, node, parent = stack.pop()
            if path and not self.present(path):
                continue
            found.append((path, node, parent))
            if isinstance(node, BaseModel):  # a field's value is read only when the profile writes it
                items: Iterable[tuple[str | int, Any]] = [
                    (name, getattr(node, name)) for name in type(node).model_fields if self.present((*path, name))]
            elif isinstance(node, dict):
                items = node.items()
            elif isinstance(node, list):
                items = enumerate(node)
            else:
                continue
            stack.extend(((*path, key), value, node) for key, value in reversed(list(items)))
        return tuple(found)

    @functools.cached_property
    def hardware(self) -> Hardware:
        """The node type the profile names."""
        return HARDWARE[self.profile.hardware]

    @functools.cached_property
    def family(self) -> ModelFamily | None:
        """What SGLang forces for the model's architecture (None for an architecture it has no rules for)."""
        return FAMILIES.get(self.profile.model.architecture)

    @functools.cached_property
    def engine_catalog(self) -> EngineCatalog | None:
        """The flag catalog engine.catalog selects; None when there is none (SC301 says so)."""
        try:
            return engine_catalog(self.profile.engine.catalog)
        except CatalogNotFound:
            return None

    @functools.cached_property
    def env_catalog(self) -> EnvCatalog | None:
        """The SGLANG_* variable catalog of the same build; None when there is none."""
        try:
            return env_catalog(self.profile.engine.catalog)
        except CatalogNotFound:
            return None

    @functools.cached_property
    def k8s_settings(self) -> k8s.Settings:
        """The Kubernetes target's settings (its section's values, or the container's)."""
        return k8s.settings(self.profile)

    @functools.cached_property
    def manifest(self) -> dict[str, Any]:
        """The LeaderWorkerSet the Kubernetes target renders (the ConfigMap digest, a label only, left empty)."""
        return k8s.leaderworkerset(self.plan, self.profile, self.k8s_settings, "")


Check = Callable[[Context], Iterator[Hit]]


def env_settings(ctx: Context) -> Iterator[tuple[Path, str, object]]:
    """Every container variable the profile sets by hand, with its path: engine.env, then each node's env."""
    for name, value in ctx.profile.engine.env.items():
        yield ("engine", "env", name), name, value
    for index, node in enumerate(ctx.profile.fleet.nodes):
        for name, value in node.env.items():
            yield ("fleet", "nodes", index, "env", name), name, value


def nccl_values(ctx: Context, name: str) -> Iterator[tuple[str, Path]]:
    """Each value the profile gives a NCCL/gloo variable by hand (nccl.extra, engine.env, a node's env), with
    its path."""
    if name in ctx.profile.nccl.extra:
        yield str(ctx.profile.nccl.extra[name]), ("nccl", "extra", name)
    for path, own, value in env_settings(ctx):
        if own == name:
            yield str(value), path


# Set per rank by the plan from model.engram, never by hand (SC408 says so; SC214 leaves them to it).
PLAN_ENGRAM_VARIABLES = ("SPARK_ENGRAM_DIR", "SPARK_ENGRAM_ROWS")

# The GID index variables the plan writes from the fleet (SC417), never by hand.
GID_VARIABLES = ("NCCL_IB_GID_INDEX", "B12X_ROCE_GID_INDEX")


def gid_hint(ctx: Context, path: Path, value: object) -> str:
    """Where a hand-set GID index belongs: the node's gid_index for a node's variable, else the fabric's."""
    fabric = ctx.profile.fleet.fabric
    if fabric is None or fabric.kind != "roce":
        return f"remove it: {'a ' + fabric.kind + ' fabric' if fabric else 'a fleet without a fabric'} has no GID index"
    text = str(value).strip()
    shown = text if text.isdigit() else "probe"
    if path[:2] == ("fleet", "nodes") and isinstance(path[2], int):
        name = ctx.profile.fleet.nodes[path[2]].name
        return (f"move it to {dotted((*path[:3], 'gid_index'))}: {shown} (node {name}; the plan writes both GID "
                "variables)")
    return f"move it to fleet.fabric.gid_index: {shown} (the plan writes both GID variables from it)"


RULES: dict[str, Rule] = {}
CHECKS: list[tuple[str, Check]] = []


def define(id: str, severity: Severity, summary: str, doc: str, bad: str, good: str) -> Rule:
    """Register a rule raised outside the checks (by the loader, the schema stage or `check --engine`)."""
    if id in RULES:
        raise ValueError(f"rule {id} defined twice")
    RULES[id] = Rule(id, severity, summary, doc.strip(), bad.strip("\n"), good.strip("\n"))
    return RULES[id]


def rule(id: str, severity: Severity, summary: str, doc: str, bad: str, good: str) -> Callable[[Check], Check]:
    """Register a rule and the check that raises it (and no other rule)."""

    def register(check: Check) -> Check:
        define(id, severity, summary, doc, bad, good)
        CHECKS.append((id, check))
        return check

    return register
