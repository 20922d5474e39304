"""The engine check's probe: resolve_probe.py in the engine venv's interpreter, fed jobs as JSON.

A large batch is split over the machine's cores, one probe process per part, all running at once: SGLang
resolves one job at a time, and the differential corpus (some 700 profiles) took two minutes in one process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any

from spark_compile.engine.report import shape_problem
from spark_compile.stages.load import YamlPath

PROBE = Path(__file__).resolve().with_name("resolve_probe.py")
PROBE_TIMEOUT_S = 900.0
JOBS_PER_PROCESS = 64  # below this a second process's start-up (importing SGLang) costs more than it saves


class NotRunError(Exception):
    """The engine check could not run for this profile; the message says why, ``path`` what to change."""

    def __init__(self, message: str, path: YamlPath = ("engine", "catalog")) -> None:
        super().__init__(message)
        self.path = path


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "PYTHON"))}


Started = tuple[subprocess.Popen[bytes], IO[str], IO[str]]


def _start(python: str, request: dict[str, Any], stack: contextlib.ExitStack) -> Started:
    # The request goes in through a file and the answers come out through files, not pipes: every process
    # starts at once, and none waits on a full pipe while another is being read.
    out = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))  # noqa: SIM115 - the stack closes it
    err = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))  # noqa: SIM115 - the stack closes it
    with tempfile.TemporaryFile("w+", encoding="utf-8") as feed:
        json.dump(request, feed)
        feed.seek(0)
        try:
            proc = subprocess.Popen([python, "-I", str(PROBE)], stdin=feed, stdout=out, stderr=err,
                                    env=_environment())
        except (FileNotFoundError, PermissionError):
            raise NotRunError(f"engine interpreter {python} cannot be run (make one with .ci/install-engine)") from None
    stack.callback(_stop, proc)
    return proc, out, err


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _answer(proc: subprocess.Popen[bytes], out: IO[str], err: IO[str], request: dict[str, Any]) -> dict[str, Any]:
    try:
        proc.wait(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise NotRunError(f"SGLang's resolution did not finish within {PROBE_TIMEOUT_S:.0f} s") from None
    out.seek(0)
    err.seek(0)
    if proc.returncode != 0:
        lines = [line.strip() for line in err.read().splitlines() if line.strip()]
        last = lines[-1] if lines else "no output"
        raise NotRunError(f"the resolution probe failed (exit {proc.returncode}): {last}")
    try:
        result = json.loads(out.read())
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotRunError(f"the resolution probe printed invalid JSON: {str(exc)[:200]}") from None
    problem = shape_problem(result, request)
    if problem:
        raise NotRunError(f"the resolution probe printed JSON of another shape than it answers with: {problem}")
    return result  # type: ignore[no-any-return]


def run_probe_jobs(python: str, hardware: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The probe's JSON result for ``jobs`` on ``hardware``, from one process per part of the batch (at most
    one per core), merged back in order; NotRunError with the reason when any part failed."""
    parts = max(1, min(os.cpu_count() or 1, len(jobs) // JOBS_PER_PROCESS))
    size = -(-len(jobs) // parts)
    requests = [{"hardware": hardware, "jobs": jobs[start:start + size]} for start in range(0, len(jobs), size)]
    with contextlib.ExitStack() as stack:
        running = [_start(python, request, stack) for request in requests]
        results = [_answer(*started, request) for started, request in zip(running, requests, strict=True)]
    merged = dict(results[0])
    merged["jobs"] = [ranks for result in results for ranks in result["jobs"]]
    return merged
