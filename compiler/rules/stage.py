"""Stage: the rules. Every cross-field, catalog and fleet check over the profile and its plan, located."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from spark_compile.capacity.budget import Capacity
from spark_compile.common.findings import Finding
from spark_compile.rules.registry import CHECKS, RULES, Context  # filled by the rule modules the package imports
from spark_compile.spec.model import Profile
from spark_compile.stages.checkpoint import committed_config
from spark_compile.stages.launch_plan import LaunchPlan
from spark_compile.stages.resolve import Resolved
from spark_compile.stages.validate import locate


def _redacted(finding: Finding, secret: str) -> Finding:
    if not secret:
        return finding
    return replace(finding, source_line=finding.source_line.replace(secret, "(redacted)"))


def rule_findings(resolved: Resolved, profile: Profile, plan: LaunchPlan, capacity: Capacity | None = None,
                  committed: dict[str, Any] | str | None = None) -> list[Finding]:
    """Every rule's findings, placed at the profile line each names, in source order (``committed``: the
    object model.config_json names, when the caller has read it)."""
    config = committed if committed is not None else committed_config(resolved, plan.checkpoint)
    context = Context(profile, plan, lambda path: path in resolved.origins, config, capacity, resolved)
    findings = [
        _redacted(locate(resolved, hit.path, rule_id, RULES[rule_id].severity, hit.message, hit.hint,
                         at_key=hit.at_key), hit.redact)
        for rule_id, check in CHECKS
        for hit in check(context)
    ]
    return sorted(findings, key=Finding.sort_key)
