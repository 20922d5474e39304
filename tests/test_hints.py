"""Every hint leads to a valid profile: for every registered rule, each concrete hint (one that names the key to
set, remove or rename, and the value) is applied to the negative profile that raises it, as an operator would
apply it (here: a child profile that extends the negative one and writes only the edit; for a file that does
not load, which nothing can extend, the edit of its own text at the finding), and the profile is checked again:
the finding is gone and no new error appears. A rule with no concrete hint is listed below
with the reason, so a new rule without a concrete hint (or a negative profile) fails the test.

The hints are read as edits by tests/hint_edits.py (its grammar is the one the rules write)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hint_edits import Profile, checked, child_text, suggestion, text_edit
from test_fixes import NEGATIVE

from spark_compile.spec.sglang_facts import SPECULATIVE_ALIASES

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS, ROOT, run_cli

# Rules whose hint names no value to write, with why: each is still covered by a negative profile's `# fix:`
# (tests/test_fixes.py), which a person wrote for the case.
NOT_CONCRETE = {
    "SC103": "a required key's own value (a node's ssh target, its home) is the operator's",
    "SC106": "the whole file's shape: its name and every other key are the operator's (it does not load)",
    "SC108": "writing out what the aliases expand to is no edit at the finding (the file does not load)",
    "SC112": "dropping the extends: that closes the loop leaves a file extending nothing, without every required "
             "key: which parent it meant is the operator's",
    "SC202": "which speculative algorithm (or none) is a deployment choice",
    "SC215": "which characters the value may hold; the value is the operator's",
    "SC227": "the checkpoint's block size or config.json, which only the checkpoint knows",
    "SC241": "the draft model's directory or hub id is the operator's",
    "SC242": "a tp that divides the heads needs as many GPUs: a fleet change",
    "SC247": "the checkpoint's config.json, which only the checkpoint has",
    "SC258": "SGLang divides whatever chunk is written: the warning says what each rank prefills",
    "SC312": "the image's digest, which only the registry knows (docker buildx imagetools inspect)",
    "SC330": "whether the image's own build takes the value is the image's (its source's catalog says)",
    "SC319": "raised only with an operator's image table: tests/test_image_builds.py applies its hint",
    "SC402": "a node's name is the operator's",
    "SC403": "a node's fabric IP is the operator's",
    "SC404": "a node's ssh target is the operator's",
    "SC405": "a node's address (or the subnet) is the operator's",
    "SC407": "the Engram tables' row counts come from the checkpoint",
    "SC414": "one GPU per container, or another model: a deployment change",
    "SC421": "where to mount instead is the operator's",
    "SC425": "the unit of the stack this release replaces is the operator's",
    "SC429": "downloading the checkpoint and naming its directory",
    "SC440": "more nodes: a fleet change",
    "SC504": "the container's memory and shared memory sizes are the operator's",
    "SC505": "the image's digest, which only the registry knows",
    "SC506": "how to place Engram rows under Kubernetes (the README under k8s/)",
    "SC509": "where to mount instead, or how to split the fleet",
    # Raised by `check --engine` (SGLang's own parser in the engine venv), not by a negative profile.
    "SC601": "check --engine only: SGLang's rewrite, accepted in engine.accept_rewrites (tests/engine)",
    "SC602": "check --engine only: SGLang's boot error (tests/engine)",
    "SC603": "check --engine only: why an engine check could not run here",
    "SC604": "check --engine only: an accepted rewrite that no longer happens (tests/engine)",
}


def _raised() -> dict[str, list[tuple[Path, Any]]]:
    """Every rule a negative profile raises: the profiles and findings."""
    from test_fixes import findings

    out: dict[str, list[tuple[Path, Any]]] = {}
    for path in NEGATIVE:
        found: list[Any] = findings(path)
        for finding in found:
            out.setdefault(finding.rule, []).append((path, finding))
    return out


@pytest.fixture(scope="module")
def raised() -> dict[str, list[tuple[Path, Any]]]:
    import os

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        return _raised()
    finally:
        os.chdir(here)


def _key(finding: Any) -> tuple[str, str]:
    return finding.rule, finding.message


def _applied(path: Path, finding: Any) -> tuple[str, list[Any], list[Any]] | None:
    """The child profile of ``finding``'s hint, its findings and the negative profile's; None when the hint
    is not concrete."""
    from test_fixes import findings

    from spark_compile.stages.load import LoadError

    try:
        profile = Profile(path)
    except LoadError:  # the file does not load, so no profile can extend it: the hint edits its own text
        edited = text_edit(path, finding)
        return None if edited is None else (edited, findings(path, edited), findings(path))
    edits = suggestion(profile, finding)
    if edits is None:
        return None
    text = child_text(path, profile, edits)
    return text, checked(path, text), findings(path)


def _problem(path: Path, finding: Any, text: str, after: list[Any], before: list[Any]) -> str | None:
    """What is wrong after the hint was applied: the finding still there, or a new error; None when nothing."""
    old = {_key(f) for f in before}
    new_errors = [f for f in after if f.severity == "error" and _key(f) not in old]
    # Still there: the same message, or the rule at the same place or at the key the edit wrote (another
    # finding of the rule the profile already had, with its own message, is not this one).
    still = [f for f in after if _key(f) == _key(finding) or (f.rule == finding.rule and _key(f) not in old and (
        f.position == finding.position or f.position.file.endswith(".hinted.yaml")))]
    if not still and not new_errors:
        return None
    return (f"{path.name}: {finding.rule} {finding.hint!r}\n{text}-> still: {[(f.rule, f.message) for f in still]}; "
            f"new: {[(f.rule, f.message) for f in new_errors]}")


def test_every_rule_has_a_concrete_hint_that_is_applied_or_says_why_not(raised: Any, monkeypatch: Any) -> None:
    from spark_compile.rules import load_all

    monkeypatch.chdir(ROOT)
    covered, failures = set(), []
    for rule, cases in sorted(raised.items()):
        for path, finding in cases:
            result = _applied(path, finding)
            if result is not None:
                covered.add(rule)
                failures.append(_problem(path, finding, *result))
    assert [f for f in failures if f] == [], "\n\n".join(f for f in failures if f)
    rules = set(load_all())
    assert sorted(rules - covered - set(NOT_CONCRETE)) == [], "rules with neither an applied hint nor a reason"
    assert sorted(covered & set(NOT_CONCRETE)) == [], "rules listed as not concrete whose hint was applied"
    assert sorted(set(NOT_CONCRETE) - rules) == []


def test_one_root_cause_is_one_finding_with_a_hint_for_the_right_tp(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    shutil.copy(REFERENCE_PROFILE.parent / "dsv41-flash.config.json", tmp_path / "dsv41-flash.config.json")
    # tp 6 on four nodes: ep 4 does not divide 6 either, but a divisor of the wrong tp would be the wrong ep.
    (tmp_path / "tp6.yaml").write_text("extends: base.yaml\nengine:\n  parallel: {tp: 6, ep: 4}\n")
    result = run_cli("check", "--format", "json", "tp6.yaml", cwd=tmp_path)
    found = [f for f in json.loads(result.stdout)["findings"] if f["rule"] != "SC312"]
    assert found == [{"rule": "SC401", "severity": "error", "file": "tp6.yaml", "line": 3, "column": 18,
                      "message": "tp 6 does not fit 4 node(s) x 1 GPU(s) of dgx-spark-gb10: expected tp 4",
                      "hint": "set engine.parallel.tp: 4 (nodes x GPUs per node), or change the node list",
                      "via": []}]


def test_an_unknown_sglang_variable_is_not_matched_on_the_prefix_every_variable_shares(tmp_path: Path) -> None:
    """SGLANG_USE_MY_KERNEL shares only SGLANG_USE_ with SGLANG_USE_SGL_FA3_KERNEL: no suggestion, but the two
    one-step edits, each of which checks clean."""
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    shutil.copy(REFERENCE_PROFILE.parent / "dsv41-flash.config.json", tmp_path / "dsv41-flash.config.json")
    (tmp_path / "patched.yaml").write_text("extends: base.yaml\nengine:\n  env: {SGLANG_USE_MY_KERNEL: '1'}\n")
    found = json.loads(run_cli("check", "--format", "json", "patched.yaml", cwd=tmp_path).stdout)["findings"]
    assert [(f["rule"], f["hint"]) for f in found if f["rule"] not in REFERENCE_WARNINGS] == [("SC307", (
        "remove SGLANG_USE_MY_KERNEL: this SGLang build ignores it, or add SGLANG_USE_MY_KERNEL to "
        "engine.catalog_extra.env if the image's own build reads it"))]
    child = "extends: patched.yaml\nengine:\n  "
    (tmp_path / "removed.yaml").write_text(f"{child}env:\n    SGLANG_USE_MY_KERNEL: !delete\n")
    (tmp_path / "extra.yaml").write_text(f"{child}catalog_extra: {{env: [SGLANG_USE_MY_KERNEL]}}\n")
    for edited in ("removed.yaml", "extra.yaml"):
        after = json.loads(run_cli("check", "--format", "json", edited, cwd=tmp_path).stdout)["findings"]
        assert [f["rule"] for f in after if f["rule"] not in REFERENCE_WARNINGS] == []


def test_every_message_names_a_node_by_its_name(raised: Any) -> None:
    """``fleet.nodes[3] (spark-3)``, ``rank 0 (spark-0)``: an index alone only where the name is the subject
    (a name used twice, a name that is not valid)."""
    bare = []
    for cases in raised.values():
        for path, finding in cases:
            for text in (finding.message, finding.hint):
                for found in re.finditer(r"fleet\.nodes\[\d+\](?!\.name)(?! \()|\brank \d+(?![ /]\(|/)", text):
                    if finding.rule != "SC402":
                        bare.append((path.name, finding.rule, text[max(0, found.start() - 20):found.end() + 20]))
    assert bare == []


# Features an engine rule's hint may drop, with why: SGLang serves the two only apart.
DROPS_FEATURE = {"SC256": "SGLang refuses a standalone draft with attention DP: one of the two must go"}
FEATURES = (("engine", "speculative", "algorithm"), ("engine", "parallel", "dp_attention"))


@pytest.mark.engine
def test_every_engine_rule_hint_is_resolved_by_sglang_with_the_feature_kept(raised: Any, tmp_path: Path) -> None:
    """For each rule whose negative profile records SGLang's verdict (`# engine:` lines), its hint applied
    literally gives a profile SGLang's own resolution (check --engine, all in one engine process) neither refuses
    nor rewrites, which keeps the speculative algorithm and attention DP the negative profile asked for."""
    python = os.environ.get("ENGINE_PYTHON", "")
    if not python:
        pytest.skip("no engine interpreter: set ENGINE_PYTHON (tests/engine/sglang_parse.py says how)")
    children: dict[str, tuple[str, Any]] = {}
    dropped = []
    for rule, cases in sorted(raised.items()):
        for path, finding in cases:
            if b"\n# engine: " not in path.read_bytes():
                continue
            if finding.rule in REFERENCE_WARNINGS and finding.position.file != str(path.relative_to(ROOT)):
                continue  # the shipped profile's own warning it extends (SGLang's verdict is on the example's own)
            edits = suggestion(Profile(path), finding)
            if edits is None:
                continue
            # Writing the name SGLang runs the feature under (NEXTN's EAGLE) keeps it.
            profile = Profile(path)
            written = profile.value(FEATURES[0]) if profile.has(FEATURES[0]) else None
            renamed = {SPECULATIVE_ALIASES.get(str(written))}
            if any(e.path[:len(f)] == f and (e.remove or e.value not in renamed) for e in edits for f in FEATURES) \
                    and rule not in DROPS_FEATURE:
                dropped.append((path.name, rule, finding.hint))
            child = tmp_path / f"{len(children):03d}-{path.stem}.yaml"
            text = child_text(path, profile, edits).replace(
                f"extends: {path.name}", f"extends: {os.path.relpath(path, tmp_path)}", 1)
            child.write_text(text, encoding="utf-8")
            children[str(child)] = (rule, finding.hint)
    assert dropped == [], "hints that drop the feature the profile asked for"
    assert len(children) >= 10
    proc = run_cli("check", "--engine", "--format", "json", *children, env={"ENGINE_PYTHON": python})
    found = json.loads(proc.stdout)["findings"]
    refused = sorted({(Path(c).name, *children[c], f["rule"], f["message"]) for f in found
                      for c in children if f["rule"] in ("SC601", "SC602")
                      and Path(c).resolve() in {(ROOT / p).resolve() for p in (f["file"], *f["via"])}})
    assert refused == []
