"""Edges of the source formats: docker's option spellings, recipe keys import cannot carry, values shaped like
sparkrun placeholders, and command-line mistakes — each with its whole message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sparkrun_oracle import node_commands

from spark_compile.cli import main
from spark_compile.common.errors import UsageError
from spark_compile.importer.docker_run import launches
from spark_compile.importer.shell import commands
from spark_compile.importer.source import Leftover


def _texts(text: str) -> list[list[str]]:
    return [[w.text for w in command] for command in commands(text, "f")]


def test_shell_words() -> None:
    text = "a 'b c' \"d \\\"e\\\"\" f\\ g \\\n h # comment\ni;j&&k || l | m & n\n"
    assert _texts(text) == [["a", "b c", 'd "e"', "f g", "h"], ["i"], ["j"], ["k"], ["l"], ["m"], ["n"]]
    lines = [[w.origin.line for w in command] for command in commands(text, "f")]
    assert lines[0] == [1, 1, 1, 1, 2]


def test_expansions_stay_one_word() -> None:
    found = commands("run --name sglang-$(hostname -s) -v ${HF_CACHE:-/raid hf}:/hf `id -u` x\n", "f")
    assert [(w.text, w.expands) for w in found[0]] == [
        ("run", False), ("--name", False), ("sglang-$(hostname -s)", True), ("-v", False),
        ("${HF_CACHE:-/raid hf}:/hf", True), ("`id -u`", True), ("x", False)]


def test_unclosed_quote_names_its_line() -> None:
    with pytest.raises(Exception, match=r"^f:2: a single quote opened here is never closed$"):
        commands("a\nb 'c\n", "f")


def test_docker_option_spellings(tmp_path: Path) -> None:
    text = ("sudo docker container run -it --env=A=1 -eB=2 --volume=/a:/b:ro -v/c:/d --name=web --rm "
            "img:1 python3 -m sglang.launch_server --model-path /m\n")
    (launch,) = launches(text, "f", tmp_path, [])
    assert [(f.text, v.text if v else None) for f, v in launch.options] == [
        ("-i", None), ("-t", None), ("--volume", "/a:/b:ro"), ("-v", "/c:/d"), ("--name", "web"), ("--rm", None)]
    assert [(n, v) for n, v, _ in launch.env] == [("A", "1"), ("B", "2")]
    assert launch.image is not None and launch.image.text == "img:1"


def test_a_container_that_is_no_sglang_server_is_skipped(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    source = tmp_path / "run.sh"
    source.write_text("docker run --rm --gpus all img:1 nvidia-smi\ndocker run --name web -v /srv/m:/models/repo "
                      "img:1 python3 -m sglang.launch_server --model-path /models/repo/snapshots/a "
                      "--served-model-name m --tp-size 1\n")
    assert main(["import", str(source), "--hosts", "192.0.2.1", "--architecture", "X",
                 "-o", str(tmp_path / "web.yaml")]) == 0
    assert (f"note: {source}:1: a docker run of img:1 that starts no SGLang server; not imported"
            in capsys.readouterr().err)


def test_unmapped_docker_options_are_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "run.sh"
    source.write_text("docker run --name web --cpu-shares 512 -p 8080:8000 img:1 python3 -m sglang.launch_server "
                      "--model-path /models/repo/snapshots/a --served-model-name m\n")
    assert main(["import", str(source), "--hosts", "192.0.2.1", "-o", str(tmp_path / "web.yaml")]) == 1
    err = capsys.readouterr().err
    assert f"left out: {source}:1: --cpu-shares 512: no profile key holds this docker option" in err
    assert (f"left out: {source}:1: -p 8080:8000: ports are not published: the container uses the host network "
            "(container.network)") in err


def test_a_gpu_device_list_is_imported_as_docker_reads_it(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    source = tmp_path / "run.sh"
    launch = ("docker run --name web --gpus {} -v /srv/m:/models/repo img:1 python3 -m sglang.launch_server "
              "--model-path /models/repo/snapshots/a --served-model-name m\n")
    source.write_text(launch.format("'\"device=0,1\"'"))
    assert main(["import", str(source), "--hosts", "192.0.2.1", "--architecture", "X",
                 "-o", str(tmp_path / "web.yaml")]) == 0
    assert yaml.safe_load((tmp_path / "web.yaml").read_text())["container"]["gpus"] == "device=0,1"
    source.write_text(launch.format("device=0,1"))
    assert main(["import", str(source), "--hosts", "192.0.2.1", "--architecture", "X",
                 "-o", str(tmp_path / "web2.yaml")]) == 1
    assert (f"left out: {source}:1: --gpus device=0,1: docker reads an unquoted device list as separate fields "
            "(device 0 and a count of 1, which its daemon refuses); quote it: --gpus '\"device=0,1\"'"
            in capsys.readouterr().err)


def test_a_source_without_a_launch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "notes.sh"
    source.write_text("echo hello\ndocker ps\n")
    assert main(["import", str(source), "--hosts", "192.0.2.1"]) == 2
    assert capsys.readouterr().err == (f"spark-compile: error: {source}: no `docker run … sglang.launch_server` line "
                                       "and no sparkrun recipe found\n")


def test_unknown_recipe_keys_are_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: org/m\nruntime: sglang\ncontainer: img:1\nlayout: a\ndefaults:\n  port: 8000\n"
                      "command: |\n  python3 -m sglang.launch_server --model-path {model} --port {port} {missing}\n")
    assert main(["import", str(recipe), "--hosts", "192.0.2.1", "-o", str(tmp_path / "p.yaml")]) == 1
    err = capsys.readouterr().err
    assert f"left out: {recipe}:4: layout: a sparkrun recipe key with no profile equivalent" in err
    assert f"left out: {recipe}:8: {{missing}}: the recipe gives no value for {{missing}}" in err


def test_a_recipe_of_another_runtime(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: org/m\nruntime: vllm\ncontainer: img:1\ndefaults: {port: 8000}\n")
    assert main(["import", str(recipe), "--hosts", "192.0.2.1"]) == 2
    assert capsys.readouterr().err == f"spark-compile: error: {recipe}:2: runtime 'vllm': only sglang recipes import\n"


def test_bad_env_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["import", "--trace", str(tmp_path / "x.sh"), "--env", "NOVALUE"]) == 2
    assert capsys.readouterr().err == "spark-compile import: --env takes NAME=VALUE (see --help)\n"


def test_hosts_must_be_addresses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = Path(__file__).parent / "fixtures" / "docker" / "one-node-nvfp4.sh"
    assert main(["import", str(source), "--hosts", "spark-a.example.net"]) == 2
    assert capsys.readouterr().err == ("spark-compile: error: node 0's host 'spark-a.example.net' is not an IPv4 "
                                       "address; give --hosts as addresses (user@192.0.2.1)\n")


def test_export_refuses_a_value_sparkrun_would_replace(tmp_path: Path) -> None:
    from roundtrip import compiled

    from spark_compile.targets.sparkrun import recipe_text

    profile = tmp_path / "p.yaml"
    example = Path(__file__).resolve().parents[2] / "spec" / "profiles" / "examples" / "single-node.yaml"
    text = example.read_text().replace("engine:\n", "engine:\n  args: {chat-template: '{tools}'}\n", 1)
    profile.write_text(text)
    with pytest.raises(UsageError, match=r"^--chat-template \{tools\}: a value shaped like a sparkrun placeholder"):
        planned = compiled(profile)
        recipe_text(planned.plan, planned.profile, str(profile), [])


def test_a_flag_of_an_older_sglang_selects_its_catalog(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from roundtrip import compiled

    source = tmp_path / "run.sh"
    source.write_text("docker run --name web -v /srv/m:/models/repo img:1 python3 -m sglang.launch_server "
                      "--model-path /models/repo/snapshots/a --served-model-name m --tp-size 1 --cuda-graph-max-bs 8\n")
    out = tmp_path / "web.yaml"
    main(["import", str(source), "--hosts", "192.0.2.1", "--architecture", "X", "-o", str(out)])
    capsys.readouterr()
    assert (f'catalog: "sglang-0.5.10.post1"  # --cuda-graph-max-bs is a flag sglang-0.5.10.post1 knows and the '
            f"newest catalog does not (from {source}:1)") in out.read_text()
    argv = list(compiled(out).plan.ranks[0].engine_argv)
    assert argv[argv.index("--cuda-graph-max-bs") + 1] == "8"  # spelled as that build takes it


def test_recipe_values_are_split_as_sparkruns_shell_splits_them(tmp_path: Path) -> None:
    from spark_compile.importer.recipe import recipe_launches

    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: org/m\nruntime: sglang\ncontainer: img:1\ndefaults:\n  port: 8000\n"
                      "  extra: --enable-metrics --log-level debug\n  kwargs: '{\"a\": 1}'\n"
                      "command: |\n  python3 -m sglang.launch_server --model-path {model} {extra} \\\n"
                      "    --port {port} --chat-template-kwargs '{kwargs}'\n")
    left: list[Leftover] = []
    (launch,) = recipe_launches(recipe.read_text(), str(recipe), ("192.0.2.1",), left, [])
    assert [w.text for w in launch.command] == [
        "python3", "-m", "sglang.launch_server", "--model-path", "org/m", "--enable-metrics", "--log-level", "debug",
        "--port", "8000", "--chat-template-kwargs", '{"a": 1}']
    # a placeholder alone on its line takes its value's line; a line a value split keeps the template's
    assert [(w.text, w.origin.line) for w in launch.command if w.text in ("org/m", "8000", "debug")] == [
        ("org/m", 9), ("debug", 9), ("8000", 5)]
    assert left == []
    assert node_commands(recipe, ["192.0.2.1"]) == [[w.text for w in launch.command]]  # as sparkrun splits them


def test_a_fabric_variable_is_kept_as_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # nccl.preset none: the source's NCCL and gloo variables stay its own, even one the fabric would set otherwise
    source = tmp_path / "run.sh"
    line = ("docker run --name web -e NCCL_SOCKET_IFNAME=enp1s0f0np0 -e GLOO_SOCKET_IFNAME=enP7s7 -e "
            "NCCL_IB_DISABLE=1 img:1 python3 -m sglang.launch_server --model-path /m --dist-init-addr "
            "192.0.2.1:20000 --nnodes 2 --node-rank {rank}\n")
    source.write_text(line.format(rank=1) + line.format(rank=0))
    out = tmp_path / "web.yaml"
    main(["import", str(source), "--hosts", "192.0.2.1,192.0.2.2", "-o", str(out)])
    assert "GLOO_SOCKET_IFNAME" not in capsys.readouterr().err
    data = yaml.safe_load(out.read_text())
    assert data["nccl"] == {"preset": "none", "extra": {"NCCL_SOCKET_IFNAME": "enp1s0f0np0",
                                                       "GLOO_SOCKET_IFNAME": "enP7s7", "NCCL_IB_DISABLE": "1"}}


def test_pipeline_stages_import_as_parallel_pp(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source, out = tmp_path / "run.sh", tmp_path / "pp.yaml"
    rank = ("docker run --name web -v /srv/m:/models/m:ro lmsysorg/sglang:v0.5.23 python3 -m sglang.launch_server "
            "--model-path /models/m --tp 1 --pp-size 2 --nnodes 2 --node-rank {} --dist-init-addr 192.0.2.1:20000\n")
    source.write_text(rank.format(1) + rank.format(0))
    code = main(["import", str(source), "--hosts", "192.0.2.1,192.0.2.2", "--fabric", "tcp", "--interface", "eth0",
                 "--architecture", "LlamaForCausalLM", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert yaml.safe_load(out.read_text())["engine"]["parallel"] == {"tp": 1, "pp": 2}


def test_an_old_flag_beside_a_new_one_keeps_the_newest_catalog(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    from roundtrip import compiled

    # DSPARK is only the newest build's; one old flag beside it must not switch the profile to the old catalog
    # (which has no DSPARK): the old flags are taken one by one.
    source = tmp_path / "run.sh"
    source.write_text("docker run --name web -v /srv/m:/models/repo img:1 python3 -m sglang.launch_server "
                      "--model-path /models/repo/snapshots/a --served-model-name m --cuda-graph-max-bs 8 "
                      "--enable-nan-detection --speculative-algorithm DSPARK --speculative-dspark-block-size 5\n")
    out = tmp_path / "web.yaml"
    assert main(["import", str(source), "--hosts", "192.0.2.1", "--architecture", "DeepseekV4ForCausalLM", "-o",
                 str(out)]) == 0
    err = capsys.readouterr().err
    engine = yaml.safe_load(out.read_text())["engine"]
    assert "catalog" not in engine
    assert engine["catalog_extra"] == {"flags": ["enable-nan-detection"]}
    assert engine["cuda_graph"] == {"max_bs_decode": 8}
    assert (f"note: {source}:1: --enable-nan-detection is a flag of sglang-0.5.10.post1 that the newest catalog "
            "lacks, written beside flags only the newest has: kept in engine.args and named in "
            "engine.catalog_extra.flags (the image's own build knows both)") in err
    planned = compiled(out)
    assert [f.rule for f in planned.findings if f.severity == "error"] == []
    argv = list(planned.plan.ranks[0].engine_argv)
    assert argv[argv.index("--cuda-graph-max-bs-decode") + 1] == "8"
    assert "DSPARK" in argv and "--enable-nan-detection" in argv
