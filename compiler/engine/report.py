"""The shape of the resolution probe's answer (resolve_probe.py), checked before `check --engine` reads it:
a probe from another build, or one that crashed half-way, is said, never half-read."""

from __future__ import annotations

from typing import Any


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not _is(entry.get("option"), str) or "value" not in entry:
        return "a written flag is not an object with 'option' and 'value'"
    sources = entry.get("sources", [])
    if not isinstance(sources, list) or not all(_is(x, str) for x in sources):
        return "a flag's 'sources' is not a list of text"
    return None


def _rank_problem(rank: Any, numbers: set[int]) -> str | None:
    if not isinstance(rank, dict) or not _is(rank.get("rank"), int) or rank["rank"] not in numbers:
        return "a rank is not an object with one of the request's rank numbers"
    texts = all(rank.get(k) is None or _is(rank[k], str) for k in ("stage", "error"))
    if not _is(rank.get("outcome"), str) or not texts:
        return "a rank's outcome, stage or error is not text"
    if not isinstance(rank.get("written"), dict):
        return "a rank's 'written' is not an object"
    return next(filter(None, map(_entry_problem, rank["written"].values())), None)


def shape_problem(result: Any, request: dict[str, Any]) -> str | None:
    """What in the probe's answer differs from the shape the compiler reads (None when it has that shape)."""
    if not isinstance(result, dict) or not _is(result.get("sglang"), str):
        return "not an object with the sglang version"
    standins = result.get("standins", [])
    if not isinstance(standins, list) or not all(_is(x, str) for x in standins):
        return "'standins' is not a list of text"
    jobs = result.get("jobs")
    if not isinstance(jobs, list) or len(jobs) != len(request["jobs"]):
        return f"'jobs' is not a list of {len(request['jobs'])} answers"
    for job, asked in zip(jobs, request["jobs"], strict=True):
        numbers = {r["rank"] for r in asked["ranks"]}
        if not isinstance(job, list) or len(job) != len(numbers):
            return "a job's answer is not a list with one entry per rank"
        problem = next(filter(None, (_rank_problem(rank, numbers) for rank in job)), None)
        if problem:
            return problem
    return None
