"""Will it fit, for every model kind: weights and KV tokens from config.json alone (MHA/GQA, MLA, hybrid
SWA, hybrid linear attention, DeepSeek-V4), the verdict, and a refusal with a working hint per family."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from spark_compile.capacity.budget import Capacity
from spark_compile.capacity.format import verdict
from spark_compile.capacity.kv_pools import Layout, gdn_state_bytes, mha_token_bytes, size_pool, with_draft
from spark_compile.pipeline import Rejected, run

from conftest import ROOT, run_cli

SPARKRUN_PYTHON = ROOT / ".cache" / "sparkrun-0.4.2" / "bin" / "python"  # made by .ci/install-sparkrun

EXAMPLES = sorted((ROOT / "spec" / "profiles" / "examples").glob("*.yaml"))
FIXTURES = ROOT / "tests" / "fixtures" / "capacity"


def planned(path: Path) -> tuple[Capacity, list[str]]:
    outcome = run(path, root=ROOT)
    plan = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert plan is not None and plan.capacity is not None, outcome.findings
    return plan.capacity, [f"{f.rule} {f.message}\n  hint: {f.hint}" for f in outcome.findings
                           if f.rule.startswith("SC44")]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_shipped_example_has_a_verdict_and_a_token_count(path: Path) -> None:
    capacity, _ = planned(path)
    for rank in capacity.ranks:
        assert rank.terms["weights"].gib is not None, rank.terms["weights"].source
        assert rank.kv is not None and rank.kv.full_token, rank.kv
    assert verdict(capacity).startswith("fits: ")


def test_a_470_gb_bf16_checkpoint_on_one_spark_is_refused_with_the_tp_that_fits() -> None:
    capacity, found = planned(FIXTURES / "qwen3-235b-bf16-1spark.yaml")
    assert found == [
        "SC440 rank 0 (spark-a) loads 437.8 GiB weights + 0.0 GiB draft = 437.8 GiB, more than the 111.7 GiB free "
        "before the load (113.0 - 0.00 NCCL - 1.3 head share)\n"
        "  hint: spread the model over 8 nodes: add nodes to fleet.nodes and set engine.parallel.tp: 8 (the least "
        "power-of-two TP whose share fits mem_fraction_static 0.888)"]
    assert verdict(capacity).startswith("does not fit: rank 0 (spark-a) loads 437.8 GiB")


def test_an_mla_checkpoint_larger_than_two_sparks_is_refused() -> None:
    _, found = planned(FIXTURES / "deepseek-v3-2spark.yaml")
    assert [f.split(" ")[0] for f in found] == ["SC440"]
    assert "engine.parallel.tp: 8" in found[0]


def test_deepseek_v4_flash_in_its_official_layout_fits_at_tp2() -> None:
    capacity, found = planned(FIXTURES / "dsv4-flash-official-tp2.yaml")
    assert not [f for f in found if f.startswith(("SC440", "SC441", "SC447"))]
    assert verdict(capacity).startswith("fits: ")
    # expert_dtype at the top level: the experts are fp4, not fp8 (fp8 would need about twice the bytes).
    assert capacity.ranks[0].gib("weights") < 85


def test_the_gqa_pool_is_kv_heads_per_rank_by_head_dims_by_layers() -> None:
    # Qwen3-30B-A3B at TP1 in bf16: 4 KV heads x (128 + 128) x 2 B per layer, 48 layers.
    assert mha_token_bytes(4, 128, 128, 1, 2) * 48 == 98304
    # At TP8 each rank keeps one KV head (replicated), not half of one.
    assert mha_token_bytes(4, 128, 128, 8, 2) == 512
    assert with_draft(512, 94, 1) == 512 * 94 + 512


def test_the_linear_attention_pool_takes_its_states_first() -> None:
    # Qwen3-Next-80B at TP2: 36 GDN layers, conv (2 x 16 x 128 + 32 x 128) / 2 x 3 x 2 B + SSM 16 x 128 x 128 x 4 B.
    state = gdn_state_bytes(16, 32, 128, 128, 4, 36, 2)
    assert state == (8192 // 2 * 3 * 2 + 16 * 128 * 128 * 4) * 36
    pool = size_pool(Layout("hybrid", 12288.0, state), 10 << 30, 1)
    budget = (10 << 30) * 0.9 / 1.9
    assert pool.state_slots == int((budget - state) // state)
    assert pool.full_token == int(((10 << 30) - (pool.state_slots + 1) * state) // 12288)


def test_the_swa_pool_keeps_a_ratio_of_window_tokens() -> None:
    pool = size_pool(Layout("swa", 18 * 2048 + 0.8 * 18 * 2048, swa_ratio=0.8), 1 << 30, 1)
    assert pool.full_token == int((1 << 30) // (18 * 2048 * 1.8))
    assert pool.swa_token == int(pool.full_token * 0.8)


def test_a_committed_index_gives_the_exact_total(tmp_path: Path) -> None:
    example = ROOT / "spec" / "profiles" / "examples"
    for name in ("single-node.yaml", "qwen3-30b-a3b.config.json"):
        (tmp_path / name).write_text((example / name).read_text())
    (tmp_path / "qwen3-30b-a3b.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 61_000_000_000}, "weight_map": {}}))
    weights = planned(tmp_path / "single-node.yaml")[0].ranks[0].terms["weights"]
    assert weights.source == ("exact total from qwen3-30b-a3b.safetensors.index.json (metadata.total_size), split "
                              "by TP 1 in the families' shares")
    assert weights.gib == pytest.approx(61e9 / (1 << 30), rel=1e-3)


_ESTIMATE = """
import json, sys
from sparkrun.core.recipe import Recipe
est = Recipe.load(sys.argv[1]).estimate_vram(auto_detect=False)
print(json.dumps({"weights": est.model_weights_gb / est.tensor_parallel, "kv": est.kv_cache_per_token_bytes,
                  "tp": est.tensor_parallel}))
"""


@pytest.mark.parametrize("name", ["two-node-tcp", "qwen3-235b-nvfp4-4spark-roce"])
def test_sparkrun_reads_the_exported_weights_and_kv_bytes_as_the_budget_has_them(tmp_path: Path, name: str) -> None:
    path = ROOT / "spec" / "profiles" / "examples" / f"{name}.yaml"
    recipe = tmp_path / "recipe.yaml"
    assert run_cli("export", "--sparkrun", str(path.relative_to(ROOT)), "-o", str(recipe)).returncode == 0
    assert SPARKRUN_PYTHON.exists(), "run .ci/install-sparkrun .cache/sparkrun-0.4.2"
    done = subprocess.run([str(SPARKRUN_PYTHON), "-c", _ESTIMATE, str(recipe)], capture_output=True,
                          text=True, check=False, env={"HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)
    rank = planned(path)[0].ranks[0]
    assert rank.kv is not None and rank.kv.bytes_per_full_token is not None
    tp = rank.gib("weights") and theirs["tp"]
    assert theirs["weights"] == pytest.approx(rank.gib("weights") + rank.gib("draft"), rel=1e-3)
    assert theirs["kv"] == pytest.approx(rank.kv.bytes_per_full_token * tp, rel=1e-6)
