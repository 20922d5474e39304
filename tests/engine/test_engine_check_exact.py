"""`check --engine` says exactly what SGLang 0.5.23 said, where the profile set it, and nothing it did not say.

Whole messages, from the real engine venv (GB10 simulated): an argparse refusal keeps argparse's own words at the
args key that wrote the flag; a resolution that failed yields its SC602 and no SC601 (graphs off used to give
two false "resolves --cuda-graph-backend-* disabled to null") and no SC604 (an acceptance cannot be judged stale
by a resolution that did not run); a draft model with no config.json here costs one SC603, and the target is
resolved all the same (tests/profiles/negative/eagle3-draft-tokens.yaml: its EAGLE3 rewrite is still reported).
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
NAMES = ("argparse-refusal", "resolution-fails-graphs-off", "draft-not-here")


@pytest.fixture(scope="module")
def found() -> dict[str, list[tuple[int, int, str, str]]]:
    paths = [str((PROFILES / f"{name}.yaml").relative_to(ROOT)) for name in NAMES]
    proc = run_cli("check", "--engine", "--format", "json", *paths, env={"ENGINE_PYTHON": engine_python()})
    assert proc.returncode == 1, proc.stderr
    out: dict[str, list[tuple[int, int, str, str]]] = {name: [] for name in NAMES}
    for f in json.loads(proc.stdout)["findings"]:
        stem = f["file"].rsplit("/", 1)[-1].removesuffix(".yaml")
        if stem in out:
            out[stem].append((f["line"], f["column"], f["rule"], f["message"]))
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
    from spark_compile.engine_check import hardware_request, run_probe

    target, draft = tmp_path / "target", tmp_path / "draft"
    for where, config in ((target, ROOT / "spec" / "profiles" / "examples" / "qwen3-30b-a3b.config.json"),
                          (draft, PROFILES / "qwen3-eagle3-draft.config.json")):
        where.mkdir()
        (where / "config.json").write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    spec = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/draft"]
    argvs = [[*spec, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
              "6"], [*spec, "--context-length", "4096"]]
    request = {"hardware": hardware_request("dgx-spark-gb10"), "jobs": [
        {"paths": {"/models/repo": str(target), "/models/draft": str(draft)},
         "ranks": [{"rank": 0, "env": {}, "argv": ["--model-path", "/models/repo", *argv]}]} for argv in argvs]}
    [rewritten], [refused] = run_probe(engine_python(), request)["jobs"]
    assert rewritten["outcome"] == "ok" and rewritten["draft"] == {"context_length": 2048, "quantization": None}
    assert rewritten["written"]["speculative_num_draft_tokens"] == {
        "option": "--speculative-num-draft-tokens", "value": 6, "resolved": 4, "sources": ["_handle_eagle_family"]}
    assert (refused["outcome"], refused["stage"], refused["error"]) == (
        "refused", "model, the draft's", "ValueError: Warning: Target model's context_length (4096) is greater than "
        "the derived context_length (2048). This may lead to incorrect model outputs or CUDA errors. Note that the "
        "derived context_length may differ from max_position_embeddings in the model's config. To allow overriding "
        "this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
