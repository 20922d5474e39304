"""Pipeline parallelism in the capacity stage: each rank holds its stage's layers (the embedding on the first
stage, lm_head where the model class builds it, the draft on the last), and every stage's KV pool takes the
least token count over the stages. The split itself is held to SGLang in tests/engine/test_pp_split.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_compile.capacity.pp_split import Stage, pp_indices, stage_of
from spark_compile.capacity.weights import estimate_dsv4, text_config
from spark_compile.capacity.weights_config import bytes_per_rank, families
from spark_compile.pipeline import Rejected, run

from conftest import ROOT

EXAMPLES = ROOT / "spec" / "profiles" / "examples"
NEGATIVE = ROOT / "tests" / "profiles" / "negative"


def _config(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded


def _stages(layers: int, pp: int, architecture: str) -> list[Stage]:
    return [stage_of(rank, pp, pp, layers, None, architecture) for rank in range(pp)]


def test_nodes_map_to_stages_as_sglang_places_them() -> None:
    # Four nodes, TP 2 x PP 2: nodes 0-1 run stage 0, nodes 2-3 stage 1 (node_rank // (nnodes // pp)).
    assert [(s.start, s.end) for s in (stage_of(r, 4, 2, 61, None, "X") for r in range(4))] == \
        [(0, 30), (0, 30), (30, 61), (30, 61)]
    assert pp_indices(61, 1, 2, "20,41") == (20, 61)


def test_dsv4_stages_add_up_to_the_whole_model() -> None:
    config = _config(ROOT / "spec" / "profiles" / "dsv41-flash.config.json")
    whole = estimate_dsv4(config, 2)
    layers = int(str(text_config(config)["num_hidden_layers"]))
    stages = [estimate_dsv4(config, 2, s) for s in _stages(layers, 2, "DeepseekV4ForCausalLM")]
    assert sum(s.target for s in stages) == pytest.approx(whole.target)
    assert [s.draft for s in stages] == [0.0, whole.draft]  # the draft runs on the last stage


@pytest.mark.parametrize("architecture, extra_heads", [("Qwen2ForCausalLM", 0), ("Qwen3NextForCausalLM", 1)])
def test_family_stages_add_up_with_lm_head_where_the_model_builds_it(architecture: str, extra_heads: int) -> None:
    config = _config(EXAMPLES / "qwen3-next-80b-a3b.config.json")
    layers = int(str(config["num_hidden_layers"]))
    stages = _stages(layers, 3, architecture)
    whole = families(config)
    parts = [families(config, s) for s in stages]
    for name in ("embed", "attention", "dense_mlp", "experts", "shared", "layers"):
        assert sum(getattr(p, name) for p in parts) == getattr(whole, name), name
    assert sum(p.lm_head for p in parts) == whole.lm_head * (1 + 2 * extra_heads)
    assert [p.embed > 0 for p in parts] == [True, False, False]
    assert bytes_per_rank(config, config, 2, stages[0])[1] == bytes_per_rank(config, config, 2)[1]


def test_every_stage_sizes_the_least_pool() -> None:
    outcome = run(NEGATIVE / "pp-deepseek-v41.yaml", root=ROOT)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert planned is not None and planned.capacity is not None
    ranks = planned.capacity.ranks
    counts = {r.kv.full_token for r in ranks if r.kv is not None}
    assert len(counts) == 1 and None not in counts
    assert any("pipeline stages' minimum" in r.kv.note for r in ranks if r.kv is not None)
    assert ranks[0].gib("draft") == 0 < ranks[-1].gib("draft")
    assert "pp stage layers" in ranks[-1].terms["weights"].source
