"""The speculative settings SGLang derives when a profile leaves them unset (compiler/capacity/spec_defaults.py)
against SGLang 0.5.23's own resolution on the engine venv (tests/engine/draft_tokens_oracle.py). SGLang refuses
EAGLE and NGRAM on DeepSeek-V4 before its speculative hook runs, so those profiles' speculative flags are
resolved on a model that takes them; DeepSeek-V4 picks the same auto parameters as that model."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from spark_compile.capacity.kv_predict import engine_reads
from spark_compile.capacity.spec_defaults import resolve_speculation, written
from spark_compile.engine.check import config_json, hardware_request, model_config, probe_job
from spark_compile.pipeline import Planned, Rejected, run

from conftest import ROOT
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

NEGATIVE = ROOT / "tests" / "profiles" / "negative"
SUBJECTS = [NEGATIVE / "dspark-block-without-dspark.yaml", NEGATIVE / "lookup-without-dspark.yaml",
            NEGATIVE / "spec-algorithm-for-model.yaml", ROOT / "tests" / "engine" / "profiles" / "ngram.yaml"]
QWEN = ROOT / "spec" / "profiles" / "examples" / "single-node.yaml"
LLAMA = ROOT / "tests" / "fixtures" / "capacity" / "llama-70b-bf16-1spark.yaml"
# (base profile, speculative section): further cases of the arithmetic, written beside the base.
EXTRA = {
    "EAGLE on Llama: the wide auto parameters": (LLAMA, "{algorithm: EAGLE}"),
    "EAGLE, steps written, top-1": (QWEN, "{algorithm: EAGLE, num_steps: 2, eagle_topk: 1}"),
    "EAGLE, top-2, tokens written": (QWEN, "{algorithm: EAGLE, num_steps: 2, eagle_topk: 2, num_draft_tokens: 5}"),
    "NGRAM, tokens written": (QWEN, "{algorithm: NGRAM, num_draft_tokens: 20}"),
    "STANDALONE": (LLAMA, "{algorithm: STANDALONE}"),
}


def _planned(path: Path) -> Planned:
    outcome = run(path, root=ROOT)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert planned is not None, outcome.findings
    return planned


def _job(base: Planned, subject: Planned, where: Path) -> dict[str, Any]:
    """The base's first rank with its speculative flags replaced by the subject's."""
    where.mkdir()
    (where / "config.json").write_text(model_config(config_json(base)), encoding="utf-8")
    job = probe_job(base, where)
    words = [w for o in subject.plan.ranks[0].engine_options if o.flag.startswith("--speculative") for w in o.words]
    kept = [w for o in base.plan.ranks[0].engine_options if not o.flag.startswith("--speculative") for w in o.words]
    job["ranks"] = [{**job["ranks"][0], "argv": kept + words}]
    return job


def _sglang(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    request = {"hardware": hardware_request("dgx-spark-gb10"), "jobs": jobs}
    done = subprocess.run([engine_python(), str(Path(__file__).with_name("draft_tokens_oracle.py"))],
                          input=json.dumps(request), capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result: list[dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_draft_token_count_is_sglangs_own(tmp_path: Path) -> None:
    cases: list[tuple[str, Planned, Planned]] = [(str(p.relative_to(ROOT)), _planned(QWEN), _planned(p))
                                                 for p in SUBJECTS]
    for index, (name, (base_path, section)) in enumerate(EXTRA.items()):
        path = tmp_path / f"{index}.yaml"
        path.write_text(f"extends: {os.path.relpath(base_path, tmp_path)}\nengine:\n  speculative: {section}\n")
        cases.append((name, _planned(base_path), _planned(path)))
    jobs = [_job(base, subject, tmp_path / f"model-{i}") for i, (_, base, subject) in enumerate(cases)]
    for (name, base, subject), got in zip(cases, _sglang(jobs), strict=True):
        assert got["refused"] is None, (name, got)
        ours = resolve_speculation(written(subject.profile), base.profile.model.architecture)
        assert ours is not None, name
        assert (got["tokens"], got["steps"], got["topk"]) == (ours.num_draft_tokens, ours.num_steps, ours.topk), name
        # What the capacity stage reads for the subject's own architecture is the same (DeepSeek-V4, like the
        # base, takes _auto_choose_speculative_params' default row).
        assert engine_reads(subject.profile).speculation == ours, name
