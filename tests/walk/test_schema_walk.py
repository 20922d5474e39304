"""Nothing written is dropped without a finding: every key the schema accepts, set alone in a child profile,
reaches a generated file (a line the unchanged child does not have holds its value) or a finding placed at
it. The walk fails when the schema grows a key that walk_cases.py does not set."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from walk_cases import CASES, Case, Removed, Replace, leaf_paths, scalar_value

from spark_compile.capacity.format import capacity_json
from spark_compile.commands.compile import artifacts
from spark_compile.commands.schema import profile_schema
from spark_compile.common.findings import Finding
from spark_compile.engine.check import _rewrite_findings
from spark_compile.pipeline import Outcome, Planned, Rejected, run
from spark_compile.review.page import build_page, render_page
from spark_compile.stages.resolve import resolve

from conftest import REFERENCE_PROFILE, ROOT

LEAVES = leaf_paths(profile_schema())


class _Delete:
    """`!delete` in the dumped child: the walked key replaces an inherited one that excludes it."""


yaml.SafeDumper.add_representer(_Delete, lambda dumper, _: dumper.represent_scalar("!delete", ""))
yaml.SafeDumper.add_representer(Removed, lambda dumper, name: dumper.represent_scalar("!delete", str(name)))
yaml.SafeDumper.add_representer(Replace, lambda dumper, data: dumper.represent_mapping("!replace", dict(data)))


def _dumpable(node: Any, folder: Path) -> Any:
    """None as `!delete`, a Path as the relative path the child names it by; the rest as it is."""
    if isinstance(node, Replace):
        return Replace(_dumpable(dict(node), folder))
    if isinstance(node, dict):
        return {k: _Delete() if v is None else _dumpable(v, folder) for k, v in node.items()}
    if isinstance(node, list):
        return [_dumpable(v, folder) for v in node]
    return os.path.relpath(node, folder) if isinstance(node, Path) else node


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _write(tmp: Path, name: str, base: Path, body: dict[str, Any]) -> Path:
    # The child lives in tmp/walk/ so that a config_json written "../spec/..." stays inside the repository:
    # tmp is beside nothing of ours, so the committed copies are reached through a link to the repository's spec/.
    folder = tmp / name
    folder.mkdir()
    data = _merge({"extends": os.path.relpath(base, folder)}, _dumpable(body, folder))
    path = folder / "child.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=1 << 20))
    return path


def _read(case: Case, outcome: Outcome, out: Path) -> set[tuple[str, str]]:
    """The lines the case's reader sees: the generated files, the checks' messages and memory budget, or the
    review page."""
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert planned is not None
    if case.reader == "check":
        text = "\n".join(f.message for f in outcome.findings)
        text += "\n" + (json.dumps(capacity_json(planned.capacity)) if planned.capacity else "")
        return {("check", line) for line in text.splitlines()}
    if case.reader == "engine":  # the verdict when SGLang's resolution ran on every rank and rewrote nothing
        found = _rewrite_findings(planned, planned.profile.engine.catalog, [], len(planned.plan.ranks), True)
        return {("check --engine", f.message) for f in found}
    if case.reader == "report":
        return {("report.html", line) for line in render_page(build_page(planned)).splitlines()}
    return _lines(planned, out)


def _lines(planned: Planned, out: Path) -> set[tuple[str, str]]:
    found = set()
    for artifact in artifacts(planned, out):
        text = artifact.content if isinstance(artifact.content, str) else artifact.content.decode()
        found |= {(artifact.path, line) for line in text.splitlines()}
    return found


def _scalar_case(path: str, node: dict[str, Any]) -> Case | None:
    keys = tuple(path.split("."))
    if any(part in ("[]", "*", "<key>") for part in keys):
        return None
    current: Any = resolve(REFERENCE_PROFILE).data
    for key in keys:
        current = current.get(key) if isinstance(current, dict) else None
    value = scalar_value(node, current)
    if value is None:
        return None
    body: Any = value
    for key in reversed(keys):
        body = {key: body}
    return Case(body, keys, None if isinstance(value, bool) else str(value))


@cache
def case_of(path: str) -> Case | None:
    return CASES.get(path) or _scalar_case(path, LEAVES.get(path, {}))


def _names_it(finding: Finding, child: str, spots: set[tuple[int, int]]) -> bool:
    pos = finding.position
    return pos.file == child and (pos.line, pos.column) in spots


def _spots(child: Path, case: Case) -> set[tuple[int, int]]:
    """Where the walked value and its keys stand in the child file (a finding there names it)."""
    resolved = resolve(child)
    found = set()
    for depth in range(2, len(case.at) + 1):
        origin = resolved.origins.get(case.at[:depth])
        if origin is not None:
            spot = origin.spot
            found |= {(p.line, p.column) for p in (spot.key, spot.value) if p is not None and p.file == resolved.path}
    return found


def test_the_walk_covers_every_key_of_the_schema() -> None:
    assert len(LEAVES) > 200  # the walk found the schema's keys (a broken walk would find few)
    missing = sorted(p for p in LEAVES if case_of(p) is None)
    assert missing == [], "schema keys the walk does not set: add them to tests/walk/walk_cases.py"
    stale = sorted(p.split(" (")[0] for p in CASES if p.split(" (")[0] not in LEAVES)
    assert stale == [], "walk_cases.py names keys the schema no longer has"


@pytest.mark.parametrize("path", sorted({*LEAVES, *CASES}))
def test_a_key_set_alone_reaches_the_output_or_a_finding(path: str, tmp_path: Path) -> None:
    case = case_of(path)
    assert case is not None
    (tmp_path / "spec").symlink_to(ROOT / "spec")
    unchanged = run(_write(tmp_path, "base", case.base, {}))
    assert isinstance(unchanged, Planned), [f.message for f in unchanged.findings]
    child = _write(tmp_path, "walk", case.base, case.body)
    outcome = run(child)
    spots = _spots(child, case)
    named = [f for f in outcome.findings if _names_it(f, str(child), spots)]
    if named:
        return  # not silent: a finding at the key says what becomes of it
    if case.reader == "files":
        assert isinstance(outcome, Planned), [f"{f.rule} {f.position.line}: {f.message}" for f in outcome.findings]
    new = _read(case, outcome, tmp_path) - _read(case, unchanged, tmp_path)
    if case.needle is None:
        assert new, f"{path}: set, and no generated line changed and no finding names it"
    else:
        assert any(case.needle in line for _, line in new), (
            f"{path}: {case.needle!r} is in no generated line (and no finding names it): {sorted(new)[:8]}"
        )
