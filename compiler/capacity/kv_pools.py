"""KV pools of the other model kinds as SGLang 0.5.23 sizes them: small pure twins of its configurators.

``sglang/srt/model_executor/pool_configurator.py``: DefaultPoolConfigurator (MHA/GQA: kv heads per TP rank x
(head_dim + v_head_dim) per layer; MLA: kv_lora_rank + rope dims, the latent is not split by TP) and
HybridSWAPoolConfigurator (full layers, plus swa_full_tokens_ratio x the sliding-window layers), with an
EAGLE draft's layers added at the target's per-layer size. ``mem_cache/kv_cache_configurator.py``
(_handle_max_mamba_cache): a linear-attention (Mamba/GDN) model first gives its state pool
mamba_full_memory_ratio / (1 + ratio) of the bytes, one state per request slot, and the full-attention layers
share the rest. tests/engine/test_kv_pools.py holds each to SGLang's own code.
"""

from __future__ import annotations

from dataclasses import dataclass

MAMBA_FULL_MEMORY_RATIO = 0.9  # --mamba-full-memory-ratio's fallback (arg_groups/fields/schedule.py)
SWA_FULL_TOKENS_RATIO = 0.8  # --swa-full-tokens-ratio's fallback (same file)
CONV_STATE_BYTES = 2  # SGLANG_MAMBA_CONV_DTYPE's default, bfloat16 (configs/mamba_utils.py)
SSM_STATE_BYTES = 4  # mamba_ssm_dtype's default, float32 (same file)


@dataclass(frozen=True, slots=True)
class Layout:
    """Bytes one token costs across the layers SGLang keeps KV for, and what each request costs up front."""

    kind: str  # the configurator SGLang picks, by its name
    cell_bytes: float  # SGLang's cell_size: bytes per full-attention token, all layers (and draft layers)
    state_per_request: int = 0  # linear-attention state (conv + SSM) of one request, all linear layers
    swa_ratio: float = 0.0  # sliding-window tokens per full token (hybrid SWA)


@dataclass(frozen=True, slots=True)
class Pool:
    """The token counts the configurator returns, and the bytes the pools take."""

    full_token: int
    swa_token: int
    state_slots: int  # linear-attention states (0 without linear layers)
    pool_bytes: int
    fixed_bytes: int  # the state pool, taken off before the tokens


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """ModelConfig.get_num_kv_heads: KV heads are split by TP, each rank keeping at least one (replicated)."""
    return max(1, kv_heads // tp)


def mha_token_bytes(kv_heads: int, head_dim: int, v_head_dim: int, tp: int, dtype_bytes: int) -> int:
    """One layer's bytes per token on one rank (K and V heads)."""
    return kv_heads_per_rank(kv_heads, tp) * (head_dim + v_head_dim) * dtype_bytes


def mla_token_bytes(kv_lora_rank: int, rope_dim: int, dtype_bytes: int) -> int:
    """One layer's bytes per token of an MLA latent (calculate_mla_kv_cache_dim; the same on every rank)."""
    return (kv_lora_rank + rope_dim) * dtype_bytes


def with_draft(layer_bytes: int, layers: int, draft_layers: int) -> int:
    """cell_size with an EAGLE/MTP draft's layers at the target's per-layer size (DefaultPoolConfigurator)."""
    cell = layer_bytes * layers
    return cell + (int(cell * draft_layers / layers) if layers and draft_layers else 0)


def gdn_state_bytes(key_heads: int, value_heads: int, key_dim: int, value_dim: int, kernel: int,
                    linear_layers: int, tp: int) -> int:
    """One request's GDN state on one rank (Mamba2StateShape of Qwen3-Next / Qwen3.5): a conv window over
    query, key and value, and the SSM state per value head, each split by TP."""
    conv_dim = 2 * key_heads * key_dim + value_heads * value_dim
    conv = conv_dim // tp * (kernel - 1) * CONV_STATE_BYTES
    ssm = value_heads // tp * key_dim * value_dim * SSM_STATE_BYTES
    return (conv + ssm) * linear_layers


def _pages(tokens: int, page_size: int) -> int:
    return tokens // page_size * page_size


def size_pool(layout: Layout, available_bytes: int, page_size: int) -> Pool:
    """calculate_pool_sizes for the layout (the mamba split first when there is a state per request)."""
    rest, slots, fixed = max(available_bytes, 0), 0, 0
    if layout.state_per_request:
        budget = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
        slots = max(int((budget - layout.state_per_request) // layout.state_per_request), 0)
        fixed = (slots + 1) * layout.state_per_request
        rest = max(rest - fixed, 0)
    full = _pages(int(rest // layout.cell_bytes), page_size) if layout.cell_bytes else 0
    swa = _pages(int(full * layout.swa_ratio), page_size)
    return Pool(full, swa, slots, int(full * layout.cell_bytes) + fixed, fixed)
