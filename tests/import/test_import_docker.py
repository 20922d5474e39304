"""`spark-compile import` of docker run lines: the profile it writes, what it reports, and the round trip."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from roundtrip import compare, compiled

from spark_compile.cli import main
from spark_compile.importer.docker_run import launches
from spark_compile.importer.mapping import ranks

FIXTURES = Path(__file__).parent / "fixtures" / "docker"


def _import(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> tuple[int, str]:
    code = main(["import", *args, "-o", str(out)])
    return code, capsys.readouterr().err


def _bash_words(script: Path) -> list[list[str]]:
    """The argv of every `docker run` in ``script`` as bash itself splits it (docker is a recording function)."""
    probe = 'docker() { printf "%s\\0" "$@"; printf "\\n--end--\\n"; }; cd "$(dirname "$1")"; . "$1"'
    out = subprocess.run(["bash", "-c", probe, "bash", str(script)], capture_output=True, check=True).stdout
    return [[w.decode() for w in chunk.strip(b"\n").split(b"\0") if w] for chunk in out.split(b"\n--end--\n")
            if chunk.strip(b"\n")]


def test_words_are_bashs(tmp_path: Path) -> None:
    script = FIXTURES / "one-node-nvfp4.sh"
    (found,) = launches(script.read_text(), str(script), script.parent, [])
    assert [w.text for w in found.words] == _bash_words(script)[0]
    assert found.image is not None and found.image.text == "lmsysorg/sglang:v0.5.23"


def test_one_node_nvfp4_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "qwen3-nvfp4.yaml"
    code, err = _import(capsys, out, str(FIXTURES / "one-node-nvfp4.sh"), "--hosts", "ops@198.51.100.7",
                        "--architecture", "Qwen3ForCausalLM")
    assert code == 0, err
    data = yaml.safe_load(out.read_text())
    model = {"architecture": "Qwen3ForCausalLM", "repo": "/srv/hf/hub/models--nvidia--Qwen3-32B-FP4",
             "container_repo": "/models/qwen3", "snapshot": "0123abcd", "served_name": "qwen3-32b"}
    assert "args" not in data["engine"]
    assert (data["engine"]["kv_cache_dtype"], data["engine"]["cuda_graph"]) == \
        ("fp8_e4m3", {"batch_sizes": [1, 2, 4, 8]})
    assert data["model"] == {**model, "quantization": "modelopt_fp4"}
    assert data["engine"]["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False",
                                     "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    line = next(t for t in out.read_text().splitlines() if "fp8_e4m3" in t)
    assert line.endswith(f"# from {FIXTURES / 'one-node-nvfp4.sh'}:18")
    assert err.splitlines() == [
        f"spark-compile import: note: {FIXTURES}/one-node-nvfp4.sh:19: --tp is argparse's abbreviation of --tp-size "
        "(the compiled command spells it so)",
        f"spark-compile import: note: {FIXTURES}/one-node-nvfp4.sh:21: --mem-fraction-static=VALUE read as "
        "--mem-fraction-static VALUE (the compiled command spells it so)",
        f"spark-compile import: note: {FIXTURES}/one-node-nvfp4.sh:9: the model directory is mounted read-only "
        "(the source mounts it read-write)",
        f"spark-compile import: note: {FIXTURES}/one-node-nvfp4.sh:19: --tp 1 is SGLang's default; kept so the "
        "command stays the source's (it may go)",
    ]


# Every gap below is something the plan writes whatever the profile says, or does differently on purpose (the
# model directory mounted read-only).
CACHE = {("-v", "/home/ops/.cache:/root/.cache:rw"): 1}  # the plan always mounts the node's cache
PORT = {("--port", ("30000",)): 1}  # the plan always writes the port


def _host_ip(rank: int) -> dict[str, str]:
    return {"HOST_IP": f"198.51.100.{rank + 1}"}  # the plan sets it when the source does not


MULTI_NODE: list[tuple[str, str, str, list[str], list[dict[str, object]]]] = [
    ("two-node-roce-eagle3.sh", "ops@10.10.0.1,ops@10.10.0.2", "Qwen3MoeForCausalLM",
     # SC445: the source leaves NCCL's default buffers on unified memory (a warning naming the trim); its
     # hand-pinned NCCL_IB_GID_INDEX agrees with the fleet's gid_index import derived from it (no SC417)
     ["SC412", "SC424", "SC312", "SC445"],
     [{"engine": ({}, PORT), "env": ({}, {}), "docker": ({}, CACHE)}] * 2),
    ("two-node-tcp.sh", "ops@198.51.100.1,ops@198.51.100.2", "Glm4MoeForCausalLM",
     # SC246: the source's --tool-call-parser glm45 is the deprecated name of glm (kept as written, warned).
     ["SC424", "SC312", "SC246", "SC412", "SC445"],
     [{"engine": ({}, {}), "env": ({}, _host_ip(rank)), "docker": ({}, CACHE)} for rank in range(2)]),
]


@pytest.mark.parametrize(("fixture", "hosts", "architecture", "rules", "gaps"), MULTI_NODE)
def test_multi_node_round_trip(capsys: pytest.CaptureFixture[str], tmp_path: Path, fixture: str, hosts: str,
                               architecture: str, rules: list[str], gaps: list[dict[str, object]]) -> None:
    source = FIXTURES / fixture
    out = tmp_path / "imported.yaml"
    code, err = _import(capsys, out, str(source), "--hosts", hosts, "--architecture", architecture)
    assert code == 0, err
    validated = compiled(out)
    assert [f.rule for f in validated.findings] == rules
    found = ranks(launches(source.read_text(), str(source), source.parent, []))
    assert [r.rank for r in found] == [0, 1]
    sides = [compare(r.launch, validated, r.rank) for r in found]
    assert [{"engine": s.engine, "env": s.env, "docker": s.docker} for s in sides] == gaps


ONE_NODE_GAPS = {
    "engine": ({}, {}),
    "env": ({}, {"HOST_IP": "198.51.100.7"}),
    "docker": ({("-v", "/srv/hf/hub/models--nvidia--Qwen3-32B-FP4:/models/qwen3:rw"): 1},
               {("-v", "/srv/hf/hub/models--nvidia--Qwen3-32B-FP4:/models/qwen3:ro"): 1}),
}


def test_one_node_round_trip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = FIXTURES / "one-node-nvfp4.sh"
    out = tmp_path / "qwen3-nvfp4.yaml"
    assert _import(capsys, out, str(source), "--hosts", "ops@198.51.100.7", "--architecture", "Qwen3ForCausalLM")[0] \
        == 0
    validated = compiled(out)
    # the tag-only image as the source has it; SC424: the source leaves --host to SGLang (127.0.0.1)
    assert [f.rule for f in validated.findings] == ["SC424", "SC312"]
    (rank,) = ranks(launches(source.read_text(), str(source), source.parent, []))
    sides = compare(rank.launch, validated, 0)
    assert {"engine": sides.engine, "env": sides.env, "docker": sides.docker} == ONE_NODE_GAPS


def test_refuses_to_overwrite_a_foreign_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    out.write_text("name: hand-written\n")
    code, err = _import(capsys, out, str(FIXTURES / "one-node-nvfp4.sh"), "--hosts", "198.51.100.7")
    assert code == 2
    assert err == (f"spark-compile: error: {out} exists and spark-compile did not write it: refusing to overwrite it "
                   "(give --force to replace it, or choose another -o)\n")
    assert out.read_text() == "name: hand-written\n"


def test_rewrites_its_own_file_and_a_foreign_one_with_force(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    args = [str(FIXTURES / "one-node-nvfp4.sh"), "--hosts", "192.0.2.1", "--architecture", "Qwen3ForCausalLM"]
    assert _import(capsys, out, *args)[0] == 0
    first = out.read_text()
    assert _import(capsys, out, *args)[0] == 0  # its own file: replaced without --force
    assert out.read_text() == first
    out.write_text("name: hand-written\n")
    assert _import(capsys, out, *args, "--force")[0] == 0
    assert out.read_text() == first
    assert [p.name for p in tmp_path.iterdir()] == ["mine.yaml"]  # no temporary file left behind


def test_without_o_the_profile_goes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["import", str(FIXTURES / "one-node-nvfp4.sh"), "--hosts", "192.0.2.1"])
    captured = capsys.readouterr()
    assert code == 1  # no --architecture: reported as left out
    assert yaml.safe_load(captured.out)["engine"]["container_name"] == "qwen3-nvfp4"
    assert captured.err.splitlines()[-2:] == [
        f"spark-compile import: left out: {FIXTURES}/one-node-nvfp4.sh:4: model.architecture: the source does not "
        "say the model's architecture (config.json `architectures[0]`) and its model is no hub id import knows; "
        "give --architecture",
        "spark-compile import: 1 setting(s) left out; the profile does not reproduce the source until they are "
        "resolved",
    ]


def test_an_entrypoint_interpreter_is_the_launchers_first_word(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    # `--entrypoint python3 IMAGE -m sglang.launch_server` runs python3 -m ...: the plan's --entrypoint is the
    # launcher's first word, so the interpreter must become it (it once compiled to `--entrypoint -m`).
    source = tmp_path / "run.sh"
    source.write_text("docker run --name qwen --network host --entrypoint python3 lmsysorg/sglang:v0.5.23 \\\n"
                      "  -m sglang.launch_server --model-path Qwen/Qwen3-8B --served-model-name q\n")
    out = tmp_path / "q.yaml"
    code, err = _import(capsys, out, str(source), "--hosts", "ops@198.51.100.7", "--architecture",
                        "Qwen3ForCausalLM")
    assert code == 0, err
    assert "launcher" not in yaml.safe_load(out.read_text())["engine"]  # python3 -m sglang.launch_server
    argv = compiled(out).plan.ranks[0].docker_argv
    image = argv.index("lmsysorg/sglang:v0.5.23")
    assert argv[image - 2:image + 3] == ("--entrypoint", "python3", "lmsysorg/sglang:v0.5.23", "-m",
                                         "sglang.launch_server")
