"""`spark-compile catalog sglang --source DIR`: a catalog from an SGLang source tree, without importing it.

The tree is a fixture this test writes: a server_args.py in the add_argument style of SGLang's releases up
to 0.5.10 (stdlib only, so its real argparse parser can be built here too), an environ.py with a few typed
variables and a module that reads one variable straight from os.environ. No engine venv is needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, run_cli

LLAMA = ROOT / "tests" / "profiles" / "positive" / "llama-2node-h100.yaml"
# Flags the Llama example's plan writes, besides the CUDA-graph ones whose spelling is under test.
PLAN_FLAGS = ("--model-path", "--served-model-name", "--nnodes", "--node-rank", "--dist-init-addr", "--host",
              "--port", "--mem-fraction-static", "--chunked-prefill-size", "--context-length",
              "--max-running-requests")
OLD_GRAPHS = '''
        parser.add_argument("--disable-cuda-graph", action="store_true", help="Disable cuda graph.")
        parser.add_argument("--cuda-graph-max-bs", type=int, default=ServerArgs.cuda_graph_max_bs,
                            help="Set the maximum batch size for cuda graph.")
'''
NEW_GRAPHS = '''
        parser.add_argument("--disable-cuda-graph", action="store_true",
                            help="Deprecated: use --cuda-graph-backend-decode=disabled instead.")
        parser.add_argument("--cuda-graph-backend-decode", type=str, choices=GRAPH_BACKENDS)
        parser.add_argument("--cuda-graph-backend-prefill", type=str, choices=GRAPH_BACKENDS)
        parser.add_argument("--cuda-graph-max-bs-decode", type=int, default=None)
'''
SERVER_ARGS = '''"""A fixture in the style of SGLang's server_args.py (add_argument calls)."""
import argparse
import dataclasses
import json

ATTENTION_BACKEND_CHOICES = ["triton", "flashinfer"]
MORE_BACKENDS = [*ATTENTION_BACKEND_CHOICES, "fa3"] + ["torch_native"]
GRAPH_BACKENDS = ["full", "breakable", "disabled"]


@dataclasses.dataclass
class ServerArgs:
    model_path: str = None
    tp_size: int = 1
    kv_cache_dtype: str = "auto"
    mem_fraction_static: float = None
    cuda_graph_max_bs: int = None
    enable_x: bool = dataclasses.field(default=None)

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, dest="model_path",
                            default=ServerArgs.model_path, help="The path of the model weights. More text follows.")
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=ServerArgs.tp_size,
                            help="The tensor parallelism size.")
        parser.add_argument("--attention-backend", type=str, choices=MORE_BACKENDS, default=None,
                            help="Choose the kernels for attention layers.")
        parser.add_argument("--kv-cache-dtype", type=str, default=ServerArgs.kv_cache_dtype,
                            choices=["auto", "fp8_e5m2", "fp8_e4m3"], help="Data type for kv cache storage.")
        parser.add_argument("--enable-x", action=argparse.BooleanOptionalAction, default=ServerArgs.enable_x,
                            help="Enable x (e.g. for tests).")
        parser.add_argument("--json-model-override-args", type=json.loads, default="{}")
        parser.add_argument("--old-flag", action="store_true", help="Deprecated. Use --tp-size instead.")
        parser.add_argument("--mem-fraction-static", type=float, default=ServerArgs.mem_fraction_static)
        parser.add_argument("--served-model-name", type=str, default=None)
        parser.add_argument("--nnodes", type=int, default=1)
        parser.add_argument("--node-rank", type=int, default=0)
        parser.add_argument("--dist-init-addr", "--nccl-init-addr", type=str, default=None)
        parser.add_argument("--host", type=str, default="127.0.0.1")
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--chunked-prefill-size", type=int, default=None)
        parser.add_argument("--context-length", type=int, default=None)
        parser.add_argument("--max-running-requests", type=int, default=None)
GRAPHS
FILLERS
'''
ENVIRON = '''"""A fixture in the style of SGLang's environ.py."""
class EnvField:
    def __init__(self, default, deprecated_name=None):
        self.default = default
        self.deprecated_name = deprecated_name

    def __set_name__(self, owner, name):
        self.name = name


class EnvBool(EnvField):
    pass


class EnvInt(EnvField):
    pass


class EnvFloat(EnvField):
    pass


class EnvStr(EnvField):
    pass


class Envs:
    SGLANG_FIXTURE_SWITCH = EnvBool(False)
    SGLANG_FIXTURE_SIZE = EnvInt(4, deprecated_name="SGLANG_FIXTURE_OLD_SIZE")
    SGLANG_FIXTURE_NAME = EnvStr("x")


_DEPRECATED_ENVS = {}
'''
READER = 'import os\n\nLIMIT = int(os.environ.get("SGLANG_FIXTURE_DIRECT", "8"))\n'


def make_tree(root: Path, graphs: str, version: str | None = "0.0.1") -> Path:
    srt = root / "python" / "sglang" / "srt"
    srt.mkdir(parents=True)
    fillers = "".join(f'        parser.add_argument("--filler-{i}", type=int, default={i}, help="Filler {i}.")\n'
                      for i in range(60))  # a real release has hundreds of flags; the extractor wants 50 or more
    (srt / "server_args.py").write_text(SERVER_ARGS.replace("GRAPHS\n", graphs).replace("FILLERS\n", fillers))
    (srt / "environ.py").write_text(ENVIRON)
    (srt / "reader.py").write_text(READER)
    if version:
        (srt.parent / "_version.py").write_text(f'__version__ = "{version}"\n')
    return root


def build(tree: Path, out: Path, *extra: str) -> dict[str, bytes]:
    result = run_cli("catalog", "sglang", "--source", str(tree), "--out", str(out), *extra)
    assert result.returncode == 0, result.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def real_parser_entries(server_args_py: Path) -> list[dict[str, Any]]:
    """The fixture's own argparse parser, read through the probe's flag_entry (what an install would give)."""
    import argparse

    from spark_compile.spec.generators.sglang_probe import flag_entry

    spec = importlib.util.spec_from_file_location("fixture_server_args", server_args_py)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parser = argparse.ArgumentParser()
    module.ServerArgs.add_cli_args(parser)
    entries = [flag_entry(a) for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    return sorted(entries, key=lambda e: (e["dest"], e["options"]))


def test_source_catalog_is_byte_identical_across_runs(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree", OLD_GRAPHS)
    first = build(tree, tmp_path / "a")
    second = build(tree, tmp_path / "b")
    assert first == second
    assert sorted(first) == ["sglang-0.0.1.json", "sglang-env-0.0.1.json"]
    env = json.loads(first["sglang-env-0.0.1.json"])
    names = {v["name"]: v for v in env["variables"]}
    assert names["SGLANG_FIXTURE_SIZE"]["kind"] == "int" and names["SGLANG_FIXTURE_SIZE"]["default"] == 4
    assert names["SGLANG_FIXTURE_OLD_SIZE"]["replacement"] == "SGLANG_FIXTURE_SIZE"
    assert names["SGLANG_FIXTURE_DIRECT"] == {"name": "SGLANG_FIXTURE_DIRECT", "kind": "int", "default": 8,
                                              "deprecated": False, "replacement": None, "source": "os.environ"}


@pytest.mark.parametrize("graphs", [OLD_GRAPHS, NEW_GRAPHS], ids=["old", "new"])
def test_static_catalog_equals_the_real_parser(tmp_path: Path, graphs: str) -> None:
    tree = make_tree(tmp_path / "tree", graphs)
    flags = json.loads(build(tree, tmp_path / "out")["sglang-0.0.1.json"])
    assert flags["flags"] == real_parser_entries(tree / "python" / "sglang" / "srt" / "server_args.py")


def test_a_commit_without_a_version_needs_a_name(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree", NEW_GRAPHS, version=None)
    refused = run_cli("catalog", "sglang", "--source", str(tree), "--out", str(tmp_path / "out"))
    assert refused.returncode == 2 and "states no version" in refused.stderr and "--name" in refused.stderr
    assert sorted(build(tree, tmp_path / "out", "--name", "sglang-main-abc1234")) == [
        "sglang-main-abc1234.json", "sglang-main-env-abc1234.json"]


def test_a_tree_in_another_style_is_refused(tmp_path: Path) -> None:
    srt = tmp_path / "sglang" / "srt"
    srt.mkdir(parents=True)
    (srt / "server_args.py").write_text("class ServerArgs:\n    tp_size: int = 1\n")
    result = run_cli("catalog", "sglang", "--source", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "0 add_argument calls" in result.stderr and "--python" in result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize(("graphs", "off", "on"), [
    (OLD_GRAPHS, ["--disable-cuda-graph"], ["--cuda-graph-max-bs", "64"]),
    (NEW_GRAPHS, ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"],
     ["--cuda-graph-max-bs-decode", "64"]),
], ids=["old", "new"])
def test_plan_writes_the_spelling_of_the_selected_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        graphs: str, off: list[str], on: list[str]) -> None:
    from spark_compile.pipeline import planned, validate
    from spark_compile.spec import catalog
    from spark_compile.stages.resolve import resolve

    out = tmp_path / "catalogs"
    build(make_tree(tmp_path / "tree", graphs), out, "--name", "sglang-fixture-1")
    monkeypatch.setattr(catalog, "_directories", lambda: (Path(catalog.__file__).with_name("catalogs"), out))
    for cached in (catalog.engine_catalog, catalog.env_catalog):
        cached.cache_clear()
    try:
        argvs = {}
        graphs_on, graphs_off = "{enabled: true, max_bs_decode: 64}", "{enabled: false}"
        for enabled in (False, True):
            profile = tmp_path / f"graphs-{enabled}.yaml"
            profile.write_text(f"extends: {os.path.relpath(LLAMA, tmp_path)}\nengine:\n"
                               f"  catalog: sglang-fixture-1\n  cuda_graph: {graphs_on if enabled else graphs_off}\n")
            validated = planned(validate(resolve(profile)))
            argvs[enabled] = validated.plan.ranks[0].engine_argv
    finally:
        for cached in (catalog.engine_catalog, catalog.env_catalog):
            cached.cache_clear()
    assert list(argvs[False][-len(off):]) == off and not set(argvs[False]) & {"--cuda-graph-max-bs-decode"}
    assert list(argvs[True][-len(on):]) == on
    assert {a for a in argvs[True] if a.startswith("--")} - {"--tp-size", *on} <= set(PLAN_FLAGS)


def test_shipped_second_release_spells_graphs_its_way() -> None:
    result = run_cli("plan", "tests/profiles/positive/llama-sglang-0.5.10.yaml")
    argv = json.loads(result.stdout)["ranks"][0]["engine_argv"]
    assert argv[-1] == "--disable-cuda-graph" and "--cuda-graph-backend-decode" not in argv


def test_item02_parsing_environ_py_reads_what_the_install_probe_read() -> None:
    """The installed SGLang's environ.py, parsed: every variable, kind, default and deprecation the committed
    catalog (made by the probe, which imports it) holds, except one default computed at run time."""
    import subprocess

    from spark_compile.spec.generators.sglang_environ import declared_entries

    from sglang_parse import engine_python

    where = subprocess.run([engine_python(), "-I", "-c", "import importlib.util as u; "
                            "print(u.find_spec('sglang').submodule_search_locations[0])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    declared = declared_entries(Path(where) / "srt" / "environ.py")
    catalog = json.loads((ROOT / "spec" / "catalogs" / "sglang-env-0.5.23.json").read_text())
    committed = {v["name"]: v for v in catalog["variables"] if v["source"] == "environ.py"}
    assert len(committed) > 700
    differs = {name for name in committed.keys() | declared.keys() if committed.get(name) != declared.get(name)}
    assert differs == {"SGLANG_CACHE_DIR"}  # EnvStr(os.path.expanduser("~/.cache/sglang")): no literal
    assert declared["SGLANG_CACHE_DIR"]["default"] is None
