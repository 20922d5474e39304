"""How the release gate scores what the candidate answered: pure functions, standard library only.

A static file of spark-compile, imported by gate.py beside it. Every function takes recorded answers and
returns an Outcome (PASS/FAIL/SKIP with a one-line summary and the figures the verdict keeps), so each check
is tested on recorded answers without a server. Thresholds and sizes are the peer's (peer-launcher-facts
section 7: multi_check.py flags batched answers under 3 words or with 8+ repeats; long_prefill_stress.py
sends 4x4 prompts of about 48K tokens beside 8 decoders).
"""

from __future__ import annotations

import re
import signal
import statistics
import threading
from dataclasses import dataclass, field
from typing import Any

MIN_WORDS = 3
REPEAT_LIMIT = 8
LONGEST_REPEATED_PHRASE = 4
STRESS_REPLY_WORD = "DONE"
MATCH_SECONDS = 2.0  # an operator pattern's match on one reply: a sane one takes microseconds
MATCH_CHARS = 4096


@dataclass(frozen=True)
class Outcome:
    """One check's result: passed (None = skipped), what was seen, and its figures for the verdict."""

    passed: bool | None
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def word(self) -> str:
        return "SKIP" if self.passed is None else "PASS" if self.passed else "FAIL"


@dataclass(frozen=True)
class Reply:
    """One request's fate: answered (content) or not (error), with the prompt size the server counted."""

    content: str = ""
    error: str = ""
    prompt_tokens: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error


def words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text.lower())


def normal(text: str) -> str:
    """Lowercase letters and digits, one blank between runs: how facts and exact answers are compared."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def repeat_run(text: str) -> int:
    """The most times one word or phrase (up to 4 words) comes back to back: a decoding loop's mark."""
    tokens = words(text)
    best = 1 if tokens else 0
    for size in range(1, LONGEST_REPEATED_PHRASE + 1):
        for start in range(size):
            run, previous = 0, None
            for i in range(start, len(tokens) - size + 1, size):
                phrase = tuple(tokens[i:i + size])
                run = run + 1 if phrase == previous else 1
                previous = phrase
                best = max(best, run)
    return best


def score_stress(long: list[Reply], decoders: list[Reply], health_after: int) -> Outcome:
    """Every long prompt answered (with the word asked for), every decoder answered, /health 200 after."""
    figures = {
        "long_prompts": len(long), "long_answered": sum(r.ok for r in long),
        "prompt_tokens_max": max((r.prompt_tokens for r in long), default=0),
        "long_seconds_max": round(max((r.seconds for r in long), default=0.0), 3),
        "decoder_requests": len(decoders), "decoders_answered": sum(r.ok and bool(r.content.strip()) for r in decoders),
        "health_after": health_after,
    }
    problems = [f"long prompt {i + 1}: {r.error}" for i, r in enumerate(long) if not r.ok]
    problems += [f"long prompt {i + 1} answered {r.content[:60]!r}, not {STRESS_REPLY_WORD}"
                 for i, r in enumerate(long) if r.ok and STRESS_REPLY_WORD not in r.content.upper()]
    problems += [f"decoder {i + 1}: {r.error or 'empty answer'}" for i, r in enumerate(decoders)
                 if not (r.ok and r.content.strip())]
    if health_after != 200:
        problems.append(f"/health answered {health_after or 'nothing'} after the stress")
    done = (f"{figures['long_answered']}/{len(long)} long prompts (up to {figures['prompt_tokens_max']} tokens), "
            f"{figures['decoders_answered']}/{len(decoders)} decoder requests, /health {health_after}")
    if problems:
        return Outcome(False, f"{done}; {problems[0]}" + (f" (+{len(problems) - 1} more)" if problems[1:] else ""),
                       figures)
    return Outcome(True, done, figures)


def score_buried(found: list[tuple[str, str, int]]) -> Outcome:
    """(fact, answer, prompt tokens) per prompt: every answer must contain its fact."""
    misses = [(fact, answer, tokens) for fact, answer, tokens in found if normal(fact) not in normal(answer)]
    figures = {"prompts": len(found), "found": len(found) - len(misses),
               "prompt_tokens": [tokens for _, _, tokens in found],
               "missed": [{"fact": fact, "answer": answer[:120], "prompt_tokens": tokens}
                          for fact, answer, tokens in misses]}
    summary = f"{len(found) - len(misses)}/{len(found)} facts found"
    if misses:
        fact, answer, tokens = misses[0]
        return Outcome(False, f"{summary}; wanted {fact!r} in {tokens} tokens, got {answer.strip()[:80]!r}", figures)
    return Outcome(True, summary, figures)


def multi_flags(answer: str) -> list[str]:
    """Why a batched answer is suspect: too short, or looping."""
    flags = []
    count = len(words(answer))
    if count < MIN_WORDS:
        flags.append(f"{count} words")
    loop = repeat_run(answer)
    if loop >= REPEAT_LIMIT:
        flags.append(f"a phrase repeated {loop} times")
    return flags


def score_multi(answers: list[Reply]) -> Outcome:
    """A batch of distinct questions asked at once: no answer under 3 words, none with 8+ repeats."""
    flagged = [(i, r.error or "; ".join(multi_flags(r.content))) for i, r in enumerate(answers)
               if not r.ok or multi_flags(r.content)]
    figures = {"answers": len(answers), "flagged": len(flagged),
               "shortest_words": min((len(words(r.content)) for r in answers), default=0),
               "longest_repeat": max((repeat_run(r.content) for r in answers), default=0),
               "why": [f"answer {i + 1}: {why}" for i, why in flagged]}
    summary = (f"{len(answers) - len(flagged)}/{len(answers)} batched answers sound (shortest "
               f"{figures['shortest_words']} words, longest repeat {figures['longest_repeat']})")
    if flagged:
        i, why = flagged[0]
        return Outcome(False, f"{summary}; answer {i + 1}: {why}: {answers[i].content.strip()[:60]!r}", figures)
    return Outcome(True, summary, figures)


def score_bench(runs: list[tuple[float, float]], baseline: dict[str, Any] | None, tolerance: float) -> Outcome:
    """(time to first token s, tokens/s) per run; medians against the previous verdict's within tolerance."""
    if not runs:
        return Outcome(False, "no bench run finished", {})
    ttft = round(statistics.median(t for t, _ in runs), 4)
    tps = round(statistics.median(s for _, s in runs), 2)
    figures: dict[str, Any] = {"runs": len(runs), "ttft_s": ttft, "tokens_per_s": tps, "tolerance": tolerance}
    mine = f"{tps} tokens/s, first token after {ttft} s (median of {len(runs)})"
    if not baseline:
        return Outcome(True, f"{mine}; no previous verdict: these figures become the baseline", figures)
    base_tps, base_ttft = float(baseline["tokens_per_s"]), float(baseline["ttft_s"])
    figures.update(baseline_tokens_per_s=base_tps, baseline_ttft_s=base_ttft,
                   baseline_from=baseline.get("from", ""))
    against = f"{base_tps} tokens/s and {base_ttft} s in {baseline.get('from') or 'the previous verdict'}"
    slower = tps < base_tps * (1 - tolerance)
    later = ttft > base_ttft * (1 + tolerance)
    if slower or later:
        what = " and ".join(w for w, bad in (("tokens/s fell", slower), ("first token came later", later)) if bad)
        return Outcome(False, f"{mine}: {what} by more than {tolerance:.0%} against {against}", figures)
    return Outcome(True, f"{mine}; within {tolerance:.0%} of {against}", figures)


def score_operator(check: dict[str, Any], reply: Reply) -> Outcome:
    """An operator's check: the exact answer (blanks and a final period aside) or a pattern's match."""
    if not reply.ok:
        return Outcome(False, f"request failed: {reply.error}", {})
    got = reply.content.strip()
    figures = {"answer": got[:200]}
    if check.get("expect") is not None:
        want = str(check["expect"])
        passed = got.rstrip(".").strip() == want.rstrip(".").strip()
        return Outcome(passed, f"{got[:80]!r} ({'is' if passed else 'is not'} exactly {want!r})", figures)
    pattern = str(check["pattern"])
    try:
        passed = search_within(pattern, got, MATCH_SECONDS)
    except TimeoutError:
        return Outcome(False, f"{got[:80]!r}: /{pattern}/ did not finish matching within {MATCH_SECONDS} s "
                       "(a pattern that backtracks; spark-compile check refuses the known shapes)", figures)
    return Outcome(passed, f"{got[:80]!r} ({'matches' if passed else 'does not match'} /{pattern}/)", figures)


def search_within(pattern: str, text: str, seconds: float) -> bool:
    """re.search with a time limit (the regex engine checks for signals while it backtracks); TimeoutError
    past it. Without a main thread to take the signal, the reply is cut to MATCH_CHARS instead."""
    if threading.current_thread() is not threading.main_thread():
        return re.search(pattern, text[:MATCH_CHARS]) is not None

    def expire(_signum: int, _frame: Any) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return re.search(pattern, text) is not None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
