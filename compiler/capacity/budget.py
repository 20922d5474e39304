"""Stage: the memory budget of every rank, each term with its source and formula (pure; inputs are gathered
by `spark_compile.capacity.inputs`).

On unified memory (GB10) the GPU's pool is the host's RAM: SGLang measures what CUDA reports free before it
loads the model (after NCCL and, on the head, the HTTP server and tokenizer took theirs), keeps
``mem_fraction_static`` of it as the static pool (weights, draft, KV cache) and leaves the rest for
activations, CUDA graphs and the prefill transient. The KV pool is what the static pool has after the weights;
for DeepSeek-V4/V4.1 its size in tokens follows SGLang's own pool configurator (`spark_compile.capacity.kv_dsv4`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_compile.capacity.kv_dsv4 import Dsv4Inputs, Dsv4Pool, Speculation, UnmodelledError, dsv4_pool
from spark_compile.capacity.weights import GIB, Split, estimate_dsv4, text_config
from spark_compile.spec.checks import docker_size_bytes
from spark_compile.spec.hardware import FAMILIES, HARDWARE
from spark_compile.spec.model import Profile
from spark_compile.spec.nccl_presets import NCCL_DEFAULT_PINNED_GIB, NCCL_PRESETS, NCCL_TRIM_PINNED_GIB
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan

HEAD_SHARE_GIB = 1.3  # HTTP server, tokenizer and detokenizer on rank 0 (an operator's published TP4 notes)
INDEXER_TRANSIENT_BYTES = 14  # DSV4 sparse indexer's prefill peak per (chunk token x prefix token), published
DSV4 = "DeepseekV4ForCausalLM"


@dataclass(frozen=True, slots=True)
class CapacityInputs:
    """What the stage reads from disk, gathered at the edge: config.json and the snapshot's headers."""

    config: dict[str, Any] | None
    config_source: str  # where config.json came from, or why there is none
    split: Split | None  # the checkpoint's own bytes per rank, from its safetensors headers
    split_source: str


@dataclass(frozen=True, slots=True)
class Term:
    """One amount of memory: GiB (None when it cannot be known here), where the figure comes from, how."""

    gib: float | None
    source: str
    formula: str = ""


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


@dataclass(frozen=True, slots=True)
class RankCapacity:
    """One rank's budget."""

    rank: int
    node: str
    terms: dict[str, Term]
    kv: Kv | None
    context_length: int | None

    def gib(self, name: str) -> float:
        """A term's GiB, 0 when it is unknown (the term's source says so)."""
        value = self.terms[name].gib
        return 0.0 if value is None else value

    def resident(self) -> list[tuple[str, float]]:
        """What must be in GPU memory before any KV cache: (label, GiB) of each known, nonzero term."""
        names = ("weights", "draft", "nccl", "head_share", "cuda_graphs")
        return [(name, self.gib(name)) for name in names if self.gib(name) > 0]


@dataclass(frozen=True, slots=True)
class Capacity:
    """Every rank's budget, and the model family's KV arithmetic used."""

    ranks: tuple[RankCapacity, ...]


def size_gib(text: str) -> float:
    """GiB meant by a docker size such as 112g or 32gb."""
    return docker_size_bytes(text) / (1 << 30)


def docker_gib(size: str | None) -> float | None:
    """A docker size (``112g``) in GiB; None when unset."""
    return None if size is None else size_gib(size)


def _cuda_total(profile: Profile) -> Term:
    hw = HARDWARE[profile.hardware]
    if hw.cuda_total_gib is not None:
        return Term(hw.cuda_total_gib, f"hardware catalog {hw.name}: what CUDA reports as the GPU's total")
    return Term(hw.gpu_memory_gb * 1e9 / GIB, f"estimate: hardware catalog {hw.name} lists {hw.gpu_memory_gb} GB "
                "and no CUDA-reported total", f"{hw.gpu_memory_gb} GB / 2^30")


def _pin(values: list[float] | None, rank: int, name: str) -> Term | None:
    if values is None or rank >= len(values):
        return None
    return Term(float(values[rank]), f"pinned: model.{name}[{rank}]")


CALIBRATE = "pin model.{name} (`verify.sh --calibrate` measures it on a booted fleet)"


def _weights_source(profile: Profile, inputs: CapacityInputs) -> tuple[Split | None, str]:
    """The checkpoint's split with where it comes from, or None with why there is none."""
    tp, ep = profile.engine.parallel.tp or 1, profile.engine.parallel.ep
    if (profile.engine.parallel.pp or 1) > 1:  # the stages' layer split is SGLang's own: not modelled here
        return None, f"no split for pipeline parallelism (pp {profile.engine.parallel.pp})"
    if inputs.split is not None:
        return inputs.split, f"safetensors headers of {inputs.split_source}, split by TP {tp} / EP {ep}"
    if inputs.config is None:
        return None, inputs.config_source
    if profile.model.architecture != DSV4:
        return None, f"no estimate for {profile.model.architecture}"
    try:
        return estimate_dsv4(inputs.config, tp), f"estimate from {inputs.config_source} (parameters x stored " \
            f"bytes, split by TP {tp})"
    except KeyError as missing:
        return None, f"config.json has no {missing}"


def _weights(profile: Profile, inputs: CapacityInputs, rank: int) -> tuple[Term, Term]:
    """(target weights, draft weights) on this rank: a pin, else the checkpoint's headers, else an estimate."""
    model, spec = profile.model, profile.engine.speculative
    split, source = _weights_source(profile, inputs)
    exact = inputs.split is not None
    target = _pin(model.weights_per_rank, rank, "weights_per_rank") or (
        Term(None, f"unknown: {source}; " + CALIBRATE.format(name="weights_per_rank")) if split is None
        else Term(split.target / GIB, source, "sum of tensor bytes per rank" if exact
                  else "fp8 dense + fp4 experts, / TP where sharded"))
    draft = _pin(model.draft_weights_per_rank, rank, "draft_weights_per_rank")
    if draft is None and spec.algorithm == "none":
        draft = Term(0.0, "no speculative decoding")
    elif draft is None and spec.draft is not None:
        draft = Term(None, "unknown: engine.speculative.draft is another checkpoint; "
                     + CALIBRATE.format(name="draft_weights_per_rank"))
    elif draft is None:
        draft = Term(None, f"unknown: {source}; " + CALIBRATE.format(name="draft_weights_per_rank")) \
            if split is None else Term(split.draft / GIB, source, "mtp.* tensors per rank" if exact
                                       else "DSpark/MTP stages, / TP where sharded")
    return target, draft


def _nccl(profile: Profile, plan_rank: RankPlan) -> Term:
    if len(profile.fleet.nodes) == 1:
        return Term(0.0, "one node: NCCL opens no network connections")
    env = plan_rank.env
    if _trimmed(env):
        return Term(NCCL_TRIM_PINNED_GIB, "the trim preset's buffers: 0.14 GB pinned, measured on the reference fleet")
    return Term(NCCL_DEFAULT_PINNED_GIB, "NCCL's default buffers: about 4.7 GiB pinned per node (published)",
                "(4 MiB Simple + 4.69 MiB LL128 + 0.5 MiB LL) x up to 512 connections")


def _int_env(env: dict[str, str | None], name: str, default: int) -> int:
    value = env.get(name)
    return int(value) if value is not None and value.isdigit() else default


def _trimmed(env: dict[str, str | None]) -> bool:
    """Buffers no bigger than the trim's: Simple 1 MiB, LL128 off (or 256 KiB), at most 8 channels."""
    trim = dict(NCCL_PRESETS["trim"])
    ll128_off = "LL128" in (env.get("NCCL_PROTO") or "") and (env.get("NCCL_PROTO") or "").startswith("^")
    return (_int_env(env, "NCCL_BUFFSIZE", 4 << 20) <= int(trim["NCCL_BUFFSIZE"])
            and (ll128_off or _int_env(env, "NCCL_LL128_BUFFSIZE", 4800 << 10) <= int(trim["NCCL_LL128_BUFFSIZE"]))
            and _int_env(env, "NCCL_MAX_NCHANNELS", 32) <= int(trim["NCCL_MAX_NCHANNELS"]))


def _engram(profile: Profile, inputs: CapacityInputs, plan_rank: RankPlan) -> tuple[Term, Term]:
    """(rows held on this rank, the part of them charged to host memory)."""
    engram, tables = plan_rank.engram, profile.model.engram
    if engram is None or tables is None:
        return Term(0.0, "no Engram tables"), Term(0.0, "no Engram tables")
    t = text_config(inputs.config) if inputs.config is not None else {}
    head_dim = t.get("engram_head_dim")
    rows = sum(hi - lo for _, lo, hi in engram.rows)
    where = ("the checkpoint's shards (read in place)" if engram.source == "shards"
             else f"the node-local copy mounted at {engram.directory}")
    if not isinstance(head_dim, int):
        return Term(None, f"{rows} rows in {where}; row bytes unknown (config.json has no engram_head_dim)"), \
            Term(None, "row bytes unknown")
    row_bytes = head_dim + head_dim // 32  # e4m3 row + one e8m0 scale per 32 values
    held = Term(rows * row_bytes / GIB, f"{rows} rows of this rank's range in {where}", f"{rows} x {row_bytes} B")
    env = plan_rank.env
    if env.get("SPARK_ENGRAM_DIR") is None and env.get("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE") != "0":
        whole = sum(tables.tables.values()) * row_bytes / GIB
        return held, Term(whole, "stock SGLang pins both whole tables in host memory",
                          f"{sum(tables.tables.values())} rows x {row_bytes} B")
    budget = env.get("SPARK_ENGRAM_CACHE_GB") or "4"
    if float(budget) == 0:
        return held, Term(held.gib, "the overlay's row cache, unbounded (SPARK_ENGRAM_CACHE_GB=0): this rank's rows")
    return held, Term(float(budget) * 1e9 / GIB, f"the overlay's row cache budget, SPARK_ENGRAM_CACHE_GB={budget}")


@dataclass(frozen=True, slots=True)
class EngineReads:
    """The engine settings the budget reads, in one place (typed fields may move; this is the one edit)."""

    algorithm: str | None
    speculation: Speculation | None
    page_size: int | None
    max_total_tokens: int | None
    mem_fraction_static: float | None
    chunked_prefill_size: int | None
    max_running_requests: int | None
    context_length: int | None


def engine_reads(profile: Profile) -> EngineReads:
    """Speculation as SGLang resolves it (DSPARK: one step, top-1, block + 1 draft tokens), the page size
    (the one SGLang forces for the family, else engine.page_size), and the limits."""
    eng, family = profile.engine, FAMILIES.get(profile.model.architecture)
    spec, limits = eng.speculative, eng.limits
    algorithm = None if spec.algorithm == "none" else spec.algorithm
    speculation = None
    if algorithm == "DSPARK" and spec.dspark_block_size is not None:
        speculation = Speculation(spec.num_draft_tokens or spec.dspark_block_size + 1)
    elif algorithm is not None and spec.num_draft_tokens is not None:
        speculation = Speculation(spec.num_draft_tokens, spec.num_steps or 1, spec.eagle_topk or 1)
    page_size = family.page_size if family and family.page_size else eng.page_size
    return EngineReads(algorithm, speculation, page_size, limits.max_total_tokens, limits.mem_fraction_static,
                       limits.chunked_prefill_size, limits.max_running_requests, limits.context_length)


def _context(profile: Profile, inputs: CapacityInputs) -> int | None:
    """The context length SGLang will run with; None when unknown or beyond the model's (SGLang refuses it)."""
    t = text_config(inputs.config) if inputs.config is not None else {}
    value = t.get("max_position_embeddings")
    model_max = value if isinstance(value, int) else profile.model.max_context_length
    written = engine_reads(profile).context_length
    if written is None:
        return model_max
    return None if model_max is not None and written > model_max else written


def _dsv4_inputs(profile: Profile, inputs: CapacityInputs, context: int) -> Dsv4Inputs:
    reads = engine_reads(profile)
    if reads.algorithm is not None and reads.speculation is None:
        raise UnmodelledError(f"{reads.algorithm}'s draft-token count is left to SGLang")
    if reads.chunked_prefill_size is None:
        raise UnmodelledError("chunked_prefill_size is unset: SGLang picks it for the GPU at start")
    if profile.engine.args.get("enable-encoder-swa-bounded-replay"):
        raise UnmodelledError("encoder SWA bounded replay sizes per-request windows this model does not follow")
    t = text_config(inputs.config or {})
    layers = t["num_hidden_layers"]
    ratio = profile.engine.args.get("swa-full-tokens-ratio")
    tails = profile.engine.args.get("swa-prefix-tails")
    return Dsv4Inputs(
        tuple(t["compress_ratios"][:layers]), tuple(t.get("kv_source_layer_ids") or ()), t["head_dim"],
        t["qk_rope_head_dim"], t["index_head_dim"], t["sliding_window"], context, reads.page_size or 256,
        reads.max_running_requests, reads.chunked_prefill_size, reads.speculation,
        128 if HARDWARE[profile.hardware].sm[0] == 10 else 64,
        float(ratio) if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else None,
        tails if isinstance(tails, int) and not isinstance(tails, bool) else None)


def predict_kv(profile: Profile, inputs: CapacityInputs, available_gib: float, context: int | None) -> Kv:
    """The KV pool SGLang would size from ``available_gib`` (its available_bytes)."""
    if profile.model.architecture != DSV4 or inputs.config is None or context is None:
        why = "no config.json" if inputs.config is None else f"no pool model for {profile.model.architecture}"
        return Kv(available_gib, None, None, None, max(available_gib, 0.0), f"{why}: the pool is the bytes left")
    try:
        pool: Dsv4Pool = dsv4_pool(_dsv4_inputs(profile, inputs, context), int(available_gib * GIB))
    except (UnmodelledError, KeyError, TypeError, IndexError) as why:
        return Kv(available_gib, None, None, None, max(available_gib, 0.0), f"not modelled: {why}")
    full = pool.full_token
    cap = engine_reads(profile).max_total_tokens
    note = "SGLang 0.5.23 DSV4PoolConfigurator arithmetic"
    if cap is not None and cap < full:
        full, note = cap, note + f", capped by max_total_tokens {cap}"
    return Kv(available_gib, pool.bytes_per_full_token, full, full // context, pool.pool_bytes() / GIB, note,
              pool.fixed_bytes / GIB)


def _transient(profile: Profile, context: int | None) -> Term:
    chunk = engine_reads(profile).chunked_prefill_size
    if profile.model.architecture != DSV4:
        return Term(None, f"no prefill transient model for {profile.model.architecture}")
    if chunk is None or context is None:
        return Term(None, "unknown: chunked_prefill_size or the context length is left to SGLang")
    return Term(INDEXER_TRANSIENT_BYTES * chunk * context / GIB, "DSV4 sparse indexer's prefill peak (published)",
                f"14 B x chunk {chunk} x prefix {context}")


def _static(terms: dict[str, Term], fraction: float | None) -> None:
    total, nccl, head = terms["cuda_total"], terms["nccl"], terms["head_share"]
    pre = (total.gib or 0.0) - (nccl.gib or 0.0) - (head.gib or 0.0)
    terms["pre_load"] = Term(pre, "what CUDA reports free before the model loads",
                             f"{total.gib:.1f} total - {nccl.gib:.2f} NCCL - {head.gib:.1f} head share")
    if fraction is None or not 0 < fraction < 1:
        why = ("mem_fraction_static is unset: SGLang picks it for the GPU at start" if fraction is None
               else f"mem_fraction_static {fraction} is not in (0, 1)")
        for name in ("static_pool", "outside_static"):
            terms[name] = Term(None, why)
        return
    terms["static_pool"] = Term(fraction * pre, "--mem-fraction-static x pre-load free memory",
                                f"{fraction} x {pre:.1f}")
    terms["outside_static"] = Term((1 - fraction) * pre, "the rest, for activations, CUDA graphs, transients",
                                   f"(1 - {fraction}) x {pre:.1f}")


def _available(profile: Profile, terms: dict[str, Term], rank: int) -> Term:
    pinned = _pin(profile.model.available_per_rank, rank, "available_per_rank")
    if pinned is not None:
        return pinned
    static, weights, draft = terms["static_pool"].gib, terms["weights"].gib, terms["draft"].gib
    if static is None or weights is None or draft is None:
        return Term(None, "unknown: the static pool or the weights are not known here")
    return Term(static - weights - draft, "SGLang's available_bytes: the static pool after the weights",
                f"{static:.1f} - {weights:.1f} weights - {draft:.1f} draft")


def _host(profile: Profile, terms: dict[str, Term]) -> Term:
    parts = [(name, terms[name].gib) for name in ("head_share", "nccl", "engram_host", "shm")]
    if any(gib is None for _, gib in parts):
        return Term(None, "unknown: a host-side term is not known here")
    total = sum(gib or 0.0 for _, gib in parts)
    return Term(total, "what the container's processes hold in host memory",
                " + ".join(f"{gib:.1f} {name}" for name, gib in parts))


def rank_capacity(profile: Profile, plan_rank: RankPlan, inputs: CapacityInputs) -> RankCapacity:
    """One rank's budget."""
    rank, box = plan_rank.rank, profile.container
    context = _context(profile, inputs)
    weights, draft = _weights(profile, inputs, rank)
    terms: dict[str, Term] = {
        "cuda_total": _cuda_total(profile), "nccl": _nccl(profile, plan_rank),
        "head_share": Term(HEAD_SHARE_GIB if plan_rank.is_head else 0.0,
                           "HTTP server, tokenizer, detokenizer (rank 0; published)" if plan_rank.is_head
                           else "not the head"),
        "weights": weights, "draft": draft,
    }
    _static(terms, engine_reads(profile).mem_fraction_static)
    terms["available"] = _available(profile, terms, rank)
    available = terms["available"].gib
    kv = None if available is None else predict_kv(profile, inputs, available, context)
    if kv is not None:
        terms["kv_pool"] = Term(kv.pool_gib, kv.note, "full_token x bytes_per_full_token + fixed pools"
                                if kv.full_token is not None else "")
    terms["cuda_graphs"] = _pin(profile.model.cuda_graph_per_rank, rank, "cuda_graph_per_rank") or Term(
        None, "not known before a boot: " + CALIBRATE.format(name="cuda_graph_per_rank"))
    terms["prefill_transient"] = _transient(profile, context)
    terms["engram_rows"], terms["engram_host"] = _engram(profile, inputs, plan_rank)
    terms["shm"] = Term(docker_gib(box.shm_size) or 0.0, "--shm-size: a tmpfs in host memory, charged when filled"
                        if box.shm_size else "no --shm-size (docker's 64 MiB)")
    terms["host_needs"] = _host(profile, terms)
    terms["container_limit"] = Term(docker_gib(box.memory), "--memory" if box.memory else "no --memory limit")
    return RankCapacity(rank, plan_rank.node, terms, kv, context)


def build_capacity(profile: Profile, plan: LaunchPlan, inputs: CapacityInputs) -> Capacity:
    """Every rank's budget; the KV arithmetic runs once per kind of rank (head or worker) unless pins differ."""
    pinned = any(values is not None for values in (
        profile.model.weights_per_rank, profile.model.draft_weights_per_rank, profile.model.available_per_rank,
        profile.model.cuda_graph_per_rank))
    memo: dict[tuple[bool, int], RankCapacity] = {}
    out = []
    for plan_rank in plan.ranks:
        key = (plan_rank.is_head, plan_rank.rank if pinned else -1)
        if key not in memo:
            memo[key] = rank_capacity(profile, plan_rank, inputs)
        base = memo[key]
        terms = dict(base.terms)
        terms["engram_rows"], terms["engram_host"] = _engram(profile, inputs, plan_rank)
        terms["host_needs"] = _host(profile, terms)
        out.append(RankCapacity(plan_rank.rank, plan_rank.node, terms, base.kv, base.context_length))
    return Capacity(tuple(out))
