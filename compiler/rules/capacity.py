"""SC44x: will it fit — each rank's memory budget (spark_compile.capacity) against the hardware and the limits."""

from __future__ import annotations

import math
from collections.abc import Iterator

from spark_compile.capacity.budget import Kv, RankCapacity
from spark_compile.rules.registry import Context, Hit, Path, rule
from spark_compile.spec.nccl_presets import NCCL_DEFAULT_PINNED_GIB

LABELS = {"weights": "weights", "draft": "draft", "nccl": "NCCL", "head_share": "HTTP/tokenizer",
          "cuda_graphs": "CUDA graphs", "engram_host": "Engram rows",
          "shm": "shm"}
TRIM = "NCCL_BUFFSIZE=1048576 NCCL_LL128_BUFFSIZE=262144 NCCL_PROTO=^LL128 NCCL_MAX_NCHANNELS=8"


def _who(budget: RankCapacity) -> str:
    """``rank 0 (spark-0)``: the rank and its node, by name."""
    return f"rank {budget.rank} ({budget.node})"


def _more(count: int) -> str:
    return "" if count == 0 else f" (and {count} more rank{'s' if count > 1 else ''})"


def _weights_path(ctx: Context) -> Path:
    return ("model", "weights_per_rank") if ctx.present(("model", "weights_per_rank")) else ("engine", "parallel",
                                                                                             "tp")


@rule("SC440", "error", "every rank's weights fit its GPU",
      "What must be resident before any KV cache (the weights on the rank as SGLang shards them, the draft "
      "model, NCCL's pinned buffers, on the head the HTTP server and tokenizer, CUDA graphs when pinned) must "
      "fit what CUDA reports on the hardware; SGLang fails the load otherwise.",
      "fleet: {nodes: [a, b]}\nengine: {parallel: {tp: 2}}   # a model sized for four Sparks",
      "fleet: {nodes: [a, b, c, d]}\nengine: {parallel: {tp: 4}}")
def rank_fits(ctx: Context) -> Iterator[Hit]:
    capacity = ctx.capacity
    if capacity is None:
        return
    over = [r for r in capacity.ranks if (r.terms["weights"].gib is not None and r.terms["cuda_total"].gib
                                          and sum(g for _, g in r.resident()) > (r.terms["cuda_total"].gib or 0))]
    if not over:
        return
    worst = max(over, key=lambda r: sum(g for _, g in r.resident()))
    total = worst.gib("cuda_total")
    parts = " + ".join(f"{gib:.1f} GiB {LABELS[name]}" for name, gib in worst.resident())
    needs = sum(g for _, g in worst.resident())
    tp = ctx.profile.engine.parallel.tp or 1
    room = total - worst.gib("nccl") - worst.gib("head_share")
    nodes = math.ceil((worst.gib("weights") + worst.gib("draft")) * tp / max(room, 1e-9))
    yield Hit(_weights_path(ctx),
              f"{_who(worst)} needs {parts} = {needs:.1f} GiB of {total:.1f} GiB{_more(len(over) - 1)}",
              f"spread the model over more nodes: its weights need at least {nodes} of {ctx.profile.hardware} "
              f"(fleet.nodes and engine.parallel.tp)")


@rule("SC441", "error", "the static pool leaves room for a KV cache",
      "SGLang keeps mem_fraction_static of the memory CUDA reports free before the load; the weights and the "
      "draft come out of it and the KV cache gets the rest. When nothing is left SGLang refuses to start "
      "(\"Loaded weights leave no GPU memory for the KV cache\").",
      "engine: {limits: {mem_fraction_static: 0.5}}", "engine: {limits: {mem_fraction_static: 0.8}}")
def static_pool_leaves_kv(ctx: Context) -> Iterator[Hit]:
    capacity = ctx.capacity
    if capacity is None or ctx.profile.model.available_per_rank is not None:
        return
    short = [r for r in capacity.ranks if r.terms["available"].gib is not None and (r.terms["available"].gib or 0) <= 0
             and r.terms["weights"].gib is not None]
    if not short or any(True for _ in rank_fits(ctx)):
        return
    worst = min(short, key=lambda r: r.gib("available"))
    pool, pre = worst.terms["static_pool"], worst.gib("pre_load")
    minimum = (worst.gib("weights") + worst.gib("draft")) / pre
    fraction = math.ceil((minimum + _kv_share(ctx, worst.kv, pre)) * 100) / 100
    yield Hit(("engine", "limits", "mem_fraction_static"),
              f"{_who(worst)}'s static pool ({pool.formula} = {pool.gib:.1f} GiB) holds "
              f"{worst.gib('weights'):.1f} GiB weights + {worst.gib('draft'):.1f} GiB draft and leaves no KV "
              f"cache ({worst.gib('available'):.1f} GiB){_more(len(short) - 1)}",
              f"set mem_fraction_static to {min(fraction, 0.95):.2f} (above {minimum:.3f}: room for "
              "max_running_requests at context_length)")


def _kv_share(ctx: Context, kv: Kv | None, pre: float) -> float:
    """The static fraction a KV pool of max_running_requests full-context requests needs (5 % when unknown)."""
    limits = ctx.profile.engine.limits
    if kv is None or kv.bytes_per_full_token is None or not limits.max_running_requests or not limits.context_length:
        return 0.05
    tokens = limits.max_running_requests * limits.context_length
    return (tokens * kv.bytes_per_full_token / (1 << 30) + kv.fixed_gib) * 1.02 / pre


@rule("SC442", "warning", "the KV pool holds max_running_requests requests at full context",
      "The predicted full_token (SGLang's own arithmetic for the model) divided by context_length is how many "
      "full-context requests the pool holds at once; with fewer than max_running_requests, long requests queue "
      "or are retracted.",
      "engine: {limits: {context_length: 1048576, max_running_requests: 64}}",
      "engine: {limits: {context_length: 524288, max_running_requests: 16}}")
def kv_holds_the_requests(ctx: Context) -> Iterator[Hit]:
    capacity, limits = ctx.capacity, ctx.profile.engine.limits
    cap = limits.max_running_requests
    if capacity is None or cap is None:
        return
    # A pool of nothing is SC441's (the static pool leaves no KV cache).
    sized = [r for r in capacity.ranks if r.kv is not None and r.kv.requests_at_context is not None
             and r.kv.full_token]
    short = [r for r in sized if (r.kv.requests_at_context or 0) < cap]  # type: ignore[union-attr]
    if not short:
        return
    worst = min(short, key=lambda r: r.kv.full_token or 0)  # type: ignore[union-attr]
    kv, context = worst.kv, worst.context_length
    assert kv is not None and kv.full_token is not None and context is not None
    held = kv.requests_at_context or 0
    yield Hit(("engine", "limits", "max_running_requests"),
              f"{_who(worst)}'s KV pool holds full_token={kv.full_token} ({kv.bytes_per_full_token:.2f} "
              f"bytes_per_full_token over {kv.available_gib:.1f} GiB): {held} requests at context_length "
              f"{context}, fewer than max_running_requests {cap}",
              f"set max_running_requests to {max(held, 1)}, or lower context_length to "
              f"{max(kv.full_token // cap // 256 * 256, 256)}, or give the KV pool more memory")


@rule("SC443", "warning", "the prefill transient fits outside the static pool",
      "DeepSeek-V4's sparse indexer needs about 14 B x chunk x prefix during a long prefill, outside the static "
      "pool (what mem_fraction_static leaves, less CUDA graphs). A prompt at the context length then runs out of "
      "memory mid-prefill.",
      "engine: {limits: {context_length: 1048576, chunked_prefill_size: 4096, mem_fraction_static: 0.9}}",
      "engine: {limits: {context_length: 1048576, chunked_prefill_size: 1024, mem_fraction_static: 0.8}}")
def transient_fits(ctx: Context) -> Iterator[Hit]:
    capacity = ctx.capacity
    if capacity is None:
        return
    over = [r for r in capacity.ranks if r.terms["prefill_transient"].gib is not None
            and r.terms["outside_static"].gib is not None
            and r.gib("prefill_transient") > r.gib("outside_static") - r.gib("cuda_graphs")]
    if not over:
        return
    worst = min(over, key=lambda r: r.gib("outside_static") - r.gib("cuda_graphs"))
    room = worst.gib("outside_static") - worst.gib("cuda_graphs")
    transient, outside = worst.terms["prefill_transient"], worst.terms["outside_static"]
    graphs = f" less {worst.gib('cuda_graphs'):.1f} GiB CUDA graphs" if worst.gib("cuda_graphs") else ""
    chunk = int(room * (1 << 30) / (14 * (worst.context_length or 1))) // 256 * 256
    fix = f"lower chunked_prefill_size to {chunk}" if chunk >= 256 else "lower context_length"
    yield Hit(("engine", "limits", "chunked_prefill_size"),
              f"the prefill transient ({transient.formula} = {transient.gib:.1f} GiB) exceeds the {room:.1f} GiB "
              f"outside {_who(worst)}'s static pool ({outside.formula}{graphs}){_more(len(over) - 1)}",
              f"{fix}, or lower mem_fraction_static")


@rule("SC444", "error", "the container's memory limit covers what it holds in host memory",
      "The container's processes hold host memory: the HTTP server and tokenizer on the head, NCCL's pinned "
      "buffers, the Engram rows kept in host memory, and /dev/shm when it fills. Past --memory the kernel kills "
      "the container.",
      "container: {memory: 16g, shm_size: 32g}", "container: {memory: 112g, shm_size: 32g}")
def container_covers_host(ctx: Context) -> Iterator[Hit]:
    capacity = ctx.capacity
    if capacity is None:
        return
    over = [r for r in capacity.ranks if r.terms["container_limit"].gib is not None
            and r.terms["host_needs"].gib is not None and r.gib("host_needs") > r.gib("container_limit")
            and r.gib("shm") <= r.gib("container_limit")]  # a shm beyond the limit is SC410's
    if not over:
        return
    worst = max(over, key=lambda r: r.gib("host_needs"))
    parts = " + ".join(f"{worst.gib(n):.1f} GiB {LABELS[n]}" for n in ("head_share", "nccl", "engram_host", "shm")
                       if worst.gib(n) > 0)
    needs = worst.gib("host_needs")
    yield Hit(("container", "memory"),
              f"{_who(worst)}'s container is limited to {worst.gib('container_limit'):.1f} GiB but holds "
              f"{parts} = {needs:.1f} GiB in host memory{_more(len(over) - 1)}",
              f"set container.memory: {math.ceil(needs)}g"
              + (f" and container.memory_swap: {math.ceil(needs)}g" if ctx.profile.container.memory_swap else "")
              + " (what it holds in host memory, at least), or lower shm_size")


@rule("SC445", "warning", "NCCL's buffers are trimmed on unified memory",
      "NCCL's default connection buffers pin about 4.7 GiB per node of host memory; on a unified-memory node "
      "that is GPU memory the KV cache loses. The trim preset measured 0.14 GB.",
      "hardware: dgx-spark-gb10\nnccl: {preset: default}", "hardware: dgx-spark-gb10\nnccl: {preset: trim}")
def nccl_trimmed(ctx: Context) -> Iterator[Hit]:
    capacity, hardware = ctx.capacity, ctx.hardware
    if capacity is None or not hardware.unified_memory:
        return
    if any(r.terms["nccl"].gib == NCCL_DEFAULT_PINNED_GIB for r in capacity.ranks):
        path: Path = ("nccl", "preset") if ctx.present(("nccl", "preset")) else ("nccl",)
        yield Hit(path,
                  f"NCCL's default connection buffers pin about {NCCL_DEFAULT_PINNED_GIB} GiB per node of host "
                  f"memory, which on {hardware.name} is GPU memory",
                  f"set nccl.preset: trim ({TRIM}: 0.14 GB measured; nccl.extra must not override it)")


PINS = ("weights_per_rank", "draft_weights_per_rank", "available_per_rank", "cuda_graph_per_rank")


@rule("SC446", "error", "each pinned memory list has one value per rank",
      "The model's pins (from `verify.sh --calibrate`) are read by rank position: a list shorter or longer than the "
      "fleet belongs to another fleet, and a rank without its value would silently fall back to an estimate.",
      "fleet: {nodes: [a, b, c, d]}\nmodel: {weights_per_rank: [77.0, 77.0]}",
      "fleet: {nodes: [a, b, c, d]}\nmodel: {weights_per_rank: [77.0, 77.0, 77.0, 77.0]}")
def pins_per_rank(ctx: Context) -> Iterator[Hit]:
    ranks = len(ctx.profile.fleet.nodes)
    for name in PINS:
        values = getattr(ctx.profile.model, name)
        if values is not None and len(values) != ranks:
            yield Hit(("model", name), f"model.{name} lists {len(values)} values for {ranks} ranks",
                      f"give one value per rank, in rank order (run `verify.sh --calibrate` on this fleet), or remove "
                      f"model.{name}")
