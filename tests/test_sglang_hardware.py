"""The hardware facts of the catalog step (spec/generators/sglang_hardware.py) on a small SGLang-shaped tree, and
the facts committed for 0.5.23 against what SGLang does on GB10 (SM121)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from spark_compile.spec.catalog import engine_catalog
from spark_compile.spec.generators.sglang_hardware import hardware_facts

COMMON = """
is_sm100_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[10]))
is_blackwell = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[10, 11, 12]))
is_sm120_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[12]))
is_sm90_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[9]))
"""
PLATFORM = """
_PLATFORM_PROBES: Dict[str, str] = {"is_sm100": "is_sm100_supported", "is_sm120": "is_sm120_supported",
                                    "is_blackwell": "is_blackwell"}
"""
HOOK = '''
def handle(server_args):
    cfg = resolving_view(server_args)
    runner = cfg.moe_runner_backend
    if cfg.quantization == "q_sm100":
        if not get_platform().is_sm100:
            raise ValueError("q_sm100 needs SM100")
    if cfg.quantization == "q_blackwell" and not get_platform().is_blackwell:
        raise ValueError(f"q_blackwell needs {cfg.quantization} on Blackwell")
    if cfg.kv_cache_dtype == "kv_either" and not (get_platform().is_sm100 or get_platform().is_sm120):
        raise ValueError("SM100 or SM120")
    if cfg.attention_backend == "mega":
        assert cfg.device == "cuda" and is_sm100_supported(), "mega needs SM100"
    if cfg.quantization == "q_fp4" and runner == "auto" and get_platform().is_sm120:
        runner = "cutlass"
    if some_model_check(cfg) and not get_platform().is_sm100:
        raise ValueError("a condition this reader does not understand: left out")
    backend = cfg.decode_backend or cfg.attention_backend
    if backend == "fi" and cfg.kv_cache_dtype != "bf16" and torch.cuda.get_device_capability()[0] >= 10:
        raise ValueError("fi on SM100+ needs bf16")
    if cfg.speculative_algorithm not in ("EAGLE",):
        return
    if cfg.quantization == "after_unknown_return" and not get_platform().is_sm100:
        raise ValueError("left out: the early return above is not understood")


def one_family(server_args):
    cfg = resolving_view(server_args)
    if cfg.attention_backend == "family_only":
        assert is_sm100_supported(), "family_only needs SM100"


def caller(server_args, model_arch):
    if model_arch in ["XForCausalLM"]:
        one_family(server_args)
'''
CHOICES = 'MXFP8_MOE_RUNNER_BACKEND_CHOICES = ["cutlass", "flashinfer_trtllm"]\n'
OVERRIDES = 'def f(view):\n    mxfp8_default = "triton" if is_gfx95 else "flashinfer_trtllm"\n'
DESTS = {"decode_backend", "moe_runner_backend", "quantization", "kv_cache_dtype", "attention_backend", "device",
         "speculative_algorithm"}


def _tree(root: Path) -> Path:
    files = {"srt/utils/common.py": COMMON, "srt/runtime_context.py": PLATFORM, "srt/arg_groups/hook.py": HOOK,
             "srt/arg_groups/choices.py": CHOICES, "srt/arg_groups/overrides.py": OVERRIDES}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_facts_of_a_tree(tmp_path: Path) -> None:
    facts = hardware_facts(_tree(tmp_path), DESTS)
    required = {(tuple(map(tuple, r["when"])), tuple(r["majors"]), r["message"]) for r in facts["requirements"]}
    assert required == {
        ((("quantization", "q_sm100"),), (10,), "q_sm100 needs SM100"),
        ((("quantization", "q_blackwell"),), (10, 11, 12), "q_blackwell needs {...} on Blackwell"),
        ((("kv_cache_dtype", "kv_either"),), (10, 12), "SM100 or SM120"),
        ((("attention_backend", "mega"),), (10,), "mega needs SM100"),
        ((("attention_backend", "family_only"),), (10,), "family_only needs SM100"),
    }
    assert [r.get("architectures") for r in facts["requirements"] if r["message"] == "family_only needs SM100"] \
        == [["XForCausalLM"]]
    assert [(r["when"], r["majors"]) for r in facts["refusals"]] == [
        ([["decode_backend|attention_backend", "fi"], ["kv_cache_dtype", "!=", "bf16"]], [10, 11, 12])]
    assert facts["rewrites"] == [{"site": "srt/arg_groups/hook.py:handle", "majors": [12], "set":
                                  ["moe_runner_backend", "cutlass"],
                                  "when": [["quantization", "q_fp4"], ["moe_runner_backend", "auto"]]}]
    assert facts["quantization_runners"] == {"mxfp8": {"allowed": ["cutlass", "flashinfer_trtllm"],
                                                       "forced": "flashinfer_trtllm"}}


def test_a_tree_without_the_probes_has_no_facts(tmp_path: Path) -> None:
    (tmp_path / "srt").mkdir()
    assert hardware_facts(tmp_path, DESTS) == {}


def test_committed_facts_are_sglangs_on_gb10() -> None:
    """SGLang 0.5.23 refuses nvfp4_online on SM121 and keeps an NVFP4 KV cache and an MXFP8 one (SM120 family,
    Blackwell), refuses FlashInfer's linear-attention decode "on SM100+" (12 included) without a bfloat16 SSM
    state, and picks flashinfer_cutlass for an NVFP4 checkpoint there."""
    gpu = engine_catalog("sglang-0.5.23").gpu
    refused: dict[tuple[tuple[str, Any, bool], ...], tuple[int, ...]] = {
        gate.when: gate.majors for gate in gpu.requirements if 12 not in gate.majors}
    assert refused[(("quantization", "nvfp4_online", True),)] == (10,)
    assert (("kv_cache_dtype", "nvfp4", True),) not in refused and (("kv_cache_dtype", "mxfp8", True),) not in refused
    assert refused[(("kv_cache_dtype", "nvfp4", True), ("prefill_kv_cache_dequant_dtype", "nvfp4", True))] == (10,)
    decode = (("linear_attn_decode_backend|linear_attn_backend", "flashinfer", True),
              ("mamba_ssm_dtype", "bfloat16", False))
    assert [g.majors for g in gpu.refusals if g.when == decode] == [(10, 11, 12)]
    assert [(g.sets, g.majors) for g in gpu.rewrites] == [(("moe_runner_backend", "flashinfer_cutlass"), (11, 12))]
    assert gpu.runners["mxfp8"][1] == "flashinfer_trtllm"
    assert engine_catalog("sglang-0.5.10.post1").gpu.requirements == ()  # a frozen catalog: no facts recorded
    path = Path(__file__).resolve().parents[1] / "spec" / "catalogs" / "sglang-0.5.23.json"
    assert "hardware" in json.loads(path.read_text(encoding="utf-8"))
