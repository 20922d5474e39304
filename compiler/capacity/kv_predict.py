"""The KV pool SGLang 0.5.23 would size on one rank from its available bytes: the engine settings it reads
(engine_reads), the context length it runs with, and the pool of the model's kind (DeepSeek-V4's twin in
`kv_dsv4`, the others in `kv_pools` via `kv_model`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from spark_compile.capacity.kv_dsv4 import Dsv4Inputs, Dsv4Pool, Speculation, UnmodelledError, dsv4_pool
from spark_compile.capacity.kv_model import layout
from spark_compile.capacity.kv_pools import size_pool
from spark_compile.capacity.pp_split import PartitionError, Stage, stage_ranges
from spark_compile.capacity.preload import DSV4, cuda_total_gib, tier
from spark_compile.capacity.spec_defaults import resolve_speculation, written
from spark_compile.capacity.weights import GIB, Split, text_config
from spark_compile.spec.hardware import FAMILIES, HARDWARE
from spark_compile.spec.model import Profile


@dataclass(frozen=True, slots=True)
class CapacityInputs:
    """What the stage reads from disk, gathered at the edge: config.json and the snapshot's headers."""

    config: dict[str, Any] | None
    config_source: str  # where config.json came from, or why there is none
    split: Split | None  # the checkpoint's own bytes per rank, from its safetensors headers
    split_source: str
    index_total: int | None = None  # model.safetensors.index.json's metadata.total_size, when committed
    index_source: str = ""
    draft_config: dict[str, Any] | None = None  # a separate draft model's config.json


@dataclass(frozen=True, slots=True)
class Kv:
    """The predicted KV pool, with SGLang's names (bytes_per_full_token, full_token)."""

    available_gib: float
    bytes_per_full_token: float | None
    full_token: int | None
    requests_at_context: int | None
    pool_gib: float
    note: str
    fixed_gib: float = 0.0  # the request-scoped pools SGLang takes off first
    clamped_by: str = ""  # what lowered full_token below the pool's size (max_total_tokens), if anything


@dataclass(frozen=True, slots=True)
class EngineReads:
    """The engine settings the budget reads, in one place (typed fields may move; this is the one edit)."""

    algorithm: str | None
    speculation: Speculation | None
    page_size: int | None
    max_total_tokens: int | None
    mem_fraction_static: float | None
    chunked_prefill_size: int  # as written, else the one SGLang picks for the GPU
    chunk_defaulted: bool
    max_running_requests: int | None
    context_length: int | None


def engine_reads(profile: Profile) -> EngineReads:
    """Speculation as SGLang resolves it (`spec_defaults`), the page size
    (the one SGLang forces for the family, else engine.page_size), and the limits (an unset chunk: the GPU's)."""
    eng, family = profile.engine, FAMILIES.get(profile.model.architecture)
    spec, limits = eng.speculative, eng.limits
    algorithm = None if spec.algorithm == "none" else spec.algorithm
    speculation = resolve_speculation(written(profile), profile.model.architecture)
    page_size = family.page_size if family and family.page_size else eng.page_size
    chunk = limits.chunked_prefill_size or tier(cuda_total_gib(profile)[0] * 1024, eng.parallel.tp or 1)[0]
    return EngineReads(algorithm, speculation, page_size, limits.max_total_tokens, limits.mem_fraction_static,
                       chunk, limits.chunked_prefill_size is None, limits.max_running_requests,
                       limits.context_length)


def context_length(profile: Profile, inputs: CapacityInputs) -> int | None:
    """The context length SGLang will run with; None when unknown or beyond the model's (SGLang refuses it)."""
    t = text_config(inputs.config) if inputs.config is not None else {}
    value = t.get("max_position_embeddings")
    model_max = value if isinstance(value, int) else profile.model.max_context_length
    written = engine_reads(profile).context_length
    if written is None:
        return model_max
    return None if model_max is not None and written > model_max else written


def _dsv4_inputs(profile: Profile, inputs: CapacityInputs, context: int, where: Stage) -> Dsv4Inputs:
    reads = engine_reads(profile)
    if reads.algorithm is not None and reads.speculation is None:
        raise UnmodelledError(f"{reads.algorithm}'s draft-token count is left to SGLang")
    if profile.engine.args.get("enable-encoder-swa-bounded-replay"):
        raise UnmodelledError("encoder SWA bounded replay sizes per-request windows this model does not follow")
    t = text_config(inputs.config or {})
    sources = tuple(layer - where.start for layer in t.get("kv_source_layer_ids") or ()
                    if where.start <= layer < where.end)
    ratio = profile.engine.args.get("swa-full-tokens-ratio")
    tails = profile.engine.args.get("swa-prefix-tails")
    return Dsv4Inputs(
        tuple(t["compress_ratios"][where.start:where.end]), sources, t["head_dim"],
        t["qk_rope_head_dim"], t["index_head_dim"], t["sliding_window"], context, reads.page_size or 256,
        reads.max_running_requests, reads.chunked_prefill_size, reads.speculation,
        128 if HARDWARE[profile.hardware].sm[0] == 10 else 64,
        float(ratio) if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else None,
        tails if isinstance(tails, int) and not isinstance(tails, bool) else None)


def draft_layers(profile: Profile, config: dict[str, Any], draft_config: dict[str, Any] | None) -> int:
    """Layers an EAGLE/NEXTN/STANDALONE draft adds to the target's KV pool (its own config.json, else the
    target's MTP layers)."""
    algorithm = profile.engine.speculative.algorithm
    if algorithm not in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"):
        return 0
    source = draft_config if draft_config is not None else config
    key = "num_hidden_layers" if draft_config is not None else "num_nextn_predict_layers"
    value = text_config(source).get(key)
    return value if isinstance(value, int) and value > 0 else 1


def _generic(profile: Profile, config: dict[str, Any], draft_config: dict[str, Any] | None,
             available_gib: float, where: Stage) -> Kv:
    t, tp = text_config(config), profile.engine.parallel.tp or 1
    reads = engine_reads(profile)
    shape = layout(profile.model.architecture, t, tp, profile.engine.kv_cache_dtype,
                   draft_layers(profile, config, draft_config), (where.start, where.end), stage_ranges(where))
    pool = size_pool(shape, int(available_gib * GIB), reads.page_size or 1)
    return Kv(available_gib, shape.cell_bytes, pool.full_token, None, pool.pool_bytes / GIB,
              f"SGLang 0.5.23 {shape.kind} arithmetic", pool.fixed_bytes / GIB)


def _pool(profile: Profile, inputs: CapacityInputs, available_gib: float, context: int, where: Stage) -> Kv:
    if profile.model.architecture != DSV4:
        assert inputs.config is not None  # predict_kv returned first without one
        return _generic(profile, inputs.config, inputs.draft_config, available_gib, where)
    pool: Dsv4Pool = dsv4_pool(_dsv4_inputs(profile, inputs, context, where), int(available_gib * GIB))
    return Kv(available_gib, pool.bytes_per_full_token, pool.full_token, None, pool.pool_bytes() / GIB,
              "SGLang 0.5.23 DSV4PoolConfigurator arithmetic", pool.fixed_bytes / GIB)


def predict_kv(profile: Profile, inputs: CapacityInputs, available_gib: float, context: int | None,
               where: Callable[[], Stage] | None = None) -> Kv:
    """The KV pool SGLang would size from ``available_gib`` (its available_bytes) on the rank of pipeline stage
    ``where()`` (the whole model when None), capped as it caps it."""
    if inputs.config is None or context is None:
        why = "no config.json" if inputs.config is None else "the context length is not known here"
        return Kv(available_gib, None, None, None, max(available_gib, 0.0), f"{why}: the pool is the bytes left")
    try:
        layers = text_config(inputs.config)["num_hidden_layers"]
        kv = _pool(profile, inputs, available_gib, context, Stage(0, layers, layers) if where is None else where())
    except (UnmodelledError, PartitionError, KeyError, TypeError, IndexError, ZeroDivisionError) as why:
        return Kv(available_gib, None, None, None, max(available_gib, 0.0), f"not modelled: {why}")
    full, cap, clamped = kv.full_token or 0, engine_reads(profile).max_total_tokens, ""
    if cap is not None and cap < full:
        full, clamped = cap, f"max_total_tokens {cap}"
    note = kv.note + (f", capped by {clamped}" if clamped else "")
    return Kv(kv.available_gib, kv.bytes_per_full_token, full, full // context, kv.pool_gib, note, kv.fixed_gib,
              clamped)


def synced_over_stages(kvs: list[Kv | None], context: int | None) -> list[Kv | None]:
    """Every pipeline stage's pool at the least token count over the stages (_apply_token_constraints'
    all_reduce MIN over the world group); unchanged when a stage has no count."""
    counts = [kv.full_token for kv in kvs if kv is not None and kv.full_token is not None]
    if len(counts) < len(kvs):
        return kvs
    least, why = min(counts), "the pipeline stages' minimum"
    return [kv if kv is None or kv.full_token == least else replace(
        kv, full_token=least, requests_at_context=least // context if context else None,
        note=f"{kv.note}, capped by {why}", clamped_by=kv.clamped_by or why) for kv in kvs]
