"""sparkrun recipes: what import reads from a recipe is what sparkrun 0.4.2 itself would run on every node, and
the profile compiled from the import runs the same engine argv (sparkrun is the oracle, run offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from roundtrip import compiled, engine_options
from sparkrun_oracle import dry_run, node_commands

from spark_compile.cli import main
from spark_compile.importer.recipe import recipe_launches

FIXTURES = Path(__file__).parent / "fixtures" / "sparkrun"
RECIPES = [
    ("qwen3-moe-nextn-tp2.yaml", ["192.0.2.11", "192.0.2.12"], "Qwen3NextForCausalLM",
     ["--fabric", "roce", "--interface", "enp1s0f0np0", "--rdma-devices", "rocep1s0f0,roceP2p1s0f0"]),
    ("llama-nvfp4-defaults.yaml", ["192.0.2.21"], "LlamaForCausalLM", []),
    ("llama-eagle3-tcp.yaml", ["192.0.2.31", "192.0.2.32"], "LlamaForCausalLM", []),
    ("qwen3-gguf-tp2.yaml", ["192.0.2.41", "192.0.2.42"], "Qwen3MoeForCausalLM",
     ["--fabric", "roce", "--interface", "enp1s0f0np0", "--rdma-devices", "rocep1s0f0"]),
]
MULTI_NODE_FLAGS = ("--dist-init-addr", "--nnodes", "--node-rank")


def _imported_words(recipe: Path, hosts: list[str]) -> list[list[str]]:
    launches = recipe_launches(recipe.read_text(), str(recipe), tuple(hosts), [], [])
    return [[w.text for w in launch.command] for launch in launches]


@pytest.mark.parametrize(("fixture", "hosts", "architecture", "extra"), RECIPES)
def test_import_reads_what_sparkrun_runs(fixture: str, hosts: list[str], architecture: str, extra: list[str]) -> None:
    recipe = FIXTURES / fixture
    ours = _imported_words(recipe, hosts)
    assert ours == node_commands(recipe, hosts)
    served = dry_run(recipe, hosts)
    head = ours[0]
    if len(hosts) > 1:  # the dry run prints the command before sparkrun adds the per-node rendezvous
        assert head[-6:] == ["--dist-init-addr", f"{hosts[0]}:25000", "--nnodes", str(len(hosts)), "--node-rank", "0"]
        head = head[:-6]
    assert head == served


@pytest.mark.parametrize(("fixture", "hosts", "architecture", "extra"), RECIPES)
def test_imported_profile_runs_sparkruns_argv(capsys: pytest.CaptureFixture[str], tmp_path: Path, fixture: str,
                                              hosts: list[str], architecture: str, extra: list[str]) -> None:
    recipe, out = FIXTURES / fixture, tmp_path / "imported.yaml"
    code = main(["import", str(recipe), "--hosts", ",".join(hosts), "--architecture", architecture, *extra,
                 "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    plan = compiled(out).plan
    sparkrun = node_commands(recipe, hosts)
    env = yaml.safe_load(recipe.read_text()).get("env", {})
    for rank, words in enumerate(sparkrun):
        launcher = 3 if words[:3] == ["python3", "-m", "sglang.launch_server"] else 2
        assert engine_options(list(plan.ranks[rank].engine_argv)) == engine_options(words[launcher:])
        assert tuple(plan.ranks[rank].launcher) == tuple(words[:launcher])
        compiled_env = {n: v for env_file in plan.ranks[rank].env_files for n, v in env_file.values}
        assert {n: str(v) for n, v in env.items()} == {n: compiled_env.get(n) for n in env}
    # and back: the profile exported as a recipe runs, under sparkrun, what the original recipe runs
    exported = tmp_path / "exported.yaml"
    assert main(["export", "--sparkrun", str(out), "-o", str(exported)]) == 0
    capsys.readouterr()
    again = node_commands(exported, hosts)
    assert [engine_options(w[3:] if w[0] == "python3" else w[2:]) for w in again] == \
        [engine_options(w[3:] if w[0] == "python3" else w[2:]) for w in sparkrun]


def test_recipe_needs_hosts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["import", str(FIXTURES / "llama-nvfp4-defaults.yaml"), "-o", str(tmp_path / "x.yaml")])
    assert code == 2
    assert capsys.readouterr().err == (f"spark-compile: error: {FIXTURES}/llama-nvfp4-defaults.yaml: a recipe names "
                                       "no machines: give --hosts H1,H2,... (head first)\n")


def test_recipe_node_count_is_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["import", str(FIXTURES / "qwen3-moe-nextn-tp2.yaml"), "--hosts", "192.0.2.1,192.0.2.2,192.0.2.3",
                 "-o", str(tmp_path / "x.yaml")])
    assert code == 2
    assert capsys.readouterr().err == (f"spark-compile: error: {FIXTURES}/qwen3-moe-nextn-tp2.yaml:5: the recipe runs "
                                       "on 2 to 2 node(s); --hosts names 3\n")


def test_recipe_profile_values_and_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "llama.yaml"
    main(["import", str(FIXTURES / "llama-nvfp4-defaults.yaml"), "--hosts", "ops@192.0.2.21", "--architecture",
          "LlamaForCausalLM", "-o", str(out)])
    err = capsys.readouterr().err
    data = yaml.safe_load(out.read_text())
    assert data["engine"]["limits"] == {"context_length": 65536, "mem_fraction_static": 0.9,
                                        "max_total_tokens": 262144}
    assert data["description"] == "Llama 3.3 70B NVFP4 on one Spark"
    text = out.read_text()
    assert f"max_total_tokens: 262144  # from {FIXTURES}/llama-nvfp4-defaults.yaml:21" in text
    assert f"note: {FIXTURES}/llama-nvfp4-defaults.yaml:10: metadata.model_dtype is information for sparkrun's " \
        "catalog; not imported" in err


def test_a_gguf_recipe_imports_as_hub_id_and_gguf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "gguf.yaml"
    code = main(["import", str(FIXTURES / "qwen3-gguf-tp2.yaml"), "--hosts", "192.0.2.41,192.0.2.42",
                 "--architecture", "Qwen3MoeForCausalLM", "--fabric", "tcp", "--interface", "enp1s0f0np0", "-o",
                 str(out)])
    assert code == 0, capsys.readouterr().err
    data = yaml.safe_load(out.read_text())
    assert data["model"] == {"architecture": "Qwen3MoeForCausalLM", "hub_id": "example-org/Qwen3-30B-A3B-GGUF",
                             "gguf": "Q4_K_M", "served_name": "qwen3-30b-gguf", "tokenizer": "Qwen/Qwen3-30B-A3B"}
    assert "args" not in data["engine"]


def test_sparkruns_model_pin_mods_and_executor_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recipe, out = FIXTURES / "pinned-mods-executor.yaml", tmp_path / "pinned.yaml"
    assert main(["import", str(recipe), "--hosts", "192.0.2.11", "-o", str(out)]) == 1  # the mod is left out
    err = capsys.readouterr().err
    assert (f"left out: {recipe}:8: mods: fix-tokenizer: sparkrun copies the mod's folder into the container and "
            "runs its run.sh there before the serve command (a pre_exec step); the profile's container starts the "
            "server only: apply the mod's change to the image instead") in err
    data = yaml.safe_load(out.read_text())
    assert data["model"]["revision"] == "0123456789abcdef0123456789abcdef01234567"
    assert (data["container"]["user"], data["container"]["shm_size"]) == ("1000:1000", "64g")
    plan = compiled(out).plan
    (words,) = node_commands(recipe, ["192.0.2.11"])
    assert engine_options(list(plan.ranks[0].engine_argv)) == engine_options(words[3:])
