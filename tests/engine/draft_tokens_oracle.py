"""Run in the engine venv: SGLang 0.5.23's own argument resolution of every job's first rank (JSON on stdin: the
probe's jobs and its hardware); prints the speculative draft tokens, steps and top-k it settles, as JSON. A
refusal after the speculative hook still reports what that hook declared, with the refusal."""

import contextlib
import json
import os
import sys
from typing import Any

from engine_oracle import start

with contextlib.redirect_stdout(sys.stderr):
    resolve_probe, request = start()
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import prepare_server_args

    base = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}
FIELDS = {"tokens": "speculative_num_draft_tokens", "steps": "speculative_num_steps",
          "topk": "speculative_eagle_topk"}


def settled(job: dict[str, Any]) -> dict[str, Any]:
    rank = job["ranks"][0]
    argv = [job["paths"].get(word, word) for word in rank["argv"]]
    os.environ.clear()
    os.environ.update(base)
    os.environ.update({k: v for k, v in rank["env"].items() if v is not None})
    refused = None
    with contextlib.redirect_stdout(sys.stderr):
        server_args = prepare_server_args(argv)
        try:
            server_args.resolve_once()
        except (ValueError, AssertionError, NotImplementedError) as exc:
            refused = f"{type(exc).__name__}: {exc}"
    return {**{key: resolution_result(server_args, field) for key, field in FIELDS.items()}, "refused": refused}


print(json.dumps([settled(job) for job in request["jobs"]]))
