"""The review page in a real browser: Debian's chromium, headless, loads the file from disk; the tests read
the DOM chromium built (tests/support/browser.py). Layout, colour schemes and screenshots:
test_report_browser.py.

Expected values come from the profile YAML and the partition formula (lo = N*r // R), not from the plan.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli
from support.browser import Browser
from support.dom import Elements

RELEASES = ROOT / "spec" / "profiles" / "releases"
HOSTILE = '<img src=x onerror="document.title=1"> & </td>'
LAYER1_NEXT = 384006168 + 4  # every rank's layer-1 range moves


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 1.7.1 page against 1.7, with one NCCL value changed and a hostile description."""
    work = tmp_path_factory.mktemp("report")
    for name in os.listdir(RELEASES):
        shutil.copy(RELEASES / name, work / name)
    (work / "next.yaml").write_text(
        "extends: production-1.7.1.yaml\n"
        f"description: {HOSTILE!r}\n"
        "nccl:\n  extra:\n    NCCL_BUFFSIZE: '2097152'\n"
        "fleet:\n  nodes:\n    - {name: spark-2, fabric_ip: 192.0.2.23, ssh: spark@192.0.2.23, home: /home/spark}\n"
        f"model:\n  engram:\n    tables: {{1: {LAYER1_NEXT}}}\n")
    out = work / "report.html"
    result = run_cli("report", "next.yaml", "--against", "production-1.7.yaml", "-o", str(out), cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def dom(page: Path, browser: Browser) -> Elements:
    return Elements(browser.open(page.as_uri(), 1400).evaluate("document.documentElement.outerHTML"))


def _nodes(dom: Elements) -> dict[str, tuple[str, str]]:
    """Each node box of the fleet picture: rank → (css classes, what changed on it)."""
    return {a["data-rank"]: (a["class"], text) for a, text in dom.select("rect", "node")}


def _svg_lines(dom: Elements) -> list[str]:
    return [text for a, text in dom.select("text") if a.get("class") in ("label", "mono", "small", "overline")]


def test_each_rank_is_in_the_fleet_picture(dom: Elements) -> None:
    nodes = yaml.safe_load((RELEASES / "production-1.1.yaml").read_text())["fleet"]["nodes"]
    nodes[2] = {**nodes[2], "fabric_ip": "192.0.2.23", "ssh": "spark@192.0.2.23"}
    boxes = _nodes(dom)
    assert sorted(boxes) == [str(r) for r in range(len(nodes))]
    assert {r: css for r, (css, _) in boxes.items()} == {"0": "node head", "1": "node worker",
                                                         "2": "node worker changed", "3": "node worker"}
    assert boxes["2"][1] == "fabric address 192.0.2.13 → 192.0.2.23; ssh spark@192.0.2.13 → spark@192.0.2.23"
    lines = _svg_lines(dom)
    ordinal = {1: "1st", 2: "2nd", 3: "3rd", 4: "4th"}
    for rank, node in enumerate(nodes):
        role = "head" if rank == 0 else "worker"
        assert f"rank {rank} · {node['name']} · {role}" in lines
        start = len(nodes) - rank  # workers first (highest rank first), the head last
        last = " (last: the head)" if rank == 0 else ""
        assert f"{node['fabric_ip']} · starts {ordinal[start]}{last}" in lines
    starts = [(a.get("class"), text) for a, text in dom.select("g", "start")]
    assert [text.split()[-1] for _, text in starts] == ["4", "3", "2", "1"]
    assert [a["class"] for a, _ in dom.select("text", "tag")] == ["tag"]  # one node changed
    model = yaml.safe_load((RELEASES / "production-1.1.yaml").read_text())["model"]
    holder = [n.get("holds_checkpoint", False) for n in nodes]
    assert [t for t in lines if t.startswith("weights: ")] == [
        f"weights: {model['holder_repo'] if held else model['repo']}" for held in holder]
    engram = [t for t in lines if t.startswith("Engram: ")]  # rank 1 reads the shards, the others a local copy
    assert engram[1].startswith("Engram: shards: /models/repo/") and engram[::2] == ["Engram: local: /engram-local"] * 2


def test_each_engram_range_is_on_the_page(dom: Elements) -> None:
    profile = yaml.safe_load((RELEASES / "production-1.1.yaml").read_text())
    old_tables, ranks = profile["model"]["engram"]["tables"], len(profile["fleet"]["nodes"])
    tables = {**old_tables, 1: LAYER1_NEXT}
    shown = {(a["data-layer"], a["data-rank"]): (a["class"], text) for a, text in dom.select("div", "engram-range")}
    assert len(shown) == len(tables) * ranks
    for layer, rows in tables.items():
        for rank in range(ranks):
            lo, hi = rows * rank // ranks, rows * (rank + 1) // ranks
            old_lo, old_hi = old_tables[layer] * rank // ranks, old_tables[layer] * (rank + 1) // ranks
            css, text = shown[(str(layer), str(rank))]
            assert f"[{lo}, {hi})" in text and f"{hi - lo:,} rows" in text
            if (lo, hi) != (old_lo, old_hi):
                assert css.split() == ["col", "engram-range", "changed"]
                assert f"[{old_lo}, {old_hi}) → [{lo}, {hi})" in text
            else:
                assert css.split() == ["col", "engram-range", "same"]
    assert any("changed" in css for css, _ in shown.values())
    pieces = [(a["title"], text) for a, text in dom.select("div", "piece")]
    assert len(pieces) == len(tables) * ranks
    assert all(title.startswith(text + ": [") for title, text in pieces)


def test_each_change_is_highlighted(dom: Elements) -> None:
    settings = {a["data-name"]: (a.get("class", ""), text) for a, text in dom.select("tr") if "data-name" in a}
    for name in ("SPARK_LOOKUP_DRAFT", "SPARK_LOOKUP_MODE", "SPARK_LOOKUP_SYNC_GATE", "SPARK_LOOKUP_NARROW_SLOTS",
                 "SPARK_LOOKUP_FUSED_C2"):
        assert settings[name][0] == "removed", name
    assert settings["NCCL_BUFFSIZE"][0] == "changed"
    assert "1048576 → 2097152" in settings["NCCL_BUFFSIZE"][1]
    assert settings["SPARK_ENGRAM_MODE"][0] == "same"
    changed = {a["data-path"] for a, _ in dom.select("li", "change") if "data-path" in a}
    assert changed == {"release", "release_notes.date", "release_notes.reason", "description", "engine.image",
                       "engine.speculative.dspark_block_size",
                       "fleet.nodes[2].fabric_ip", "fleet.nodes[2].ssh", "model.engram.tables[1]",
                       "operations.verify.hooks_armed",
                       "engine.env.CUDA_LOG_FILE", "engine.env.SGLANG_RAGGED_VERIFY_MODE", "nccl.extra.NCCL_BUFFSIZE",
                       *(f"overlay.lookup_{k}" for k in ("draft", "mode", "sync_gate", "narrow_slots", "fused_c2"))}
    rows = {a["data-path"]: (a["class"], text) for a, text in dom.select("tr", "value")}
    assert rows["nccl.extra.NCCL_BUFFSIZE"] == ("value added", "nccl.extra.NCCL_BUFFSIZE SC225 (unset) → 2097152 "
                                                "next.yaml:5 NCCL_BUFFSIZE")
    assert rows["fleet.nodes[2].fabric_ip"] == ("value changed", "fleet.nodes[2].fabric_ip 192.0.2.13 → "
                                                "192.0.2.23 next.yaml:8 HOST_IP")
    assert rows["overlay.lookup_mode"] == ("value removed", "overlay.lookup_mode wide → (unset) "
                                           "production-1.7.yaml:16")
    artifacts = " | ".join(text for _, text in dom.select("li", "change"))
    assert "ranks 0-3 nccl.env NCCL_BUFFSIZE: 1048576 → 2097152" in artifacts
    assert "ranks 0-3 overlay.env SPARK_LOOKUP_MODE: wide → (unset)" in artifacts
    assert "rank 2 engine.env HOST_IP: 192.0.2.13 → 192.0.2.23" in artifacts


def test_a_hostile_value_stays_text(dom: Elements) -> None:
    assert not [a for a, _ in dom.select("img")]
    _, _, row = dom.by_id("v-description")
    assert HOSTILE in row
    change = [text for a, text in dom.select("li", "change") if a.get("data-path") == "description"]
    assert len(change) == 1 and HOSTILE in change[0]


def test_the_page_makes_no_external_requests(page: Path, browser: Browser) -> None:
    html = page.read_text()
    assert not re.search(r"""(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"@import|url\s*\(", html, re.I)
    assert "<script" not in html.lower() and "<link" not in html.lower() and "<iframe" not in html.lower()
    tab = browser.open(page.as_uri(), 1400)
    assert tab.requests() == [page.as_uri()]
    assert tab.evaluate("performance.getEntriesByType('resource').length") == 0


def test_the_page_is_deterministic(page: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    result = run_cli("report", "next.yaml", "--against", "production-1.7.yaml", "-o", str(again), cwd=page.parent,
                     env={"PYTHONHASHSEED": "7", "TZ": "Asia/Tokyo", "LC_ALL": "C"})
    assert result.returncode == 0, result.stderr
    assert again.read_bytes() == page.read_bytes()


def test_every_value_on_the_page_is_redacted_and_escaped() -> None:
    from spark_compile.review.page import Page, SettingRow, render_page
    from spark_compile.review.page_fleet import Picture, Shape
    from spark_compile.review.page_values import ChangeLine, FindingLine, Section, ValueRow

    token = "hf_" + "Z9y8X7w6V5" * 4
    bad = f"<b>{token}</b>"
    row = SettingRow("X", {0: bad}, token, "engine.env.X", (bad, bad))
    value = ValueRow(bad, bad, bad, bad, bad, "changed", bad, [bad], [bad], [bad])
    shape = Shape("text", bad, "1", "2", text=bad, title=bad, data={"rank": bad})
    page = Page(f"t <i>{token}", [Section("engine", bad, [value], [("engine.env", [row])])],
                Picture("10", [shape, Shape("rect", bad, "1", "2", title=bad, data={"rank": bad})]), [],
                [FindingLine(bad, bad, bad, bad, bad, bad)], [("description", token)], bad,
                [ChangeLine(bad, bad, bad, bad, bad, bad)], [(bad, bad)], [(bad, bad, bad)],
                {"ranks": [(bad, bad)], "rows": [{"label": bad, "css": bad, "gib": [bad], "was": [bad],
                                                  "sources": [bad]}], "totals": [bad], "unified": True}, bad)
    html = render_page(page)
    assert "Z9y8X7w6V5" not in html and html.count("(redacted)") >= 30
    assert "<b>" not in html and "&lt;b&gt;(redacted)&lt;/b&gt;" in html and "<i>" not in html


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "spec" / "profiles" / "examples").glob("*.yaml")))
def test_every_shipped_example_gets_a_page(example: str) -> None:
    path = ROOT / "spec" / "profiles" / "examples" / example
    result = run_cli("report", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    ranks = [a["data-rank"] for a, _ in Elements(result.stdout).select("rect", "node")]
    plan = run_cli("plan", str(path), "--json")
    assert ranks == [str(r["rank"]) for r in json.loads(plan.stdout)["ranks"]]


def test_each_node_shows_its_memory_as_one_bar(dom: Elements) -> None:
    # next.yaml doubles NCCL_BUFFSIZE: no longer the trim, so each node pays NCCL's default 4.7 GiB.
    tracks = [a for a, _ in dom.select("rect", "track")]
    assert [a["data-rank"] for a in tracks] == ["0", "1", "2", "3"]  # one bar per node, nothing beside it
    segments = [(a["data-rank"], a["data-term"], a["data-gib"], text) for a, text in dom.select("rect", "seg")]
    assert all(title.startswith(f"{float(gib):.1f} GiB (", len(title.split(":")[0]) + 2)
               for _, _, gib, title in segments)
    nccl = [text for _, term, _, text in segments if term == "nccl"]
    assert len(nccl) == 4 and all(t.startswith("NCCL: 4.7 GiB (NCCL's default buffers") for t in nccl)
    terms = {rank: [term for r, term, _, _ in segments if r == rank] for rank in "0123"}
    # one pool: the host's share is in the same bar, the Engram row cache inside SGLang's outside share; the shm
    # ceiling is no segment (the table's row below)
    assert terms["0"] == ["weights", "draft", "kv", "outside", "engram", "nccl", "http", "os"]
    # a worker keeps free what the fleet's minimum (the head's) took for the head's own processes
    assert terms["1"] == terms["2"] == terms["3"] == ["weights", "draft", "kv", "outside", "engram", "nccl", "os",
                                                       "free"]
    # the page cache and the OS: the catalog's idle MemTotal - MemAvailable (121.7 - 113.0)
    assert {gib for _, term, gib, _ in segments if term == "os"} == {"8.70"}
    for track in tracks:  # SGLang's pool is what its fraction leaves of the free memory: the node is filled
        mine = sum(float(gib) for r, _, gib, _ in segments if r == track["data-rank"])
        assert track["data-total"] == "121.70" and track["data-over"] == "0.00"
        assert abs(mine - 121.7) < 0.03
    lines = _svg_lines(dom)
    summaries = [t for t in lines if "121.7 GiB unified" in t]
    assert len(summaries) == len(tracks)
    assert [line.rsplit(" \u00b7 ", 1)[1] for line in summaries] == ["0.0 GiB free"] + ["1.3 GiB free"] * 3
    table = {a["data-term"]: text for a, text in dom.select("tr") if "data-term" in a}
    assert table["nccl"].startswith("NCCL" + " 0.1 → 4.7" * 4 + " NCCL's default buffers")  # was the trim
    assert table["http"].startswith("HTTP/tokenizer 1.3 - - - ")
    assert table["outside"].startswith("outside the pool" + " 18.6 → 17.7" * 4 + " what SGLang leaves outside")
    assert table["shm"].startswith("shm ceiling (not drawn)" + " 32.0" * 4 + " --shm-size: a tmpfs in host memory, "
                                   "charged when filled; a ceiling, so not in the bar")


def test_the_page_lists_engine_flags_and_docker_options_with_their_keys() -> None:
    path = ROOT / "spec" / "profiles" / "examples" / "qwen3-235b-nvfp4-2spark-roce.yaml"
    result = run_cli("report", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    parsed = Elements(result.stdout)
    rows = {attrs["data-name"]: text for attrs, text in parsed.select("tr") if "data-name" in attrs}
    # option, value, the build's default, the profile key, where it is set
    assert rows["--kv-cache-dtype"].startswith("--kv-cache-dtype fp8_e4m3 auto engine.kv_cache_dtype ")
    assert rows["--speculative-draft-model-quantization"].startswith(
        "--speculative-draft-model-quantization unquant - engine.speculative.draft.quantization ")
    # RDMA access by construction: from the fabric's kind, where the profile says roce.
    assert rows["--cap-add"].startswith("--cap-add IPC_LOCK - fleet.fabric.kind ")
    assert rows["--device"].startswith("--device /dev/infiniband - fleet.fabric.kind ")
    assert rows["-v [engine.speculative.draft.repo]"].startswith(
        "-v [engine.speculative.draft.repo] /srv/models/Qwen3-235B-A22B-EAGLE3:/models/draft:ro - ")


def test_a_stale_mention_is_a_word_of_the_key_right_before_its_old_value() -> None:
    from spark_compile.review.artifact_diff import ProfileChange
    from spark_compile.review.page_values import stale_mentions

    def change(path: str, old: object, new: object) -> ProfileChange:
        return ProfileChange(path, old, new, None, None)

    text = "DSV4 on 4x Spark, TP4/EP4, DSpark block 5.5, mode: wide."
    assert stale_mentions(text, [change("engine.parallel.tp", 4, 8)]) == [
        "says “TP4” but engine.parallel.tp is now 8 (was 4)"]
    assert stale_mentions(text, [change("overlay.lookup_mode", "wide", "replace")]) == [
        "says “mode: wide” but overlay.lookup_mode is now replace (was wide)"]
    assert stale_mentions(text, [change("engine.speculative.dspark_block_size", 5, 7),  # 5.5 is not 5
                                 change("engine.parallel.ep", 4, 4), change("x.tp", True, False),
                                 change("description", "a", "b")]) == []
