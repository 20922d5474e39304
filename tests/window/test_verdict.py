"""verdict.py on its own: memory peaks from the window's samples, the verdict's JSON and Markdown from the
gate's output, and the bench baseline the next window takes (the newest verdict whose bench passed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gatekit import REFERENCE_FLEET_JSON, STATIC, gate_folder, import_gate

VERDICT = STATIC / "verdict.py"
NODES = "spark-0 spark-1"


def verdict_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(VERDICT), *args], capture_output=True, text=True, check=False)


def gate_line(name: str, result: str, summary: str, **figures: Any) -> str:
    return "GATE-RESULT " + json.dumps({"name": name, "result": result, "summary": summary, "figures": figures})


def write(tmp_path: Path, gate: list[str], memory: str, result: str, stopped: int) -> dict[str, Any]:
    (tmp_path / "gate").write_text("PASS count: ok\n" + "\n".join(gate) + "\n")
    (tmp_path / "memory").write_text(memory)
    candidate = str(REFERENCE_FLEET_JSON.parents[1])
    proc = verdict_cli("write", "--dir", str(tmp_path / "verdicts"), "--candidate", candidate,
                       "--gate", str(tmp_path / "gate"), "--memory", str(tmp_path / "memory"), "--nodes", NODES,
                       "--started", "1790000000", "--stopped", str(stopped), "--result", result,
                       "--reason", "test", "--restored", "1")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads((tmp_path / "verdicts" / "dsv41-4spark.verdict.json").read_text())
    return data


def test_verdict_records_checks_memory_peaks_and_times(tmp_path: Path) -> None:
    memory = ("1790000001 0 90 29\n1790000001 1 80 39\n1790000016 0 101 18\n1790000016 1 unreachable\n"
              "1790000031 0 95 24\n")
    gate = [gate_line("bench", "PASS", "fine", tokens_per_s=31.2, ttft_s=0.43),
            gate_line("buried-facts", "FAIL", "7/8 facts found; wanted 'teal'", found=7)]
    data = write(tmp_path, gate, memory, "FAIL", 1790000600)
    assert data["failed"] == ["buried-facts"] and data["result"] == "FAIL"
    assert data["why"] == ["buried-facts: 7/8 facts found; wanted 'teal'"]
    manifest = json.loads((REFERENCE_FLEET_JSON.parents[1] / "MANIFEST.json").read_text())
    assert data["release"] == "production-1.7.1"
    assert data["profile_sha256"] == manifest["sources"][0]["sha256"] and len(data["profile_sha256"]) == 64
    assert data["profile_sources"][0]["path"] == "../spec/profiles/dsv41-4spark.yaml"
    assert data["started"] == "2026-09-21T14:13:20Z" and data["seconds"] == 600
    assert data["memory"]["nodes"] == {
        "spark-0": {"samples": 3, "unreachable": 0, "peak_used_gib": 101, "least_available_gib": 18},
        "spark-1": {"samples": 1, "unreachable": 1, "peak_used_gib": 80, "least_available_gib": 39},
    }
    assert data["bench"] == {"tokens_per_s": 31.2, "ttft_s": 0.43}
    markdown = (tmp_path / "verdicts" / "dsv41-4spark.verdict.md").read_text()
    assert "| buried-facts | FAIL | 7/8 facts found; wanted 'teal' |" in markdown
    assert "- FAIL buried-facts: 7/8 facts found; wanted 'teal'\n" in markdown
    assert "| spark-1 | 80 | 39 | 1 (1 unreachable) |" in markdown


def test_the_baseline_is_the_newest_verdict_whose_bench_passed(tmp_path: Path) -> None:
    assert verdict_cli("baseline", str(tmp_path)).stdout == ""
    write(tmp_path, [gate_line("bench", "PASS", "fine", tokens_per_s=30.0, ttft_s=0.5)], "", "PASS", 1790000600)
    older = tmp_path / "verdicts" / "dsv41-4spark.verdict.json"
    older.rename(older.with_name("production-1.7.verdict.json"))
    write(tmp_path, [gate_line("bench", "FAIL", "slow", tokens_per_s=10.0, ttft_s=2.0)], "", "FAIL", 1790009999)
    out = verdict_cli("baseline", str(tmp_path / "verdicts")).stdout.splitlines()
    assert out == ["--baseline-tps=30.0", "--baseline-ttft=0.5", "--baseline-from=dsv41-4spark@2026-09-21T14:23:20Z"]


# How window.sh hands the baseline to gate.py: one word per line of verdict.py's output, never split further.
WINDOW_READS = 'mapfile -t baseline < <(python3 "$1" baseline "$2"); printf "%s\\0" "${baseline[@]}"'
HOSTILE_VERDICTS = [
    {"profile": "p --host evil.example --port 9 --only count", "stopped": "2099-01-01T00:00:00Z",
     "bench": {"tokens_per_s": 30.0, "ttft_s": 0.5}},
    {"profile": "q", "stopped": "2099-01-02T00:00:00Z", "bench": {"tokens_per_s": "1 --host evil.example",
                                                                 "ttft_s": 0.5}},
    {"profile": "r\n--host\nevil.example", "stopped": "2098-01-01T00:00:00Z",
     "bench": {"tokens_per_s": 1e400, "ttft_s": True}},
]


def _window_words(folder: Path) -> list[str]:
    proc = subprocess.run(["bash", "-c", WINDOW_READS, "window", str(VERDICT), str(folder)], capture_output=True,
                          check=True)
    return [word.decode() for word in proc.stdout.split(b"\0") if word]


def test_item01_verdict_cannot_inject_gate_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    for index, verdict in enumerate(HOSTILE_VERDICTS):
        (verdicts / f"v{index}.verdict.json").write_text(json.dumps(verdict))
    words = _window_words(verdicts)
    # The newest verdict with sane figures wins (the second has text for a number, the third none finite);
    # its hostile profile name stays inside the one --baseline-from word.
    assert words == ["--baseline-tps=30.0", "--baseline-ttft=0.5",
                     "--baseline-from=p --host evil.example --port 9 --only count@2099-01-01T00:00:00Z"]
    # gate.py's own parser, on those words: the API host and port stay the fleet's, every check runs.
    gate, _ = import_gate(gate_folder(tmp_path / "gate"))
    seen: dict[str, object] = {}

    def record(api: object, baseline: object) -> dict[str, object]:
        seen.update(api=api, baseline=baseline)
        return {}

    monkeypatch.setattr(gate, "gate_checks", record)
    monkeypatch.setenv("SPARK_ON_HEAD", "1")
    assert gate.main(words) == 0
    api = seen["api"]
    assert api.url == f"http://{gate.CONFIG['host']}:{gate.CONFIG['port']}/v1/chat/completions"  # type: ignore[attr-defined]
    assert seen["baseline"] == {"tokens_per_s": 30.0, "ttft_s": 0.5,
                                "from": "p --host evil.example --port 9 --only count@2099-01-01T00:00:00Z"}


def test_item01_a_verdict_with_no_sane_figures_gives_no_baseline(tmp_path: Path) -> None:
    (tmp_path / "x.verdict.json").write_text(json.dumps(HOSTILE_VERDICTS[2]))
    (tmp_path / "y.verdict.json").write_text("[" * 100_000)
    assert _window_words(tmp_path) == []


def test_a_400_digit_number_in_a_verdict_leaves_the_bench_gate_its_baseline(tmp_path: Path) -> None:
    # float() of it raised OverflowError: verdict.py crashed, printed no baseline, and the bench gate was off.
    sane = {"profile": "p", "stopped": "2099-01-01T00:00:00Z", "bench": {"tokens_per_s": 30.0, "ttft_s": 0.5}}
    huge = {"profile": "q", "stopped": "2099-01-02T00:00:00Z", "bench": {"tokens_per_s": 30.0, "ttft_s": 0.5}}
    (tmp_path / "p.verdict.json").write_text(json.dumps(sane))
    (tmp_path / "q.verdict.json").write_text(json.dumps(huge).replace("30.0", "9" * 400))
    proc = verdict_cli("baseline", str(tmp_path))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == ["--baseline-tps=30.0", "--baseline-ttft=0.5",
                                        "--baseline-from=p@2099-01-01T00:00:00Z"]
