"""List patches in `extends:`: a keyed list entry (a node, a mount, a window check) is updated, removed
(`!delete NAME`) or replaced (`!replace {...}`) by its key, in place, each value keeping its origin."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest

from spark_compile.stages.load import LoadError
from spark_compile.stages.resolve import resolve

from conftest import REFERENCE_PROFILE, ROOT

FOUR = ROOT / "spec" / "profiles" / "examples" / "qwen3-235b-nvfp4-4spark-roce.yaml"


def _child(tmp_path: Path, body: str, parent: Path = REFERENCE_PROFILE) -> Path:
    path = tmp_path / "child.yaml"
    path.write_text(f"extends: {os.path.relpath(parent, tmp_path)}\n{body}")
    return path


def test_replace_swaps_a_node_in_place_with_the_childs_values_only(tmp_path: Path) -> None:
    resolved = resolve(_child(tmp_path, "fleet:\n  nodes:\n    - !replace {name: spark-2, fabric_ip: 192.0.2.23, "
                                        "ssh: ops@192.0.2.23, home: /home/ops}\n"))
    nodes = resolved.data["fleet"]["nodes"]
    assert [n["name"] for n in nodes] == ["spark-0", "spark-1", "spark-2", "spark-3"]
    assert nodes[2] == {"name": "spark-2", "fabric_ip": "192.0.2.23", "ssh": "ops@192.0.2.23", "home": "/home/ops"}
    assert type(nodes[2]) is dict  # the validator reads plain data
    origin = resolved.origin(("fleet", "nodes", 2, "fabric_ip"))
    assert (origin.spot.value.file, origin.spot.value.line, origin.via) == (str(tmp_path / "child.yaml"), 4, ())
    assert resolved.origin(("fleet", "nodes", 3, "ssh")).spot.value.file.endswith("spec/profiles/dsv41-4spark.yaml")


def test_replace_of_a_mapping_drops_what_it_does_not_say(tmp_path: Path) -> None:
    resolved = resolve(_child(tmp_path, "container: !replace {shm_size: 8g}\n"))
    assert resolved.data["container"] == {"shm_size": "8g"}


def test_mounts_are_keyed_by_target(tmp_path: Path) -> None:
    single = ROOT / "spec" / "profiles" / "examples" / "single-node.yaml"
    resolved = resolve(_child(tmp_path, "container:\n  mounts:\n    - !delete /hf-cache\n"
                                        "    - {source: /srv/tok, target: /tok}\n", single))
    assert resolved.data["container"]["mounts"] == [{"source": "/srv/tok", "target": "/tok"}]


@pytest.mark.parametrize(("body", "message"), [
    ("fleet:\n  nodes:\n    - !replace {name: spark-9, fabric_ip: 192.0.2.99}\n",
     "!replace: no inherited item has name 'spark-9'"),
    ("fleet:\n  nodes:\n    - !delete spark-9\n", "!delete spark-9: no inherited item has name 'spark-9'"),
    ("kubernetes: !replace {}\n", "!replace of 'kubernetes': no profile it extends sets it"),
])
def test_a_patch_that_matches_nothing_is_a_finding(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(LoadError) as failed:
        resolve(_child(tmp_path, body))
    assert (failed.value.finding.rule, failed.value.finding.message) == ("SC112", message)
    assert failed.value.finding.position.line == (4 if "nodes" in body else 2)


def test_replace_in_a_profile_that_extends_nothing_is_a_finding(tmp_path: Path) -> None:
    path = tmp_path / "alone.yaml"
    path.write_text("name: x\ncontainer: !replace {shm_size: 8g}\n")
    with pytest.raises(LoadError) as failed:
        resolve(path)
    finding = failed.value.finding
    assert (finding.rule, finding.position.line, finding.message) == (
        "SC112", 2, "!replace in a profile that extends nothing: there is nothing to replace")


def _files(path: Path) -> tuple[object, dict[str, bytes]]:
    from spark_compile.pipeline import planned, run

    validated = planned(run(path))
    return validated, {a.path: a.content for a in validated.files}


def _changed_lines(old: bytes, new: bytes) -> list[str]:
    diff = difflib.unified_diff(old.decode().splitlines(), new.decode().splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def _diff_is_the_node_and_the_fleet(diff: Any, node_files: set[str]) -> None:
    """What `diff` reports of the rendered files: the removed ranks' files gone, the fleet data (README, fleet/,
    plan.json) and, on the other ranks, only what the node count and tp are written into."""
    gone = [g for g in diff.artifacts.changes if g.ranks and set(g.ranks) <= {2, 3}]
    assert all(g.change.new is None for g in gone)
    assert {g.change.file for g in gone if not g.shared} == node_files
    others = [g for g in diff.artifacts.changes if g.ranks and not set(g.ranks) <= {2, 3}]
    assert sorted((g.ranks, g.change.file, diff.sources.get(g.change)) for g in others) == [
        ((0,), "sglang-qwen3-235b-4spark.service", None),
        ((0, 1), "docker-run.sh", "engine.parallel.tp, fleet.nodes"),
        ((0, 1), "fleet/fleet.env", "engine.parallel.tp"), ((0, 1), "fleet/fleet.env", "fleet.nodes"),
        ((0, 1), "plan.json", "engine.parallel.tp"), ((0, 1), "plan.json", "fleet.nodes"),
        ((1,), "sglang-qwen3-235b-4spark.service", None)]
    assert all(g.change.key.startswith("[Unit] Description") for g in others if g.change.file.endswith(".service"))
    shared = {g.change.file for g in diff.artifacts.changes if not g.ranks}
    assert shared == {"README.md", "fleet/README.md", "fleet/fleet.env", "plan.json"}
    assert diff.artifacts.renamed == [] and diff.artifacts.folds == []


def test_removing_inherited_nodes_compiles_the_fleet_without_them(tmp_path: Path) -> None:
    from spark_compile.review.diff import diff_profiles

    # Two nodes go: tp 3 cannot split the model's 64 attention heads (SC242), tp 2 can.
    child = _child(tmp_path, "fleet:\n  nodes:\n    - !delete spark-c\n    - !delete spark-d\n"
                   "engine:\n  parallel: {tp: 2}\n", FOUR)
    old, before = _files(FOUR)
    new, after = _files(child)
    assert [r.node for r in new.plan.ranks] == ["spark-a", "spark-b"]  # type: ignore[attr-defined]
    # The profile diff names the nodes' fields and the one value that follows from the node count.
    diff = diff_profiles(old, new)  # type: ignore[arg-type]
    changes = diff.profile
    removed = sorted(p for p in before if p.startswith(("2-spark-c/", "3-spark-d/")))
    _diff_is_the_node_and_the_fleet(diff, {p.split("/", 1)[1] for p in removed})
    assert sorted((c.path, c.old, str(c.new)) for c in changes) == [
        ("engine.parallel.tp", 4, "2"),
        *[(f"fleet.nodes[{i}].{key}", value, "(unset)") for i, node in ((2, "spark-c"), (3, "spark-d"))
          for key, value in (("fabric_ip", f"192.168.100.1{i + 1}"), ("home", "/home/ops"), ("name", node),
                             ("ssh", f"ops@{node}.example.net"))]]
    # Files: the nodes' own are gone, none is added; the other ranks keep theirs but for the node count.
    assert sorted(set(before) - set(after)) == removed
    assert set(after) <= set(before)
    fleet_data = {"plan.json", "README.md", "MANIFEST.json"}
    changed = {p for p in after if before[p] != after[p]}
    assert {p for p in changed if not p.startswith("fleet/")} - fleet_data == {
        f"{rank}/{name}" for rank in ("0-spark-a", "1-spark-b")
        for name in ("docker-run.sh", "sglang-qwen3-235b-4spark.service")}
    for path in sorted(changed - fleet_data):
        if path.startswith("fleet/"):
            continue
        lines = _changed_lines(before[path], after[path])
        if path.endswith("docker-run.sh"):
            assert lines == ["-  --tp-size 4 \\", "-  --nnodes 4 \\", "+  --tp-size 2 \\", "+  --nnodes 2 \\"], path
        else:
            rank, node = path.split("/")[0].split("-", 1)
            described = f"Description=SGLang qwen3-235b-4spark rank {rank} of {{}} on {node}"
            assert lines == ["-" + described.format(4), "+" + described.format(2)], path
