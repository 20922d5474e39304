"""A checkpoint larger than its fleet, one per architecture family (dense GQA, MoE, MLA, hybrid sliding-window,
hybrid linear attention, DeepSeek-V4), is refused with the rank, the numbers and a hint; the hint applied as
written (the nodes added, engine.parallel.tp set) gives a profile that fits."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

import pytest

from spark_compile.capacity.format import verdict
from spark_compile.common.findings import Finding
from spark_compile.pipeline import Planned, Rejected, run

from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "capacity"
CASES = {
    "dense GQA": (FIXTURES / "llama-70b-bf16-1spark.yaml", "SC440"),
    "MoE": (FIXTURES / "qwen3-235b-bf16-1spark.yaml", "SC440"),
    "MLA": (FIXTURES / "deepseek-v3-2spark.yaml", "SC440"),
    "hybrid SWA": (FIXTURES / "gpt-oss-120b-bf16-2spark.yaml", "SC441"),  # loads, but the static pool is full
    "hybrid linear": (FIXTURES / "qwen3-next-80b-1spark.yaml", "SC440"),
    "DeepSeek-V4": (ROOT / "tests" / "profiles" / "negative" / "model-too-big-for-two-nodes.yaml", "SC440"),
}
SPREAD = re.compile(r"^spread the model over (\d+) nodes: add nodes to fleet\.nodes and set engine\.parallel\.tp: "
                    r"(\d+) \(")
CAPACITY_ERRORS = ("SC440", "SC441", "SC447")


def outcome(path: Path) -> tuple[Planned, list[Finding]]:
    done = run(path, root=ROOT)
    planned = done.planned if isinstance(done, Rejected) else done
    assert planned is not None and planned.capacity is not None, done.findings
    return planned, list(done.findings)


def refusal(path: Path, rule: str) -> Finding:
    planned, found = outcome(path)
    hits = [f for f in found if f.rule == rule]
    assert len(hits) == 1, [f"{f.rule} {f.message}" for f in found]
    assert planned.capacity is not None and verdict(planned.capacity).startswith("does not fit: rank ")
    return hits[0]


@pytest.mark.parametrize("family", CASES)
def test_a_checkpoint_larger_than_the_fleet_is_refused_with_rank_numbers_and_a_hint(family: str) -> None:
    path, rule = CASES[family]
    hit = refusal(path, rule)
    assert re.match(r"rank \d+ \([\w-]+\)", hit.message), hit.message
    assert re.search(r"\d+\.\d GiB weights \+ \d+\.\d GiB draft", hit.message), hit.message
    match = SPREAD.match(hit.hint)
    assert match is not None and match[1] == match[2], hit.hint


def applied(path: Path, hint: str, tmp_path: Path) -> Path:
    """A child profile doing what the hint says: the nodes added (on the fleet's fabric, or a TCP one when a
    single node had none: several nodes need one) and engine.parallel.tp set."""
    planned, _ = outcome(path)
    match = SPREAD.match(hint)
    assert match is not None, hint
    wanted, fleet = int(match[1]), planned.profile.fleet
    last = max(ipaddress.IPv4Address(str(node.fabric_ip)) for node in fleet.nodes)
    nodes = "".join(f"    - {{name: added-{i}, fabric_ip: {last + i}, ssh: ops@added-{i}.example.net, "
                    "home: /home/ops}\n" for i in range(1, wanted - len(fleet.nodes) + 1))
    fabric = "" if fleet.fabric is not None else "  fabric: {kind: tcp, interface: enP7s7, subnet: 198.51.100.0/24}\n"
    child = tmp_path / "hinted.yaml"
    child.write_text(f"extends: {os.path.relpath(path, tmp_path)}\nfleet:\n{fabric}  nodes:\n{nodes}"
                     f"engine:\n  parallel: {{tp: {match[2]}}}\n")
    return child


@pytest.mark.parametrize("family", CASES)
def test_the_hint_applied_as_written_fits(family: str, tmp_path: Path) -> None:
    path, rule = CASES[family]
    planned, found = outcome(applied(path, refusal(path, rule).hint, tmp_path))
    assert [f"{f.rule} {f.message}" for f in found if f.severity == "error"] == []
    assert planned.capacity is not None and verdict(planned.capacity).startswith("fits: ")
