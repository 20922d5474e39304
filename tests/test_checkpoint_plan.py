"""One checkpoint plan: the plan decides once which directory holds the target's config.json, its shards and
the draft's config.json, and the budget, the rules, `check --engine`, the mounts and the fleet's preflight
data all read that directory. Every checkpoint here is written in the test's own tmp folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_safetensors_header import write_shard

from spark_compile.engine.check import config_json
from spark_compile.pipeline import Planned, run

from conftest import ROOT

TCP = ROOT / "spec" / "profiles" / "examples" / "two-node-tcp.yaml"
CONFIG = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_attention_heads": 16}


def model_dir(directory: Path) -> Path:
    """A plain model directory: a config.json and one shard (a 4 x 4 BF16 embedding)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(CONFIG))
    write_shard(directory / "model.safetensors", {"embed.weight": ("BF16", [4, 4])})
    return directory


def planned(tmp_path: Path, body: str, parent: Path = TCP) -> Planned:
    """The planned child of ``parent`` (warnings allowed), written in ``tmp_path``."""
    path = tmp_path / "child.yaml"
    path.write_text(f"extends: {os.path.relpath(parent, tmp_path)}\n{body}")
    outcome = run(path)
    assert isinstance(outcome, Planned), [f"{f.rule} {f.message}" for f in outcome.findings]
    return outcome


def local_model(*keys: str) -> str:
    """A model section read from this machine: no snapshot and no committed config.json, plus ``keys``."""
    return "model:\n  snapshot: !delete\n  config_json: !delete\n" + "".join(f"  {key}\n" for key in keys)


def weights_source(validated: Planned, rank: int = 0) -> str:
    assert validated.capacity is not None
    return validated.capacity.ranks[rank].terms["weights"].source


def model_mounts(validated: Planned) -> list[str]:
    target = validated.profile.model.container_repo
    return [m.source for r in validated.plan.ranks for m in r.mounts if m.target == target]


def test_holder_repo_without_engram_is_read_where_every_node_mounts_it(tmp_path: Path) -> None:
    repo, holder = model_dir(tmp_path / "repo"), model_dir(tmp_path / "holder")
    validated = planned(tmp_path, local_model(f"repo: {repo}", f"holder_repo: {holder}"))
    # Without Engram holder_repo means nothing (SC428): every node mounts model.repo ...
    assert model_mounts(validated) == [str(repo), str(repo)]
    # ... so check --engine reads model.repo's config.json, and the budget weighs model.repo's shards.
    assert config_json(validated) == repo / "config.json"
    assert weights_source(validated) == f"safetensors headers of {repo}, split by TP 2 / EP 1"
