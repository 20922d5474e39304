"""The static KV model against SGLang 0.5.23's own DSV4 pool configurator (engine venv, GB10 simulated): for
every shipped DeepSeek-V4.1 profile and every rank, `check --engine` runs the configurator on the bytes the
capacity stage predicts and the two full_token figures must agree within 2 %."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

SHIPPED = sorted((ROOT / "spec" / "profiles").rglob("*.yaml"))
_NOTE = re.compile(r"^check --engine: (\S+) rank (\d+): SGLang's DSV4PoolConfigurator: bytes_per_full_token=([\d.]+) "
                   r"full_token=(\d+); the static model: bytes_per_full_token=([\d.]+) full_token=(\d+) "
                   r"\(([\d.]+)% apart\)$", re.MULTILINE)


def _modelled_ranks(path: Path) -> int:
    """How many ranks of a profile the static model sizes (those with a bytes_per_full_token)."""
    plan = json.loads(run_cli("plan", str(path.relative_to(ROOT)), "--json").stdout)
    return sum(rank["bytes_per_full_token"] is not None and "DSV4PoolConfigurator" in rank["kv_model"]
               for rank in plan["capacity"]["ranks"])


def test_every_shipped_profile_agrees_with_sglangs_configurator() -> None:
    modelled = {path: _modelled_ranks(path) for path in SHIPPED}
    dsv4 = [path for path, count in modelled.items() if count]
    assert len(dsv4) == 10  # the reference, the eight releases and the eight-node example
    proc = run_cli("check", "--engine", *(str(p.relative_to(ROOT)) for p in dsv4),
                   env={"ENGINE_PYTHON": engine_python()})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = _NOTE.findall(proc.stderr)
    assert len(notes) == sum(modelled.values()), proc.stderr  # every rank of every profile, sized by both
    for _, rank, theirs_bpft, theirs, ours_bpft, ours, _ in notes:
        assert float(ours_bpft) == pytest.approx(float(theirs_bpft), rel=0.02), rank
        assert int(ours) == pytest.approx(int(theirs), rel=0.02), rank
        assert int(theirs) > 0
