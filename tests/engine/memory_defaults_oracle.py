"""Run in the engine venv: SGLang 0.5.23's own argument resolution of every rank's argv (JSON on stdin: the
probe's jobs, its hardware and the GPU's total in MiB), get_device_memory_capacity answering that total; prints
the chunked_prefill_size, decode graph max_bs and mem_fraction_static it settles, per rank, as JSON."""

import contextlib
import json
import os
import sys
from typing import Any

from engine_oracle import start

with contextlib.redirect_stdout(sys.stderr):
    resolve_probe, request = start()
    from sglang.srt.arg_groups import memory_hook
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import prepare_server_args

    # What nvidia-smi (or CUDA, on GB10 where nvidia-smi has no total) would answer.
    memory_hook.get_device_memory_capacity = lambda device=None: request["gpu_mb"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}


def settled(job: dict[str, Any], rank: dict[str, Any]) -> dict[str, Any]:
    argv = [job["paths"].get(word, word) for word in rank["argv"]]
    os.environ.clear()
    os.environ.update(base)
    os.environ.update({k: v for k, v in rank["env"].items() if v is not None})
    with contextlib.redirect_stdout(sys.stderr):
        server_args = prepare_server_args(argv)
        server_args.resolve_once()
    graphs = resolution_result(server_args, "cuda_graph_config")
    return {"fraction": resolution_result(server_args, "mem_fraction_static"),
            "chunk": resolution_result(server_args, "chunked_prefill_size"), "decode_max_bs": graphs.decode.max_bs}


print(json.dumps([[settled(job, rank) for rank in job["ranks"]] for job in request["jobs"]]))
