"""Weights per rank from config.json alone: parameters per tensor family x the bytes the checkpoint stores
them in (quantization_config, or a top-level expert_dtype), split as SGLang shards them.

Families: the embedding and lm_head (vocab-parallel, 1/TP), attention (MHA/GQA q/k/v/o, MLA's low-rank
projections, or a GDN linear-attention block; 1/TP), dense MLPs (1/TP), routed experts (1/TP: EP x MoE-TP =
TP) and shared experts (1/TP); norms and routers are small and replicated. Quantized linears carry their
scales (fp8 block scales, NVFP4's fp8 scale per 16 values, MXFP4's e8m0 per 32); modules the quantization
config excludes stay in the model dtype. When the profile commits the checkpoint's
model.safetensors.index.json, its metadata.total_size is the exact whole, split by these families' shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_compile.capacity.pp_split import Stage

BF16 = 2.0
FP8_BLOCK128 = 1 + 4 / (128 * 128)  # e4m3 with a float32 scale per 128x128 block
NVFP4 = 0.5 + 1 / 16  # e2m1 with an e4m3 scale per 16 values
MXFP4 = 0.5 + 1 / 32  # e2m1 with an e8m0 scale per 32 values
INT4_GROUP128 = 0.5 + 4 / 128  # int4 with a bf16 scale and zero per 128 values (AWQ/GPTQ)


class EstimateError(ValueError):
    """config.json lacks what the estimate needs (the message names the field)."""


@dataclass(frozen=True, slots=True)
class Families:
    """Parameters of each tensor family, whole model (before any split)."""

    embed: int
    lm_head: int
    attention: int
    dense_mlp: int
    experts: int
    shared: int
    layers: int


def _int(t: dict[str, Any], key: str, default: int | None = None) -> int:
    value = t.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EstimateError(f"config.json has no {key}")
    return value


def _attention(t: dict[str, Any], d: int) -> tuple[int, int]:
    """(full-attention parameters per layer, linear-attention parameters per layer)."""
    heads = _int(t, "num_attention_heads")
    head_dim = _int(t, "head_dim", d // heads)
    if isinstance(t.get("kv_lora_rank"), int):
        q_rank, kv_rank = t.get("q_lora_rank"), _int(t, "kv_lora_rank")
        nope, rope, v = _int(t, "qk_nope_head_dim"), _int(t, "qk_rope_head_dim"), _int(t, "v_head_dim")
        q = d * heads * (nope + rope) if not isinstance(q_rank, int) else d * q_rank + q_rank * heads * (nope + rope)
        full = q + d * (kv_rank + rope) + kv_rank * heads * (nope + v) + heads * v * d
    else:
        kv = _int(t, "num_key_value_heads", heads)
        full = d * heads * head_dim * 2 + 2 * d * kv * head_dim
    linear = 0
    if isinstance(t.get("linear_num_value_heads"), int):
        kh, vh = _int(t, "linear_num_key_heads"), _int(t, "linear_num_value_heads")
        kd, vd = _int(t, "linear_key_head_dim"), _int(t, "linear_value_head_dim")
        key, value = kh * kd, vh * vd
        linear = d * (2 * key + 2 * value) + 2 * d * vh + value * d
    return full, linear


def _full_linear(t: dict[str, Any], layers: int, start: int, end: int) -> tuple[int, int]:
    """(full-attention layers, linear-attention layers) among layers [start, end)."""
    types = t.get("layer_types")
    if isinstance(types, list) and "linear_attention" in types:
        linear = sum(1 for kind in types[start:min(end, layers)] if kind == "linear_attention")
        return end - start - linear, linear
    interval = t.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0 and isinstance(t.get("linear_num_value_heads"), int):
        full = sum(1 for layer in range(start, end) if (layer + 1) % interval == 0)
        return full, end - start - full
    return end - start, 0


def families(t: dict[str, Any], stage: Stage | None = None) -> Families:
    """Each family's parameter count for a decoder config (DeepSeek-V4 has its own estimate): the whole model,
    or one pipeline stage's layers with the embedding on the first stage and lm_head where the model builds it."""
    d, layers, vocab = _int(t, "hidden_size"), _int(t, "num_hidden_layers"), _int(t, "vocab_size")
    start, end = (0, layers) if stage is None else (stage.start, stage.end)
    full_layers, linear_layers = _full_linear(t, layers, start, end)
    full, linear = _attention(t, d)
    experts = t.get("num_experts", t.get("n_routed_experts", t.get("num_local_experts")))
    moe_layers, dense_layers = 0, end - start
    expert_params = shared_params = 0
    if isinstance(experts, int) and experts > 0:
        first_dense = t.get("first_k_dense_replace", 0) if isinstance(t.get("first_k_dense_replace"), int) else 0
        dense_layers = max(0, min(end, first_dense) - start)
        moe_layers = end - start - dense_layers
        inter = _int(t, "moe_intermediate_size", t.get("intermediate_size"))
        expert_params = moe_layers * experts * 3 * d * inter
        shared_inter = t.get("shared_expert_intermediate_size")
        if not isinstance(shared_inter, int):
            shared_inter = _int(t, "n_shared_experts", 0) * inter
        shared_params = moe_layers * 3 * d * shared_inter
    dense = dense_layers * 3 * d * _int(t, "intermediate_size") if dense_layers else 0
    tied = t.get("tie_word_embeddings") is True
    embed = stage is None or stage.first
    head = not tied and (stage is None or stage.holds_lm_head)
    return Families(vocab * d if embed else 0, vocab * d if head else 0,
                    full_layers * full + linear_layers * linear, dense, expert_params, shared_params, end - start)


def _excluded(quant: dict[str, Any], family: str) -> bool:
    """Whether the quantization config keeps this family in the model dtype."""
    names = quant.get("exclude_modules") or quant.get("modules_to_not_convert") or quant.get("ignore") or []
    text = " ".join(str(n) for n in names) if isinstance(names, list) else ""
    marks = {"attention": ("self_attn", "attn"), "lm_head": ("lm_head",), "embed": ("embed_tokens",),
             "experts": ("experts",), "dense_mlp": (".mlp*", ".mlp "), "shared": ("shared_expert",)}
    return any(mark in text for mark in marks.get(family, ()))


def stored_bytes(config: dict[str, Any], family: str) -> tuple[float, str]:
    """Bytes per parameter the checkpoint stores one family in, and the format's name."""
    quant = config.get("quantization_config")
    expert_dtype = config.get("expert_dtype") or (quant.get("expert_dtype") if isinstance(quant, dict) else None)
    if family == "experts" and expert_dtype == "fp4":
        return MXFP4, "fp4 experts"
    # The embedding and lm_head stay in the model dtype in the quantized checkpoints SGLang loads (the
    # quantizers exclude them); DeepSeek-V4's fp8 lm_head has its own estimate.
    if not isinstance(quant, dict) or family in ("embed", "lm_head") or _excluded(quant, family):
        return BF16, "bf16"
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "")).upper()
    if method == "mxfp4":
        return (MXFP4, "mxfp4") if family == "experts" else (BF16, "bf16")
    if "FP4" in algo or method in ("modelopt_fp4", "nvfp4"):
        return NVFP4, "nvfp4"
    if method in ("fp8", "modelopt", "compressed-tensors") or "FP8" in algo:
        return FP8_BLOCK128, "fp8"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return INT4_GROUP128, "int4"
    return BF16, "bf16"


FAMILY_NAMES = ("embed", "lm_head", "attention", "dense_mlp", "experts", "shared")


def bytes_per_rank(config: dict[str, Any], t: dict[str, Any], tp: int,
                   stage: Stage | None = None) -> tuple[float, float, str]:
    """(bytes on one rank, bytes of the whole model, the formats used) for a decoder config; with a stage,
    the rank's bytes are that pipeline stage's."""
    counts, everything = families(t, stage), families(t)
    whole = rank = 0.0
    formats: list[str] = []
    for name in FAMILY_NAMES:
        per, fmt = stored_bytes(config, name)
        whole += getattr(everything, name) * per
        rank += getattr(counts, name) * per / tp
        if getattr(counts, name):
            formats.append(f"{name} {fmt}")
    norm = 4 * _int(t, "hidden_size") * BF16  # replicated norms and routers per layer, roughly
    return rank + counts.layers * norm, whole + everything.layers * norm, ", ".join(formats)
