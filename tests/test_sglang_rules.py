"""The facts the SGLang rules read from a config.json (spec/checkpoint.py), the way SGLang 0.5.23 derives them,
and the hints that must lead to a value SGLang accepts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_fixes import findings

from spark_compile.spec.checkpoint import checkpoint

from conftest import ROOT

BASE = {"architectures": ["LlamaForCausalLM"], "num_attention_heads": 32, "num_key_value_heads": 8}


def test_context_length_follows_get_context_length() -> None:
    # The first context key wins (max_sequence_length before max_position_embeddings), times rope_scaling.factor
    # unless the scaling names original_max_position_embeddings or is llama3's (get_context_length).
    assert checkpoint({**BASE, "max_position_embeddings": 4096}, "c").context_length == 4096
    assert checkpoint({**BASE, "max_sequence_length": 8192, "max_position_embeddings": 4096}, "c").context_length \
        == 8192
    yarn = checkpoint({**BASE, "max_position_embeddings": 32768, "rope_scaling": {"factor": 4.0, "type": "yarn"}},
                      "c")
    assert (yarn.context_length, yarn.context_source) == (131072, "max_position_embeddings 32768 x "
                                                          "rope_scaling.factor 4.0")
    for scaling in ({"factor": 4.0, "original_max_position_embeddings": 8192}, {"factor": 8.0, "rope_type": "llama3"}):
        assert checkpoint({**BASE, "max_position_embeddings": 4096, "rope_scaling": scaling}, "c").context_length \
            == 4096
    assert checkpoint(BASE, "c").context_length == 2048


def test_quantization_names_what_sglang_runs() -> None:
    nvfp4 = checkpoint({**BASE, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}, "c")
    assert (nvfp4.quant_method, nvfp4.quantization) == ("modelopt", "modelopt_fp4")
    fp8 = checkpoint({**BASE, "quantization_config": {"quant_method": "FP8"}}, "c")
    assert (fp8.quant_method, fp8.quantization) == ("fp8", "fp8")
    assert checkpoint(BASE, "c").quantization is None


def test_heads_of_a_text_config_and_mla() -> None:
    nested = checkpoint({"architectures": ["X"], "text_config": {"num_attention_heads": 16, "kv_lora_rank": 512}},
                        "c")
    assert (nested.attention_heads, nested.kv_heads, nested.mla) == (16, 16, True)


def test_shipped_config_facts() -> None:
    data = json.loads((ROOT / "spec" / "profiles" / "examples" / "qwen3-30b-a3b.config.json").read_text())
    qwen = checkpoint(data, "qwen3-30b-a3b.config.json")
    assert (qwen.attention_heads, qwen.kv_heads, qwen.context_length, qwen.experts) == (32, 4, 40960, 128)


def hints(path: str, rule: str) -> list[str]:
    return [f.hint for f in findings(ROOT / path) if f.rule == rule]  # type: ignore[attr-defined]


def test_ep_hints_name_values_the_moe_runner_takes() -> None:
    # flashinfer_mxfp4 (the reference) takes any divisor; SGLang's flashinfer_cutlass for NVFP4 on GB10 only 1 or tp.
    assert hints("tests/profiles/negative/ep-not-dividing.yaml", "SC201") == [
        "set engine.parallel.ep: 4 (the divisor of tp 4 closest to 3)"]
    assert hints("tests/profiles/negative/ep-not-dividing-nvfp4.yaml", "SC201") == [
        "set engine.parallel.ep: 4 (the MoE runner flashinfer_cutlass takes ep 1 or ep = tp)"]
    assert hints("tests/profiles/negative/ep-nvfp4-moe-runner.yaml", "SC243") == ["use ep: 4 (or 1)"]


def test_names_from_config_json_reach_messages_only_when_they_look_like_names() -> None:
    hostile = checkpoint({"architectures": ["X\x1b[2J"], "model_type": "a b",
                          "quantization_config": {"quant_method": "fp8\n"}}, "c")
    assert (hostile.architecture, hostile.model_type, hostile.quant_method) == (None, None, None)


def test_a_config_json_that_is_not_a_regular_file_is_not_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)  # opening it would block the check forever
    profile = ROOT / "tests" / "profiles" / "negative" / "config-json-unreadable.yaml"
    name = os.path.relpath(fifo, profile.parent)
    text = f"extends: ../../../spec/profiles/examples/single-node.yaml\nmodel: {{config_json: '{name}'}}\n"
    [finding] = [f for f in findings(profile, text) if getattr(f, "rule", "") == "SC247"]
    assert getattr(finding, "message", "").endswith(
        "config.fifo is not a readable JSON file: the config.json rules did not run")


def test_the_context_limit_of_a_separate_draft_counts() -> None:
    """SGLang's draft worker judges --context-length against the draft's own maximum at boot (test_engine_check_
    exact.py shows it refusing 4096 over a 2,048-token EAGLE3 head); SC209 reads the draft's committed config."""
    from spark_compile.pipeline import Rejected, run
    from spark_compile.rules.engine import context_length
    from spark_compile.rules.registry import Context

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        outcome = run(Path("tests/profiles/negative/context-over-config-json.yaml"))
    finally:
        os.chdir(here)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert planned is not None
    draft = checkpoint(json.loads((ROOT / "tests" / "engine" / "profiles" / "qwen3-eagle3-draft.config.json")
                                  .read_text()), "qwen3-eagle3-draft.config.json")
    ctx = Context(planned.profile, planned.plan, lambda _: True)
    ctx.__dict__["_checkpoints"] = (None, draft, "")  # as if the draft's config.json were committed
    assert [(h.path, h.message) for h in context_length(ctx)] == [
        (("engine", "limits", "context_length"), "context_length 65536 exceeds the model's maximum 2048 (the draft "
         "model's qwen3-eagle3-draft.config.json: max_position_embeddings)")]
