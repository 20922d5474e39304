"""Rules the shipped profiles never trip, each tripped by a one-line child of the reference profile and read
back through `check --format json`: the rule, severity, place (the child's line, or the inherited value's
line with the route), message and hint, whole. Every expectation was read off the rule's code in
compiler/rules/; the reference's own tag-only warning (SC312) and its KV pool's shortfall against
max_running_requests (SC442, tests/test_capacity.py) are left out of each list."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import REFERENCE_PROFILE, run_cli

REF = "dsv41-4spark.yaml"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / ".git").mkdir()
    for name in (REF, "dsv41-flash.config.json"):
        shutil.copy(REFERENCE_PROFILE.parent / name, root / name)
    return root


def _finding(rule: str, severity: str, file: str, line: int, column: int, message: str, hint: str,
             via: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"rule": rule, "severity": severity, "file": file, "line": line, "column": column, "message": message,
            "hint": hint, "via": list(via)}


def _check(repo: Path, body: str) -> tuple[int, list[dict[str, Any]]]:
    (repo / "c.yaml").write_text(f"extends: {REF}\n{body}")
    result = run_cli("check", "--format", "json", "c.yaml", cwd=repo)
    report = json.loads(result.stdout)
    return result.returncode, [f for f in report["findings"] if f["rule"] not in ("SC312", "SC442")]


CASES: list[tuple[str, int, list[dict[str, Any]]]] = [
    ("engine:\n  cuda_graph: {enabled: false}\n", 1, [
        _finding("SC206", "error", REF, 61, 31, "max_bs_decode is set but graphs are disabled",
                 "remove max_bs_decode", ("c.yaml",))]),
    ("engine:\n  cuda_graph: {max_bs_decode: 8}\n", 1, [
        _finding("SC206", "error", "c.yaml", 3, 31, "max_bs_decode 8 is below max_running_requests 16",
                 "write max_bs_decode: max_running_requests, or raise it to at least 16")]),
    ("engine:\n  limits:\n    max_running_requests: !delete\n", 1, [
        _finding("SC423", "warning", "c.yaml", 3, 3, "Engram's id batch cannot be derived: max_running_requests "
                 "unset", "set engine.limits.max_running_requests: 16 (as production runs), or pin "
                 "overlay.engram_max_ids"),
        _finding("SC206", "error", REF, 61, 31, "max_bs_decode follows max_running_requests, which is not set",
                 "set engine.limits.max_running_requests (e.g. 16), or write max_bs_decode as a number",
                 ("c.yaml",))]),
    ("container:\n  memory_swap: 64g\n", 1, [
        _finding("SC410", "error", "c.yaml", 3, 16, "memory_swap 64g is below memory 112g",
                 "set container.memory_swap: 112g (docker refuses less than memory)")]),
    ("container:\n  memory: !delete\n  memory_swap: 200g\n", 1, [
        _finding("SC410", "error", "c.yaml", 4, 16, "memory_swap is set without memory",
                 "docker needs --memory with --memory-swap")]),
    ("container:\n  memory: 16g\n  shm_size: 32g\n", 1, [
        _finding("SC410", "error", "c.yaml", 4, 13, "shm size 32g exceeds the memory limit 16g",
                 "set container.shm_size: 4g (shared memory is charged to the container's limit: a quarter of "
                 "it leaves the rest for the engine's host-side memory)")]),
    ("model:\n  served_name: 'a:b'\n", 1, [
        _finding("SC211", "error", "c.yaml", 3, 16, "served_name 'a:b' contains ':'", "remove the ':'")]),
    ("model:\n  aliases: [deepseek-v4.1-flash, 'x,y']\n", 1, [
        _finding("SC211", "error", "c.yaml", 3, 13, "alias 'deepseek-v4.1-flash' repeats a served id",
                 "aliases are distinct ids without commas"),
        _finding("SC211", "error", "c.yaml", 3, 34, "alias 'x,y' contains a comma",
                 "aliases are distinct ids without commas")]),
    ("engine:\n  env: {NCCL_DEBUG: INFO}\n", 0, [
        _finding("SC214", "warning", "c.yaml", 3, 9, "NCCL_DEBUG is an NCCL/gloo variable in engine.env",
                 "set nccl.debug instead")]),
    ("engine:\n  chat:\n    reasoning_parser: !delete\n", 0, [
        _finding("SC216", "warning", REF, 67, 15, "thinking is on by default but no reasoning_parser is set",
                 "set engine.chat.reasoning_parser (the model's own parser, e.g. deepseek-v41), or set "
                 "engine.chat.thinking: false", ("c.yaml",))]),
]


@pytest.mark.parametrize(("body", "code", "expected"), CASES, ids=[body.split("\n")[1].strip() for body, _, _ in
                                                                   CASES])
def test_a_rule_reports_its_whole_finding(repo: Path, body: str, code: int, expected: list[dict[str, Any]]) -> None:
    assert _check(repo, body) == (code, expected)


def test_the_reference_itself_trips_none_of_them(repo: Path) -> None:
    assert _check(repo, "") == (0, [])


def test_the_findings_are_the_same_bytes_on_a_second_run(repo: Path) -> None:
    body = "model:\n  aliases: [deepseek-v4.1-flash, 'x,y']\ncontainer:\n  memory: 16g\n  shm_size: 32g\n"
    (repo / "c.yaml").write_text(f"extends: {REF}\n{body}")
    runs = [run_cli("check", "c.yaml", cwd=repo) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr
    assert runs[0].returncode == 1
