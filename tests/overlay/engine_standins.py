"""Import-only stand-in for torchvision, for the engine tests' interpreter (never the serving image).

``import sglang.srt.entrypoints.http_server`` reaches ``sglang.srt.configs``, which imports every
model config, some of which do ``import torchvision.transforms`` at module level. PyPI's torchvision
does not load beside the CPU torch 2.13.0 wheel of this machine ("operator torchvision::nms does not
exist"), and the overlay's hooks never touch an image transform, so a module that answers attribute
lookups with inert placeholder classes is enough. ``install()`` adds it only if none is installed.
It carries a version because transformers reads one from any torchvision it can find.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

NAME = "torchvision"


class _Meta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name)

    def __getitem__(cls, item: Any) -> Any:
        return cls


class _Placeholder(metaclass=_Meta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name)


def _placeholder(name: str) -> type:
    return _Meta(name, (_Placeholder,), {})


class _StandInModule(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] != NAME:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.28.0+stand-in"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: ModuleType) -> None:
        return None


def install() -> bool:
    """Put the stand-in last on sys.meta_path unless a torchvision is installed; True if it was put."""
    if importlib.util.find_spec(NAME) is not None:
        return False
    sys.meta_path.append(_Finder())
    return True
