"""kernel_load_guard (SPARK_KERNEL_LOAD_RETRIES): retry a kernel load the driver refused.

Target triton.compiler.compiler. Patches ``CompiledKernel._init_handles``, the method that loads a
compiled kernel's binary into the device (``driver.active.utils.load_binary``) the first time the
kernel is launched. The CUDA driver refuses a module load while another stream of the process is
capturing a CUDA graph ("operation not permitted when stream is capturing"); the capture ends a
moment later, so the load is waited for and retried, with doubling delays, at most
SPARK_KERNEL_LOAD_RETRIES times; then the last error is raised as is, the kernel left unloaded so
that its next launch tries again. Any other error passes through untouched on the first attempt.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from . import mark

HOOK = "kernel_load_guard"
REFUSAL = "operation not permitted"
# Module attributes, read at each retry, so a test can shorten them.
BASE_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 4.0

log = logging.getLogger(__name__)


def is_refusal(error: BaseException) -> bool:
    """A load the driver refused for now (RuntimeError from triton's driver, EPERM from the OS)."""
    return isinstance(error, (RuntimeError, OSError)) and REFUSAL in str(error).lower()


def delay(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based)."""
    return float(min(BASE_DELAY_SECONDS * 2 ** (attempt - 1), MAX_DELAY_SECONDS))


def _forget_launcher(kernel: Any) -> None:
    """After the last refusal, leave the kernel as if never loaded.

    triton 3.x sets the launcher (``_run``) before loading the binary and its ``run`` property only
    loads while ``_run`` is None: a failed load would leave a launcher with no kernel behind it, and
    the next launch would not try again.
    """
    if getattr(kernel, "module", None) is None and getattr(kernel, "_run", None) is not None:
        kernel._run = None


def apply(module: ModuleType, flags: Mapping[str, object]) -> None:
    retries = flags["SPARK_KERNEL_LOAD_RETRIES"]
    if not isinstance(retries, int) or retries <= 0:
        return
    cls = module.CompiledKernel
    original = cls._init_handles

    @functools.wraps(original)
    def _init_handles(self: Any) -> Any:
        attempt = 0
        while True:
            try:
                return original(self)
            except (RuntimeError, OSError) as error:
                if not is_refusal(error):
                    raise
                if attempt >= retries:
                    _forget_launcher(self)
                    raise
                attempt += 1
                wait = delay(attempt)
                log.warning(
                    "overlay: kernel %s load refused (%s); retry %d/%d in %.2f s",
                    getattr(self, "name", "?"),
                    error,
                    attempt,
                    retries,
                    wait,
                )
                time.sleep(wait)

    cls._init_handles = mark(_init_handles, HOOK)
