"""The Engram row arithmetic is written once (spark_compile.common.engram_rows): the plan, the rules, fleet.env
and the shipped engram.py use it. What cannot import it is held equal to it here: the serving container's
parser of SPARK_ENGRAM_ROWS (overlay/values.py) and fleet-lib.sh's checks on the node, which read
engram.py's manifest and the checkpoint's config.json with their own few lines of Python."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.common import engram_rows
from spark_compile.overlay import values

from conftest import ROOT
from support.fleet_install import installed_fleet

REFERENCE = ROOT / "generated" / "dsv41-4spark"
LAYERS = st.integers(min_value=0, max_value=96)
TABLES = st.dictionaries(LAYERS, st.integers(min_value=0, max_value=10**12), min_size=1, max_size=6)
RANKS = st.integers(min_value=1, max_value=1024)


@given(TABLES, RANKS)
def test_the_ranks_shares_tile_every_table_and_differ_by_at_most_one_row(tables: dict[int, int], ranks: int) -> None:
    shares = [engram_rows.rank_rows(tables, rank, ranks) for rank in range(ranks)]
    for layer, rows in tables.items():
        spans = [share[layer] for share in shares]
        assert spans[0][0] == 0 and spans[-1][1] == rows
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        assert max(hi - lo for lo, hi in spans) - min(hi - lo for lo, hi in spans) <= 1


@given(TABLES, RANKS, st.data())
def test_the_container_reads_the_rows_text_as_it_is_written(tables: dict[int, int], ranks: int,
                                                            data: st.DataObject) -> None:
    rows = engram_rows.rank_rows(tables, data.draw(st.integers(min_value=0, max_value=ranks - 1)), ranks)
    text = engram_rows.format_rows(rows)
    assert text == values.format_rows(rows)
    assert values.parse_rows(text) == engram_rows.parse_rows(text) == rows


@pytest.mark.parametrize("text", ["1:0:x", "1:0", "1:0:2:3", "", "1:-1:2", "1:0:²"])
def test_a_rows_text_the_container_refuses_engram_py_refuses_too(text: str) -> None:
    with pytest.raises(values.FlagValueError):
        values.parse_rows(text)
    with pytest.raises(ValueError, match="is not a row range: expected L:lo:hi with whole numbers"):
        engram_rows.parse_rows(text)


def test_engram_py_gives_each_rank_the_rows_the_plan_gives_it(tmp_path: Path) -> None:
    plan = json.loads((REFERENCE / "plan.json").read_text())
    tables = {1: 384006168, 14: 384016682}  # model.engram.tables of the reference profile
    (tmp_path / "config.json").write_text(json.dumps({"engram_layer_ids": list(tables),
                                                      "engram_num_embeddings": list(tables.values())}))
    shown = subprocess.run([sys.executable, str(ROOT / "generated" / "fleet_scripts" / "engram.py"), "rows",
                            str(tmp_path), "--tp", str(len(plan["ranks"]))], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    planned = [engram_rows.format_rows({int(k): (lo, hi) for k, (lo, hi) in rank["engram"]["rows"].items()})
               for rank in plan["ranks"]]
    assert shown == ["tables: {1: 384006168, 14: 384016682}", *(f"rank {r}: {text}" for r, text in enumerate(planned))]
    overlay = (REFERENCE / "1-spark-1" / "overlay.env").read_text()
    assert f"SPARK_ENGRAM_ROWS={planned[1]}\n" in overlay


@pytest.fixture(scope="module")
def fleet_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fleet-lib.sh in an installed reference folder (it sources the fleet.env beside it)."""
    return installed_fleet(REFERENCE, tmp_path_factory.mktemp("deploy") / "dsv41-4spark") / "fleet-lib.sh"


def node(fleet_lib: Path, *argv: str) -> str:
    """One of fleet-lib.sh's node functions, run here as a node runs it: its one line of output."""
    proc = subprocess.run(["bash", "-c", 'source "$1" && "${@:2}"', "node", str(fleet_lib), *argv],
                          capture_output=True, text=True, check=False, timeout=30)
    return proc.stdout + proc.stderr


@settings(max_examples=15, deadline=None)
@given(TABLES, RANKS, st.data())
def test_preflight_reads_a_copy_s_manifest_as_engram_py_writes_it(fleet_lib: Path, tables: dict[int, int],
                                                                  ranks: int, data: st.DataObject) -> None:
    rows = engram_rows.rank_rows(tables, data.draw(st.integers(min_value=0, max_value=ranks - 1)), ranks)
    manifest = fleet_lib.parent / "engram-local.json"
    # engram.py copy's manifest, layers as it writes them.
    manifest.write_text(json.dumps({"layers": {str(k): list(v) for k, v in sorted(rows.items())}, "quant": "fp8"}))
    text = engram_rows.format_rows(rows)
    assert node(fleet_lib, "node_rows_check", "local", str(manifest), text) == f"rows-ok {manifest} ({text})\n"


@settings(max_examples=15, deadline=None)
@given(TABLES, st.booleans())
def test_preflight_reads_config_json_s_tables_as_engram_py_does(fleet_lib: Path, tables: dict[int, int],
                                                                nested: bool) -> None:
    config = {"engram_layer_ids": list(tables), "engram_num_embeddings": list(tables.values())}
    path = fleet_lib.parent / "config.json"
    path.write_text(json.dumps({"text_config": config} if nested else config))
    assert engram_rows.table_sizes(json.loads(path.read_text())) == tables
    text = engram_rows.format_tables(tables)
    assert node(fleet_lib, "node_tables_check", str(path), text) == f"tables-ok: {path} gives {text}\n"
    other = engram_rows.format_tables({**tables, 97: 1})
    assert node(fleet_lib, "node_tables_check", str(path), other) == (
        f"!tables-MISMATCH: {path} gives Engram rows {text}, the profile says {other} (model.engram.tables)\n")
