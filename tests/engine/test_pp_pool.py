"""A pipeline stage's DeepSeek-V4 KV pool (the capacity stage's twin on the stage's layers) against SGLang
0.5.23's DSV4PoolConfigurator given the same stage (tests/engine/pp_pool_oracle.py). SGLang refuses pp for
DeepSeek-V4.1 at start, so the reference's argv is resolved and the configurator handed each stage's layers,
as ModelRunner would on a stage."""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from spark_compile.capacity.kv_predict import CapacityInputs, context_length, predict_kv
from spark_compile.capacity.pp_split import Stage, pp_indices
from spark_compile.capacity.weights import GIB, text_config
from spark_compile.engine.check import config_json, hardware_request, model_config, probe_job
from spark_compile.pipeline import Planned, Rejected, run

from conftest import REFERENCE_PROFILE, ROOT
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

AVAILABLE = 9 << 30
SPLITS = [(2, None), (3, None), (2, "10,30")]


def _sglang(request: dict[str, Any]) -> list[list[Any]]:
    done = subprocess.run([engine_python(), str(Path(__file__).with_name("pp_pool_oracle.py"))],
                          input=json.dumps(request), capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result: list[list[Any]] = json.loads(done.stdout.splitlines()[-1])
    return result


def _same(stage: Stage) -> Stage:
    return stage


def test_each_stage_pool_is_sglangs_own(tmp_path: Path) -> None:
    outcome = run(REFERENCE_PROFILE, root=ROOT)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert isinstance(planned, Planned)
    config = json.loads(config_json(planned).read_text())
    layers = text_config(config)["num_hidden_layers"]
    (tmp_path / "config.json").write_text(model_config(config_json(planned)), encoding="utf-8")
    stages = [Stage(*pp_indices(layers, r, pp, part), layers, pp, partition=part)
              for pp, part in SPLITS for r in range(pp)]
    theirs = _sglang({"hardware": hardware_request("dgx-spark-gb10"), "available_bytes": AVAILABLE,
                      "job": probe_job(planned, tmp_path),
                      "stages": [[s.start, s.end, i, s.pp] for i, s in enumerate(stages)]})
    inputs = CapacityInputs(config, "", None, "")
    context = context_length(planned.profile, inputs)
    for stage, (their_bpft, their_tokens) in zip(stages, theirs, strict=True):
        ours = predict_kv(planned.profile, inputs, AVAILABLE / GIB, context, partial(_same, stage))
        if isinstance(their_tokens, str):  # a stage with no per-token bytes: SGLang divides by zero, we refuse
            assert ours.full_token is None and "division by zero" in ours.note, (stage.start, stage.end)
            continue
        assert ours.bytes_per_full_token == pytest.approx(their_bpft, rel=1e-9), (stage.start, stage.end)
        assert ours.full_token == their_tokens, (stage.start, stage.end)
