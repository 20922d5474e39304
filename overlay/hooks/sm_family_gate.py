"""sm_family_gate (no flag; armed with the overlay): SM 12.x where SGLang asks for exactly SM 12.0.

GB10 (DGX Spark) is SM 12.1, the same family as the RTX Blackwell SM 12.0 that SGLang's SM120 paths
were written for. Most of SGLang 0.5.23 already tests the major version (``is_sm120_supported``,
``get_platform().is_sm120``); two checks in srt/ test for exactly 12.0 and send a GB10 down the
other branch. Targets and patches:
- sglang.srt.utils.common: ``is_sm120`` (``get_device_capability() == (12, 0)``) becomes
  ``major == 12``. Patched right after the module executes, before anything has imported the name,
  so ``from sglang.srt.utils import is_sm120`` everywhere gets this one.
- sglang.srt.model_loader.utils: ``should_deepgemm_weight_requant_ue8m0`` keeps dense block-FP8
  weights in CUTLASS's FP32 scales only when ``get_device_sm() == 120``; the module's own
  ``get_device_sm`` (used nowhere else in it) reports any 12.x as 120.
Checks under sglang.kernels that pick kernels compiled for sm_120a only (the NVFP4 MoE and KDA
registrations) are deliberately left alone: they need binaries a GB10 may not have.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from . import mark

HOOK = "sm_family_gate"
COMMON = "sglang.srt.utils.common"
MODEL_LOADER_UTILS = "sglang.srt.model_loader.utils"


def _widen_is_sm120(common: Any) -> None:
    torch: Any = common.torch

    # Cached like the stock probe: the device does not change under a running process.
    @functools.lru_cache(maxsize=1)
    def is_sm120() -> bool:
        if not common.is_cuda():
            return False
        major, _minor = torch.cuda.get_device_capability()
        return bool(major == 12)

    common.is_sm120 = mark(is_sm120, HOOK)


def _widen_device_sm(loader_utils: Any) -> None:
    stock: Callable[[], int] = loader_utils.get_device_sm

    @functools.wraps(stock)
    def get_device_sm() -> int:
        sm = int(stock())
        return 120 if 120 <= sm < 130 else sm

    loader_utils.get_device_sm = mark(get_device_sm, HOOK)


def apply(module: ModuleType, flags: Mapping[str, object]) -> None:
    if module.__name__ == COMMON:
        _widen_is_sm120(module)
    elif module.__name__ == MODEL_LOADER_UTILS:
        _widen_device_sm(module)
    else:
        raise LookupError(f"{HOOK} has no patch for {module.__name__}")
