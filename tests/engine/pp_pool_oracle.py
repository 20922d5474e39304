"""Run in the engine venv: SGLang 0.5.23's DSV4 pool configurator on one pipeline stage's layers (JSON on stdin:
a probe job, its hardware, the available bytes and the stages as [start, end, pp rank, pp size]); prints each
stage's bytes_per_full_token and full_token as JSON (the error's text for a stage SGLang divides by zero on)."""

import contextlib
import json
import os
import sys

from engine_oracle import start

with contextlib.redirect_stdout(sys.stderr):
    resolve_probe, request = start()
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
