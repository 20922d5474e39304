"""The differential corpus: every one-value mutant of every shipped profile and example (differential.py) through
SGLang's own judgement (`check --engine`: parser, resolution, check_server_args and the model stage, all mutants
in ONE engine-venv process) and through plain `check`; the two must agree.

SGLang's verdict on a mutant is what `check --engine` adds to its parent's findings: a refusal (SC602), a rewrite
(SC601), or nothing. Plain `check` agrees when it reports something new for every refusal or rewrite, and reports
no new error where SGLang accepts unless the rule says why SGLang cannot see it (STRICTER), and a finding of
check's sits at the profile line of each SGLang refusal or rewrite. Every other disagreement must be listed in
LISTED with its reason; the suite prints its figures.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from differential import RELEASES, SHIPPED, Mutant, mutants

from conftest import ROOT
from sglang_parse import engine_python

if TYPE_CHECKING:
    from spark_compile.common.findings import Finding
    from spark_compile.pipeline import Outcome, Planned

pytestmark = pytest.mark.engine

# Rules that refuse what SGLang's resolution accepts, and why SGLang does not judge it there.
STRICTER = {
    "SC222": "the Spark overlay's lookup drafting extends DSpark's block: the overlay, not SGLang, needs DSPARK",
    "SC226": "the overlay's lookup-wide mode, not SGLang, needs DSpark block 15 and compact ragged verify",
    "SC221": "the Spark overlay's MXFP8 route (SPARK_MXFP8_BACKEND=b12x), not SGLang, needs flashinfer_cutlass",
    "SC201": "SGLang does not check that ep divides tp before the model runner starts (moe_ep_setup.py)",
    "SC206": "practice: decode graphs below the request cap run the larger batches eager (SGLang accepts)",
    "SC208": "SGLang does not check --mem-fraction-static's range",
    "SC441": "SGLang learns the weights' size only when it loads them: its resolution does not size the static pool",
    "SC242": "SGLang asserts the head split when it builds the attention layers, after the model stage",
    "SC401": "the fleet, not SGLang, fixes tp: it must be nodes x GPUs per node or the rendezvous never completes",
    "SC203": "dspark_block_size without DSPARK is a setting that does nothing (SGLang ignores it)",
    "SC205": "num_steps/eagle_topk without an EAGLE-family algorithm do nothing (SGLang ignores them)",
}
# Mutants where the two disagree otherwise, with the reason.
LISTED: dict[str, str] = {}


@dataclass
class Verdict:
    """One mutant's verdicts."""

    mutant: Mutant
    static: set[tuple[str, str, str]]  # new (rule, severity, message) from plain check
    engine: set[tuple[str, str]]  # new (rule, message) from check --engine's SC6xx
    same_line: bool = False  # a new plain finding sits where a new SC601/SC602 does

    @property
    def sglang(self) -> str:
        rules = {rule for rule, _ in self.engine}
        return "refuses" if "SC602" in rules else "rewrites" if "SC601" in rules else \
            "not run" if "SC603" in rules else "accepts"

    def disagreement(self) -> str:
        """Why check and SGLang disagree on this mutant, or ''."""
        if self.sglang in ("refuses", "rewrites") and not self.static:
            return f"SGLang {self.sglang}, check says nothing"
        if self.sglang == "accepts":
            unexplained = sorted({r for r, sev, _ in self.static if sev == "error" and r not in STRICTER})
            if unexplained:
                return f"check errors {', '.join(unexplained)} where SGLang accepts"
        return ""


def _validate(paths: list[Path]) -> list[Outcome]:
    from spark_compile.pipeline import run

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        return [run(Path(os.path.relpath(p, ROOT))) for p in paths]
    finally:
        os.chdir(here)


def _planned(outcome: Outcome) -> Planned | None:
    from spark_compile.pipeline import Rejected

    return outcome.planned if isinstance(outcome, Rejected) else outcome


def _static(outcome: Outcome) -> set[tuple[str, str, str]]:
    return {(f.rule, f.severity, f.message) for f in outcome.findings}


def _spots(findings: list[Finding], rules: tuple[str, ...] | None = None) -> set[tuple[str, str, int]]:
    return {(f.message, f.position.file, f.position.line) for f in findings if rules is None or f.rule in rules}



@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    from spark_compile.engine.check import engine_findings_many

    work = tmp_path_factory.mktemp("mutants")
    corpus = mutants(work)
    paths = []
    for index, mutant in enumerate(corpus):
        path = work / f"m{index:03d}.yaml"
        path.write_text(mutant.text, encoding="utf-8")
        paths.append(path)
    validated = _validate([*SHIPPED, *RELEASES, *paths])
    planned = [p for p in map(_planned, validated) if p is not None]
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        engine = dict(zip(map(id, planned), engine_findings_many(planned, engine_python()), strict=True))
    finally:
        os.chdir(here)

    def verdict(v: Outcome) -> list[Finding]:
        p = _planned(v)
        return engine.get(id(p), []) if p is not None else []

    def of(v: Outcome) -> tuple[set[tuple[str, str, str]], set[tuple[str, str]]]:
        return _static(v), {(f.rule, f.message) for f in verdict(v)}

    parents = [*SHIPPED, *RELEASES]
    base = {parent: (of(v), v) for parent, v in zip(parents, validated, strict=False)}
    out = []
    for mutant, v in zip(corpus, validated[len(parents):], strict=True):
        static, found = of(v)
        (parent_static, parent_engine), parent = base[mutant.parent]
        new_static = {s[1:] for s in _spots(v.findings)} - {s[1:] for s in _spots(parent.findings)}
        new_engine = {s[1:] for s in _spots(verdict(v), ("SC601", "SC602"))} - \
            {s[1:] for s in _spots(verdict(parent), ("SC601", "SC602"))}
        # A check that did not run on the parent did not run on the mutant either: SGLang judged neither.
        engine_new = found - {e for e in parent_engine if e[0] != "SC603"}
        out.append(Verdict(mutant, static - parent_static, engine_new, bool(new_static & new_engine)))
    return out


def test_check_and_sglang_agree_on_every_mutant(outcomes: list[Verdict], capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = Counter(o.sglang for o in outcomes)
    disagreements = {o.mutant.id: o.disagreement() for o in outcomes if o.disagreement()}
    judged = [o for o in outcomes if o.sglang in ("refuses", "rewrites")]
    caught = sum(1 for o in judged if o.static)
    same = sum(1 for o in judged if o.same_line)
    stricter = Counter(r for o in outcomes if o.sglang == "accepts" for r, sev, _ in o.static if sev == "error")
    with capsys.disabled():
        print(f"\ndifferential: {len(outcomes)} mutants of {len(SHIPPED) + len(RELEASES)} profiles; SGLang refuses "
              f"{verdicts['refuses']}, rewrites {verdicts['rewrites']}, accepts {verdicts['accepts']}, "
              f"not run {verdicts['not run']}; caught by check {caught} of "
              f"{len(judged)} ({same} at the engine's own line); caught by check --engine {len(judged)}; listed "
              f"disagreements {len(set(disagreements) & set(LISTED))}; check stricter than SGLang's resolution: "
              + ", ".join(f"{rule} x{n}" for rule, n in sorted(stricter.items())))
        for mutant, why in sorted(disagreements.items()):
            print(f"  {mutant}: {why}" + (f" — listed: {LISTED[mutant]}" if mutant in LISTED else ""))
        for o in judged:
            if not o.same_line:
                print(f"  {o.mutant.id}: check's finding is not at SGLang's line")
    assert {m: why for m, why in disagreements.items() if m not in LISTED} == {}
    assert set(LISTED) <= set(disagreements), "a listed disagreement no longer happens"
    # SGLang's finding sits at the key that wrote the flag it names, where the static rule's does.
    assert [o.mutant.id for o in judged if not o.same_line] == []
