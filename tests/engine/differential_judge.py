"""The differential corpus judged twice: by SGLang (`check --engine`: parser, resolution, check_server_args and the
model stage, every mutant in ONE engine-venv process) and by plain `check`, and the two verdicts compared.

SGLang's verdict on a mutant is what `check --engine` adds to its parent's findings: a refusal (SC602), a rewrite
(SC601), or nothing. Plain `check` agrees when SGLang refuses and it reports a new error, when SGLang rewrites and
it reports a new error or warning, and when SGLang accepts and it reports no new error (unless the rule is listed
in STRICTER with the reason SGLang cannot see it). ``python tests/engine/differential_judge.py`` regenerates the
committed corpus (tests/engine/corpus/mutants.txt) and its disagreements (tests/engine/corpus/disagreements.txt).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # run as a script: differential, sglang_parse and conftest

from differential import BASES, RELEASES, SHIPPED, Mutant, mutants, read_together  # noqa: E402

from conftest import ROOT  # noqa: E402
from sglang_parse import engine_python  # noqa: E402

if TYPE_CHECKING:
    from spark_compile.common.findings import Finding
    from spark_compile.pipeline import Outcome, Planned

CORPUS = HERE / "corpus" / "mutants.txt"
DISAGREEMENTS = HERE / "corpus" / "disagreements.txt"
VERSION = "0.5.23"

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
    "SC205": "num_steps/eagle_topk without an algorithm that drafts in steps do nothing (SGLang ignores them)",
}


@dataclass
class Verdict:
    """One mutant's verdicts."""

    mutant: Mutant
    static: set[tuple[str, str, str]]  # new (rule, severity, message) from plain check
    engine: set[tuple[str, str]]  # new (rule, message) from check --engine's SC6xx
    same_line: bool = False  # a new plain finding sits where a new SC601/SC602 does
    cached: str | None = None  # SGLang's verdict read from the committed corpus (this mutant was not re-judged)

    @property
    def sglang(self) -> str:
        if self.cached is not None:
            return self.cached
        rules = {rule for rule, _ in self.engine}
        return "refuses" if "SC602" in rules else "rewrites" if "SC601" in rules else \
            "not run" if "SC603" in rules else "accepts"

    @property
    def check(self) -> str:
        severities = {sev for _, sev, _ in self.static}
        return "error" if "error" in severities else "warning" if "warning" in severities else "nothing"

    def disagreement(self) -> str:
        """Why check and SGLang disagree on this mutant, or ''."""
        if self.sglang == "refuses" and self.check != "error":
            return f"SGLang refuses, check says {self.check}"
        if self.sglang == "rewrites" and self.check == "nothing":
            return "SGLang rewrites, check says nothing"
        if self.sglang == "accepts":
            unexplained = sorted({r for r, sev, _ in self.static if sev == "error" and r not in STRICTER})
            if unexplained:
                return f"check errors {', '.join(unexplained)} where SGLang accepts"
        return ""


def _validate(paths: list[Path]) -> list[Outcome]:
    from spark_compile.pipeline import run

    return [run(Path(os.path.relpath(p, ROOT))) for p in paths]


def _planned(outcome: Outcome) -> Planned | None:
    from spark_compile.pipeline import Rejected

    return outcome.planned if isinstance(outcome, Rejected) else outcome


def _new(found: list[Finding], before: list[Finding]) -> set[tuple[str, str, str]]:
    return {(f.rule, str(f.severity), f.message) for f in found} - \
        {(f.rule, str(f.severity), f.message) for f in before}


def _spots(findings: list[Finding], rules: tuple[str, ...] | None = None) -> set[tuple[str, int]]:
    return {(f.position.file, f.position.line) for f in findings if rules is None or f.rule in rules}


def pairs_of_sglang() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The key pairs SGLang's judgements read together, from the engine venv's SGLang source."""
    from spark_compile.spec.generators.catalog_extract import package_of
    from spark_compile.spec.generators.sglang_judgements import catalog_dests, sites

    return read_together([site.reads for site in sites(package_of(engine_python()), catalog_dests(VERSION))])


def _committed_rows(path: Path) -> list[list[str]]:
    """The tab-separated rows of a committed corpus file (none before its first regeneration)."""
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def committed_sglang() -> dict[str, str]:
    """SGLang 0.5.23's committed verdict per mutant id (the corpus is the cache of SGLang's judgement, keyed by
    its version: VERSION)."""
    return {row[0]: row[1].removeprefix("SGLang ") for row in _committed_rows(CORPUS) if len(row) == 3}


def judge(work: Path, every: int = 1) -> list[Verdict]:
    """Write every mutant into ``work``, judge each with plain check and every ``every``-th with SGLang (one engine
    process per hardware kind; the others take SGLang's committed verdict), and return the verdicts in order."""
    from spark_compile.engine.check import engine_findings_many

    corpus = mutants(work, pairs_of_sglang())
    paths = []
    for index, mutant in enumerate(corpus):
        path = work / f"m{index:04d}.yaml"
        path.write_text(mutant.text, encoding="utf-8")
        paths.append(path)
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        parents = [*SHIPPED, *BASES, *RELEASES]
        validated = _validate([*parents, *paths])
        chosen = [v for i, v in enumerate(validated) if i < len(parents) or (i - len(parents)) % every == 0]
        planned = [p for p in map(_planned, chosen) if p is not None]
        engine = dict(zip(map(id, planned), engine_findings_many(planned, engine_python()), strict=True))
    finally:
        os.chdir(here)

    def sc6(v: Outcome) -> list[Finding]:
        p = _planned(v)
        return engine.get(id(p), []) if p is not None else []

    base = dict(zip(parents, validated, strict=False))
    cached = committed_sglang() if every > 1 else {}
    out = []
    for index, (mutant, v) in enumerate(zip(corpus, validated[len(parents):], strict=True)):
        parent = base[mutant.parent]
        if index % every:
            out.append(Verdict(mutant, _new(v.findings, parent.findings), set(), cached=cached.get(mutant.id, "?")))
            continue
        # A check that did not run on the parent did not run on the mutant either: SGLang judged neither.
        known = {(f.rule, f.message) for f in sc6(parent) if f.rule != "SC603"}
        engine_new = {(f.rule, f.message) for f in sc6(v)} - known
        lines = (_spots(v.findings) - _spots(parent.findings)) & \
            (_spots(sc6(v), ("SC601", "SC602")) - _spots(sc6(parent), ("SC601", "SC602")))
        out.append(Verdict(mutant, _new(v.findings, parent.findings), engine_new, bool(lines)))
    return out


def architecture(path: Path) -> str:
    from spark_compile.stages.resolve import resolve

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        data = resolve(path.relative_to(ROOT)).data
    finally:
        os.chdir(here)
    model = data.get("model") if isinstance(data, dict) else None
    return str(model.get("architecture")) if isinstance(model, dict) else "?"


def table(verdicts: list[Verdict]) -> str:
    """The agreement table: per architecture, SGLang's verdicts and check's agreement."""
    arch = {p: architecture(p) for p in {v.mutant.parent for v in verdicts}}
    rows: dict[str, Counter[str]] = {}
    for v in verdicts:
        row = rows.setdefault(arch[v.mutant.parent], Counter())
        row["mutants"] += 1
        row[v.sglang] += 1
        row["agree" if not v.disagreement() else "listed"] += 1
    head = ("architecture", "mutants", "refuses", "rewrites", "accepts", "not run", "agree", "listed")
    lines = [" | ".join(head)]
    for name, row in sorted(rows.items()):
        lines.append(" | ".join([name, *(str(row[h]) for h in head[1:])]))
    total: Counter[str] = sum(rows.values(), Counter())
    lines.append(" | ".join(["all", *(str(total[h]) for h in head[1:])]))
    return "\n".join(lines) + "\n"


def corpus_text(verdicts: list[Verdict]) -> str:
    return "".join(f"{v.mutant.id}\tSGLang {v.sglang}\tcheck {v.check}\n" for v in verdicts)


def disagreements_text(verdicts: list[Verdict], listed: dict[str, str]) -> str:
    """Each disagreement with the reason the rule is deliberately stricter (``listed``), or UNEXPLAINED."""
    return "".join(f"{v.mutant.id}\t{v.disagreement()}\t{listed.get(v.mutant.id, 'UNEXPLAINED')}\n"
                   for v in verdicts if v.disagreement())


def read_listed() -> dict[str, str]:
    """The committed reasons, by mutant id (the third column of disagreements.txt)."""
    return {row[0]: row[2] for row in _committed_rows(DISAGREEMENTS) if len(row) == 3 and row[2] != "UNEXPLAINED"}


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
        verdicts = judge(Path(tmp))
    CORPUS.parent.mkdir(exist_ok=True)
    CORPUS.write_text(corpus_text(verdicts), encoding="utf-8")
    DISAGREEMENTS.write_text(disagreements_text(verdicts, read_listed()), encoding="utf-8")
    sys.stdout.write(table(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
