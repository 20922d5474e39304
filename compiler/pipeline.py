"""The one pipeline entry every command uses: load → resolve → schema → plan → capacity → rules, and the render
of every target's files.

A profile comes out Planned (typed, planned, with its warnings) or Rejected (with the findings that stop it).
A command that cannot go on past a rejected profile raises RejectedError, which the CLI prints as the
findings report and maps to exit 1, whatever the command.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_compile.capacity.budget import Capacity, build_capacity
from spark_compile.capacity.inputs import capacity_inputs
from spark_compile.common.errors import RejectedError
from spark_compile.common.findings import Finding, has_errors
from spark_compile.fleet.audit_plan import audit_artifact
from spark_compile.fleet.scripts import fleet_artifacts
from spark_compile.rules.stage import rule_findings
from spark_compile.spec.model import Profile
from spark_compile.stages.checkpoint import committed_config
from spark_compile.stages.launch_plan import LaunchPlan
from spark_compile.stages.load import LoadError
from spark_compile.stages.plan import build_plan
from spark_compile.stages.render import Artifact, render_plan
from spark_compile.stages.resolve import BlobReader, DocumentReader, Resolved, resolve
from spark_compile.stages.validate import schema
from spark_compile.targets.k8s_render import k8s_artifacts


@dataclass(frozen=True)  # no slots: cached_property keeps its value in the instance's __dict__
class Planned:
    """A profile that passed the schema: its resolved source, typed Profile, plan, and every rule's findings."""

    resolved: Resolved
    profile: Profile
    plan: LaunchPlan
    findings: list[Finding]
    capacity: Capacity | None = None  # every rank's memory budget (spark_compile.capacity.budget)

    @functools.cached_property
    def files(self) -> list[Artifact]:
        """Every file of the profile's directory except MANIFEST.json, rendered once (a diff and history
        compare each profile with two others)."""
        return rendered_files(self.plan, self.profile, self.capacity)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A profile that stops here, with its findings (an error among them); ``planned`` when only rules refused it."""

    findings: list[Finding]
    planned: Planned | None = None


Outcome = Planned | Rejected


def rendered_files(plan: LaunchPlan, profile: Profile, capacity: Capacity | None = None) -> list[Artifact]:
    """Every file of the profile's directory except MANIFEST.json, rendered in memory (the fleet's verify.sh
    also reads the memory budget's predictions)."""
    extra = fleet_artifacts(plan, profile, capacity)
    if profile.kubernetes is not None:
        extra += k8s_artifacts(plan, profile)
    files = render_plan(plan, profile, extra=extra)
    # The audit's expectations hold the sha256 of the rank files just rendered.
    return sorted([*files, audit_artifact(plan, profile, files)], key=lambda a: a.path)


def validate(resolved: Resolved) -> Outcome:
    """Schema → plan → capacity (the memory budget, from the plan and what config.json and the snapshot's
    headers say) → rules over resolved data; only a profile that passes the schema is planned and ruled."""
    profile = schema(resolved)
    if isinstance(profile, list):
        return Rejected(profile)
    plan = build_plan(profile)
    committed = committed_config(resolved, plan.checkpoint)  # read once: the budget and the rules both read it
    capacity = build_capacity(profile, plan, capacity_inputs(resolved, profile, plan.checkpoint, committed))
    planned = Planned(resolved, profile, plan, rule_findings(resolved, profile, plan, capacity, committed), capacity)
    return Rejected(planned.findings, planned) if has_errors(planned.findings) else planned


def run(path: Path, *, targets: Sequence[str] = (), root: Path | None = None, display: str | None = None,
        reader: DocumentReader | None = None, exists: Callable[[Path], bool] | None = None,
        blob: BlobReader | None = None) -> Outcome:
    """The whole pipeline on one profile (``reader``/``exists``/``blob`` read it and the files it names from
    elsewhere, e.g. a git revision).
    Each target named is enabled with its defaults unless the profile has its section."""
    try:
        resolved = resolve(path, display, reader, exists, root, blob)
    except LoadError as failed:
        return Rejected([failed.finding])
    if isinstance(resolved.data, dict):
        for target in targets:
            resolved.data.setdefault(target, {})
    return validate(resolved)


def planned(outcome: Outcome) -> Planned:
    """The planned profile, or RejectedError with its findings."""
    if isinstance(outcome, Rejected):
        raise RejectedError(outcome.findings)
    return outcome
