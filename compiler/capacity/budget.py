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

from spark_compile.capacity.kv_predict import (
    CapacityInputs,
    Kv,
    context_length,
    engine_reads,
    predict_kv,
    synced_over_stages,
)
from spark_compile.capacity.pp_split import PARTITION_ENV, PartitionError, Stage, stage_of
from spark_compile.capacity.preload import DSV4, cuda_total_gib, mem_available, memory_defaults, memory_inputs
from spark_compile.capacity.weights import GIB, Split, estimate_dsv4, text_config
from spark_compile.capacity.weights_config import EstimateError, bytes_per_rank
from spark_compile.spec.checks import docker_size_bytes
from spark_compile.spec.hardware import HARDWARE
from spark_compile.spec.model import Profile
from spark_compile.spec.nccl_presets import NCCL_DEFAULT_PINNED_GIB, NCCL_PRESETS, NCCL_TRIM_PINNED_GIB
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan

HEAD_SHARE_GIB = 1.3  # HTTP server, tokenizer and detokenizer on rank 0 (an operator's published TP4 notes)
INDEXER_TRANSIENT_BYTES = 14  # DSV4 sparse indexer's prefill peak per (chunk token x prefix token), published
# What SGLang's load of DeepSeek-V4.1-Flash took beyond its checkpoint's bytes: the published TP4/EP4 boot's
# 77 + 2.5 GiB (`Load weight end` mem usage) against this estimate's 69.5 + 1.8 GiB for the same placement
# (MXFP4 experts repacked for FlashInfer's runner, dequantized copies); the load delta, not the file size.
DSV4_LOAD_OVER_CHECKPOINT = 79.5 / 71.3
@dataclass(frozen=True, slots=True)
class Term:
    """One amount of memory: GiB (None when it cannot be known here), where the figure comes from, how."""

    gib: float | None
    source: str
    formula: str = ""


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
    gib, reported = cuda_total_gib(profile)
    if reported:
        return Term(gib, f"hardware catalog {hw.name}: what CUDA reports as the GPU's total")
    return Term(gib, f"estimate: hardware catalog {hw.name} lists {hw.gpu_memory_gb} GB and no CUDA-reported "
                "total", f"{hw.gpu_memory_gb} GB / 2^30")


def _pin(values: list[float] | None, rank: int, name: str) -> Term | None:
    if values is None or rank >= len(values):
        return None
    return Term(float(values[rank]), f"pinned: model.{name}[{rank}]")


CALIBRATE = "pin model.{name} (`verify.sh --calibrate` measures it on a booted fleet)"


def stage(profile: Profile, inputs: CapacityInputs, plan_rank: RankPlan) -> Stage:
    """The rank's pipeline stage (the whole model without pp); PartitionError when the written split is wrong."""
    t = text_config(inputs.config) if inputs.config is not None else {}
    layers = t.get("num_hidden_layers")
    return stage_of(plan_rank.rank, len(profile.fleet.nodes), profile.engine.parallel.pp or 1,
                    layers if isinstance(layers, int) and not isinstance(layers, bool) else 0,
                    plan_rank.env.get(PARTITION_ENV), profile.model.architecture)


def _split_note(tp: int, where: Stage) -> str:
    return f"split by TP {tp}" + (f", pp stage layers {where.start}-{where.end - 1} of {where.layers}"
                                  if where.pp > 1 else "")


def _config_split(profile: Profile, inputs: CapacityInputs, tp: int, where: Stage) -> tuple[Split, str, str]:
    """(the split from config.json, its source, its method): DeepSeek-V4's own estimate or the families'."""
    assert inputs.config is not None
    if profile.model.architecture == DSV4:
        raw = estimate_dsv4(inputs.config, tp, where)
        split = Split(raw.target * DSV4_LOAD_OVER_CHECKPOINT, raw.draft * DSV4_LOAD_OVER_CHECKPOINT, 0.0, 0)
        return split, f"estimate from {inputs.config_source} (parameters x stored bytes, {_split_note(tp, where)}, " \
            f"x {DSV4_LOAD_OVER_CHECKPOINT:.3f} load over checkpoint, published)", "fp8 dense + fp4 experts, / TP " \
            "where sharded"
    rank, whole, formats = bytes_per_rank(inputs.config, text_config(inputs.config), tp, where)
    if inputs.index_total is not None:
        return Split(inputs.index_total * rank / whole, 0.0, 0.0, 0), \
            f"exact total from {inputs.index_source} (metadata.total_size), {_split_note(tp, where)} in the " \
            "families' shares", f"{inputs.index_total} B x {rank / whole:.4f}"
    return Split(rank, 0.0, 0.0, 0), f"estimate from {inputs.config_source} (parameters per family x stored " \
        f"bytes, {_split_note(tp, where)})", formats


def _stage_share(profile: Profile, inputs: CapacityInputs, tp: int, where: Stage) -> float:
    """The stage's part of a TP rank's target bytes, in the estimate's proportions (for the headers' split)."""
    if where.pp <= 1 or inputs.config is None:
        return 1.0
    if profile.model.architecture == DSV4:
        return estimate_dsv4(inputs.config, tp, where).target / estimate_dsv4(inputs.config, tp).target
    t = text_config(inputs.config)
    return bytes_per_rank(inputs.config, t, tp, where)[0] / bytes_per_rank(inputs.config, t, tp)[0]


def _weights_source(profile: Profile, inputs: CapacityInputs, plan_rank: RankPlan) -> tuple[Split | None, str, str]:
    """The checkpoint's split on this rank with where it comes from and how, or None with why there is none."""
    tp, ep = profile.engine.parallel.tp or 1, profile.engine.parallel.ep
    if inputs.split is None and inputs.config is None:
        return None, inputs.config_source, ""
    try:
        where = stage(profile, inputs, plan_rank)
        if inputs.split is not None:
            share, split = _stage_share(profile, inputs, tp, where), inputs.split
            return Split(split.target * share, split.draft if where.last else 0.0, split.engram_tables, split.shards), \
                f"safetensors headers of {inputs.split_source}, split by TP {tp} / EP {ep}" + (
                    f", x {share:.4f} for pp stage layers {where.start}-{where.end - 1}" if where.pp > 1 else ""), \
                "sum of tensor bytes per rank"
        return _config_split(profile, inputs, tp, where)
    except KeyError as missing:
        return None, f"config.json has no {missing}", ""
    except (EstimateError, PartitionError) as why:
        return None, str(why), ""


def _draft_config_term(profile: Profile, inputs: CapacityInputs, last_stage: bool) -> Term:
    """A separate draft's weights from its own config.json (its quantization, else the model dtype)."""
    spec = profile.engine.speculative
    if not last_stage:
        return Term(0.0, "the draft runs on the last pipeline stage only (EAGLEWorkerV2)")
    if inputs.draft_config is None:
        return Term(None, "unknown: engine.speculative.draft is another checkpoint and its config.json is not "
                    "here; " + CALIBRATE.format(name="draft_weights_per_rank"))
    config = dict(inputs.draft_config)
    if spec.draft is not None and spec.draft.quantization == "unquant":
        config.pop("quantization_config", None)
    tp = profile.engine.parallel.tp or 1
    try:
        rank, _, formats = bytes_per_rank(config, text_config(config), tp)
    except (EstimateError, KeyError) as why:
        return Term(None, f"unknown: the draft's config.json: {why}")
    return Term(rank / GIB, f"estimate from the draft's config.json (parameters per family x stored bytes, "
                f"split by TP {tp})", formats)


def _last_stage(profile: Profile, inputs: CapacityInputs, plan_rank: RankPlan) -> bool:
    try:
        return stage(profile, inputs, plan_rank).last
    except PartitionError:
        return True


def _weights(profile: Profile, inputs: CapacityInputs, plan_rank: RankPlan) -> tuple[Term, Term]:
    """(target weights, draft weights) on this rank: a pin, else the checkpoint's headers, else an estimate."""
    model, spec, rank = profile.model, profile.engine.speculative, plan_rank.rank
    split, source, method = _weights_source(profile, inputs, plan_rank)
    target = _pin(model.weights_per_rank, rank, "weights_per_rank") or (
        Term(None, f"unknown: {source}; " + CALIBRATE.format(name="weights_per_rank")) if split is None
        else Term(split.target / GIB, source, method))
    draft = _pin(model.draft_weights_per_rank, rank, "draft_weights_per_rank")
    if draft is None and spec.algorithm == "none":
        draft = Term(0.0, "no speculative decoding")
    elif draft is None and spec.draft is not None:
        draft = _draft_config_term(profile, inputs, _last_stage(profile, inputs, plan_rank))
    elif draft is None:
        draft = Term(None, f"unknown: {source}; " + CALIBRATE.format(name="draft_weights_per_rank")) \
            if split is None else Term(split.draft / GIB, source, "mtp.* tensors per rank"
                                       if inputs.split is not None else "DSpark/MTP stages, / TP where sharded")
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


def _transient(profile: Profile, context: int | None) -> Term:
    reads = engine_reads(profile)
    if profile.model.architecture != DSV4:
        return Term(None, f"no prefill transient model for {profile.model.architecture}")
    if context is None:
        return Term(None, "unknown: the context length is not known here")
    chunk = f"chunk {reads.chunked_prefill_size}" + (" (unset: SGLang's for the GPU)" if reads.chunk_defaulted else "")
    return Term(INDEXER_TRANSIENT_BYTES * reads.chunked_prefill_size * context / GIB,
                "DSV4 sparse indexer's prefill peak (published)", f"14 B x {chunk} x prefix {context}")


@dataclass(frozen=True, slots=True)
class Fleetwide:
    """What SGLang takes as the minimum over ranks: free memory before the load and after it (GiB)."""

    pre_load: float
    pre_source: str
    after_load: float | None  # None when a rank's weights are unknown here


def _fraction(profile: Profile, inputs: CapacityInputs) -> Term:
    written = engine_reads(profile).mem_fraction_static
    if written is not None:
        return Term(written, "engine.limits.mem_fraction_static")
    t = text_config(inputs.config) if inputs.config is not None else None
    derived = memory_defaults(memory_inputs(profile, t))
    return Term(derived.fraction, "unset: SGLang derives it (handle_gpu_memory_settings)", derived.formula)


def _static(profile: Profile, inputs: CapacityInputs, terms: dict[str, Term], fleet: Fleetwide) -> None:
    terms["fraction"] = fraction = _fraction(profile, inputs)
    pre, f = fleet.pre_load, fraction.gib or 0.0
    terms["pre_load_min"] = Term(pre, f"the minimum over ranks of the pre-load free memory ({fleet.pre_source}): "
                                 "SGLang sizes every rank from it")
    if not 0 < f < 1:
        for name in ("static_pool", "outside_static"):
            terms[name] = Term(None, f"mem_fraction_static {f} is not in (0, 1)")
        return
    terms["static_pool"] = Term(f * pre, "--mem-fraction-static x pre-load free memory", f"{f} x {pre:.1f}")
    terms["outside_static"] = Term((1 - f) * pre, "the rest, for activations, CUDA graphs, transients",
                                   f"(1 - {f}) x {pre:.1f}")


def _available(profile: Profile, terms: dict[str, Term], rank: int, fleet: Fleetwide) -> Term:
    pinned = _pin(profile.model.available_per_rank, rank, "available_per_rank")
    if pinned is not None:
        return pinned
    f = terms["fraction"].gib or 0.0
    if fleet.after_load is None:
        return Term(None, "unknown: a rank's weights are not known here")
    return Term(fleet.after_load - (1 - f) * fleet.pre_load, "SGLang's available_bytes: the minimum free after "
                "the load less the (1 - F) share of the minimum before it",
                f"{fleet.after_load:.1f} - (1 - {f}) x {fleet.pre_load:.1f}")


def _pre_load(profile: Profile, plan_rank: RankPlan) -> tuple[Term, Term]:
    """(MemAvailable before the load, what this rank's SGLang measures: less NCCL and the head's processes)."""
    total = _cuda_total(profile).gib or 0.0
    measured = mem_available(profile, plan_rank.rank, total)
    nccl, head = _nccl(profile, plan_rank).gib or 0.0, HEAD_SHARE_GIB if plan_rank.is_head else 0.0
    if measured.source.startswith("pinned"):  # a boot's own figure already has them taken off
        return Term(measured.gib, measured.source), Term(measured.gib, measured.source)
    return Term(measured.gib, measured.source), Term(
        measured.gib - nccl - head, "free before the load: the NCCL buffers and the head's processes are "
        "already held (the Engram row cache fills while serving, after SGLang measured)",
        f"{measured.gib:.1f} - {nccl:.2f} NCCL - {head:.1f} head share")


def fleetwide(profile: Profile, plan: LaunchPlan, inputs: CapacityInputs) -> Fleetwide:
    """The minimum over ranks of SGLang's two measurements (get_available_gpu_memory(distributed=True))."""
    pres = [_pre_load(profile, r)[1] for r in plan.ranks]
    loads = [_weights(profile, inputs, r) for r in plan.ranks]
    pre = min(pres, key=lambda t: t.gib or 0.0)
    known = all(w.gib is not None and d.gib is not None for w, d in loads)
    after = min((p.gib or 0.0) - (w.gib or 0.0) - (d.gib or 0.0) for p, (w, d) in zip(pres, loads, strict=True)) \
        if known else None
    return Fleetwide(pre.gib or 0.0, pre.source.split(":")[0], after)


def _host(profile: Profile, terms: dict[str, Term]) -> Term:
    parts = [(name, terms[name].gib) for name in ("head_share", "nccl", "engram_host", "shm")]
    if any(gib is None for _, gib in parts):
        return Term(None, "unknown: a host-side term is not known here")
    total = sum(gib or 0.0 for _, gib in parts)
    return Term(total, "what the container's processes hold in host memory",
                " + ".join(f"{gib:.1f} {name}" for name, gib in parts))


def rank_capacity(profile: Profile, plan_rank: RankPlan, inputs: CapacityInputs, fleet: Fleetwide) -> RankCapacity:
    """One rank's budget."""
    rank, box = plan_rank.rank, profile.container
    context = context_length(profile, inputs)
    weights, draft = _weights(profile, inputs, plan_rank)
    terms: dict[str, Term] = {
        "cuda_total": _cuda_total(profile), "nccl": _nccl(profile, plan_rank),
        "head_share": Term(HEAD_SHARE_GIB if plan_rank.is_head else 0.0,
                           "HTTP server, tokenizer, detokenizer (rank 0; published)" if plan_rank.is_head
                           else "not the head"),
        "weights": weights, "draft": draft,
    }
    terms["mem_available"], terms["pre_load"] = _pre_load(profile, plan_rank)
    _static(profile, inputs, terms, fleet)
    terms["available"] = _available(profile, terms, rank, fleet)
    available = terms["available"].gib
    kv = None if available is None else predict_kv(profile, inputs, available, context,
                                                   lambda: stage(profile, inputs, plan_rank))
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
        profile.model.cuda_graph_per_rank, profile.model.pre_load_available_per_rank))
    fleet = fleetwide(profile, plan, inputs)
    memo: dict[tuple[bool, int], RankCapacity] = {}
    out = []
    for plan_rank in plan.ranks:
        key = (plan_rank.is_head, plan_rank.rank if pinned or (profile.engine.parallel.pp or 1) > 1 else -1)
        if key not in memo:
            memo[key] = rank_capacity(profile, plan_rank, inputs, fleet)
        base = memo[key]
        terms = dict(base.terms)
        terms["engram_rows"], terms["engram_host"] = _engram(profile, inputs, plan_rank)
        terms["host_needs"] = _host(profile, terms)
        out.append(RankCapacity(plan_rank.rank, plan_rank.node, terms, base.kv, base.context_length))
    return Capacity(tuple(_pp_synced(out) if (profile.engine.parallel.pp or 1) > 1 else out))


def _pp_synced(ranks: list[RankCapacity]) -> list[RankCapacity]:
    kvs = synced_over_stages([r.kv for r in ranks], ranks[0].context_length if ranks else None)
    return [RankCapacity(r.rank, r.node, r.terms, kv, r.context_length) for r, kv in zip(ranks, kvs, strict=True)]
