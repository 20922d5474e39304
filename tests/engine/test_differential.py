"""The differential corpus (differential.py generates it, differential_judge.py judges it): every mutant through
SGLang's own judgement in one engine-venv process and through plain `check`. The verdicts must equal the committed
corpus (tests/engine/corpus/), every disagreement must be listed there with the reason the rule is deliberately
stricter, and the agreement table is printed. Regenerate with `python tests/engine/differential_judge.py`.
"""

from __future__ import annotations

import os

import pytest
from differential_judge import (
    CORPUS,
    DISAGREEMENTS,
    Verdict,
    corpus_text,
    disagreements_text,
    judge,
    read_listed,
    table,
)

pytestmark = pytest.mark.engine


# Plain check judges every mutant; SGLang re-judges every EVERY-th (and every parent) and the others take its
# committed verdict, so a corpus that no longer matches SGLang 0.5.23 fails on the sample. DIFFERENTIAL_EVERY=1
# re-judges all (what `python tests/engine/differential_judge.py` does), at about twenty times the time: SGLang's
# resolution of one mutant costs a second or more of CPU, plain check a few milliseconds.
EVERY = int(os.environ.get("DIFFERENTIAL_EVERY", "32"))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    return judge(tmp_path_factory.mktemp("mutants"), EVERY)


def test_check_and_sglang_agree_on_every_mutant(verdicts: list[Verdict], capsys: pytest.CaptureFixture[str]) -> None:
    listed = read_listed()
    with capsys.disabled():
        print("\ndifferential: check against SGLang 0.5.23\n" + table(verdicts))
    assert corpus_text(verdicts) == CORPUS.read_text(encoding="utf-8"), \
        "the verdicts changed: run python tests/engine/differential_judge.py and review the diff"
    assert disagreements_text(verdicts, listed) == DISAGREEMENTS.read_text(encoding="utf-8")
    assert "UNEXPLAINED" not in DISAGREEMENTS.read_text(encoding="utf-8"), "a disagreement without its reason"


def test_the_corpus_is_big_and_wide(verdicts: list[Verdict]) -> None:
    judged = [v for v in verdicts if v.sglang != "not run"]
    assert len(judged) >= 400
    assert sum(1 for v in verdicts if v.cached is None) * EVERY >= len(verdicts)  # the sample is re-judged
    assert len({v.mutant.parent for v in judged}) >= 5
    assert sum(1 for v in verdicts if "," in v.mutant.id) >= 100  # the pairs SGLang reads together



def test_check_s_finding_sits_where_sglang_s_does_or_is_counted(verdicts: list[Verdict],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Where SGLang's refusal or rewrite is placed (at the key its message names) and check's finding is not, the
    mutant is printed: SGLang's message may name another key than the one the mutant wrote (a speculative refusal
    sits at the algorithm)."""
    judged = [v for v in verdicts if v.sglang in ("refuses", "rewrites") and v.static and v.cached is None]
    elsewhere = sorted(v.mutant.id for v in judged if not v.same_line)
    with capsys.disabled():
        print(f"\ndifferential: {len(judged) - len(elsewhere)} of {len(judged)} judged mutants have check's finding "
              f"at SGLang's line; elsewhere: " + ", ".join(elsewhere))
    assert len(elsewhere) < len(judged) // 2
