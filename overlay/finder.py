"""The one meta-path finder: runs each armed hook once, right after its target module executes.

For a watched module name it asks the other finders for the real spec and wraps that spec's loader;
after the real ``exec_module`` it calls the module's hooks in registry order. A (hook, module) pair
runs at most once per process, so ``importlib.reload`` (which re-executes the module through the
same finder) does not run it again. Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import OverlayHookError

# Found by attribute, not isinstance: the package may be loaded twice under two names
# (spark_overlay and spark_compile.overlay) and there must still be only one finder.
FINDER_MARKER = "_spark_overlay_finder"


@dataclass(frozen=True, slots=True)
class Patch:
    """One hook applied to one target module."""

    hook: str
    target: str
    apply: Callable[[ModuleType], None]


class HookedLoader(importlib.abc.Loader):
    """The real loader, plus the hooks after ``exec_module``; everything else is delegated."""

    def __init__(self, inner: Any, finder: OverlayFinder) -> None:
        self._inner = inner
        self._finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._finder.run_hooks(module, fresh=True)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_resource_reader, is_package ...: inspect and importlib.resources use them.
        if name == "_inner":  # not set yet (copy, unpickling): no endless recursion
            raise AttributeError(name)
        return getattr(self._inner, name)


class OverlayFinder(importlib.abc.MetaPathFinder):
    """Watches the target modules of the armed hooks."""

    _spark_overlay_finder = True

    def __init__(self, patches: Sequence[Patch], summary: str) -> None:
        self.patches = tuple(patches)
        self.summary = summary
        self._by_target: dict[str, list[Patch]] = {}
        for patch in self.patches:
            self._by_target.setdefault(patch.target, []).append(patch)
        self._done: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self._by_target)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._by_target:
            return None
        spec = self._real_spec(fullname, path, target)
        if spec is None or spec.loader is None or isinstance(spec.loader, HookedLoader):
            return spec
        spec.loader = HookedLoader(spec.loader, self)
        return spec

    def _real_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in list(sys.meta_path):
            if getattr(finder, FINDER_MARKER, False):
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def run_hooks(self, module: ModuleType, *, fresh: bool = False) -> None:
        """Apply the module's pending hooks in order; OverlayHookError names the one that failed.

        ``fresh`` means the module object was just executed by an import: if a hook fails the
        import machinery throws that object away, so the hooks already applied to it are re-armed
        for the next attempt instead of being counted as done on a module nobody holds.
        """
        spec = getattr(module, "__spec__", None)
        name = spec.name if spec is not None else module.__name__
        applied: list[tuple[str, str]] = []
        for patch in self._by_target.get(name, ()):
            key = (patch.hook, name)
            with self._lock:
                if key in self._done:
                    continue
                self._done.add(key)
            try:
                patch.apply(module)
            except Exception as error:
                with self._lock:
                    self._done.discard(key)
                    if fresh:
                        self._done.difference_update(applied)
                message = (
                    f"overlay: hook {patch.hook} failed on module {name}: {type(error).__name__}: {error}"
                )
                # Said on stderr too, in case a caller catches the exception and carries on.
                sys.stderr.write(message + "\n")
                raise OverlayHookError(message) from error
            applied.append(key)

    def patch_imported(self) -> None:
        """Targets imported before the finder existed are patched now, in registry order."""
        for patch in self.patches:
            module = sys.modules.get(patch.target)
            if module is not None:
                self.run_hooks(module)

    def applied(self) -> list[tuple[str, str]]:
        """The (hook, module) pairs applied so far, for tests and diagnostics."""
        with self._lock:
            return sorted(self._done)


def installed_finder() -> OverlayFinder | None:
    """The overlay finder already on sys.meta_path, from whichever copy of the package put it there."""
    for finder in sys.meta_path:
        if getattr(finder, FINDER_MARKER, False):
            return finder  # type: ignore[return-value]
    return None


def install(patches: Iterable[Patch], summary: str) -> tuple[OverlayFinder, bool]:
    """Put the finder first on sys.meta_path unless one is there; (finder, newly installed)."""
    existing = installed_finder()
    if existing is not None:
        return existing, False
    finder = OverlayFinder(list(patches), summary)
    sys.meta_path.insert(0, finder)
    return finder, True
