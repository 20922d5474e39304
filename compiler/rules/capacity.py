"""SC44x: will it fit — each rank's memory budget (spark_compile.capacity) against the hardware and the limits."""

from __future__ import annotations

import math
from collections.abc import Iterator

from spark_compile.capacity.budget import Capacity, RankCapacity
from spark_compile.capacity.kv_predict import Kv
from spark_compile.rules.registry import Context, Hit, Path, rule
from spark_compile.rules.sglang_model import tp_misses_fleet
from spark_compile.spec.nccl_presets import NCCL_DEFAULT_PINNED_GIB

LABELS = {"weights": "weights", "draft": "draft", "nccl": "NCCL", "head_share": "HTTP/tokenizer",
          "cuda_graphs": "CUDA graphs", "engram_host": "Engram rows",
          "shm": "shm"}
CAPACITY_RULES = "SC44"  # every rule of this module: `plan --capacity` still prints the budget when only they refuse
TRIM = "NCCL_BUFFSIZE=1048576 NCCL_LL128_BUFFSIZE=262144 NCCL_PROTO=^LL128 NCCL_MAX_NCHANNELS=8"


def _capacity(ctx: Context) -> Capacity | None:
    """Every rank's budget for the error rules (SC440, SC441), or None when tp does not fill the fleet: SC401
    says so, and a budget of the wrong shards would be a second error of that one cause."""
    return None if tp_misses_fleet(ctx) else ctx.capacity


def _who(budget: RankCapacity) -> str:
    """``rank 0 (spark-0)``: the rank and its node, by name."""
    return f"rank {budget.rank} ({budget.node})"


def _more(count: int) -> str:
    return "" if count == 0 else f" (and {count} more rank{'s' if count > 1 else ''})"


def _weights_path(ctx: Context) -> Path:
    return ("model", "weights_per_rank") if ctx.present(("model", "weights_per_rank")) else ("engine", "parallel",
                                                                                             "tp")


def _load(r: RankCapacity) -> float:
    return r.gib("weights") + r.gib("draft")


def least_tp(ctx: Context, worst: RankCapacity) -> int | None:
    """The least power-of-two TP above today's whose share of the weights leaves the static pool room for one
    request at context_length; None when none up to 64 does."""
    tp, fraction, pre = ctx.profile.engine.parallel.tp or 1, worst.gib("fraction"), worst.gib("pre_load_min")
    kv = worst.kv
    one_request = (kv.bytes_per_full_token or 0) * (worst.context_length or 0) / (1 << 30) if kv else 0.0
    candidate = tp * 2
    while candidate <= 64:
        if _load(worst) * tp / candidate + one_request * tp / candidate < fraction * pre:
            return candidate
        candidate *= 2
    return None


def _spread(ctx: Context, worst: RankCapacity) -> str:
    tp = least_tp(ctx, worst)
    if tp is None:
        return "this model does not fit any fleet of these nodes: choose a smaller or more quantized checkpoint"
    return (f"spread the model over {tp} nodes: add nodes to fleet.nodes and set engine.parallel.tp: {tp} "
            f"(the least power-of-two TP whose share fits mem_fraction_static {worst.gib('fraction')})")


@rule("SC440", "error", "every rank's weights fit its GPU",
      "What the load takes on each rank (the weights as SGLang shards them and the draft model) must fit the "
      "memory SGLang measures free before it (on unified memory the OS's MemAvailable, less NCCL's pinned "
      "buffers and on the head the HTTP server and tokenizer); SGLang fails the load otherwise.",
      "fleet: {nodes: [a, b]}\nengine: {parallel: {tp: 2}}   # a model sized for four Sparks",
      "fleet: {nodes: [a, b, c, d]}\nengine: {parallel: {tp: 4}}")
def rank_fits(ctx: Context) -> Iterator[Hit]:
    capacity = _capacity(ctx)
    if capacity is None:
        return
    over = [r for r in capacity.ranks if r.terms["weights"].gib is not None and _load(r) > r.gib("pre_load")]
    if not over:
        return
    worst = max(over, key=_load)
    yield Hit(_weights_path(ctx),
              f"{_who(worst)} loads {worst.gib('weights'):.1f} GiB weights + {worst.gib('draft'):.1f} GiB draft = "
              f"{_load(worst):.1f} GiB, more than the {worst.gib('pre_load'):.1f} GiB free before the load "
              f"({worst.terms['pre_load'].formula or worst.terms['pre_load'].source}){_more(len(over) - 1)}",
              _spread(ctx, worst))


@rule("SC441", "error", "the static pool leaves room for a KV cache",
      "SGLang keeps mem_fraction_static of the memory free before the load (the minimum over ranks); the "
      "weights and the draft come out of it and the KV cache gets the rest. When nothing is left SGLang refuses "
      "to start (\"Loaded weights leave no GPU memory for the KV cache\").",
      "engine: {limits: {mem_fraction_static: 0.5}}", "engine: {limits: {mem_fraction_static: 0.8}}")
def static_pool_leaves_kv(ctx: Context) -> Iterator[Hit]:
    capacity = _capacity(ctx)
    if capacity is None or ctx.profile.model.available_per_rank is not None:
        return
    short = [r for r in capacity.ranks if r.terms["available"].gib is not None and (r.terms["available"].gib or 0) <= 0
             and r.terms["weights"].gib is not None]
    if not short or any(True for _ in rank_fits(ctx)):
        return
    worst = min(short, key=lambda r: r.gib("available"))
    pool, pre = worst.terms["static_pool"], worst.gib("pre_load_min")
    minimum = _load(worst) / pre
    fraction = math.ceil((minimum + _kv_share(ctx, worst.kv, pre)) * 100) / 100
    fix = (f"set mem_fraction_static to {fraction:.2f} (above {minimum:.3f}: room for max_running_requests at "
           "context_length)" if fraction <= 0.95 else _spread(ctx, worst))
    yield Hit(("engine", "limits", "mem_fraction_static"),
              f"{_who(worst)}'s static pool ({pool.formula} = {pool.gib:.1f} GiB) holds "
              f"{worst.gib('weights'):.1f} GiB weights + {worst.gib('draft'):.1f} GiB draft and leaves no KV "
              f"cache ({worst.gib('available'):.1f} GiB){_more(len(short) - 1)}", fix)


def _kv_share(ctx: Context, kv: Kv | None, pre: float) -> float:
    """The static fraction a KV pool of max_running_requests full-context requests needs (5 % when unknown)."""
    limits = ctx.profile.engine.limits
    if kv is None or kv.bytes_per_full_token is None or not limits.max_running_requests or not limits.context_length:
        return 0.05
    tokens = limits.max_running_requests * limits.context_length
    return (tokens * kv.bytes_per_full_token / (1 << 30) + kv.fixed_gib) * 1.02 / pre


def _sized(capacity: Capacity) -> list[RankCapacity]:
    return [r for r in capacity.ranks if r.kv is not None and r.kv.full_token and r.context_length is not None]


@rule("SC442", "warning", "the KV pool holds max_running_requests requests at full context",
      "The predicted full_token (SGLang's own arithmetic for the model's pool kind) divided by context_length is "
      "how many full-context requests the pool holds at once; with fewer than max_running_requests, long "
      "requests queue or are retracted.",
      "engine: {limits: {context_length: 1048576, max_running_requests: 64}}",
      "engine: {limits: {context_length: 524288, max_running_requests: 16}}")
def kv_holds_the_requests(ctx: Context) -> Iterator[Hit]:
    capacity, limits = ctx.capacity, ctx.profile.engine.limits
    cap = limits.max_running_requests
    if capacity is None or cap is None:
        return
    # A pool of nothing is SC441's; a pool below one request is SC447's.
    short = [r for r in _sized(capacity) if 1 <= (r.kv.requests_at_context or 0) < cap]  # type: ignore[union-attr]
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
              f"set context_length to {max(kv.full_token // cap // 256 * 256, 256)}, or max_running_requests to "
              f"{held}, or give the KV pool more memory")


@rule("SC447", "warning", "one request at context_length fits the KV pool",
      "SGLang clamps a request to the tokens its KV pool holds: when max_total_tokens or the pool itself is below "
      "context_length, a prompt near the context length is refused or truncated at the pool's size.",
      "engine: {limits: {context_length: 131072, max_total_tokens: 65536}}",
      "engine: {limits: {context_length: 65536, max_total_tokens: 262144}}")
def one_request_fits(ctx: Context) -> Iterator[Hit]:
    capacity = ctx.capacity
    if capacity is None:
        return
    short = [r for r in _sized(capacity) if (r.kv.full_token or 0) < (r.context_length or 0)]  # type: ignore[union-attr]
    if not short:
        return
    worst = min(short, key=lambda r: r.kv.full_token or 0)  # type: ignore[union-attr]
    kv, context = worst.kv, worst.context_length
    assert kv is not None and kv.full_token is not None and context is not None
    tokens = kv.full_token // 256 * 256 or kv.full_token
    if kv.clamped_by:
        yield Hit(("engine", "limits", "max_total_tokens"),
                  f"max_total_tokens {kv.full_token} is below context_length {context}: SGLang holds no full-context "
                  "request", f"set max_total_tokens to {context} or more, or context_length to {tokens}")
        return
    yield Hit(("engine", "limits", "context_length") if ctx.present(("engine", "limits", "context_length"))
              else ("engine", "limits"),
              f"{_who(worst)}'s KV pool holds full_token={kv.full_token} ({kv.bytes_per_full_token:.2f} bytes per "
              f"token over {kv.available_gib:.1f} GiB), less than one request at context_length {context}",
              f"set engine.limits.context_length: {tokens}, or give the KV pool more memory ({_spread(ctx, worst)})")


@rule("SC448", "warning", "a pinned available_per_rank matches the profile's mem_fraction_static",
      "available_per_rank is what a boot measured at the fraction it ran with; with the pre-load pin and the "
      "weights pinned too, SGLang's arithmetic gives what this profile's mem_fraction_static leaves. A pin that "
      "differs by more than 1 GiB belongs to another fraction and freezes an answer that is no longer true.",
      "model: {pre_load_available_per_rank: [110.0], weights_per_rank: [60.0], available_per_rank: [40.0]}\n"
      "engine: {limits: {mem_fraction_static: 0.8}}",
      "model: {pre_load_available_per_rank: [110.0], weights_per_rank: [60.0]}\n"
      "engine: {limits: {mem_fraction_static: 0.8}}")
def available_pin_matches(ctx: Context) -> Iterator[Hit]:
    capacity, model = ctx.capacity, ctx.profile.model
    if capacity is None or model.available_per_rank is None or model.pre_load_available_per_rank is None:
        return
    for r in capacity.ranks:
        expected = r.gib("fraction") * r.gib("pre_load_min") - _load(r)
        if r.rank < len(model.available_per_rank) and abs(model.available_per_rank[r.rank] - expected) > 1.0:
            yield Hit(("model", "available_per_rank"),
                      f"model.available_per_rank[{r.rank}] is {model.available_per_rank[r.rank]} GiB, but "
                      f"mem_fraction_static {r.gib('fraction')} x {r.gib('pre_load_min'):.1f} GiB pre-load - "
                      f"{_load(r):.1f} GiB loaded leaves {expected:.1f} GiB",
                      "remove model.available_per_rank: the pre-load pin predicts it for any mem_fraction_static")
            return


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


PINS = ("weights_per_rank", "draft_weights_per_rank", "available_per_rank", "cuda_graph_per_rank",
        "pre_load_available_per_rank")


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
