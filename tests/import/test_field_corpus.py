"""The field corpus (tests/fixtures/field/: public deployments written by others): each file imports with at most
its nodes' addresses given, checks with no error, needs at most two raw engine settings, and compiles to what its
source runs: sparkrun 0.4.2's own per-node commands for a recipe, the docker run line for a playbook."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from roundtrip import compare, compiled, engine_options
from sparkrun_oracle import node_commands

from spark_compile.cli import main
from spark_compile.common.findings import has_errors
from spark_compile.importer.docker_run import launches
from spark_compile.importer.mapping import ranks
from spark_compile.importer.trace import traced_launches

FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "field"
RECIPES = sorted(p.name for p in FIELD.glob("spark-arena_sparkrun__recipes_*.yaml"))
PLAYBOOK = "NVIDIA_dgx-spark-playbooks__nvidia_sglang_README.md"
MAX_RAW = 2  # engine.args entries an imported field file may need


def _hosts(recipe: Path) -> list[str]:
    nodes = int(yaml.safe_load(recipe.read_text()).get("min_nodes", 1))
    return [f"192.0.2.{11 + i}" for i in range(nodes)]


def _import(capsys: pytest.CaptureFixture[str], source: Path, hosts: list[str], out: Path) -> str:
    code = main(["import", str(source), "--hosts", ",".join(hosts), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err  # complete: nothing left out
    return err


def _clean(profile: Path) -> None:
    planned = compiled(profile)
    assert not has_errors(planned.findings), [f"{f.rule}: {f.message}" for f in planned.findings]
    assert len(yaml.safe_load(profile.read_text())["engine"].get("args", {})) <= MAX_RAW


def test_the_corpus_is_every_kind_of_source() -> None:
    assert len(RECIPES) == 9 and (FIELD / PLAYBOOK).is_file()


@pytest.mark.parametrize("name", RECIPES)
def test_a_field_recipe_imports_checks_and_runs_sparkruns_argv(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                name: str) -> None:
    recipe, out = FIELD / name, tmp_path / "imported.yaml"
    hosts = _hosts(recipe)
    _import(capsys, recipe, hosts, out)
    _clean(out)
    plan = compiled(out).plan
    for rank, words in enumerate(node_commands(recipe, hosts)):
        launcher = 3 if words[:3] == ["python3", "-m", "sglang.launch_server"] else 2
        assert tuple(plan.ranks[rank].launcher) == tuple(words[:launcher])
        assert engine_options(list(plan.ranks[rank].engine_argv)) == engine_options(words[launcher:])


def test_the_playbook_imports_checks_and_runs_its_docker_line(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    source, out = FIELD / PLAYBOOK, tmp_path / "playbook.yaml"
    err = _import(capsys, source, ["192.0.2.11"], out)
    assert (f"note: {source}:161: the server command typed into the shell of the container started at "
            f"{source}:147; imported as that container's command") in err
    _clean(out)
    (launch,) = launches(source.read_text(), str(source), source.parent, [])
    sides = compare(launch, compiled(out), ranks([launch])[0].rank)
    # What the plan writes whatever the profile says: a container name (docker picks one at random for the
    # source), its cache mount, the host network (the source publishes the server's port as itself) and IPC,
    # HOST_IP.
    assert sides.engine == ({}, {})
    assert dict(sides.docker[0]) == {("-p", "30000:30000"): 1}
    assert dict(sides.docker[1]) == {("--name", "nvidia-dgx-spark-playbooks-nvidia-sglang-readme"): 1,
                                     ("--network", "host"): 1, ("--ipc", "host"): 1,
                                     ("-v", "/root/.cache:/root/.cache:rw"): 1}
    assert sides.env == ({}, {"HOST_IP": "192.0.2.11"})


LAUNCHER = FIELD / "mark-ramsey-ri_sglang-dgx-spark" / "start_cluster.sh"  # beside the config.env it sources
# The nodes' addresses, all the launcher is given: the head's with --hosts, the worker's as the launcher takes it
# (WORKER_IB_IP; it reaches the worker over ssh there too). The fabric is what the sandbox shows it: a Spark's own.
LAUNCHER_ARGS = ["--env", "WORKER_IB_IP=10.10.0.2"]


def test_the_launcher_traced_imports_checks_and_runs_its_docker_lines(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    script, out = LAUNCHER, tmp_path / "gptoss.yaml"
    code = main(["import", "--trace", str(script), "--hosts", "10.10.0.1,10.10.0.2", *LAUNCHER_ARGS, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    _clean(out)
    fabric = yaml.safe_load(out.read_text())["fleet"]["fabric"]  # from the NCCL variables the launcher passed
    assert (fabric["interface"], fabric["rdma_devices"]) == ("enp1s0f0np0", ["roceP2p1s0f0", "rocep1s0f0"])
    found = traced_launches(script, ("10.10.0.1", "10.10.0.2"), {"WORKER_IB_IP": "10.10.0.2"}, [], [])
    planned = compiled(out)
    for rank in ranks(found):
        sides = compare(rank.launch, planned, rank.rank)
        assert sides.engine == ({}, {}), rank.rank
        assert sides.env[0] == {"HF_TOKEN": ""}, rank.rank  # empty: huggingface_hub reads it as unset (a note)
        assert dict(sides.docker[0]) == {}, (rank.rank, sides.docker)
