"""Activation file of the spark overlay: put this directory on PYTHONPATH and every Python process
of the container runs it at start-up.

It does nothing at all unless SPARK_ENGRAM_DIR is set and non-empty (the overlay's master switch).
Then it loads the overlay package from the directory above this one (under the name spark_overlay,
whatever that directory is called) and arms the hooks, or ends the process naming what it refuses.
Either way it then runs the sitecustomize this file shadows, if there is one further down sys.path.
Standard library only.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys


def _overlay_package() -> object:
    # Loaded by path so that the sitecustomize always arms its own copy of the overlay, even when
    # another spark_overlay (or spark_compile.overlay) is importable from site-packages.
    name = "spark_overlay"
    if name in sys.modules:
        return sys.modules[name]
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(package_dir, "__init__.py"), submodule_search_locations=[package_dir]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"overlay: cannot load the overlay package from {package_dir}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


def _activate() -> None:
    if not os.environ.get("SPARK_ENGRAM_DIR", ""):
        return
    _overlay_package()
    importlib.import_module("spark_overlay.bootstrap").start()


def _run_shadowed() -> None:
    """Run the next sitecustomize on sys.path: the image's own must keep working under the overlay."""
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    rest = [entry for entry in sys.path if os.path.realpath(entry or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_spark_overlay_shadowed_sitecustomize"] = module
    spec.loader.exec_module(module)


_activate()
_run_shadowed()
