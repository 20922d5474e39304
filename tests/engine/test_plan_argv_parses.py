"""Every compiled rank's engine argv parses with SGLang 0.5.23 into exactly what the argv states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
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
    proc = run_cli("plan", profile, "--json")
    assert proc.returncode == 0, f"spark-compile plan {profile} failed ({proc.returncode}): {proc.stderr}"
    plan: dict[str, object] = json.loads(proc.stdout)
    return plan


Parsed = tuple[list[Any], list[list[str]], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def parsed() -> dict[str, Parsed]:
    """Each profile's ranks, their engine argvs and SGLang's parse of each: every argv of every profile in
    one engine process (importing sglang costs seconds; one process per profile cost most of this file)."""
    python = engine_python()
    ranks: dict[str, list[Any]] = {}
    for profile in PROFILES:
        found = plan_json(profile)["ranks"]
        assert isinstance(found, list) and found, profile
        ranks[profile] = found
    argvs = {profile: [engine_argv_of(rank["docker_argv"]) for rank in ranks[profile]] for profile in PROFILES}
    results = iter(parse_engine_argvs_full([argv for profile in PROFILES for argv in argvs[profile]], python))
    return {profile: (ranks[profile], argvs[profile], [next(results) for _ in argvs[profile]])
            for profile in PROFILES}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_rank_argv_parses_to_what_it_states(profile: str, parsed: dict[str, Parsed]) -> None:
    ranks, argvs, results = parsed[profile]
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
