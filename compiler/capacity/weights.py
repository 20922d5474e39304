"""Weights per rank: the checkpoint's tensors split the way SGLang shards them, or an estimate from config.json.

The split is by tensor name. Routed experts go to ranks by expert parallelism and each expert is split again
by the remaining tensor parallelism (EP x MoE-TP = TP), so they count 1/TP per rank; projections with a head
or output axis, shared experts, the embedding and lm_head are TP-sharded (1/TP); norms, biases, the router,
the hyper-connection mixes, the single latent KV head (wq_a, wkv), the compressor, the indexer's keys, the
Engram projections and the vision tower are replicated on every rank. The Engram tables themselves are not
GPU weights (they live in host memory, a node-local copy or the shards): they are counted apart. DSpark /
MTP layers (`mtp.*`) are the draft model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_compile.capacity.pp_split import Stage
from spark_compile.capacity.safetensors_header import Tensor

GIB = float(1 << 30)
# Name fragments of replicated tensors (see the module docstring).
REPLICATED = ("norm", ".gate.", "hc_", "attn.wq_a", "attn.wkv", "compressor", "indexer.wk", "engram.",
              "vision", "markov_head", "confidence_head", "main_proj")
ENGRAM_TABLE = ".engram.embed."
FP8_BLOCK = 1 + 1 / 1024  # e4m3 with one e8m0 scale per 32x32 block
FP4_ROW = 0.5 + 1 / 32  # e2m1 with one e8m0 scale per 32 values


@dataclass(frozen=True, slots=True)
class Split:
    """Bytes per rank of one checkpoint: target weights, draft weights, Engram tables (whole, all ranks)."""

    target: float
    draft: float
    engram_tables: float
    shards: int  # how many tensors were read (for the source note)


def _per_rank(tensor: Tensor, tp: int) -> float:
    if ".experts." in tensor.name and ".shared_experts." not in tensor.name:
        return tensor.nbytes / tp
    if any(part in tensor.name for part in REPLICATED) or tensor.name.endswith(".bias"):
        return float(tensor.nbytes)
    return tensor.nbytes / tp


def split_tensors(tensors: Iterable[Tensor], tp: int) -> Split:
    """Each rank's bytes of target and draft weights, and the Engram tables' bytes."""
    target = draft = engram = 0.0
    count = 0
    for tensor in tensors:
        count += 1
        if ENGRAM_TABLE in tensor.name:
            engram += tensor.nbytes
        elif tensor.name.startswith("mtp."):
            draft += _per_rank(tensor, tp)
        else:
            target += _per_rank(tensor, tp)
    return Split(target, draft, engram, count)


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The model's text settings: V4.1 nests them under text_config (SGLang's loader merges them up)."""
    nested = config.get("text_config")
    return {**nested, **{k: v for k, v in config.items() if k != "text_config"}} if isinstance(nested, dict) \
        else config


def _int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise KeyError(key)
    return value


def estimate_dsv4(config: dict[str, Any], tp: int, stage: Stage | None = None) -> Split:
    """Each rank's target and draft bytes for a DeepSeek-V4/V4.1 config: parameters x stored bytes (fp8 with
    block scales; routed experts fp4 when quantization_config says so); with a pipeline stage, its layers, the
    embedding on the first stage, lm_head and the draft on the last. KeyError names a missing field."""
    t = text_config(config)
    quant = config.get("quantization_config")
    # DeepSeek-V4-Flash's official config.json writes expert_dtype at the top level, V4.1 inside quantization_config.
    expert_dtype = t.get("expert_dtype") or (quant.get("expert_dtype") if isinstance(quant, dict) else None)
    expert_bpp = FP4_ROW if expert_dtype == "fp4" else FP8_BLOCK
    d, inter, heads, head_dim = _int(t, "hidden_size"), _int(t, "moe_intermediate_size"), \
        _int(t, "num_attention_heads"), _int(t, "head_dim")
    q_rank, o_rank, groups = _int(t, "q_lora_rank"), _int(t, "o_lora_rank"), _int(t, "o_groups")
    replicated = (d * q_rank + d * head_dim) * FP8_BLOCK
    sharded_attn = (q_rank * heads * head_dim + o_rank * heads * head_dim + d * groups * o_rank) * FP8_BLOCK
    shared = _int(t, "n_shared_experts") * 3 * d * inter * FP8_BLOCK

    def layer(experts: int) -> float:
        return replicated + (sharded_attn + shared + experts * 3 * d * inter * expert_bpp) / tp

    vocab, layers = _int(t, "vocab_size"), _int(t, "num_hidden_layers")
    first, last = stage is None or stage.first, stage is None or stage.last
    held = layers if stage is None else stage.end - stage.start
    embed_head = vocab * d * ((2 if first else 0) + (FP8_BLOCK if last else 0)) / tp  # bf16 embedding, fp8 lm_head
    target = held * layer(_int(t, "n_routed_experts")) + embed_head
    stages = t.get("num_nextn_predict_layers", 0)
    draft_experts = t.get("dspark_n_routed_experts", t.get("n_routed_experts"))
    draft = stages * layer(draft_experts) if isinstance(stages, int) and isinstance(draft_experts, int) and last \
        else 0.0
    return Split(target, draft, 0.0, 0)
