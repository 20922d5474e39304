"""Run in the engine venv: SGLang 0.5.23's DSV4 pool configurator on one pipeline stage's layers (JSON on stdin:
a probe job, its hardware, the available bytes and the stages as [start, end, pp rank, pp size]); prints each
stage's bytes_per_full_token and full_token as JSON (the error's text for a stage SGLang divides by zero on)."""

import contextlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

_PROBE = Path(__file__).resolve().parents[2] / "compiler" / "engine" / "resolve_probe.py"
_SPEC = importlib.util.spec_from_file_location("resolve_probe", _PROBE)
assert _SPEC is not None and _SPEC.loader is not None
resolve_probe: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(resolve_probe)
request = json.load(sys.stdin)

with contextlib.redirect_stdout(sys.stderr):
    resolve_probe.install_standins()
    resolve_probe.simulate(request["hardware"])
    from sglang.srt.server_args import prepare_server_args

    job = request["job"]
    rank = job["ranks"][0]
    os.environ.update({k: v for k, v in rank["env"].items() if v is not None})
    server_args = prepare_server_args([job["paths"].get(word, word) for word in rank["argv"]])
    server_args.resolve_once()
    pools = []
    for stage in request["stages"]:
        try:
            pool = resolve_probe.pool_sizes(server_args, request["available_bytes"], tuple(stage))
            pools.append([pool["bytes_per_full_token"], pool["full_token"]])
        except ZeroDivisionError as exc:
            pools.append([0.0, str(exc)])
print(json.dumps(pools))
