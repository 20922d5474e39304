"""Each gate check's scoring on recorded answers (recorded_answers.json), without a server; the smoke
checks the gate reuses are scored through a stand-in API that replays recorded chat answers."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from gatekit import gate_folder, import_gate

RECORDED = json.loads((Path(__file__).with_name("recorded_answers.json")).read_text())


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    return import_gate(gate_folder(tmp_path_factory.mktemp("gate")))


@pytest.fixture(scope="module")
def scoring(modules: tuple[ModuleType, ModuleType]) -> ModuleType:
    gate, _ = modules
    return gate.scoring  # type: ignore[no-any-return]


def replies(scoring: ModuleType, texts: list[str]) -> list[Any]:
    return [scoring.Reply(content=text) for text in texts]


def test_multi_answer_passes_sound_answers(scoring: ModuleType) -> None:
    outcome = scoring.score_multi(replies(scoring, RECORDED["multi_sound"]))
    assert outcome.passed, outcome.summary
    assert outcome.figures["shortest_words"] == 3 and outcome.figures["flagged"] == 0


def test_multi_answer_flags_an_answer_under_three_words(scoring: ModuleType) -> None:
    outcome = scoring.score_multi(replies(scoring, RECORDED["multi_truncated"]))
    assert outcome.passed is False
    assert outcome.figures["why"] == ["answer 1: 1 words"]


def test_multi_answer_flags_eight_repeats_not_seven(scoring: ModuleType) -> None:
    outcome = scoring.score_multi(replies(scoring, RECORDED["multi_looping"]))
    assert outcome.passed is False and "repeated 8 times" in outcome.summary
    assert scoring.repeat_run("go " * 7 + "home") == 7
    assert scoring.score_multi(replies(scoring, ["so " * 7 + "we stopped"])).passed
    assert not scoring.score_multi(replies(scoring, ["so " * 8 + "we stopped"])).passed
    # Natural repetition in a sound answer is no loop.
    assert scoring.repeat_run(RECORDED["multi_natural_repeats"]) == 3


def test_multi_answer_counts_a_failed_request(scoring: ModuleType) -> None:
    outcome = scoring.score_multi([scoring.Reply(error="HTTP 500: boom")])
    assert outcome.passed is False and "HTTP 500" in outcome.summary


def test_buried_facts_match_whatever_the_punctuation_and_case(scoring: ModuleType) -> None:
    outcome = scoring.score_buried([tuple(item) for item in RECORDED["buried_found"]])
    assert outcome.passed, outcome.summary
    assert outcome.figures["found"] == 4 and outcome.figures["prompt_tokens"][-1] == 47001


def test_buried_facts_fail_on_a_missed_fact_and_name_it(scoring: ModuleType) -> None:
    outcome = scoring.score_buried([tuple(item) for item in RECORDED["buried_missed"]])
    assert outcome.passed is False
    assert "'seventeen' in 24011 tokens" in outcome.summary
    assert outcome.figures["missed"][0]["answer"] == "There are 17 lanterns."


def stress(scoring: ModuleType, long_key: str, health: int = 200) -> Any:
    long = [scoring.Reply(**RECORDED["stress_long_ok"])] * 15 + [scoring.Reply(**RECORDED[long_key])]
    decoders = [scoring.Reply(**RECORDED["stress_decoder_ok"])] * 8
    return scoring.score_stress(long, decoders, health)


def test_stress_passes_when_everything_answered(scoring: ModuleType) -> None:
    outcome = stress(scoring, "stress_long_ok")
    assert outcome.passed, outcome.summary
    assert outcome.figures["long_answered"] == 16 and outcome.figures["prompt_tokens_max"] == 48012


def test_stress_fails_on_a_dropped_long_prompt(scoring: ModuleType) -> None:
    outcome = stress(scoring, "stress_long_dropped")
    assert outcome.passed is False and "long prompt 16: RemoteDisconnected" in outcome.summary


def test_stress_fails_on_a_wrong_answer_or_an_unhealthy_engine(scoring: ModuleType) -> None:
    assert stress(scoring, "stress_long_wrong").passed is False
    outcome = stress(scoring, "stress_long_ok", health=0)
    assert outcome.passed is False and "/health answered nothing" in outcome.summary


def test_stress_fails_on_an_empty_decoder_answer(scoring: ModuleType) -> None:
    long = [scoring.Reply(**RECORDED["stress_long_ok"])] * 16
    outcome = scoring.score_stress(long, [scoring.Reply(content="  ")], 200)
    assert outcome.passed is False and "decoder 1: empty answer" in outcome.summary


def runs(name: str) -> list[tuple[float, float]]:
    return [(ttft, tps) for ttft, tps in RECORDED[name]]


def test_bench_within_tolerance_of_the_previous_verdict(scoring: ModuleType) -> None:
    outcome = scoring.score_bench(runs("bench_runs_steady"), RECORDED["bench_previous"], 0.10)
    assert outcome.passed, outcome.summary
    assert outcome.figures["tokens_per_s"] == 31.2 and outcome.figures["ttft_s"] == 0.43
    assert outcome.figures["baseline_from"] == "production-1.7.1"


def test_bench_fails_when_tokens_per_s_falls(scoring: ModuleType) -> None:
    outcome = scoring.score_bench(runs("bench_runs_slow"), RECORDED["bench_previous"], 0.10)
    assert outcome.passed is False and "tokens/s fell" in outcome.summary
    assert "first token" not in outcome.summary.split(":")[-1]
    # The tolerance is the profile's: 25% lets the same runs through.
    assert scoring.score_bench(runs("bench_runs_slow"), RECORDED["bench_previous"], 0.25).passed


def test_bench_fails_when_the_first_token_comes_later(scoring: ModuleType) -> None:
    outcome = scoring.score_bench(runs("bench_runs_late"), RECORDED["bench_previous"], 0.10)
    assert outcome.passed is False and "first token came later" in outcome.summary


def test_bench_without_a_previous_verdict_sets_the_baseline(scoring: ModuleType) -> None:
    outcome = scoring.score_bench(runs("bench_runs_slow"), None, 0.10)
    assert outcome.passed and "become the baseline" in outcome.summary
    assert scoring.score_bench([], None, 0.10).passed is False


def test_operator_checks_exact_and_pattern(scoring: ModuleType) -> None:
    exact = {"name": "arith", "prompt": "What is 17 * 23?", "expect": "391", "pattern": None}
    assert scoring.score_operator(exact, scoring.Reply(content=" 391.\n")).passed
    assert not scoring.score_operator(exact, scoring.Reply(content="17 * 23 = 391")).passed
    pattern = {"name": "count", "prompt": "How many r in strawberry?", "expect": None, "pattern": r"\b3\b"}
    assert scoring.score_operator(pattern, scoring.Reply(content="There are 3.")).passed
    outcome = scoring.score_operator(pattern, scoring.Reply(content="There are 2."))
    assert outcome.passed is False and "does not match" in outcome.summary
    assert not scoring.score_operator(pattern, scoring.Reply(error="timed out")).passed


class Replay:
    """A stand-in for smoke.Api that answers each chat with the next recorded message."""

    def __init__(self, *messages: dict[str, Any]) -> None:
        self.messages = list(messages)

    def chat(self, content: object, **extra: Any) -> dict[str, Any]:
        del content, extra
        return {"choices": [{"message": self.messages.pop(0)}], "usage": {"prompt_tokens": 20}}


def test_smoke_scoring_the_gate_reuses(modules: tuple[ModuleType, ModuleType]) -> None:
    gate, smoke = modules
    assert gate.smoke is smoke  # reused by import, not copied
    smoke_answers = RECORDED["smoke"]
    assert smoke.check_count(Replay({"content": smoke_answers["count_ok"]}))[0] is True
    assert smoke.check_count(Replay({"content": smoke_answers["count_skipped_13"]}))[0] is False
    tool_ok = {"content": "", "tool_calls": [{"function": smoke_answers["tool_ok"]}]}
    tool_bad = {"content": "", "tool_calls": [{"function": smoke_answers["tool_missing_unit"]}]}
    assert smoke.check_tool_call(Replay(tool_ok))[0] is True
    assert smoke.check_tool_call(Replay(tool_bad))[0] is False
    # The gate turns a smoke result into an outcome with the same verdict and text.
    outcome = gate.smoke_outcome(lambda: smoke.check_count(Replay({"content": smoke_answers["count_ok"]})))
    assert outcome.word == "PASS" and "20" in outcome.summary


def test_item04_gate_stops_a_backtracking_pattern(scoring: ModuleType) -> None:
    # Unbounded, this match takes 2**64 steps: that it returns at all, with the time limit's message, is the
    # behaviour (no clock is read here).
    outcome = scoring.score_operator({"name": "x", "pattern": "(a+)+$"}, scoring.Reply(content="a" * 64 + "!"))
    assert not outcome.passed
    assert outcome.summary == (f"{'a' * 64 + '!'!r}: /(a+)+$/ did not finish matching within "
                               f"{scoring.MATCH_SECONDS} s (a pattern that backtracks; spark-compile check refuses "
                               "the known shapes)")
    assert scoring.score_operator({"name": "x", "pattern": "^4$"}, scoring.Reply(content="4")).passed
