"""Every compiled rank's engine argv parses with SGLang 0.5.23 into exactly what the argv states."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_parse import (
    engine_argv_of,
    engine_python,
    expected_values,
    load_flag_catalog,
    parse_engine_argvs_full,
)

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
# Every shipped profile (the reference and the release history) and every positive example written for the
# build in this venv (a profile that selects another engine.catalog is spelled for that build).
PROFILES = sorted(str(p.relative_to(ROOT)) for p in [*(ROOT / "spec" / "profiles").rglob("*.yaml"),
                                                      *(ROOT / "tests" / "profiles" / "positive").glob("*.yaml")]
                  if "catalog: sglang-" not in p.read_text() or "catalog: sglang-0.5.23" in p.read_text())


def plan_json(profile: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "spark_compile.cli", "plan", profile, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"spark-compile plan failed ({proc.returncode}): {proc.stderr}"
    plan: dict[str, object] = json.loads(proc.stdout)
    return plan


@pytest.mark.parametrize("profile", PROFILES)
def test_every_rank_argv_parses_to_what_it_states(profile: str) -> None:
    python = engine_python()
    ranks = plan_json(profile)["ranks"]
    assert isinstance(ranks, list) and ranks
    argvs = [engine_argv_of(rank["docker_argv"]) for rank in ranks]
    results = parse_engine_argvs_full(argvs, python)
    catalog = load_flag_catalog()
    for index, (rank, argv, result) in enumerate(zip(ranks, argvs, results, strict=True)):
        assert "error" not in result, f"rank {index}: sglang refused {argv}: {result.get('error')}"
        assert result["abbreviations"] == {}, f"rank {index}: abbreviated options {result['abbreviations']}"
        ns = result["namespace"]
        expected = expected_values(argv, catalog)
        assert {dest: ns[dest] for dest in expected} == expected, f"rank {index}"
        assert ns["node_rank"] == rank.get("rank", index) == index
        # Unwritten (one GPU), --tp-size is SGLang's default 1.
        assert ns["tp_size"] == (int(argv[argv.index("--tp-size") + 1]) if "--tp-size" in argv else 1)
        assert ns["nnodes"] == len(ranks)
        for deprecated in (e for e in catalog.values() if e["deprecated"]):
            assert not set(deprecated["options"]) & set(argv), f"rank {index} uses deprecated {deprecated}"
