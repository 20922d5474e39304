"""The tables the static SGLang rules reason with (spec/sglang_facts.py) are the installed SGLang's own.

Each is read out of the engine venv's SGLang source by AST (no import), where SGLang keeps it, so a build that
changes one fails here rather than leaving a rule quietly wrong.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from typing import Any

import pytest

from spark_compile.spec import sglang_facts as facts

from sglang_parse import engine_python

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def srt() -> Path:
    proc = subprocess.run([engine_python(), "-I", "-c", "import importlib.util; "
                           "print(importlib.util.find_spec('sglang').submodule_search_locations[0])"],
                          capture_output=True, text=True, check=True)
    return Path(proc.stdout.strip()) / "srt"


def function(srt: Path, rel: str, name: str) -> ast.FunctionDef:
    tree = ast.parse((srt / rel).read_text(encoding="utf-8"))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def assigned(node: ast.AST, name: str) -> Any:
    value = next(n.value for n in ast.walk(node) if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == name for t in n.targets))
    return ast.literal_eval(value)


def test_deprecated_tool_call_parsers(srt: Path) -> None:
    found = assigned(function(srt, "arg_groups/serving_hook.py", "handle_deprecated_args"),
                     "deprecated_tool_call_parsers")
    assert found == facts.DEPRECATED_TOOL_CALL_PARSERS


def test_compatible_quantization(srt: Path) -> None:
    found = assigned(function(srt, "configs/model_config.py", "_verify_quantization"),
                     "compatible_quantization_methods")
    assert {k: tuple(v) for k, v in found.items()} == facts.COMPATIBLE_QUANTIZATION
    tree = ast.parse((srt / "configs/model_config.py").read_text(encoding="utf-8"))
    assert tuple(assigned(tree, "REQUANTIZATION_METHODS")) == facts.REQUANTIZATION_METHODS


def test_ep_one_or_tp_runners(srt: Path) -> None:
    body = function(srt, "arg_groups/moe_hook.py", "handle_moe_kernel_config")
    runners = set()
    for node in ast.walk(body):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.comparators[0], ast.Constant):
            asserts = [a for stmt in node.body for a in ast.walk(stmt) if isinstance(a, ast.Assert)]
            if any("ep_size" in ast.unparse(a.test) and "tp_size" in ast.unparse(a.test) for a in asserts):
                runners.add(node.test.comparators[0].value)
    assert runners == set(facts.EP_ONE_OR_TP_RUNNERS)


def test_kv4_backend_lists(srt: Path) -> None:
    body = function(srt, "arg_groups/kv_cache_hook.py", "handle_kv4_compatibility")
    assert tuple(assigned(body, "KV4_ATTENTION_MHA_BACKEND_CHOICES")) == facts.KV4_MHA_BACKENDS
    assert tuple(assigned(body, "KV4_ATTENTION_MLA_BACKEND_CHOICES")) == facts.KV4_MLA_BACKENDS


def test_eagle_chain_rewrite(srt: Path) -> None:
    text = ast.unparse(function(srt, "arg_groups/speculative_hook.py", "_handle_eagle_family"))
    assert "speculative_num_draft_tokens=cfg.speculative_num_steps + 1" in text


def test_mtp_draft_architectures(srt: Path) -> None:
    body = function(srt, "arg_groups/speculative_hook.py", "_handle_eagle_family")
    lists = [ast.literal_eval(n.comparators[0]) for n in ast.walk(body) if isinstance(n, ast.Compare)
             and isinstance(n.left, ast.Name) and n.left.id == "model_arch" and isinstance(n.comparators[0], ast.List)]
    assert tuple(lists[0]) == facts.MTP_DRAFT_ARCHITECTURES


def test_speculative_by_model_type(srt: Path) -> None:
    text = ast.unparse(function(srt, "arg_groups/deepseek_v4_hook.py", "validate_deepseek_v41_features"))
    assert "hf_config.model_type != 'deepseek_v41'" in text
    assert "str(cfg.speculative_algorithm).upper() != 'DSPARK'" in text
    assert facts.SPECULATIVE_BY_MODEL_TYPE == {"deepseek_v41": ("DSPARK",)}


def test_speculative_aliases(srt: Path) -> None:
    text = ast.unparse(function(srt, "arg_groups/speculative_hook.py", "_resolve_speculative_algorithm_alias"))
    assert "if speculative_algorithm == 'NEXTN' or speculative_algorithm == 'EAGLE':" in text
    assert "return 'EAGLE'" in text
    assert facts.SPECULATIVE_ALIASES == {"NEXTN": "EAGLE"}


def test_gpt_oss_attention_backends(srt: Path) -> None:
    from spark_compile.spec.hardware import FAMILIES

    family = FAMILIES["GptOssForCausalLM"]
    listed = assigned(function(srt, "arg_groups/model_hook.py", "handle_model_specific_adjustments"),
                      "supported_backends")
    assert listed == [*family.attention_backends, "ascend", "intel_amx", "intel_xpu", "aiter"]
    body = function(srt, "arg_groups/model_overrides/gpt_oss.py", "_gpt_oss_overrides")
    unset = next(n for n in ast.walk(body) if isinstance(n, ast.If)
                 and ast.unparse(n.test) == "is_attention_backend_not_set(cfg)")
    chain: list[tuple[str, Any]] = []
    node: ast.stmt | None = unset.body[0]
    while isinstance(node, ast.If):
        chain.append((ast.unparse(node.test), ast.literal_eval(node.body[0].value)))  # type: ignore[attr-defined]
        node = node.orelse[0] if node.orelse else None
    # GB10 (12.1) is neither SM100 nor SM90, nor a CPU, an XPU or a HIP device: the last branch is its.
    assert [test for test, _ in chain] == ["get_platform().is_sm100", "get_platform().is_sm90",
                                           "is_cpu() and get_platform().has_amx", "get_platform().is_xpu",
                                           "get_platform().is_hip", "not (is_mps() and use_mlx())"]
    assert chain[-1][1] == family.gb10_attention_backend


def test_written_batch_sizes_decide_max_bs(srt: Path) -> None:
    text = ast.unparse(function(srt, "arg_groups/memory_hook.py", "handle_gpu_memory_settings"))
    assert "decode_cuda_graph_config.max_bs = max(decode_cuda_graph_config.bs)" in text


def test_draft_mtp_architectures(srt: Path) -> None:
    """Every architecture whose draft ModelConfig SGLang turns into its MTP (NextN) model: the literal names
    _config_draft_model compares architectures[0] with, the DSPARK draft's own architecture aside."""
    body = function(srt, "configs/model_config.py", "_config_draft_model")
    found: list[str] = []
    for node in ast.walk(body):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.BoolOp)) or not any(
                isinstance(p, ast.Name) and p.id == "is_draft_model" for p in node.test.values):
            continue
        for part in node.test.values:
            if isinstance(part, ast.Compare) and ast.unparse(part.left) == "self.hf_config.architectures[0]":
                try:
                    named = ast.literal_eval(part.comparators[0])
                except ValueError:  # a module-level name (MIMO_V2_MODEL_ARCHS: no Spark model)
                    continue
                found += [named] if isinstance(named, str) else list(named)
    assert [n for n in found if n != "DSparkMiniMaxDraftModel"] == list(facts.DRAFT_MTP_ARCHITECTURES)


def test_pipeline_parallelism_refusals(srt: Path) -> None:
    text = ast.unparse(function(srt, "arg_groups/deepseek_v4_hook.py", "validate_deepseek_v41_features"))
    assert "('pipeline parallelism', cfg.pp_size > 1)" in text and facts.NO_PP_MODEL_TYPES == ("deepseek_v41",)
    compat = ast.unparse(function(srt, "arg_groups/validation_hook.py", "check_pipeline_parallel_compat"))
    assert "cfg.speculative_algorithm.upper() == 'EAGLE' and (not cfg.enable_multi_layer_eagle)" in compat
    assert f"if envs.{facts.PP_SPEC_ENV}.get():" in compat
    assert "assert cfg.disaggregation_mode == 'prefill'" in compat
