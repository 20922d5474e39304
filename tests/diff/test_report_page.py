"""The review page in a real browser: Debian's chromium, headless, loads the file from disk; the test reads the
DOM chromium built and keeps a screenshot under tests/artifacts/ (ignored by git) as an artifact of the run.

Expected values come from the profile YAML and the partition formula (lo = N*r // R), not from the plan.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli
from support.tools import require_tool

RELEASES = ROOT / "spec" / "profiles" / "releases"
ARTIFACTS = ROOT / "tests" / "artifacts"
HOSTILE = '<img src=x onerror="document.title=1"> & </td>'
LAYER1_NEXT = 384006168 + 4  # every rank's layer-1 range moves


class Elements(HTMLParser):
    """Every element with its attributes and its text (children's text included)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str], list[str]]] = []
        self.open: list[tuple[str, dict[str, str], list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element: tuple[str, dict[str, str], list[str]] = (tag, {k: v or "" for k, v in attrs}, [])
        for outer in self.open:  # a cell boundary separates words
            outer[2].append(" ")
        self.found.append(element)
        if tag not in ("meta", "br", "img", "link", "input"):
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element[2].append(data)

    def select(self, tag: str, cls: str | None = None) -> list[tuple[dict[str, str], str]]:
        """Elements of ``tag`` (with the class ``cls`` among theirs): attributes and whitespace-folded text."""
        return [(found, " ".join("".join(text).split())) for name, found, text in self.found
                if name == tag and (cls is None or cls in found.get("class", "").split())]


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


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    chromium = require_tool("chromium")
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module")
def dom(page: Path, tmp_path_factory: pytest.TempPathFactory) -> Elements:
    result = _chromium(tmp_path_factory.mktemp("chromium"), "--dump-dom", page.as_uri())
    assert result.returncode == 0 and "<body" in result.stdout, result.stderr[-2000:]
    parsed = Elements()
    parsed.feed(result.stdout)
    return parsed


def test_each_rank_is_on_the_page(dom: Elements) -> None:
    nodes = yaml.safe_load((RELEASES / "production-1.1.yaml").read_text())["fleet"]["nodes"]
    nodes[2] = {**nodes[2], "fabric_ip": "192.0.2.23", "ssh": "spark@192.0.2.23"}
    rows = {attrs["data-rank"]: text for attrs, text in dom.select("tr") if attrs.get("id", "").startswith("rank-")}
    status = {attrs["data-rank"]: attrs["class"] for attrs, _ in dom.select("tr") if "data-rank" in attrs
              and attrs.get("id", "").startswith("rank-")}
    assert status == {"0": "same", "1": "same", "2": "changed", "3": "same"}
    assert "192.0.2.13 → 192.0.2.23" in rows["2"] and "spark@192.0.2.13 → spark@192.0.2.23" in rows["2"]
    assert sorted(rows) == [str(r) for r in range(len(nodes))]
    for rank, node in enumerate(nodes):
        text = rows[str(rank)]
        assert node["name"] in text and node["fabric_ip"] in text and node["ssh"] in text
        # start order: workers first (highest rank first), the head last
        assert f" {len(nodes) - rank} " in f" {text} "
    assert "head" in rows["0"] and all("worker" in rows[str(r)] for r in range(1, len(nodes)))


def test_each_engram_range_is_on_the_page(dom: Elements) -> None:
    profile = yaml.safe_load((RELEASES / "production-1.1.yaml").read_text())
    old_tables, ranks = profile["model"]["engram"]["tables"], len(profile["fleet"]["nodes"])
    tables = {**old_tables, 1: LAYER1_NEXT}
    shown = {(a["data-layer"], a["data-rank"]): (a["class"], text) for a, text in dom.select("tr", "engram-range")}
    assert len(shown) == len(tables) * ranks
    for layer, rows in tables.items():
        for rank in range(ranks):
            lo, hi = rows * rank // ranks, rows * (rank + 1) // ranks
            old_lo, old_hi = old_tables[layer] * rank // ranks, old_tables[layer] * (rank + 1) // ranks
            css, text = shown[(str(layer), str(rank))]
            assert f"[{lo}, {hi})" in text
            if (lo, hi) != (old_lo, old_hi):
                assert css.split() == ["engram-range", "changed"] and f"[{old_lo}, {old_hi}) → [{lo}, {hi})" in text
            else:
                assert css.split() == ["engram-range", "same"]
    assert any("changed" in css for css, _ in shown.values())
    bars = [(a["title"], text) for a, text in dom.select("div", "seg")]
    assert len(bars) == len(tables) * ranks
    assert all(title.startswith(text + ": [") for title, text in bars)


def test_each_change_is_highlighted(dom: Elements) -> None:
    settings = {a["data-name"]: (a.get("class", ""), text) for a, text in dom.select("tr") if "data-name" in a}
    for name in ("SPARK_LOOKUP_DRAFT", "SPARK_LOOKUP_MODE", "SPARK_LOOKUP_SYNC_GATE", "SPARK_LOOKUP_NARROW_SLOTS",
                 "SPARK_LOOKUP_FUSED_C2"):
        assert settings[name][0] == "removed", name
    assert settings["NCCL_BUFFSIZE"][0] == "changed"
    assert "1048576 → 2097152" in settings["NCCL_BUFFSIZE"][1]
    assert settings["SPARK_ENGRAM_MODE"][0] == "same"
    changed = {a["data-path"] for a, _ in dom.select("li") if "data-path" in a}
    assert changed == {"release", "release_notes.date", "release_notes.reason", "description", "engine.image",
                       "engine.speculative.dspark_block_size",
                       "fleet.nodes[2].fabric_ip", "fleet.nodes[2].ssh", "model.engram.tables[1]",
                       "operations.verify.hooks_armed",
                       "engine.env.CUDA_LOG_FILE", "engine.env.SGLANG_RAGGED_VERIFY_MODE", "nccl.extra.NCCL_BUFFSIZE",
                       *(f"overlay.lookup_{k}" for k in ("draft", "mode", "sync_gate", "narrow_slots", "fused_c2"))}
    artifacts = " | ".join(text for _, text in dom.select("li", "change"))
    assert "ranks 0-3 nccl.env NCCL_BUFFSIZE: 1048576 → 2097152" in artifacts
    assert "ranks 0-3 overlay.env SPARK_LOOKUP_MODE: wide → (unset)" in artifacts
    assert "rank 2 engine.env HOST_IP: 192.0.2.13 → 192.0.2.23" in artifacts


def test_a_hostile_value_stays_text(dom: Elements) -> None:
    assert not [a for a, _ in dom.select("img")]
    assert any(HOSTILE in text for a, text in dom.select("dd"))


def test_the_page_makes_no_external_requests(page: Path) -> None:
    html = page.read_text()
    assert not re.search(r"""(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"@import|url\s*\(", html, re.I)
    assert "<script" not in html.lower() and "<link" not in html.lower() and "<iframe" not in html.lower()


def test_the_page_is_deterministic(page: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    result = run_cli("report", "next.yaml", "--against", "production-1.7.yaml", "-o", str(again), cwd=page.parent,
                     env={"PYTHONHASHSEED": "7", "TZ": "Asia/Tokyo", "LC_ALL": "C"})
    assert result.returncode == 0, result.stderr
    assert again.read_bytes() == page.read_bytes()


def test_screenshot_is_kept(page: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-page.png"
    shot.unlink(missing_ok=True)
    result = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    print(f"screenshot of the review page: {shot}")


def test_every_value_on_the_page_is_redacted_and_escaped() -> None:
    from spark_compile.report_page import Page, SettingRow, render_page

    token = "hf_" + "Z9y8X7w6V5" * 4
    row = SettingRow("X", {0: f"<b>{token}</b>"}, token, "engine.env.X", "p.yaml:3")
    page = Page(f"t <i>{token}", [("description", token)], [], [], [("engine.env", [row])])
    html = render_page(page)
    assert "Z9y8X7w6V5" not in html and html.count("(redacted)") >= 4
    assert "<b>" not in html and "&lt;b&gt;(redacted)&lt;/b&gt;" in html and "<i>" not in html


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "spec" / "profiles" / "examples").glob("*.yaml")))
def test_every_shipped_example_gets_a_page(example: str) -> None:
    path = ROOT / "spec" / "profiles" / "examples" / example
    result = run_cli("report", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    parsed = Elements()
    parsed.feed(result.stdout)
    ranks = [a["data-rank"] for a, _ in parsed.select("tr") if a.get("id", "").startswith("rank-")]
    plan = run_cli("plan", str(path), "--json")
    assert ranks == [str(r["rank"]) for r in json.loads(plan.stdout)["ranks"]]


def test_the_page_lists_engine_flags_and_docker_options_with_their_keys() -> None:
    path = ROOT / "spec" / "profiles" / "examples" / "qwen3-235b-nvfp4-2spark-roce.yaml"
    result = run_cli("report", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    parsed = Elements()
    parsed.feed(result.stdout)
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
