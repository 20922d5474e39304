#!/usr/bin/env python3
"""The release gate: every smoke check plus the checks that would have caught past incidents, asked of a
candidate's OpenAI-compatible API (by `launch.sh window`, or by hand).

A static file of spark-compile; its defaults come from fleet.json beside it, its smoke checks from smoke.py
beside it (imported, not copied), its scoring from gate_scoring.py. Standard library only.

    gate.py [--host H] [--port P] [--model M] [--timeout S] [--only NAME,...]
            [--baseline-tps X --baseline-ttft Y [--baseline-from LABEL]]

Checks, each printing PASS, FAIL or SKIP with its figures, then a `GATE-RESULT {json}` line the window's
verdict reads; the exit status is the number of failures:
  smoke checks       count, needle-N, image, tool-call, thinking, reasoning-effort (see smoke.py).
  long-prefill-stress  4 rounds of 4 concurrent prompts of about 48K tokens while 8 decoders keep asking;
                     every request must be answered and /health must answer 200 afterwards.
  buried-facts       eight prompts of 4K-47K tokens, each hiding a fact at its own depth; each answer must
                     contain its fact.
  multi-answer       distinct questions sent at once (one batch); no answer under 3 words or looping a
                     phrase 8+ times.
  bench              a fixed prompt, fixed length, streamed: time to first token and tokens/s (medians of
                     operations.window.bench_runs), against the previous verdict's within bench_tolerance.
  operator-NAME      operations.window.checks: a prompt and its exact answer or pattern.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate_scoring as scoring
import smoke
from fleet_io import MAX_FIGURE, decimal
from gate_scoring import Outcome, Reply

CONFIG = smoke.CONFIG
WINDOW: dict[str, Any] = CONFIG["window"]
STRESS_ROUNDS, STRESS_PROMPTS, STRESS_TOKENS, STRESS_DECODERS = 4, 4, 48_000, 8
ANSWER_TOKENS = 64
# The buried facts: (what is asked, the fact), one per prompt size, each at its own depth.
FACTS = [
    ("the name of the lighthouse keeper's dog", "Bramble"),
    ("the colour of the third door in the north corridor", "teal"),
    ("the launch code of the orbital ferry", "ORCHID-4471"),
    ("the surname of the night-shift chemist", "Okonkwo"),
    ("the number of lanterns on the east pier", "seventeen"),
    ("the password of the archive room", "velvet compass"),
    ("the town where the cartographer was born", "Tromso"),
    ("the name of the ship in dry dock", "Marigold Dawn"),
]
FACT_TOKENS = [4_000, 8_000, 12_000, 18_000, 24_000, 31_000, 39_000, 47_000]
FACT_DEPTHS = [0.9, 0.15, 0.6, 0.35, 0.8, 0.05, 0.5, 0.25]
MULTI_QUESTIONS = [
    "In one or two sentences, why do leaves change colour in autumn?",
    "In one or two sentences, what does a compiler do?",
    "In one or two sentences, why is the sky blue?",
    "In one or two sentences, how does a bicycle stay upright?",
    "In one or two sentences, what is the difference between weather and climate?",
    "In one or two sentences, why do ships float?",
    "In one or two sentences, what is photosynthesis?",
    "In one or two sentences, how does a refrigerator keep food cold?",
    "In one or two sentences, why do we have seasons?",
    "In one or two sentences, what is a prime number?",
    "In one or two sentences, how do vaccines work?",
    "In one or two sentences, what causes tides?",
    "In one or two sentences, why does ice float on water?",
    "In one or two sentences, what is inflation in economics?",
    "In one or two sentences, how does a rainbow form?",
    "In one or two sentences, what does a database index do?",
]
BENCH_PROMPT = "Write a story of about 300 words about a lighthouse keeper who finds a message in a bottle."
BENCH_TOKENS = 256
DECODER_PROMPT = "Write a short paragraph about the history of {topic}."
DECODER_TOPICS = ["bridges", "clocks", "maps", "paper", "glass", "bread", "sails", "ink"]


def ask(api: smoke.Api, prompt: str, max_tokens: int, thinking: bool = False) -> Reply:
    """One chat request, its failure kept as data (the scoring decides what it means)."""
    start = time.monotonic()
    try:
        answer = api.chat(prompt, max_tokens=max_tokens, **smoke.thinking(thinking))
    except smoke.ApiError as err:
        return Reply(error=str(err)[:200], seconds=time.monotonic() - start)
    tokens = int((answer.get("usage") or {}).get("prompt_tokens") or 0)
    return Reply(content=smoke.text(answer), prompt_tokens=tokens, seconds=time.monotonic() - start)


def health(api: smoke.Api) -> int:
    url = api.url.replace("/v1/chat/completions", "/health")
    try:
        with api.opener.open(url, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def fits(tokens: int) -> bool:
    return tokens + 4 * ANSWER_TOKENS <= int(CONFIG["context_length"])


def long_prompt(tokens: int, ratio: float, seed: int, ask_for: str) -> list[str]:
    return [*smoke.filler(tokens - ANSWER_TOKENS, ratio, seed), ask_for]


def check_stress(api: smoke.Api, ratio: Callable[[], float]) -> Outcome:
    if not fits(STRESS_TOKENS):
        return Outcome(None, f"{STRESS_TOKENS} tokens is above the context length {CONFIG['context_length']}")
    ask_for = f"\n\nThat was a survey log. Reply with the word {scoring.STRESS_REPLY_WORD}."
    prompts = [" ".join(long_prompt(STRESS_TOKENS, ratio(), 1000 + i, ask_for))
               for i in range(STRESS_ROUNDS * STRESS_PROMPTS)]
    long: list[Reply] = []
    decoders: list[Reply] = []
    stop = time.monotonic() + 10 ** 9

    def decode(slot: int) -> None:
        rounds = 0
        while rounds == 0 or time.monotonic() < stop:
            decoders.append(ask(api, DECODER_PROMPT.format(topic=DECODER_TOPICS[slot % len(DECODER_TOPICS)]), 128))
            rounds += 1

    with ThreadPoolExecutor(STRESS_DECODERS) as background:
        running = [background.submit(decode, slot) for slot in range(STRESS_DECODERS)]
        with ThreadPoolExecutor(STRESS_PROMPTS) as pool:
            for first in range(0, len(prompts), STRESS_PROMPTS):
                long += pool.map(lambda p: ask(api, p, 16), prompts[first:first + STRESS_PROMPTS])
        stop = time.monotonic()
        for future in running:
            future.result()
    return scoring.score_stress(long, decoders, health(api))


def check_buried(api: smoke.Api, ratio: Callable[[], float]) -> Outcome:
    found: list[tuple[str, str, int]] = []
    for (subject, fact), tokens, depth in zip(FACTS, FACT_TOKENS, FACT_DEPTHS, strict=True):
        if not fits(tokens):
            continue
        sentences = smoke.filler(tokens - ANSWER_TOKENS, ratio(), tokens)
        sentences.insert(int(len(sentences) * depth), f"For the record, {subject} is {fact}.")
        question = f"\n\nAccording to the text above, what is {subject}? Reply with the answer only."
        reply = ask(api, " ".join(sentences) + question, ANSWER_TOKENS)
        found.append((fact, reply.content if reply.ok else f"(request failed: {reply.error})", reply.prompt_tokens))
    if not found:
        return Outcome(None, f"every prompt is above the context length {CONFIG['context_length']}")
    return scoring.score_buried(found)


def check_multi(api: smoke.Api) -> Outcome:
    with ThreadPoolExecutor(len(MULTI_QUESTIONS)) as pool:
        answers = list(pool.map(lambda q: ask(api, q, 160), MULTI_QUESTIONS))
    return scoring.score_multi(answers)


def bench_once(api: smoke.Api) -> tuple[float, float]:
    """One streamed run of the fixed prompt: (seconds to the first token, tokens/s after it)."""
    body = {"model": api.model, "temperature": 0, "max_tokens": BENCH_TOKENS, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": BENCH_PROMPT}],
            **smoke.thinking(False)}
    headers = {"Content-Type": "application/json"}
    if os.environ.get("SPARK_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['SPARK_API_KEY']}"
    request = urllib.request.Request(api.url, data=json.dumps(body).encode(), headers=headers)
    start, first, chunks, usage = time.monotonic(), 0.0, 0, 0
    try:
        with api.opener.open(request, timeout=api.timeout) as response:
            for raw in response:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                event = json.loads(line[5:])
                usage = int((event.get("usage") or {}).get("completion_tokens") or usage)
                delta = (event.get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content") or delta.get("reasoning_content"):
                    first = first or time.monotonic()
                    chunks += 1
    except (OSError, ValueError) as err:
        raise smoke.ApiError(f"{type(err).__name__}: {err}") from err
    end = time.monotonic()
    if not first:
        raise smoke.ApiError("the stream carried no tokens")
    tokens = usage or chunks
    return first - start, (tokens - 1) / max(end - first, 1e-6)


def check_bench(api: smoke.Api, baseline: dict[str, Any] | None) -> Outcome:
    runs = [bench_once(api) for _ in range(int(WINDOW["bench_runs"]))]
    return scoring.score_bench(runs, baseline, float(WINDOW["bench_tolerance"]))


def check_operator(api: smoke.Api, check: dict[str, Any]) -> Outcome:
    reply = ask(api, str(check["prompt"]), int(check["max_tokens"]), bool(check["thinking"]))
    return scoring.score_operator(check, reply)


def smoke_outcome(check: Callable[[], smoke.Result]) -> Outcome:
    passed, got = check()
    return Outcome(passed, got)


def gate_checks(api: smoke.Api, baseline: dict[str, Any] | None) -> dict[str, Callable[[], Outcome]]:
    """Every gate check by name, in the order they run (cheap ones first, the bench on a quiet engine)."""
    ratio = functools.cache(lambda: smoke.calibrate(api))
    checks: dict[str, Callable[[], Outcome]] = {
        name: functools.partial(smoke_outcome, check)
        for name, check in smoke.smoke_checks(api, list(CONFIG["needle_tokens"])).items()}
    checks["bench"] = lambda: check_bench(api, baseline)
    checks["multi-answer"] = lambda: check_multi(api)
    checks["buried-facts"] = lambda: check_buried(api, ratio)
    checks["long-prefill-stress"] = lambda: check_stress(api, ratio)
    for operator in WINDOW["checks"]:
        checks[f"operator-{operator['name']}"] = functools.partial(check_operator, api, operator)
    return checks


def run(name: str, check: Callable[[], Outcome]) -> str:
    try:
        outcome = check()
    except smoke.ApiError as err:
        outcome = Outcome(False, f"request failed: {err}")
    print(f"{outcome.word} {name}: {outcome.summary}", flush=True)
    record = {"name": name, "result": outcome.word, "summary": outcome.summary, "figures": outcome.figures}
    print("GATE-RESULT " + json.dumps(record, sort_keys=True), flush=True)
    return outcome.word


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    smoke.add_api_options(parser)
    parser.add_argument("--only", default="", help="comma-separated check names")
    parser.add_argument("--baseline-tps", type=decimal(0, MAX_FIGURE), help="the previous verdict's bench tokens/s")
    parser.add_argument("--baseline-ttft", type=decimal(0, MAX_FIGURE),
                        help="the previous verdict's bench time to first token (s)")
    parser.add_argument("--baseline-from", default="", help="which verdict the baseline comes from")
    args = parser.parse_args(argv)
    # Parsed here first: --help and a bad option are answered locally, never sent (with the key) to the head.
    if CONFIG["via_head"] and os.environ.get("SPARK_ON_HEAD") != "1" and args.host is None:
        return smoke.on_head(argv, "gate.py")
    if (args.baseline_tps is None) != (args.baseline_ttft is None):
        parser.error("give both --baseline-tps and --baseline-ttft, or neither")
    baseline = None if args.baseline_tps is None else {
        "tokens_per_s": args.baseline_tps, "ttft_s": args.baseline_ttft, "from": args.baseline_from}
    api = smoke.Api(args.host or CONFIG["host"], args.port, args.model, args.timeout)
    checks = gate_checks(api, baseline)
    only = {name for name in args.only.split(",") if name}
    if only - set(checks):
        parser.error(f"unknown checks {sorted(only - set(checks))}; known: {', '.join(checks)}")
    words = [run(name, check) for name, check in checks.items() if not only or name in only]
    failures = words.count("FAIL")
    print(f"gate: {words.count('PASS')} PASS, {failures} FAIL, {words.count('SKIP')} SKIP", flush=True)
    return min(failures, 125)


if __name__ == "__main__":
    sys.exit(main())
