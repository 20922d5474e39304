"""The KV pool of a DeepSeek-V4 / V4.1 model as SGLang 0.5.23 sizes it: a static twin of its pool configurator.

``sglang/srt/model_executor/pool_configurator.py`` (DSV4PoolConfigurator) divides the bytes left after the
weights by ``bytes_per_full_token`` (compressed KV + indexer bytes per token of every layer that owns compressed
storage, plus the SWA pool's share, inflated by (layers + 1) / layers for a speculative draft) after taking off
the request-scoped fixed pools, and rounds down to pages. This module follows that arithmetic for the paths
GB10 and the other catalog GPUs take (the V4 KV layout, no unified pool, no online c128, no encoder replay);
a setting that leaves those paths raises UnmodelledError with the reason. tests/engine holds it to SGLang's own.
"""

from __future__ import annotations

from dataclasses import dataclass

# KVLayout.V4 (sglang/kernels/ops/attention/dsv4/kv_layout.py): 448 fp8 nope + 64 bf16 rope + 8 scale bytes,
# page stride padded to 576 bytes.
V4_BYTES_PER_TOKEN = 584
V4_PAGE_ALIGN = 576
SWA_EVICTION_INTERVAL = 128  # SGLANG_SWA_EVICTION_INTERVAL's default
DEFAULT_SWA_FULL_TOKENS_RATIO = 0.1  # DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO
COMPRESS_STATE_BYTES = 4  # SGLANG_DSV4_COMPRESS_STATE_DTYPE's default, float32


class UnmodelledError(ValueError):
    """A setting whose pool arithmetic this twin does not follow (the message says which)."""


@dataclass(frozen=True, slots=True)
class Speculation:
    """The resolved speculative settings the pool reads (SGLang's get_spec())."""

    num_draft_tokens: int
    num_steps: int = 1
    topk: int = 1


@dataclass(frozen=True, slots=True)
class Dsv4Inputs:
    """What DSV4PoolConfigurator reads: the model's layout and the resolved scheduling settings."""

    compress_ratios: tuple[int, ...]  # the target's layers only (config.json lists the MTP layers after them)
    kv_source_layer_ids: tuple[int, ...]
    head_dim: int
    rope_head_dim: int
    index_head_dim: int
    window: int
    context_len: int
    page_size: int
    max_running_requests: int | None
    chunked_prefill_size: int | None
    speculation: Speculation | None
    index_page_size: int = 64  # DSV41_INDEX_PAGE_SIZE: 128 only with DeepGEMM's paged sparse MQA (SM100)
    swa_full_tokens_ratio: float | None = None  # --swa-full-tokens-ratio when the profile writes it
    swa_prefix_tails: int | None = None  # --swa-prefix-tails when written


@dataclass(frozen=True, slots=True)
class Dsv4Pool:
    """The configurator's result, with SGLang's own names."""

    bytes_per_full_token: float
    full_token: int
    swa_tokens: int
    fixed_bytes: int  # request-scoped pools taken off available_bytes first
    padding_bytes: int  # reserved low-ratio pages beyond the per-token bytes
    max_running_requests: int  # what the fixed pools were sized for

    def pool_bytes(self) -> int:
        """Bytes the KV pools occupy: full tokens x bytes per token, plus the fixed and reserved pages."""
        return int(self.full_token * self.bytes_per_full_token) + self.fixed_bytes + self.padding_bytes


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _paged_bytes(page_size: int, ratio: int = 0) -> float:
    page = page_size // ratio if ratio else page_size
    return _ceil_div(page * V4_BYTES_PER_TOKEN, V4_PAGE_ALIGN) * V4_PAGE_ALIGN / page


def owner_layers(ratios: tuple[int, ...], kv_sources: tuple[int, ...]) -> dict[int, list[int]]:
    """Layers owning compressed storage per ratio: every layer of ratio 4 and 128, the KV sources of 1 and 2."""
    for ratio in ratios:
        if ratio not in (0, 1, 2, 4, 128):
            raise UnmodelledError(f"compress ratio {ratio} is not one SGLang 0.5.23 supports")
    owners: dict[int, list[int]] = {}
    for ratio in (4, 128, 1, 2):
        if ratio in (1, 2):
            layers = [layer for layer in kv_sources if layer < len(ratios) and ratios[layer] == ratio]
        else:
            layers = [layer for layer, r in enumerate(ratios) if r == ratio]
        if layers:
            owners[ratio] = layers
    return owners


def ring_size(ratio: int, spec: Speculation | None) -> int:
    """Compress-state rows per request (get_compress_state_ring_size)."""
    if ratio == 2:
        return 2 if spec is None else 1 << (spec.num_draft_tokens + 1).bit_length()
    if spec is not None:
        return 16 if ratio == 4 else 256
    return 8 if ratio == 4 else 128


class _Twin:
    """One configurator's state, as DSV4PoolConfigurator.__init__ leaves it."""

    def __init__(self, inp: Dsv4Inputs) -> None:
        self.inp = inp
        self.attn_head_dim = inp.head_dim
        self.owners = owner_layers(inp.compress_ratios, inp.kv_source_layer_ids)
        self.rings = {ratio: ring_size(ratio, inp.speculation) for ratio in self.owners if ratio != 1}
        self.layers = len(inp.compress_ratios)
        self.low_index = inp.index_head_dim // 2 + inp.index_head_dim // 32  # fp4 indexer rows
        self.index = inp.index_head_dim + inp.index_head_dim // 128 * 4  # fp8 indexer rows (ratio 4)
        self.swa_ratio = (inp.swa_full_tokens_ratio if inp.swa_full_tokens_ratio is not None
                          else DEFAULT_SWA_FULL_TOKENS_RATIO)
        self.swa_cap = self._swa_cap_tokens()
        infl = (self.layers + 1) / self.layers if inp.speculation is not None else 1.0
        self.bytes_per_swa_token = self._bytes_per_swa_token() * infl
        swa_share = 0 if self.swa_cap is not None else self.swa_ratio
        self.bytes_per_full_token = (swa_share * self._bytes_per_swa_token() + sum(
            self._compressed(ratio) * len(layers) for ratio, layers in self.owners.items())) * infl

    def _prefix_tails(self) -> int:
        inp = self.inp
        if inp.swa_prefix_tails is not None:
            return inp.swa_prefix_tails
        return 0 if inp.max_running_requests is None else 4 * inp.max_running_requests

    def _decode_alloc(self) -> int:
        spec, page = self.inp.speculation, self.inp.page_size
        if spec is None:
            return page
        if page == 1 or spec.topk == 1:
            alloc = max(spec.num_steps * spec.topk, spec.num_draft_tokens)
        else:
            pages = (page - 1 + spec.num_steps + page - 1) // page
            alloc = max(pages * page * spec.topk, spec.num_draft_tokens)
        return 2 * alloc  # the overlap scheduler keeps two steps outstanding

    def _swa_cap_tokens(self) -> int | None:
        inp = self.inp
        if inp.swa_full_tokens_ratio is not None or inp.max_running_requests is None:
            return None
        if inp.chunked_prefill_size is None or inp.chunked_prefill_size <= 0:
            return None
        draft = inp.speculation.num_draft_tokens if inp.speculation is not None else 1
        per_request = inp.window + SWA_EVICTION_INTERVAL * draft + inp.page_size + self._decode_alloc()
        cap = per_request * max(1, inp.max_running_requests) + 2 * inp.chunked_prefill_size + inp.page_size
        headroom = self._prefix_tails() * (inp.window + inp.page_size)
        return _ceil_div(cap + headroom, inp.page_size) * inp.page_size

    def _bytes_per_swa_token(self) -> float:
        c4_state = 2 * 2 * (self.attn_head_dim + self.inp.index_head_dim) * COMPRESS_STATE_BYTES
        c4_ratio = self.rings.get(4, 0) / self.inp.page_size
        return (_paged_bytes(self.inp.page_size) * self.layers
                + c4_ratio * c4_state * len(self.owners.get(4, ())))

    def _compressed(self, ratio: int) -> float:
        page = self.inp.page_size
        if ratio in (1, 2):
            return (_paged_bytes(page, ratio) + self.low_index) / ratio
        if ratio == 4:
            return _paged_bytes(page, 4) / 4 + self.index / 4
        return _paged_bytes(page, 128) / 128

    def padding(self, full_tokens: int) -> float:
        """Reserved main and indexer pages of the ratio-1/2 layers (_get_low_ratio_kv_padding_bytes)."""
        page, index_page, total = self.inp.page_size, self.inp.index_page_size, 0.0
        for ratio in (1, 2):
            layers = len(self.owners.get(ratio, ()))
            if layers:
                index_size = (full_tokens + page) // ratio
                slots = _ceil_div(index_size + index_page, index_page) * index_page
                total += (page * _paged_bytes(page, ratio) + (slots - full_tokens // ratio) * self.low_index) * layers
        return total

    def requests(self, available_bytes: int) -> int:
        """The request count the fixed pools are sized for (_resolve_max_running_requests_per_worker)."""
        if self.inp.max_running_requests is not None:
            return max(1, self.inp.max_running_requests)
        full = int(available_bytes / self.bytes_per_full_token)
        estimated = max(min(int(full / self.inp.context_len * 512), 4096), 2048)
        return min(estimated, full // 2)

    def fixed(self, requests: int) -> int:
        """c128 and ratio-2 compress state per request slot, and the cap-mode SWA pool."""
        slots, attn, total = requests + 1, self.attn_head_dim, 0
        if 128 in self.owners:
            rows = _ceil_div(slots * self.rings[128] + self.rings[128] + 1, 128) * 128
            total += rows * 2 * attn * COMPRESS_STATE_BYTES * len(self.owners[128])
        if 2 in self.owners:
            rows = _ceil_div(slots * self.rings[2] + self.rings[2] + 1, 2) * 2
            total += rows * 2 * attn * 4 * len(self.owners[2])
        swa = 0 if self.swa_cap is None else self.swa_cap * self.bytes_per_swa_token
        return int(total + swa)


def dsv4_pool(inp: Dsv4Inputs, available_bytes: int) -> Dsv4Pool:
    """SGLang's calculate_pool_sizes(available_bytes, page_size) for these inputs."""
    if inp.page_size % 128:
        raise UnmodelledError(f"page size {inp.page_size} is not a multiple of 128 (SGLang refuses it)")
    twin, page = _Twin(inp), inp.page_size
    requests = twin.requests(available_bytes)
    fixed = twin.fixed(requests)
    for_tokens = max(available_bytes - fixed, 0)
    full = int(for_tokens / twin.bytes_per_full_token) // page * page
    while full > 0 and full * twin.bytes_per_full_token + twin.padding(full) > for_tokens:
        full -= page
    full = max(full, 0)
    swa = twin.swa_cap if twin.swa_cap is not None else int(full * twin.swa_ratio) // page * page
    return Dsv4Pool(twin.bytes_per_full_token, full, swa, fixed, int(twin.padding(full)) if full else 0, requests)
