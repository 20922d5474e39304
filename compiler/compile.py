"""`spark-compile PROFILE`: plan, render and write one validated profile; report what changed."""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spark_compile.capacity import Capacity, build_capacity
from spark_compile.capacity_inputs import capacity_inputs
from spark_compile.errors import EXIT_OK
from spark_compile.findings import Finding
from spark_compile.launch_plan import LaunchPlan
from spark_compile.plan import build_plan
from spark_compile.resolve import Resolved
from spark_compile.rules import rule_findings
from spark_compile.validate import schema

if TYPE_CHECKING:
    from spark_compile.render import Artifact
    from spark_compile.spec.core_model import Profile

SCHEMA_FILE = "profile.schema.json"


@dataclass(frozen=True)
class Validated:
    """A resolved profile after the checking stages: its Profile and plan (None when the schema failed)."""

    resolved: Resolved
    profile: Profile | None
    plan: LaunchPlan | None
    findings: list[Finding]
    capacity: Capacity | None = None  # the memory budget per rank (None when the schema failed)

    def planned(self) -> tuple[Profile, LaunchPlan]:
        """The profile and its plan; only for a profile that passed the schema (callers check findings first)."""
        if self.profile is None or self.plan is None:
            raise ValueError(f"{self.resolved.path} did not pass the schema")
        return self.profile, self.plan

    @property
    def resolved_name(self) -> str:
        """The profile's name (it names the output directory)."""
        return self.planned()[0].name


def validate(resolved: Resolved) -> Validated:
    """The pipeline up to the findings: profile = schema(data); plan = build_plan(profile); capacity =
    build_capacity(profile, plan, inputs read from disk); findings = rule_findings(profile, plan, capacity).
    Only a profile that passes the schema is planned and ruled."""
    profile = schema(resolved)
    if isinstance(profile, list):
        return Validated(resolved, None, None, profile)
    plan = build_plan(profile)
    capacity = build_capacity(profile, plan, capacity_inputs(resolved, profile))
    return Validated(resolved, profile, plan, rule_findings(resolved, profile, plan, capacity), capacity)


def default_out(profile_path: Path) -> Path:
    """generated/ at the top of the project the profile lives in (beside spec/), else beside the profile."""
    found = next((parent / "generated" for parent in profile_path.resolve().parents
                  if (parent / "spec").is_dir() and (parent / "generated").is_dir()),
                 profile_path.resolve().parent / "generated")
    try:
        return found.relative_to(Path.cwd())
    except ValueError:
        return found


def source_digests(validated: Validated, out_root: Path) -> list[tuple[str, str]]:
    """Each profile of the extends chain: its path relative to the output root, and its sha256."""
    digests = []
    for display in validated.resolved.chain:
        doc = validated.resolved.documents[display]
        rel = os.path.relpath(Path(display).resolve(), out_root.resolve())
        digests.append((Path(rel).as_posix(), hashlib.sha256(doc.text.encode()).hexdigest()))
    return digests


def rendered_files(validated: Validated) -> list[Artifact]:
    """Every file of the profile's directory except MANIFEST.json, rendered in memory (plan → render)."""
    from spark_compile.fleet import fleet_artifacts
    from spark_compile.render import render_plan

    profile, plan = validated.planned()
    extra = fleet_artifacts(plan, profile, validated.capacity)
    if profile.kubernetes is not None:
        from spark_compile.k8s_render import k8s_artifacts

        extra += k8s_artifacts(plan, profile)
    return render_plan(plan, profile, extra=extra)


def artifacts(validated: Validated, out_root: Path) -> list[Artifact]:
    """Every file of the profile's directory, MANIFEST.json included."""
    from spark_compile.render import manifest

    files = rendered_files(validated)
    return [*files, manifest(files, source_digests(validated, out_root), validated.resolved_name)]


def compile_profile(validated: Validated, profile_path: Path, out: Path | None) -> int:
    """Write the profile's artifacts; print a one-line summary. (`spark-compile schema` writes the schema:
    it changes with the compiler, not with a profile, and the drift check holds it current.)"""
    from spark_compile.write import write_tree

    out_root = out or default_out(profile_path)
    files = artifacts(validated, out_root)
    report = write_tree(out_root, validated.resolved_name, files)
    target = out_root / validated.resolved_name
    sys.stdout.write(f"{target}: {len(report.written)} written, {len(report.unchanged)} unchanged, "
                     f"{len(report.removed)} removed\n")
    for path in report.foreign:
        sys.stdout.write(f"{target / path}: not generated by spark-compile; left alone\n")
    return EXIT_OK
