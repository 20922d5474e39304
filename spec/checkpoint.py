"""What a checkpoint's config.json tells the rules: heads, context limit, quantization, experts.

Pure: the rules stage reads the file (``spark_compile.stages.checkpoint``) and hands the parsed object here. How
SGLang 0.5.23 derives each value is named beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# sglang/srt/utils/hf_transformers/common.py CONTEXT_LENGTH_KEYS: the first key present is the context limit.
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")
DEFAULT_CONTEXT = 2048  # get_context_length's answer when no key is present
# A name from config.json reaches messages (and terminals) only if it looks like one.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The facts of one config.json the rules reason with (None: the file does not say)."""

    file: str
    architecture: str | None
    model_type: str | None
    attention_heads: int | None
    kv_heads: int | None
    mla: bool  # multi-head latent attention (kv_lora_rank): KV heads are not split by TP
    context_length: int
    context_source: str  # how context_length was derived, for messages
    quant_method: str | None  # quantization_config.quant_method
    quantization: str | None  # the --quantization name SGLang runs the checkpoint with
    experts: int | None


def _int(data: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _context(data: dict[str, Any]) -> tuple[int, str]:
    """SGLang's get_context_length: the first context key, times the rope scaling factor unless the scaling
    names original_max_position_embeddings or is llama3's."""
    scaling = data.get("rope_scaling")
    factor: float = 1
    if isinstance(scaling, dict) and scaling:
        raw = scaling.get("factor", 1)
        factor = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 1
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            how = key if factor == 1 else f"{key} {value} x rope_scaling.factor {factor}"
            return int(factor * value), how
    return DEFAULT_CONTEXT, "no context key (SGLang's default)"


def _quantization(config: Any) -> tuple[str | None, str | None]:
    """(quant_method, the name SGLang runs): ModelOpt checkpoints name their algorithm in quant_algo."""
    method = _name(config.get("quant_method")) if isinstance(config, dict) else None
    if method is None:
        return None, None
    method = method.lower()
    algo = (_name(config.get("quant_algo")) or "").upper()
    if method == "modelopt":
        return method, {"NVFP4": "modelopt_fp4", "FP8": "modelopt_fp8", "MIXED_PRECISION": "modelopt_mixed"}.get(
            algo, method)
    return method, method


def checkpoint(data: dict[str, Any], file: str) -> Checkpoint:
    """The facts of a parsed config.json (text models keep them at the top level or under text_config)."""
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
    assert isinstance(text, dict)
    architectures = data.get("architectures")
    architecture = _name(architectures[0]) if isinstance(architectures, list) and architectures else None
    heads = _int(text, "num_attention_heads")
    context, how = _context(text)
    method, quantization = _quantization(data.get("quantization_config", text.get("quantization_config")))
    model_type = _name(data.get("model_type"))
    return Checkpoint(file, architecture, model_type, heads, _int(text, "num_key_value_heads") or heads,
                      "kv_lora_rank" in text, context, how, method, quantization,
                      _int(text, "num_experts", "n_routed_experts", "num_local_experts"))
