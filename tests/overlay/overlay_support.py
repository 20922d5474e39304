"""Helpers of the overlay tests: overlay copies, fake target modules, fresh interpreters.

The runtime tests never import the overlay into the test process to exercise it: start-up happens in
``sitecustomize`` of a fresh interpreter, so each scenario runs one (``run_python``), with PYTHONPATH
pointing at an activation directory and at fake target modules.

``make_overlay`` copies overlay/ to ``<tmp>/spark_overlay``, the layout of the serving image (which
copies it to site-packages/spark_overlay), and can add stand-in hook modules: every start-up with the
master switch on arms an Engram hook (SPARK_ENGRAM_MODE picks one of the two; there is no "off"),
and this overlay ships no Engram implementation, so a scenario that must start adds a stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "overlay"
ACTIVATION_DIR = OVERLAY / "site"
ENGINE_PYTHON_ENV = "ENGINE_PYTHON"

# Flags that turn off the GB10-only hooks armed by default (besides Engram, which has no off switch).
GB10_DEFAULTS_OFF = {"SPARK_ENGRAM_PREFETCH": "0", "SPARK_ROCE_AG": "0", "SPARK_PREFILL_FLUSH_TOKENS": "0"}
MASTER_ON = {"SPARK_ENGRAM_DIR": "/engram-local"}
# GB10-only hooks without a flag: armed whenever the overlay is (the peer's indexer schedule, FlashMLA
# prefill pages and request guard); this overlay ships none of them, so every start-up needs stand-ins.
ALWAYS_ON_GB10 = ("indexer_schedule", "sm120_prefill_pages", "request_guard")
SILENT_HOOK = "def apply(module, flags):\n    pass\n"

# A stand-in hook: records each call in hooks/_calls.py, and what it saw of the module.
RECORDING_HOOK = """
from . import _calls

def apply(module, flags):
    _calls.CALLS.append("{hook}@" + module.__name__)
    _calls.SEEN.append(getattr(module, "EXECUTED", None))
"""
FAILING_HOOK = """
def apply(module, flags):
    raise ValueError("boom from {hook}")
"""


def make_overlay(tmp: Path, *, recording: Iterable[str] = (), failing: Iterable[str] = (),
                 stand_ins: bool = True) -> Path:
    """A copy of overlay/ at tmp/spark_overlay with stand-in hooks; returns its activation directory.
    The GB10-only hooks armed with every start (no flag turns them off) get silent stand-ins."""
    target = tmp / "spark_overlay"
    shutil.copytree(OVERLAY, target, ignore=shutil.ignore_patterns("__pycache__"))
    (target / "hooks" / "_calls.py").write_text("CALLS: list = []\nSEEN: list = []\n")
    for hook in ALWAYS_ON_GB10 if stand_ins else ():
        (target / "hooks" / f"{hook}.py").write_text(SILENT_HOOK)
    for hook in recording:
        (target / "hooks" / f"{hook}.py").write_text(RECORDING_HOOK.format(hook=hook))
    for hook in failing:
        (target / "hooks" / f"{hook}.py").write_text(FAILING_HOOK.format(hook=hook))
    return target / "site"


def make_modules(root: Path, modules: Mapping[str, str]) -> Path:
    """Write fake modules {dotted name: source} under root, with the packages they need."""
    for name, source in modules.items():
        parts = name.split(".")
        for depth in range(1, len(parts)):
            package = root.joinpath(*parts[:depth])
            package.mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").touch()
        (root.joinpath(*parts[:-1]) / f"{parts[-1]}.py").write_text(source)
    return root


def fake_target(name: str) -> str:
    """Source of a fake target module that counts its executions (across reloads)."""
    return (
        "import builtins\n"
        "runs = getattr(builtins, '_fake_runs', {})\n"
        "builtins._fake_runs = runs\n"
        f"runs[{name!r}] = runs.get({name!r}, 0) + 1\n"
        "EXECUTED = True\n"
    )


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment without any SPARK_* variable (ENGINE_PYTHON would be an unknown
    flag to the overlay), PYTHON* settings or SGLang settings, plus ``extra``."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYTHON", "SGLANG_", "SGL_"))}
    return {**keep, **(extra or {})}


def run_python(
    code: str,
    *,
    cwd: Path,
    path: Iterable[Path | str] = (),
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    timeout: float = 120,
    args: Iterable[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with PYTHONPATH = ``path`` (activation directory first).

    ``cwd`` is required: ``-c`` puts the working directory on sys.path, and it must be a folder of the
    test's own (never the repository, whose overlay/ must not be importable by accident).
    """
    full_env = clean_env(env)
    full_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    full_env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [python or sys.executable, "-s", "-c", code, *args],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_json(stdout: str) -> Any:
    """The JSON document on the last line of stdout."""
    return json.loads(stdout.strip().splitlines()[-1])


def engine_python() -> str:
    """The engine venv's interpreter; the test fails when it is missing under CI (CI set), else skips."""
    python = os.environ.get(ENGINE_PYTHON_ENV, "")
    if python and Path(python).is_file() and os.access(python, os.X_OK):
        return python
    reason = (
        f"${ENGINE_PYTHON_ENV}={python!r} is not an executable file"
        if python
        else f"${ENGINE_PYTHON_ENV} is not set"
    ) + " (make the engine venv with .ci/install-engine)"
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)
