"""page_cache_release (SPARK_PAGE_CACHE_RELEASE): drop the checkpoint from the page cache once loaded.

Target sglang.srt.model_executor.model_runner. On a GB10 the page cache and the GPU draw on the same
memory: the checkpoint's files, read once to load the weights, would otherwise sit in the page cache
that the KV pool is sized from. Patches ``ModelRunner.load_model`` (when it returns with the weights
in place) and ``ModelRunner.finalize_startup_weight_load`` (the overlapped load's real end; SGLang
leaves ``startup_weight_load`` set until then) to call ``os.posix_fadvise(POSIX_FADV_DONTNEED)`` on
every weight file under ``model_config.model_path``. Releasing is an optimisation: a file it cannot
release is reported and skipped, never fatal.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from . import mark

HOOK = "page_cache_release"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def weight_files(root: str) -> list[str]:
    """The checkpoint's weight files under ``root`` (symlinks followed: HF snapshots link to blobs)."""
    found = []
    for directory, _, names in os.walk(root, followlinks=True):
        found += [os.path.join(directory, name) for name in sorted(names) if name.endswith(WEIGHT_SUFFIXES)]
    return sorted(found)


def release(root: str) -> tuple[int, int, list[str]]:
    """Advise the kernel to drop ``root``'s weight files: (files released, their bytes, failures)."""
    released, size, failures = 0, 0, []
    for path in weight_files(root):
        try:
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
                size += os.fstat(descriptor).st_size
            finally:
                os.close(descriptor)
        except OSError as error:
            failures.append(f"{path}: {error}")
            continue
        released += 1
    return released, size, failures


def _release_for(runner: Any) -> None:
    root = getattr(getattr(runner, "model_config", None), "model_path", None)
    if not isinstance(root, str) or not os.path.isdir(root):
        sys.stderr.write(
            f"overlay: page_cache_release: {root!r} is not a local directory; nothing released\n"
        )
        return
    released, size, failures = release(root)
    failed = f"; {len(failures)} failed: {'; '.join(failures[:3])}" if failures else ""
    sys.stderr.write(
        f"overlay: page_cache_release: dropped {released} weight files ({size / 2**30:.1f} GiB) of {root} "
        f"from the page cache{failed}\n"
    )


def _after(original: Callable[..., Any], loaded: Callable[[Any], bool]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if loaded(self):
            _release_for(self)
        return result

    return mark(wrapper, HOOK)


def apply(module: ModuleType, flags: Mapping[str, object]) -> None:
    cls = module.ModelRunner
    # With an overlapped start-up load, load_model returns with placeholder weights and
    # startup_weight_load set; the files are still being read until finalize_startup_weight_load.
    cls.load_model = _after(
        cls.load_model, lambda runner: getattr(runner, "startup_weight_load", None) is None
    )
    if hasattr(cls, "finalize_startup_weight_load"):
        cls.finalize_startup_weight_load = _after(cls.finalize_startup_weight_load, lambda runner: True)
