"""What SGLang 0.5.23 measures before the load, and the static fraction it derives when none is written.

get_available_gpu_memory (utils/common.py) returns psutil's MemAvailable on an integrated device such as
GB10 and CUDA's free memory elsewhere; with several ranks each takes the minimum over all of them. An unset
--mem-fraction-static comes from handle_gpu_memory_settings (arg_groups/memory_hook.py): the device's total
less a reserve for activations and CUDA graphs, at least 10 GiB on a device above 60 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_compile.spec.hardware import HARDWARE
from spark_compile.spec.model import Profile

RESERVE_FLOOR_MB = 10 * 1024  # the floor on devices above 60 GiB
LARGE_DEVICE_MB = 60 * 1024


@dataclass(frozen=True, slots=True)
class Measured:
    """One figure SGLang measures: GiB, where this one comes from."""

    gib: float
    source: str


def mem_available(profile: Profile, rank: int, cuda_total_gib: float) -> Measured:
    """The free memory SGLang's rank sees before it loads: the pin, the hardware's MemAvailable, or CUDA's."""
    pins = profile.model.pre_load_available_per_rank
    if pins is not None and rank < len(pins):
        return Measured(float(pins[rank]), f"pinned: model.pre_load_available_per_rank[{rank}]")
    hw = HARDWARE[profile.hardware]
    if hw.mem_available_gib is not None:
        return Measured(hw.mem_available_gib, f"default MemAvailable of {hw.name} before the load: "
                        f"{hw.mem_available_source}; pin model.pre_load_available_per_rank "
                        "(`verify.sh --calibrate` reads it from the boot log)")
    return Measured(cuda_total_gib, "CUDA's free memory: the GPU's total, nothing else on it")


def derived_fraction(profile: Profile, cuda_total_gib: float, chunk: int | None,
                     graph_max_bs: int | None) -> tuple[float, str]:
    """mem_fraction_static as SGLang derives it when unset, and the formula (graph reserve: 2 MB per decode
    batch size, SGLang's own estimate; the prefill graphs' term is left out)."""
    parallel = profile.engine.parallel
    gpu_mb = cuda_total_gib * 1024
    tokens = max(chunk or 2048, 2048)
    reserved = 512 + tokens * 1.5 + (parallel.tp or 1) * (parallel.pp or 1) / 8 * 1024 + 2 * (graph_max_bs or 0)
    if gpu_mb > LARGE_DEVICE_MB:
        reserved = max(reserved, RESERVE_FLOOR_MB)
    fraction = round((gpu_mb - reserved) / gpu_mb, 3)
    return fraction, f"derived as SGLang does: ({gpu_mb:.0f} MB - {reserved:.0f} MB reserved) / {gpu_mb:.0f} MB"
