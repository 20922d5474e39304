"""The committed SGLang catalogs are exactly what the real SGLang 0.5.23 yields, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_compile.spec.generators.catalog_extract import (
    check_catalogs,
    extract_sglang_catalog,
    named_paths,
    render_catalog,
)

from conftest import run_cli
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
CATALOG_DIR = ROOT / "spec" / "catalogs"
Catalogs = tuple[dict[str, Any], dict[str, Any]]


@pytest.fixture(scope="module")
def extracted() -> Catalogs:
    return extract_sglang_catalog(engine_python())


def test_regenerated_catalogs_equal_the_committed_files(extracted: Catalogs) -> None:
    flags, env = extracted
    assert flags["version"] == "0.5.23"
    flags_path, env_path = named_paths(CATALOG_DIR, "sglang-0.5.23")
    assert render_catalog(flags) == flags_path.read_text(encoding="utf-8"), (
        "spec/catalogs/sglang-0.5.23.json is stale: run spark-compile catalog sglang"
    )
    assert render_catalog(env) == env_path.read_text(encoding="utf-8"), (
        "spec/catalogs/sglang-env-0.5.23.json is stale: run spark-compile catalog sglang"
    )


def test_catalog_facts(extracted: Catalogs) -> None:
    flags, env = extracted
    by_option = {o: e for e in flags["flags"] for o in e["options"]}
    assert len(flags["flags"]) == 531
    assert sum(len(e["options"]) for e in flags["flags"]) == 559
    assert by_option["--tp-size"]["dest"] == "tp_size" and "--tp" not in by_option
    assert by_option["--fp8-gemm-backend"]["dest"] == "fp8_gemm_runner_backend"
    assert by_option["--no-enable-decoder-swa-bounded-replay"]["action"] == "boolean_optional"
    cuda_graph = by_option["--disable-cuda-graph"]
    assert cuda_graph["deprecated"] and "--cuda-graph-backend-" in cuda_graph["replacement"]
    assert by_option["--speculative-algorithm"]["choices"] is None  # DSPARK is checked later, not by argparse
    names = {v["name"]: v for v in env["variables"]}
    # 770 Envs fields + 4 old names of renamed ones + 14 deprecated names, 3 of which are also Envs fields
    assert sum(v["source"] == "environ.py" for v in names.values()) == 770 + 4 + 14 - 3
    assert sum(v["deprecated"] for v in names.values()) == 4 + 14
    assert names["SGLANG_DSV41_REASONING_EFFORT"]["source"] == "environ.py"
    assert any(v["source"] == "os.environ" for v in names.values())


def test_check_reports_differences(extracted: Catalogs, tmp_path: Path) -> None:
    flags, env = extracted
    flags_path, env_path = named_paths(tmp_path, "sglang-0.5.23")
    assert check_catalogs(flags, env, tmp_path) == [
        f"{flags_path.name}: missing (run without --check to write it)",
        f"{env_path.name}: missing (run without --check to write it)",
    ]
    stale = json.loads(render_catalog(flags))
    stale["flags"] = [e for e in stale["flags"] if e["dest"] != "tp_size"]
    stale["flags"][0]["default"] = "changed"
    flags_path.write_text(render_catalog(stale), encoding="utf-8")
    env_path.write_text(render_catalog(env), encoding="utf-8")
    problems = check_catalogs(flags, env, tmp_path)
    assert f"{flags_path.name}: added --tensor-parallel-size/--tp-size" in problems
    assert any(p.startswith(f"{flags_path.name}: changed ") and "default" in p for p in problems)
    assert not any(p.startswith(env_path.name) for p in problems)


def test_cli_check_passes_on_the_committed_catalogs() -> None:
    result = run_cli("catalog", "sglang", "--python", engine_python(), "--check")
    assert (result.returncode, result.stdout, result.stderr) == (0, "catalogs sglang-0.5.23 are up to date\n", "")


def test_cli_usage_errors(tmp_path: Path) -> None:
    vllm = run_cli("catalog", "vllm")
    assert (vllm.returncode, vllm.stdout, vllm.stderr) == (
        2, "", "spark-compile catalog: argument engine: invalid choice: 'vllm' (choose from 'sglang') (see --help)\n")
    missing = run_cli("catalog", "sglang", "--python", str(tmp_path / "missing-python"))
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        2, "", f"spark-compile catalog: error: engine interpreter not found: {tmp_path / 'missing-python'} (make one "
        "with .ci/install-engine)\n")
