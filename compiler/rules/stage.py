"""Stage: the rules. Every cross-field, catalog and fleet check over the profile and its plan, located."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_compile.findings import Finding
from spark_compile.launch_plan import LaunchPlan
from spark_compile.resolve import Resolved
from spark_compile.rules import CHECKS, RULES, Context, load_all
from spark_compile.validate import locate

if TYPE_CHECKING:
    from spark_compile.spec.model import Profile


def _redacted(finding: Finding, secret: str) -> Finding:
    if not secret:
        return finding
    return replace(finding, source_line=finding.source_line.replace(secret, "(redacted)"))


MAX_CONFIG_BYTES = 1 << 20  # a model's config.json is a few KB


def committed_config(resolved: Resolved, profile: Profile) -> dict[str, Any] | None:
    """The model's config.json that model.config_json names (relative to the profile that names it); None when
    unset or unreadable (`check --engine` reports why)."""
    name = profile.model.config_json
    if name is None:
        return None
    path = Path(resolved.origin(("model", "config_json")).spot.value.file).parent / name
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_CONFIG_BYTES else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def rule_findings(resolved: Resolved, profile: Profile, plan: LaunchPlan) -> list[Finding]:
    """Every rule's findings, placed at the profile line each names, in source order."""
    load_all()
    context = Context(profile, plan, lambda path: path in resolved.origins, committed_config(resolved, profile))
    findings = [
        _redacted(locate(resolved, hit.path, rule_id, RULES[rule_id].severity, hit.message, hit.hint,
                         at_key=hit.at_key), hit.redact)
        for rule_id, check in CHECKS
        for hit in check(context)
    ]
    return sorted(findings, key=Finding.sort_key)
