"""gate.py against the fake OpenAI server, told to misbehave one way at a time: each gate check catches its
own fault and no other check fails (a check that failed on someone else's fault would hide the cause)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gatekit import fake_api, gate_folder, run_gate

ARITH = "What is 17 times 23? Reply with the number only."
WINDOW = {
    # Sleep-paced fake timings vary with the machine's load; a fault slows the bench fourfold.
    "bench_tolerance": 0.5, "bench_runs": 2,
    "checks": [{"name": "arith", "prompt": ARITH, "expect": "391", "pattern": None, "max_tokens": 16,
                "thinking": False}],
}
CHECKS = {"count", "needle-2000", "image", "tool-call", "thinking", "reasoning-effort", "bench", "multi-answer",
          "buried-facts", "long-prefill-stress", "operator-arith"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, Path]]:
    folder = gate_folder(tmp_path_factory.mktemp("gate"), needle_tokens=[2000], window=WINDOW)
    with fake_api(folder, {"canned": {ARITH: "391"}}) as (port, control):
        yield folder, port, control


@pytest.fixture(scope="module")
def baseline(api: tuple[Path, int, Path]) -> list[str]:
    """The clean run: every check passes; its bench figures are the baseline of the faulty runs."""
    folder, port, _ = api
    status, records, out = run_gate(folder, port)
    assert status == 0, out
    assert set(records) == CHECKS, out
    assert {r["result"] for r in records.values()} == {"PASS"}, out
    figures = records["bench"]["figures"]
    stress = records["long-prefill-stress"]["figures"]
    assert stress["long_prompts"] == 16 and stress["prompt_tokens_max"] > 40_000
    assert stress["decoder_requests"] >= 8
    assert records["buried-facts"]["figures"]["found"] == 8
    assert max(records["buried-facts"]["figures"]["prompt_tokens"]) < 48_000
    assert min(records["buried-facts"]["figures"]["prompt_tokens"]) > 3_500
    return ["--baseline-tps", str(figures["tokens_per_s"]), "--baseline-ttft", str(figures["ttft_s"]),
            "--baseline-from", "the clean run"]


@pytest.mark.parametrize(("fault", "caught_by"), [
    ({"truncate": True}, "multi-answer"),
    ({"repeat": True}, "multi-answer"),
    ({"wrong_fact": True}, "buried-facts"),
    ({"crash_long": True}, "long-prefill-stress"),
    ({"slow_bench": 4}, "bench"),
    ({"canned": {ARITH: "392"}}, "operator-arith"),
])
def test_each_check_catches_its_own_fault_and_no_other(api: tuple[Path, int, Path], baseline: list[str],
                                                       fault: dict[str, Any], caught_by: str) -> None:
    folder, port, control = api
    control.write_text(__import__("json").dumps({"canned": {ARITH: "391"}, **fault}))
    try:
        status, records, out = run_gate(folder, port, *baseline)
    finally:
        control.write_text(__import__("json").dumps({"canned": {ARITH: "391"}}))
    failed = {name for name, record in records.items() if record["result"] == "FAIL"}
    assert failed == {caught_by}, out
    assert status == 1, out
    assert set(records) == CHECKS, out


def test_bench_figures_compare_with_the_baseline(api: tuple[Path, int, Path], baseline: list[str]) -> None:
    folder, port, _ = api
    status, records, out = run_gate(folder, port, "--only", "bench", *baseline)
    assert status == 0, out
    figures = records["bench"]["figures"]
    assert figures["baseline_from"] == "the clean run" and figures["runs"] == 2
    assert "within 50% of" in records["bench"]["summary"]
