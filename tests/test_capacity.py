"""The memory budget against published figures (capacity-facts: one operator's TP4/EP4 notes for
DeepSeek-V4.1-Flash on four Sparks), and the plan's `capacity` section and table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spark_compile.capacity.budget import Capacity, RankCapacity, Term
from spark_compile.pipeline import Rejected, run

from conftest import REFERENCE_PROFILE, ROOT, run_cli

# The operator's notes: 77 GiB of weights and about 2.5 GiB of DSpark draft layers per rank (the `Load weight
# end` load), mem-fraction-static 0.90 -> about 16 M tokens (~26.7 GB per rank); at 0.80 about 13 GB less;
# bytes_per_full_token 1670.75 (their build, DSpark block 3). Their boot's pre-load MemAvailable is not
# published: the pin below is what SGLang's arithmetic needs for 16 M at 0.90 ((24.9 GiB pool + 1.1 GiB fixed
# pools + 79.5 GiB loaded) / 0.90 = 117.2 GiB), and the 0.80 boot's 13 GB is then an independent check.
PUBLISHED = """\
extends: {reference}
engine:
  limits: {{mem_fraction_static: {fraction}}}
model:
  weights_per_rank: [77.0, 77.0, 77.0, 77.0]
  draft_weights_per_rank: [2.5, 2.5, 2.5, 2.5]
  {pin}
nccl:
  preset: {preset}
"""
PRE_LOAD_PIN = "pre_load_available_per_rank: [117.2, 117.2, 117.2, 117.2]"
# The deployment document: the reference's boots report full_token between 4.2 M and 6.6 M.
REFERENCE_BOOTS = (4.2e6, 6.6e6)


def budget(tmp_path: Path, text: str) -> Capacity:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    outcome = run(path, root=ROOT)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    assert planned is not None and planned.capacity is not None, outcome.findings
    return planned.capacity


def published(tmp_path: Path, fraction: float = 0.90, preset: str = "default", pin: str = PRE_LOAD_PIN
              ) -> RankCapacity:
    text = PUBLISHED.format(reference=os.path.relpath(REFERENCE_PROFILE, tmp_path), fraction=fraction, preset=preset,
                            pin=pin)
    return budget(tmp_path, text).ranks[1]


def test_the_reference_with_the_hardware_default_lies_inside_its_boots(tmp_path: Path) -> None:
    capacity = budget(tmp_path, f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\n")
    for rank in capacity.ranks:
        assert rank.kv is not None and rank.kv.full_token is not None
        assert REFERENCE_BOOTS[0] <= rank.kv.full_token <= REFERENCE_BOOTS[1], rank.rank
    assert capacity.ranks[0].terms["mem_available"].source.startswith("default MemAvailable of dgx-spark-gb10")


def test_a_calibrated_pre_load_predicts_its_boot_within_five_percent(tmp_path: Path) -> None:
    rank = published(tmp_path)
    assert rank.kv is not None and rank.kv.full_token is not None and rank.kv.bytes_per_full_token is not None
    assert rank.kv.full_token == pytest.approx(16e6, rel=0.05)
    assert rank.kv.full_token * rank.kv.bytes_per_full_token / 1e9 == pytest.approx(26.7, rel=0.05)
    # Their build's 1670.75 (DSpark block 3) and SGLang 0.5.23's for block 5 differ by 0.15 %.
    assert rank.kv.bytes_per_full_token == pytest.approx(1670.75, rel=0.01)


def test_a_lower_static_fraction_costs_what_was_published(tmp_path: Path) -> None:
    high, low = published(tmp_path, 0.90), published(tmp_path, 0.80)
    assert high.kv is not None and low.kv is not None
    lost = (high.kv.pool_gib - low.kv.pool_gib) * (1 << 30) / 1e9
    assert lost == pytest.approx(13, rel=0.10)


def test_the_trim_leaves_more_for_the_kv_pool(tmp_path: Path) -> None:
    trim, default = published(tmp_path, preset="trim", pin=""), published(tmp_path, preset="default", pin="")
    assert trim.terms["nccl"].gib == pytest.approx(0.13, abs=0.01)
    assert trim.gib("available") - default.gib("available") == pytest.approx(0.9 * (4.7 - 0.13), abs=0.01)


def test_every_term_says_where_it_comes_from(tmp_path: Path) -> None:
    rank = published(tmp_path)
    assert rank.terms["weights"].source == "pinned: model.weights_per_rank[1]"
    assert rank.terms["mem_available"].source == "pinned: model.pre_load_available_per_rank[1]"
    assert rank.terms["static_pool"].formula == "0.9 x 117.2"
    assert rank.terms["available"].formula == "37.7 - (1 - 0.9) x 117.2"
    assert rank.terms["prefill_transient"].formula == "14 B x chunk 2048 x prefix 524288"
    # Rank 1 holds the checkpoint: 96001542 rows of layer 1's table and 96004171 of layer 14's, read in place.
    assert rank.terms["engram_rows"].formula == "192005713 x 264 B"
    assert rank.terms["engram_rows"].source == ("192005713 rows of this rank's range in the checkpoint's shards "
                                                "(read in place)")
    assert rank.terms["engram_host"].source == "the overlay's row cache budget, SPARK_ENGRAM_CACHE_GB=4"
    assert all(term.source for term in rank.terms.values())


def test_every_rank_is_sized_from_the_minimum_over_ranks(tmp_path: Path) -> None:
    capacity = budget(tmp_path, PUBLISHED.format(reference=os.path.relpath(REFERENCE_PROFILE, tmp_path),
                                                 fraction=0.9, preset="default", pin=""))
    head, worker = capacity.ranks[0], capacity.ranks[1]
    assert worker.gib("pre_load") - head.gib("pre_load") == pytest.approx(1.3)
    assert {r.gib("pre_load_min") for r in capacity.ranks} == {head.gib("pre_load")}
    assert head.kv is not None and worker.kv is not None and head.kv.full_token == worker.kv.full_token


def test_an_unset_fraction_is_derived_as_sglang_does(tmp_path: Path) -> None:
    reference = os.path.relpath(REFERENCE_PROFILE, tmp_path)
    text = f"extends: {reference}\nengine:\n  limits:\n    mem_fraction_static: !delete\n"
    rank = budget(tmp_path, text).ranks[0]
    # GB10's 124621 MB is above 60 GiB: the 10 GiB floor outweighs 512 + 1.5 x 2048 + 4/8 x 1024 + 2 x 16 MB
    # (DeepSeek-V4 captures no prefill graphs).
    assert rank.terms["fraction"] == Term(0.918, "unset: SGLang derives it (handle_gpu_memory_settings)",
                                          "(124621 MB - 10240 MB reserved) / 124621 MB; reserved: 512 + 1.5 x 2048 "
                                          "tokens + 4 x 128 MB (TP x PP) + 32 MB graphs, at least 10240 MB")


def test_plan_json_names_the_kv_figures_as_sglang_does() -> None:
    result = run_cli("plan", str(REFERENCE_PROFILE.relative_to(ROOT)), "--json")
    assert result.returncode == 0, result.stderr
    ranks = json.loads(result.stdout)["capacity"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    one = ranks[1]
    assert one["bytes_per_full_token"] == 1673.31
    assert isinstance(one["full_token"], int) and one["requests_at_context_length"] == one["full_token"] // 524288
    assert one["terms"]["weights"]["source"].startswith("estimate from model.config_json (dsv41-flash.config.json)")
    assert one["terms"]["nccl"] == {"gib": 0.13, "formula": "",
                                    "source": "the trim preset's buffers: 0.14 GB pinned, measured on the "
                                              "reference fleet"}


def test_plan_capacity_prints_a_table() -> None:
    result = run_cli("plan", str(REFERENCE_PROFILE.relative_to(ROOT)), "--capacity")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fits: ") and "requests at context_length 524288" in lines[0]
    lines = lines[1:]
    assert lines[0].split() == ["rank", "node", "total", "weights", "draft", "nccl", "head", "static", "kv", "pool",
                                "outside", "graphs", "transient", "host", "limit", "full_token", "requests"]
    assert [line.split()[:2] for line in lines[1:5]] == [["0", "spark-0"], ["1", "spark-1"], ["2", "spark-2"],
                                                         ["3", "spark-3"]]
    assert "  prefill_transient: DSV4 sparse indexer's prefill peak (published) (14 B x chunk 2048 x prefix " \
           "524288)" in lines


def test_a_snapshot_on_this_machine_is_weighed_from_its_headers(tmp_path: Path) -> None:
    from test_safetensors_header import checkpoint

    snapshot = tmp_path / "repo" / "snapshots" / "0f3c9a1d5e7b2468ace13579bdf02468ace13579"
    snapshot.mkdir(parents=True)
    checkpoint(snapshot)
    reference = os.path.relpath(REFERENCE_PROFILE, tmp_path)
    rank = budget(tmp_path, f"extends: {reference}\nmodel: {{repo: {tmp_path}/repo, holder_repo: {tmp_path}/repo}}\n"
                  ).ranks[1]
    source = f"safetensors headers of {snapshot}, split by TP 4 / EP 4"
    per_rank = ((2048 + 256 + 16 + 512 + 256 + 1024) / 4 + 128 + 1 + 32 + 128) / (1 << 30)
    assert rank.terms["weights"] == Term(per_rank, source, "sum of tensor bytes per rank")
    assert rank.terms["draft"].source == source
