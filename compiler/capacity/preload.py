"""What SGLang 0.5.23 measures before the load, and the defaults it derives from the GPU's memory when unset.

get_available_gpu_memory (utils/common.py) returns psutil's MemAvailable on an integrated device such as
GB10 and CUDA's free memory elsewhere; with several ranks each takes the minimum over all of them. An unset
--chunked-prefill-size, decode graph batch size and --mem-fraction-static come from handle_gpu_memory_settings
(arg_groups/memory_hook.py) and reserve_for_graph_mb beside it: `memory_defaults` is their twin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_compile.capacity.weights import GIB
from spark_compile.spec.hardware import HARDWARE, Hardware
from spark_compile.spec.model import Profile
from spark_compile.stages.model_paths import container_path

DSV4 = "DeepseekV4ForCausalLM"
RESERVE_FLOOR_MB = 10 * 1024  # the floor on devices above 60 GiB
LARGE_DEVICE_MB = 60 * 1024
# handle_gpu_memory_settings' tiers (arg_groups/memory_hook.py): (GPU memory below, MiB; chunked_prefill_size;
# decode max_bs at tp < 4, at tp >= 4). Above the last: 16384 and 512.
TIERS = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
         (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512))
MLA_PREFILL_RESERVE_MB = 1.5 * 1024  # reserve_for_graph_mb: "MLA backend overhead is much higher"


@dataclass(frozen=True, slots=True)
class Measured:
    """One figure SGLang measures: GiB, where this one comes from."""

    gib: float
    source: str


def cuda_total_gib(profile: Profile) -> tuple[float, bool]:
    """What CUDA reports as the GPU's total (GiB), and whether the catalog says so (else decimal GB, estimated)."""
    return hardware_total_gib(HARDWARE[profile.hardware])


def hardware_total_gib(hw: Hardware) -> tuple[float, bool]:
    """:func:`cuda_total_gib` of one kind of node (what `check --engine` simulates, too)."""
    if hw.cuda_total_gib is not None:
        return hw.cuda_total_gib, True
    return hw.gpu_memory_gb * 1e9 / GIB, False


def mem_available(profile: Profile, rank: int, cuda_total: float) -> Measured:
    """The free memory SGLang's rank sees before it loads: the pin, the hardware's MemAvailable, or CUDA's."""
    pins = profile.model.pre_load_available_per_rank
    if pins is not None and rank < len(pins):
        return Measured(float(pins[rank]), f"pinned: model.pre_load_available_per_rank[{rank}]")
    hw = HARDWARE[profile.hardware]
    if hw.mem_available_gib is not None:
        return Measured(hw.mem_available_gib, f"default MemAvailable of {hw.name} before the load: "
                        f"{hw.mem_available_source}; pin model.pre_load_available_per_rank "
                        "(`verify.sh --calibrate` reads it from the boot log)")
    return Measured(cuda_total, "CUDA's free memory: the GPU's total, nothing else on it")


def tier(gpu_mb: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode graph max_bs) SGLang picks for a GPU of ``gpu_mb`` MiB when unset."""
    for below, chunk, small, large in TIERS:
        if gpu_mb < below:
            return chunk, small if tp < 4 else large
    return 16384, 512


@dataclass(frozen=True, slots=True)
class MemoryInputs:
    """What handle_gpu_memory_settings reads, as the profile writes it (None: left to SGLang)."""

    gpu_mb: float
    chunked_prefill_size: int | None
    max_running_requests: int | None
    max_total_tokens: int | None
    decode_max_bs: int | None  # --cuda-graph-max-bs-decode
    decode_bs: tuple[int, ...]  # --cuda-graph-bs-decode; empty: SGLang's list
    tp: int
    pp: int
    attn_dp: int  # attention-DP ranks (--dp-size with --enable-dp-attention), else 1
    decode_graphs: bool
    prefill_graphs: bool  # after SGLang's own turning-off (pipeline parallelism, DeepSeek-V4)
    mla: bool  # attention_arch MLA: a flat prefill graph reserve, whatever it captures
    llama2: bool  # "llama-2" in the model path: prefill graphs capped at 4096 tokens


@dataclass(frozen=True, slots=True)
class MemoryDefaults:
    """What SGLang settles from the GPU's memory: the chunk, the decode graphs' max_bs, the reserve, F."""

    chunked_prefill_size: int
    decode_max_bs: int
    reserved_mb: float
    fraction: float
    formula: str


def _prefill_sizes(max_bs: int) -> int:
    """How many token counts generate_prefill_cuda_graph_batch_sizes (cuda_graph_hook.py) captures."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_bs + 1, 512)]
    return sum(1 for size in sizes if size <= max_bs)


def _graph_reserve(m: MemoryInputs, chunk: int, decode_max_bs: int) -> float:
    """reserve_for_graph_mb: 2 MiB per decode batch size, attention DP's padding, the prefill graphs' share."""
    reserved = 2.0 * decode_max_bs if m.decode_graphs else 0.0
    if m.attn_dp > 1:
        reserved += decode_max_bs * m.attn_dp * (3 + (1.5 if decode_max_bs > 300 else 0))
    if m.prefill_graphs and m.mla:
        reserved += MLA_PREFILL_RESERVE_MB
    elif m.prefill_graphs:
        max_bs = min(chunk, m.max_total_tokens or chunk, 4096 if m.llama2 else chunk)
        reserved += 8 * _prefill_sizes(max_bs)
    return reserved


def memory_defaults(m: MemoryInputs) -> MemoryDefaults:
    """handle_gpu_memory_settings' arithmetic for a CUDA device (no PD disaggregation, DeepEP, post-capture
    sizing or VLM adjustment): the tier's chunk and max_bs, the request cap, then the reserve and F."""
    chunk, decode_max_bs = tier(m.gpu_mb, m.tp)
    chunk = m.chunked_prefill_size or chunk
    if m.decode_max_bs is not None:
        decode_max_bs = m.decode_max_bs
    elif m.max_running_requests is not None:
        decode_max_bs = min(decode_max_bs, m.max_running_requests)
    if m.decode_bs:
        decode_max_bs = max(m.decode_bs)
    graphs = _graph_reserve(m, chunk, decode_max_bs)
    # memory_hook.py's reserved_mem: constant metadata, 1.5 MiB per activation token, 1/8 GiB per TP x PP rank.
    reserved = 512 + max(chunk, 2048) * 1.5 + m.tp * m.pp / 8 * 1024 + graphs
    floor = f", at least {RESERVE_FLOOR_MB} MB" if m.gpu_mb > LARGE_DEVICE_MB else ""
    reserved = max(reserved, RESERVE_FLOOR_MB) if floor else reserved
    fraction = round((m.gpu_mb - reserved) / m.gpu_mb, 3)
    return MemoryDefaults(chunk, decode_max_bs, reserved, fraction, (
        f"({m.gpu_mb:.0f} MB - {reserved:.0f} MB reserved) / {m.gpu_mb:.0f} MB; reserved: 512 + 1.5 x "
        f"{max(chunk, 2048)} tokens + {m.tp * m.pp} x 128 MB (TP x PP) + {graphs:g} MB graphs{floor}"))


def memory_inputs(profile: Profile, config: dict[str, Any] | None) -> MemoryInputs:
    """The profile's side of handle_gpu_memory_settings (``config``: the model's text config, for MLA)."""
    eng = profile.engine
    par, graphs, limits = eng.parallel, eng.cuda_graph, eng.limits
    tp, pp = par.tp or 1, par.pp or 1
    max_bs = graphs.max_bs_decode
    pinned = limits.max_running_requests if max_bs == "max_running_requests" else max_bs
    return MemoryInputs(
        cuda_total_gib(profile)[0] * 1024, limits.chunked_prefill_size, limits.max_running_requests,
        limits.max_total_tokens, pinned if graphs.enabled else None,
        tuple(graphs.batch_sizes or ()) if graphs.enabled else (), tp, pp,
        (par.dp or 1) if par.dp_attention else 1, graphs.enabled,
        graphs.enabled and graphs.prefill and pp == 1 and profile.model.architecture != DSV4,
        isinstance((config or {}).get("kv_lora_rank"), int), "llama-2" in container_path(profile.model).lower())
