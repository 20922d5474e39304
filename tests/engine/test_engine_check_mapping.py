"""How `check --engine` turns the probe's report into findings, with a stand-in engine interpreter.

The stand-in prints a fixed report (the real probe's format), so these run without the engine venv and pin
what the real runs (test_engine_check.py) cannot steer: a rewrite on some ranks only, a step that could not
run, a probe that crashes, and the request the probe is given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS, ROOT, run_cli


def stand_in(tmp_path: Path, ranks: list[dict[str, Any]], exit_code: int = 0) -> str:
    """An executable that records its stdin and prints a probe report for every job it is given."""
    report = {"sglang": "0.5.23", "standins": ["sgl_kernel"], "ranks": ranks}
    script = tmp_path / "engine-python"
    script.write_text(f"""#!/usr/bin/env python3
import json, sys
request = json.load(sys.stdin)
open({str(tmp_path / "request.json")!r}, "w").write(json.dumps(request))
report = json.loads({json.dumps(json.dumps(report))})
print(json.dumps({{"sglang": report["sglang"], "standins": report["standins"],
                  "jobs": [report["ranks"] for _ in request["jobs"]]}}))
sys.exit({exit_code})
""")
    script.chmod(0o755)
    return str(script)


def rank(number: int, written: dict[str, Any] | None = None, outcome: str = "ok", stage: str | None = None,
         error: str | None = None) -> dict[str, Any]:
    return {"rank": number, "outcome": outcome, "stage": stage, "error": error, "warnings": [],
            "written": written or {}, "resolved": outcome == "ok"}


def check(tmp_path: Path, python: str, profile: Path = REFERENCE_PROFILE) -> tuple[int, list[dict[str, Any]], str]:
    result = run_cli("check", "--engine", "--engine-python", python, "--format", "json",
                     os.path.relpath(profile, ROOT))
    # The reference's own warnings (compile-time, not the probe's) are left out: these tests pin the probe's.
    findings = [f for f in json.loads(result.stdout)["findings"] if f["rule"] not in REFERENCE_WARNINGS]
    return result.returncode, findings, result.stderr


def test_a_rewrite_on_some_ranks_names_them_and_its_line(tmp_path: Path) -> None:
    written = {"chunked_prefill_size": {"option": "--chunked-prefill-size", "value": 2048, "resolved": 1024,
                                        "sources": ["_handle_gpu_memory_settings"]}}
    unchanged = {"chunked_prefill_size": {**written["chunked_prefill_size"], "resolved": 2048}}
    python = stand_in(tmp_path, [rank(0, unchanged), rank(1, written), rank(2, written), rank(3, unchanged)])
    status, findings, stderr = check(tmp_path, python)
    assert status == 1
    [finding] = findings
    assert (finding["rule"], finding["line"]) == ("SC601", 74)  # chunked_prefill_size in the reference
    assert finding["message"] == ("sglang-0.5.23 resolves --chunked-prefill-size 2048 to 1024 "
                                  "(_handle_gpu_memory_settings) on ranks 1, 2")
    assert "import-only stand-ins: sgl_kernel" in stderr


def test_the_probe_gets_every_rank_with_paths_and_hardware(tmp_path: Path) -> None:
    python = stand_in(tmp_path, [rank(n) for n in range(4)])
    assert check(tmp_path, python)[:2] == (0, [])
    request = json.loads((tmp_path / "request.json").read_text())
    assert request["hardware"] == {"name": "dgx-spark-gb10", "capability": [12, 1], "gpus": 1, "memory_gib": 121.7,
                                   "gpu_name": "NVIDIA GB10", "unified": True, "machine": "aarch64"}
    [job] = request["jobs"]
    assert [r["rank"] for r in job["ranks"]] == [0, 1, 2, 3]
    [(container, local)] = job["paths"].items()
    assert container == "/models/repo/snapshots/0f3c9a1d5e7b2468ace13579bdf02468ace13579"
    assert job["ranks"][2]["argv"][job["ranks"][2]["argv"].index("--node-rank") + 1] == "2"
    assert job["ranks"][0]["env"]["HOST_IP"] == "192.0.2.11" and job["ranks"][0]["env"]["NCCL_IB_GID_INDEX"] is None
    assert local.endswith("/0") and not Path(local).exists()  # a temporary copy, gone after the run


def test_a_step_that_could_not_run_is_said(tmp_path: Path) -> None:
    failed = rank(0, outcome="not_run", stage="resolve", error="ModuleNotFoundError: No module named 'x'")
    python = stand_in(tmp_path, [failed, *(rank(n) for n in range(1, 4))])
    status, findings, _ = check(tmp_path, python)
    assert status == 0
    assert [(f["rule"], f["severity"], f["message"]) for f in findings] == [
        ("SC603", "warning", "SGLang's resolve step could not run here on rank 0: "
                             "ModuleNotFoundError: No module named 'x'")]


def test_a_crashing_probe_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    status, findings, stderr = check(tmp_path, stand_in(tmp_path, [], exit_code=7))
    assert status == 0 and "Traceback" not in stderr
    assert [f["rule"] for f in findings] == ["SC603"]
    assert "the resolution probe failed (exit 7)" in findings[0]["message"]


def test_no_interpreter_is_a_finding(tmp_path: Path) -> None:
    status, findings, _ = check(tmp_path, str(tmp_path / "no-such-python"))
    assert status == 0
    assert [f["rule"] for f in findings] == ["SC603"] and "cannot be run" in findings[0]["message"]
