"""The start every oracle script run in the engine venv shares: the compiler's probe loaded by path (the engine
venv does not install spark_compile), its stand-ins for the CUDA-only imports installed and the request's
device simulated."""

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

_PROBE = Path(__file__).resolve().parents[2] / "compiler" / "engine" / "resolve_probe.py"


def start() -> tuple[Any, dict[str, Any]]:
    """The probe module and the JSON request read from stdin, with the stand-ins in place and the request's
    hardware simulated (call it with stdout redirected: the oracle's own JSON is its only output)."""
    spec = importlib.util.spec_from_file_location("resolve_probe", _PROBE)
    assert spec is not None and spec.loader is not None
    probe: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    request: dict[str, Any] = json.load(sys.stdin)
    probe.install_standins()
    probe.simulate(request["hardware"])
    return probe, request
