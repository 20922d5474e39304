"""`check --engine` says exactly what SGLang 0.5.23 said, where the profile set it, and nothing it did not say.

Whole messages, from the real engine venv (GB10 simulated): an argparse refusal keeps argparse's own words at the
args key that wrote the flag; a resolution that failed yields its SC602 and no SC601 (graphs off used to give
two false "resolves --cuda-graph-backend-* disabled to null") and no SC604 (an acceptance cannot be judged stale
by a resolution that did not run); a draft model with no config.json here costs one SC603, and the target is
resolved all the same (tests/profiles/negative/eagle3-draft-tokens.yaml: its EAGLE3 rewrite is still reported);
a draft whose directory is not here but whose config.json is committed is resolved beside the target, its
rewrites and its own checks reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, run_cli
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

PROFILES = ROOT / "tests" / "engine" / "profiles"
NAMES = ("argparse-refusal", "resolution-fails-graphs-off", "draft-not-here", "draft-absent-rewrites",
         "draft-config-only")
Spot = tuple[int, int, str, str]


@pytest.fixture(scope="module")
def run() -> list[dict[str, Any]]:
    paths = [str((PROFILES / f"{name}.yaml").relative_to(ROOT)) for name in NAMES]
    proc = run_cli("check", "--engine", "--format", "json", *paths, env={"ENGINE_PYTHON": engine_python()})
    assert proc.returncode == 1, proc.stderr
    findings: list[dict[str, Any]] = json.loads(proc.stdout)["findings"]
    return findings


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".yaml")


@pytest.fixture(scope="module")
def found(run: list[dict[str, Any]]) -> dict[str, list[Spot]]:
    """Each profile's findings in its own file."""
    out: dict[str, list[Spot]] = {name: [] for name in NAMES}
    for f in run:
        if _stem(f["file"]) in out:
            out[_stem(f["file"])].append((f["line"], f["column"], f["rule"], f["message"]))
    return out


@pytest.fixture(scope="module")
def inherited(run: list[dict[str, Any]]) -> dict[str, list[tuple[str, Spot]]]:
    """Each profile's findings at a line of the profile it extends (the parent's tag-only image aside)."""
    out: dict[str, list[tuple[str, Spot]]] = {name: [] for name in NAMES}
    for f in run:
        if f.get("via") and _stem(f["via"][0]) in out and f["rule"] != "SC312":
            out[_stem(f["via"][0])].append((f["file"], (f["line"], f["column"], f["rule"], f["message"])))
    return out


def test_argparse_refusal_keeps_argparse_words(found: dict[str, Any]) -> None:
    assert sorted(found["argparse-refusal"]) == [
        (3, 30, "SC304", "--max-prefill-tokens takes a whole number; got 'lots'"),
        (3, 30, "SC602", "sglang-0.5.23 refuses the arguments at boot (parse) on every rank: argparse: argument "
                         "--max-prefill-tokens: Invalid integer value: 'lots'. Use a plain integer, SI suffixes (1k, "
                         "1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive."),
    ]


def test_failed_resolution_reports_no_rewrite_and_no_stale_acceptance(found: dict[str, Any]) -> None:
    assert sorted(found["resolution-fails-graphs-off"]) == [
        (4, 28, "SC209", "context_length 2097152 exceeds the model's maximum 1048576"),
        (4, 28, "SC602", "sglang-0.5.23 refuses the arguments at boot (resolve) on every rank: ValueError: Warning: "
                         "User-specified context_length (2097152) is greater than the derived context_length "
                         "(1048576). This may lead to incorrect model outputs or CUDA errors. Note that the derived "
                         "context_length may differ from max_position_embeddings in the model's config. To allow "
                         "overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
    ]


def test_an_absent_draft_with_its_config_is_resolved_with_the_target(found: dict[str, Any],
                                                                    inherited: dict[str, Any]) -> None:
    """The draft's directory is not on this machine; its committed config.json (an NVFP4 EAGLE3 head) is: the
    target's rewrite and the draft's are both reported, at the keys that wrote them, and nothing is skipped."""
    assert inherited["draft-absent-rewrites"] == []
    assert sorted(found["draft-absent-rewrites"]) == [
        (7, 23, "SC240", "with eagle_topk 1 SGLang verifies num_steps + 1 = 4 draft tokens and replaces "
                         "num_draft_tokens 6"),
        (7, 23, "SC601", "sglang-0.5.23 resolves --speculative-num-draft-tokens 6 to 4 (_handle_eagle_family)"),
        (8, 59, "SC244", "--speculative-draft-model-quantization fp8 contradicts the quantization_config of "
                         "qwen3-eagle3-draft-nvfp4.config.json (modelopt, which SGLang runs as modelopt_fp4)"),
        (8, 59, "SC601", "sglang-0.5.23 resolves --speculative-draft-model-quantization fp8 to modelopt_fp4 "
                         "(ModelConfig._verify_quantization)"),
    ]


def test_an_absent_draft_with_its_config_has_its_own_checks(found: dict[str, Any], inherited: dict[str, Any]) -> None:
    """The draft's config.json allows 2,048 tokens: SGLang's draft ModelConfig refuses the inherited 32,768 at the
    parent's context_length line, and the target's rewrite is reported all the same."""
    assert sorted(found["draft-config-only"]) == [
        (7, 23, "SC240", "with eagle_topk 1 SGLang verifies num_steps + 1 = 4 draft tokens and replaces "
                         "num_draft_tokens 6"),
        (7, 23, "SC601", "sglang-0.5.23 resolves --speculative-num-draft-tokens 6 to 4 (_handle_eagle_family)"),
    ]
    parent = "spec/profiles/examples/single-node.yaml"
    assert sorted(inherited["draft-config-only"]) == [
        (parent, (30, 21, "SC209", "context_length 32768 exceeds the model's maximum 2048 (the draft model's "
                                   "qwen3-eagle3-draft.config.json: max_position_embeddings)")),
        (parent, (30, 21, "SC602", "sglang-0.5.23 refuses the arguments at boot (model, the draft's): ValueError: "
                                   "Warning: Target model's context_length (32768) is greater than the derived "
                                   "context_length (2048). This may lead to incorrect model outputs or CUDA errors. "
                                   "Note that the derived context_length may differ from max_position_embeddings in "
                                   "the model's config. To allow overriding this maximum, set the env var "
                                   "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")),
    ]


def test_an_absent_draft_costs_one_warning(found: dict[str, Any]) -> None:
    assert sorted(found["draft-not-here"]) == [
        (3, 36, "SC603", "engine checks of the draft model for sglang-0.5.23 did not run: no config.json: "
                         "/srv/models/draft/config.json is not on this machine and "
                         "engine.speculative.draft.config_json is unset (commit a copy of the checkpoint's "
                         "config.json beside the profile and name it there); the target was resolved without "
                         "--speculative-draft-model-path"),
    ]



def test_a_draft_with_its_config_is_resolved_beside_the_target(tmp_path: Path) -> None:
    """The probe builds the draft worker's ModelConfig from the draft's own config.json (a one-layer EAGLE3 head
    for Qwen3-30B-A3B, made for this test with a 2,048-token limit): a rewrite in the target and the draft's own
    context check are both reported."""
    from spark_compile.engine.check import hardware_request
    from spark_compile.engine.probe import run_probe_jobs

    target, draft = tmp_path / "target", tmp_path / "draft"
    for where, config in ((target, ROOT / "spec" / "profiles" / "examples" / "qwen3-30b-a3b.config.json"),
                          (draft, PROFILES / "qwen3-eagle3-draft.config.json")):
        where.mkdir()
        (where / "config.json").write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    spec = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/draft"]
    argvs = [[*spec, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
              "6"], [*spec, "--context-length", "4096"]]
    jobs = [{"paths": {"/models/repo": str(target), "/models/draft": str(draft)},
             "ranks": [{"rank": 0, "env": {}, "argv": ["--model-path", "/models/repo", *argv]}]} for argv in argvs]
    [rewritten], [refused] = run_probe_jobs(engine_python(), hardware_request("dgx-spark-gb10"), jobs)["jobs"]
    assert rewritten["outcome"] == "ok" and rewritten["draft"] == {"context_length": 2048, "quantization": None}
    assert rewritten["written"]["speculative_num_draft_tokens"] == {
        "option": "--speculative-num-draft-tokens", "value": 6, "resolved": 4, "sources": ["_handle_eagle_family"]}
    assert (refused["outcome"], refused["stage"], refused["error"]) == (
        "refused", "model, the draft's", "ValueError: Warning: Target model's context_length (4096) is greater than "
        "the derived context_length (2048). This may lead to incorrect model outputs or CUDA errors. Note that the "
        "derived context_length may differ from max_position_embeddings in the model's config. To allow overriding "
        "this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
