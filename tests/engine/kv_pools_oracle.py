"""Run in the engine venv: SGLang 0.5.23's own pool code on the cases tests/engine/test_kv_pools.py names (JSON
on stdin), on the probe's stand-ins and a simulated GB10; prints SGLang's figures as JSON."""

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

# The compiler's probe, by path (the engine venv does not install spark_compile): its stand-ins for the
# CUDA-only imports and its simulated device.
_PROBE = Path(__file__).resolve().parents[2] / "compiler" / "engine" / "resolve_probe.py"
_SPEC = importlib.util.spec_from_file_location("resolve_probe", _PROBE)
assert _SPEC is not None and _SPEC.loader is not None
resolve_probe: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(resolve_probe)
resolve_probe.install_standins()
resolve_probe.simulate({"gpu_name": "NVIDIA GB10", "capability": [12, 1], "gpus": 1, "memory_gib": 121,
                        "unified": True, "machine": "aarch64"})

import torch  # noqa: E402
from sglang.srt.configs import qwen3_next  # noqa: E402
from sglang.srt.configs.model_config import ModelConfig  # noqa: E402
from sglang.srt.mem_cache.kv_cache_configurator import calculate_mla_kv_cache_dim  # noqa: E402
from sglang.srt.model_executor.pool_configurator import (  # noqa: E402
    DefaultPoolConfigurator,
    HybridSWAPoolConfigurator,
)


def kv_heads(total: int, tp: int) -> int:
    view = types.SimpleNamespace(get_total_num_kv_heads=lambda: total, is_draft_model=False)
    return int(ModelConfig.get_num_kv_heads(view, tp))


def mla_dim(rank: int, rope: int) -> int:
    config = types.SimpleNamespace(kv_lora_rank=rank, qk_rope_head_dim=rope,
                                   hf_config=types.SimpleNamespace(architectures=["DeepseekV3ForCausalLM"]))
    return int(calculate_mla_kv_cache_dim(model_config=config, kv_cache_dtype=torch.bfloat16))


def gdn_state(config: dict[str, Any], tp: int) -> int:
    qwen3_next.linear_attn_tp_size = lambda: tp
    return int(qwen3_next.Qwen3NextConfig(**config).mamba2_cache_params.mamba_cache_per_req)


def default_tokens(cell: int, available: int, page: int) -> int:
    pool = object.__new__(DefaultPoolConfigurator)
    pool._fixed_overhead_bytes, pool._cell_size, pool._zero_kv_max_tokens = 0, cell, 0
    return int(pool.calculate_pool_sizes(available, page).max_total_num_tokens)


def swa_tokens(full: int, swa: int, full_layers: int, swa_layers: int, draft: int, available: int) -> list[int]:
    pool = object.__new__(HybridSWAPoolConfigurator)
    pool._full_per_token, pool._swa_per_token = full, swa
    pool._full_layers_num, pool._swa_layers_num = full_layers, swa_layers
    pool._draft_full_layers_num, pool._draft_swa_layers_num, pool._draft_swa_full_layers_num = draft, 0, 0
    pool._draft_cell_size, pool._fused_full_entry, pool._fused_swa_entry = 0, None, None
    pool._swa_full_tokens_ratio, pool._enable_unified_memory = 0.8, False
    pool._sliding_window_size, pool._page_size = 128, 1
    pool._recompute_cell_size()
    config = pool.calculate_pool_sizes(available, 1)
    return [config.full_max_total_num_tokens, config.swa_max_total_num_tokens]


cases = json.load(sys.stdin)
print(json.dumps({
    "kv_heads": [kv_heads(total, tp) for total, tp in cases["kv_heads"]],
    "mla": [mla_dim(rank, rope) for rank, rope in cases["mla"]],
    "gdn": [gdn_state(config, tp) for config, tp in cases["gdn"]],
    "default": [default_tokens(*case) for case in cases["default"]],
    "swa": [swa_tokens(*case) for case in cases["swa"]],
}))
