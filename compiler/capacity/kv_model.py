"""Which KV pool SGLang 0.5.23 builds for a model, read from its config.json: the layout `kv_pools` sizes
(DeepSeek-V4 has its own twin, `kv_dsv4`)."""

from __future__ import annotations

from typing import Any

from spark_compile.capacity.kv_pools import (
    SWA_FULL_TOKENS_RATIO,
    Layout,
    gdn_state_bytes,
    mha_token_bytes,
    mla_token_bytes,
    with_draft,
)

# SWA_SINK_ARCHS and the other hybrid-SWA architectures of configs/model_config.py that config.json shows by
# layer_types (is_hybrid_swa_model).
SWA_ARCHS = ("GptOssForCausalLM", "Gemma4ForCausalLM", "Step3p5ForCausalLM", "MiMoV2FlashForCausalLM")


def dtype_bytes(kv_cache_dtype: str | None) -> int:
    """Bytes per KV element: 1 for the fp8 (and fp4 with scales, counted as fp8 here) caches, else bf16's 2."""
    return 1 if kv_cache_dtype and kv_cache_dtype.startswith(("fp8", "fp4")) else 2


def _int(t: dict[str, Any], key: str, default: int | None = None) -> int:
    value = t.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise KeyError(key)
    return value


def _head_dim(t: dict[str, Any]) -> int:
    value = t.get("head_dim")
    return value if isinstance(value, int) and value > 0 else _int(t, "hidden_size") // _int(t, "num_attention_heads")


def _linear_ids(t: dict[str, Any], layers: int) -> list[int]:
    types = t.get("layer_types")
    if isinstance(types, list) and "linear_attention" in types:
        return [layer for layer, kind in enumerate(types[:layers]) if kind == "linear_attention"]
    interval = t.get("full_attention_interval")
    return [layer for layer in range(layers) if (layer + 1) % interval] if isinstance(interval, int) and interval > 0 \
        else []


def _state(t: dict[str, Any], tp: int, linear: list[int], stages: tuple[tuple[int, int], ...]) -> int:
    """One request's linear-attention state; under PP the largest stage's share of it on every rank
    (_handle_max_mamba_cache: int(per_req x most stage layers / all layers))."""
    whole = gdn_state_bytes(_int(t, "linear_num_key_heads"), _int(t, "linear_num_value_heads"),
                            _int(t, "linear_key_head_dim"), _int(t, "linear_value_head_dim"),
                            _int(t, "linear_conv_kernel_dim"), len(linear), tp)
    if len(stages) <= 1:
        return whole
    most = max(sum(1 for layer in linear if start <= layer < end) for start, end in stages)
    return int(whole * (most / len(linear)))


def layout(architecture: str, t: dict[str, Any], tp: int, kv_dtype: str | None, draft_layers: int,
           held: tuple[int, int] | None = None, stages: tuple[tuple[int, int], ...] = ()) -> Layout:
    """The pool SGLang picks and its per-token bytes on one rank, which holds layers ``held`` [start, end) of
    the pipeline ``stages`` (all layers by default); KeyError names a missing config field."""
    layers, size = _int(t, "num_hidden_layers"), dtype_bytes(kv_dtype)
    start, end = held or (0, layers)
    if isinstance(t.get("kv_lora_rank"), int):
        per = mla_token_bytes(_int(t, "kv_lora_rank"), _int(t, "qk_rope_head_dim"), size)
        return Layout("DefaultPoolConfigurator (MLA)", with_draft(per, end - start, draft_layers))
    heads, head_dim = _int(t, "num_key_value_heads", t.get("num_attention_heads")), _head_dim(t)
    per = mha_token_bytes(heads, head_dim, head_dim, tp, size)
    linear = _linear_ids(t, layers) if isinstance(t.get("linear_num_value_heads"), int) else []
    if linear:
        full = end - start - sum(1 for layer in linear if start <= layer < end)
        return Layout("DefaultPoolConfigurator (hybrid linear attention)", with_draft(per, full, draft_layers),
                      _state(t, tp, linear, stages))
    types = t.get("layer_types")
    if architecture in SWA_ARCHS and isinstance(types, list) and "sliding_attention" in types:
        swa = sum(1 for kind in types[start:min(end, layers)] if kind == "sliding_attention")
        cell = per * (end - start - swa + draft_layers) + SWA_FULL_TOKENS_RATIO * per * swa
        return Layout("HybridSWAPoolConfigurator", cell, swa_ratio=SWA_FULL_TOKENS_RATIO)
    return Layout("DefaultPoolConfigurator (MHA/GQA)", with_draft(per, end - start, draft_layers))
