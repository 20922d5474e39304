"""The defaults SGLang derives from the GPU's memory (compiler/capacity/preload.py: chunked_prefill_size,
the decode graphs' max_bs, mem_fraction_static) against SGLang 0.5.23's own resolution on the engine venv,
a GB10's CUDA total answered to get_device_memory_capacity (tests/engine/memory_defaults_oracle.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from spark_compile.capacity.preload import cuda_total_gib, memory_defaults, memory_inputs
from spark_compile.capacity.weights import text_config
from spark_compile.engine.check import config_json, hardware_request, model_config, probe_job
from spark_compile.pipeline import Planned, Rejected, run

from conftest import REFERENCE_PROFILE, ROOT
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

EXAMPLES = ROOT / "spec" / "profiles" / "examples"
SINGLE, TWO, EAGLE3 = EXAMPLES / "single-node.yaml", EXAMPLES / "two-node-tcp.yaml", \
    EXAMPLES / "qwen3-235b-nvfp4-2spark-roce.yaml"
UNSET = "  limits:\n    mem_fraction_static: !delete\n"
# (profile, its engine section's changes): mem_fraction_static is unset in each, so SGLang derives it.
CASES = {
    "one node, no chunk": (SINGLE, ""),
    "one node, chunk set": (SINGLE, "  limits: {chunked_prefill_size: 4096}\n"),
    "one node, request cap below the tier's max_bs": (SINGLE, "  limits: {max_running_requests: 32}\n"),
    "one node, max_total_tokens below the chunk": (SINGLE, "  limits: {max_total_tokens: 3000}\n"),
    "one node, decode sizes pinned": (SINGLE, "  cuda_graph: {batch_sizes: [1, 2, 4, 8]}\n"),
    "one node, no prefill graphs": (SINGLE, "  cuda_graph: {prefill: false}\n"),
    "one node, no graphs": (SINGLE, "  cuda_graph: {enabled: false}\n"),
    "tp2": (TWO, ""),
    "tp2, MLA": (ROOT / "tests" / "fixtures" / "capacity" / "deepseek-v3-2spark.yaml", ""),
    "tp2, EAGLE3, no chunk": (EAGLE3, UNSET),
    "tp2, EAGLE3, chunk set": (EAGLE3, "  limits:\n    mem_fraction_static: !delete\n    chunked_prefill_size: 4096\n"),
    "tp4, DSPARK, chunk set": (REFERENCE_PROFILE, UNSET),
    "tp4, DSPARK, no chunk": (REFERENCE_PROFILE, UNSET + "    chunked_prefill_size: !delete\n"),
    "tp4, no speculative": (REFERENCE_PROFILE, UNSET + "  speculative:\n    algorithm: none\n"
                                                       "    dspark_block_size: !delete\n"),
    "attention DP 2": (ROOT / "tests" / "profiles" / "negative" / "chunk-per-dp-rank.yaml", ""),
    "pipeline parallel": (ROOT / "tests" / "profiles" / "negative" / "pp-does-not-fit.yaml", ""),
}


def _planned(tmp_path: Path, index: int, name: str) -> Planned:
    base, engine = CASES[name]
    path = tmp_path / f"{index}.yaml"
    path.write_text(f"extends: {os.path.relpath(base, tmp_path)}\n" + (f"engine:\n{engine}" if engine else ""))
    outcome = run(path, root=ROOT)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert planned is not None, outcome.findings
    return planned


def _sglang(jobs: list[dict[str, Any]], gpu_mb: float) -> list[list[dict[str, Any]]]:
    request = {"hardware": hardware_request("dgx-spark-gb10"), "gpu_mb": gpu_mb, "jobs": jobs}
    done = subprocess.run([engine_python(), str(Path(__file__).with_name("memory_defaults_oracle.py"))],
                          input=json.dumps(request), capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result: list[list[dict[str, Any]]] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_defaults_are_sglangs_own_on_a_gb10(tmp_path: Path) -> None:
    planned = {name: _planned(tmp_path, index, name) for index, name in enumerate(CASES)}
    jobs = []
    for index, one in enumerate(planned.values()):
        where = tmp_path / f"model-{index}"
        where.mkdir()
        (where / "config.json").write_text(model_config(config_json(one)), encoding="utf-8")
        jobs.append(probe_job(one, where))
    gpu_mb = cuda_total_gib(next(iter(planned.values())).profile)[0] * 1024
    assert gpu_mb == pytest.approx(124621, abs=1)  # GB10's CUDA total
    fractions = set()
    for (name, one), ranks in zip(planned.items(), _sglang(jobs, gpu_mb), strict=True):
        config = text_config(json.loads(config_json(one).read_text()))
        inputs = memory_inputs(one.profile, config)
        ours = memory_defaults(inputs)
        for rank in ranks:  # SGLang runs the chunk per attention-DP rank, divided after the fraction is set
            assert rank == {"fraction": ours.fraction, "chunk": ours.chunked_prefill_size // inputs.attn_dp,
                            "decode_max_bs": ours.decode_max_bs}, name
        assert one.capacity is not None and one.capacity.ranks[0].terms["fraction"].gib == ours.fraction, name
        fractions.add(ours.fraction)
    assert len(fractions) >= 6  # the cases reach different parts of the arithmetic
