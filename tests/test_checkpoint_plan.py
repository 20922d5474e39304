"""One checkpoint plan: the plan decides once which directory holds the target's config.json, its shards and
the draft's config.json, and the budget, the rules, `check --engine`, the mounts and the fleet's preflight
data all read that directory. Every checkpoint here is written in the test's own tmp folder."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from test_safetensors_header import write_shard

from spark_compile.capacity.inputs import capacity_inputs
from spark_compile.common.findings import dotted
from spark_compile.engine.check import config_json
from spark_compile.engine.probe import NotRunError
from spark_compile.pipeline import Planned, Rejected, run
from spark_compile.rules.registry import Context
from spark_compile.spec.engine_values import DRAFT_PATH
from spark_compile.stages.checkpoint import ModelFiles, NodeCheckpoint, committed_config, config_file

from conftest import REFERENCE_PROFILE, ROOT

EXAMPLES = ROOT / "spec" / "profiles" / "examples"
TCP, EAGLE3, GPT_OSS = (EXAMPLES / name for name in ("two-node-tcp.yaml", "qwen3-235b-nvfp4-2spark-roce.yaml",
                                                     "gpt-oss-120b-1spark.yaml"))
SNAPSHOT = "0f3c9a1d5e7b2468ace13579bdf02468ace13579"  # the reference profile's
CONFIG = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_attention_heads": 16}


def model_dir(directory: Path) -> Path:
    """A plain model directory: a config.json and one shard (a 4 x 4 BF16 embedding)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(CONFIG))
    write_shard(directory / "model.safetensors", {"embed.weight": ("BF16", [4, 4])})
    return directory


def planned(tmp_path: Path, body: str, parent: Path = TCP, *, errors: bool = False) -> Planned:
    """The planned child of ``parent`` (warnings allowed; with ``errors``, one only the rules refuse), written in
    ``tmp_path``."""
    path = tmp_path / "child.yaml"
    path.write_text(f"extends: {os.path.relpath(parent, tmp_path)}\n{body}")
    outcome = run(path)
    if errors:
        assert isinstance(outcome, Rejected) and outcome.planned is not None, outcome
        return outcome.planned
    assert isinstance(outcome, Planned), [f"{f.rule} {f.message}" for f in outcome.findings]
    return outcome


def fleet_array(validated: Planned, name: str) -> list[str]:
    """One per-rank array of fleet.env, the data the fleet's preflight checks read."""
    text = next(a.content.decode() for a in validated.files if a.path == "fleet/fleet.env")
    line = next(line for line in text.splitlines() if line.startswith(f"{name}=("))
    return shlex.split(line.removeprefix(f"{name}=(").removesuffix(")"))


def rules_context(validated: Planned) -> Context:
    """What the rules see of the planned profile, as the rules stage builds it."""
    resolved = validated.resolved
    return Context(validated.profile, validated.plan, lambda path: path in resolved.origins,
                   committed_config(resolved, validated.plan.checkpoint), validated.capacity, resolved)


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
    assert fleet_array(validated, "rank_config") == [f"{repo}/config.json"] * 2


def test_engram_holder_reads_its_own_copy_and_this_machine_reads_the_holders(tmp_path: Path) -> None:
    holder = model_dir(tmp_path / "holder" / "snapshots" / SNAPSHOT)
    validated = planned(tmp_path, f"model:\n  repo: {tmp_path}/repo\n  holder_repo: {tmp_path}/holder\n"
                                  "  config_json: !delete\n", REFERENCE_PROFILE)
    repo = f"{tmp_path}/repo/snapshots/{SNAPSHOT}"
    # spark-1 holds the checkpoint: it mounts holder_repo, every other node model.repo.
    other = NodeCheckpoint(f"{tmp_path}/repo", "repo", repo)
    assert validated.plan.checkpoint.nodes == (
        other, NodeCheckpoint(f"{tmp_path}/holder", "holder_repo", str(holder)), other, other)
    assert model_mounts(validated) == [f"{tmp_path}/{name}" for name in ("repo", "holder", "repo", "repo")]
    assert [dotted(m.origin) for m in validated.plan.ranks[1].mounts if m.source == f"{tmp_path}/holder"] == [
        "model.holder_repo"]
    # This machine reads the holder's copy: check --engine its config.json, the budget its shards.
    assert validated.plan.checkpoint.target == ModelFiles(str(holder), None, ("model", "config_json"))
    assert config_json(validated) == holder / "config.json"
    assert weights_source(validated, 1) == f"safetensors headers of {holder}, split by TP 4 / EP 4"
    # The fleet's preflight data: each node's config.json, and the holder's index of the shards its rows are in.
    assert fleet_array(validated, "rank_config") == [f"{repo}/config.json", f"{holder}/config.json",
                                                     f"{repo}/config.json", f"{repo}/config.json"]
    assert fleet_array(validated, "rank_rows_path")[1] == f"{holder}/model.safetensors.index.json"
    assert fleet_array(validated, "rank_models") == [repo, str(holder), repo, repo]


def test_the_budget_estimates_from_the_config_json_the_plan_names(tmp_path: Path) -> None:
    holder = tmp_path / "holder" / "snapshots" / SNAPSHOT
    holder.mkdir(parents=True)
    (holder / "config.json").write_bytes((REFERENCE_PROFILE.parent / "dsv41-flash.config.json").read_bytes())
    validated = planned(tmp_path, f"model:\n  repo: {tmp_path}/repo\n  holder_repo: {tmp_path}/holder\n"
                                  "  config_json: !delete\n", REFERENCE_PROFILE)
    assert weights_source(validated) == (f"estimate from {holder}/config.json (parameters x stored bytes, split by "
                                         "TP 4, x 1.115 load over checkpoint, published)")


def test_engram_without_a_holder_is_read_at_model_repo(tmp_path: Path) -> None:
    repo = model_dir(tmp_path / "repo" / "snapshots" / SNAPSHOT)
    model_dir(tmp_path / "holder" / "snapshots" / SNAPSHOT)
    # No node holds the checkpoint (SC406 refuses it): every node mounts model.repo, and so it is read here.
    validated = planned(tmp_path, f"model:\n  repo: {tmp_path}/repo\n  holder_repo: {tmp_path}/holder\n"
                                  "  config_json: !delete\nfleet:\n  nodes:\n    - !replace {name: spark-1, "
                                  "fabric_ip: 192.0.2.12, ssh: spark@192.0.2.12, home: /home/spark}\n",
                        REFERENCE_PROFILE, errors=True)
    assert validated.plan.checkpoint.target.directory == str(repo)
    assert {node.field for node in validated.plan.checkpoint.nodes} == {"repo"}
    assert config_json(validated) == repo / "config.json"
    assert weights_source(validated) == f"safetensors headers of {repo}, split by TP 4 / EP 4"


def test_every_reader_reads_the_committed_copy_the_child_names(tmp_path: Path) -> None:
    (tmp_path / "mine.json").write_text(json.dumps({**CONFIG, "num_attention_heads": 6}))
    validated = planned(tmp_path, "model:\n  config_json: mine.json\n")
    mine = tmp_path / "mine.json"
    assert config_file(validated.resolved, validated.plan.checkpoint.target) == mine
    assert config_json(validated) == mine
    inputs = capacity_inputs(validated.resolved, validated.profile, validated.plan.checkpoint)
    assert inputs.config == {**CONFIG, "num_attention_heads": 6}
    assert inputs.config_source == "model.config_json (mine.json)"
    context = rules_context(validated)
    assert context.checkpoint is not None
    assert (context.checkpoint.file, context.checkpoint.attention_heads) == ("mine.json", 6)


def test_a_draft_is_read_where_every_node_mounts_it(tmp_path: Path) -> None:
    draft = model_dir(tmp_path / "draft")
    validated = planned(tmp_path, f"engine:\n  speculative:\n    draft:\n      repo: {draft}\n"
                                  "      config_json: !delete\n", EAGLE3)
    assert validated.plan.checkpoint.draft == ModelFiles(str(draft), None, (*DRAFT_PATH, "config_json"))
    assert [m.source for r in validated.plan.ranks for m in r.mounts if m.origin == (*DRAFT_PATH, "repo")] == [
        str(draft)] * 2
    assert config_json(validated, DRAFT_PATH) == draft / "config.json"
    target = validated.plan.checkpoint.target.directory
    assert fleet_array(validated, "rank_models") == [f"{target}:{draft}"] * 2


def test_the_rules_read_the_drafts_committed_copy_the_plan_names(tmp_path: Path) -> None:
    (tmp_path / "head.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                                    "num_attention_heads": 32, "num_key_value_heads": 8,
                                                    "max_position_embeddings": 40960}))
    validated = planned(tmp_path, "engine:\n  speculative:\n    draft:\n      config_json: head.json\n", EAGLE3)
    assert validated.plan.checkpoint.draft is not None
    assert config_file(validated.resolved, validated.plan.checkpoint.draft) == tmp_path / "head.json"
    assert config_json(validated, DRAFT_PATH) == tmp_path / "head.json"
    context = rules_context(validated)
    assert context.draft_checkpoint is not None
    assert (context.draft_checkpoint.file, context.draft_checkpoint.kv_heads) == ("head.json", 8)


def test_a_hub_id_leaves_nothing_to_read_on_this_machine(tmp_path: Path) -> None:
    validated = planned(tmp_path, "model:\n  config_json: !delete\n", GPT_OSS)
    assert validated.plan.checkpoint.nodes == (NodeCheckpoint(None, "repo", None),)
    assert validated.plan.checkpoint.target == ModelFiles(None, None, ("model", "config_json"))
    inputs = capacity_inputs(validated.resolved, validated.profile, validated.plan.checkpoint)
    assert (inputs.config, inputs.split) == (None, None)
    assert inputs.config_source == "no config.json: model.config_json is unset and the model directory is not on " \
                                   "this machine"
    assert inputs.split_source == "a hub id names the model"
    with pytest.raises(NotRunError) as refused:
        config_json(validated)
    assert str(refused.value) == ("no config.json: model.hub_id openai/gpt-oss-120b is resolved on the node, and "
                                  "model.config_json is unset (commit a copy of its config.json beside the profile "
                                  "and name it there)")
    assert fleet_array(validated, "rank_config") == [""]
