"""The review page on a reader's screen, measured in headless Chromium: on a 400 px phone the list of changes
is on the first screen (the legend folded after it); no text renders under 11 px at 400 px or at 1400 px, the
fleet picture's included (its SVG text scaled by the picture's own scale); each node has one memory bar whose
segments add up to the node's total; and the page counts the changes `diff` counts, for every release pair.

Expected figures come from the hardware catalog, `plan --capacity`'s table and `diff`'s own output.
"""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import pytest

from spark_compile.spec.hardware import HARDWARE

from conftest import ROOT, run_cli
from support.browser import Browser
from support.dom import Elements

PROFILES = ROOT / "spec" / "profiles"
RELEASES = sorted((PROFILES / "releases").glob("production-*.yaml"),
                  key=lambda p: tuple(int(n) for n in p.stem.removeprefix("production-").split(".")))
PAIRS = list(itertools.pairwise(RELEASES))
EXAMPLES = sorted((PROFILES / "examples").glob("*.yaml"))
PHONE = (400, 700)  # a phone's first screen, CSS px
GB10 = HARDWARE["dgx-spark-gb10"]

FIRST_SCREEN = """(() => {
  const first = document.querySelector('#changes li.change').getBoundingClientRect();
  const legend = document.getElementById('legend');
  return {bottom: first.bottom, height: innerHeight, legend: legend.getBoundingClientRect().top,
          open: legend.open};
})()"""

# Every text node the page renders, with every <details> opened: its computed font size times the scale its
# SVG draws at (the text's screen matrix), in CSS px.
TEXT_SIZES = """(() => {
  for (const box of document.querySelectorAll('details')) box.open = true;
  const sizes = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    if (!node.textContent.trim() || el.closest('title')) continue;
    const range = document.createRange(); range.selectNodeContents(node);
    if (!range.getClientRects().length) continue;  // not rendered at this width
    const svg = el.closest('svg') !== null, m = svg ? el.getScreenCTM() : null;
    const size = parseFloat(getComputedStyle(el).fontSize) * (svg ? Math.hypot(m.a, m.b) : 1);
    sizes.push([size, svg, node.textContent.trim().slice(0, 60)]);
  }
  sizes.sort((a, b) => a[0] - b[0]);
  return {smallest: sizes.slice(0, 3), svg: sizes.filter(s => s[1]).length, count: sizes.length};
})()"""

# Each memory bar as drawn: its node, figures and rendered widths, and each of its segments'.
BARS = """[...document.querySelectorAll('svg rect.track')].map(track => ({
  rank: track.dataset.rank, total: +track.dataset.total, over: +track.dataset.over,
  width: track.getBoundingClientRect().width,
  segments: [...document.querySelectorAll(`svg rect.seg[data-rank="${track.dataset.rank}"]`)].map(s => ({
    term: s.dataset.term, gib: +s.dataset.gib, width: s.getBoundingClientRect().width}))}))"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The reference against production-1.7, a child changing one value, and each release against the one
    before it."""
    work = tmp_path_factory.mktemp("screen")
    for name in ("dsv41-4spark.yaml", "dsv41-flash.config.json"):
        shutil.copy(PROFILES / name, work / name)
    (work / "block7.yaml").write_text("extends: dsv41-4spark.yaml\nengine:\n  speculative:\n    dspark_block_size: 7\n")
    sides = {"reference": ("spec/profiles/dsv41-4spark.yaml", "spec/profiles/releases/production-1.7.yaml"),
             "block7": (str(work / "block7.yaml"), str(work / "dsv41-4spark.yaml")),
             **{new.stem: (str(new.relative_to(ROOT)), str(old.relative_to(ROOT))) for old, new in PAIRS}}
    out = {}
    for name, (new, old) in sides.items():
        out[name] = work / f"{name}.html"
        result = run_cli("report", new, "--against", old, "-o", str(out[name]))
        assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.mark.parametrize("which", ["reference", "block7", RELEASES[-1].stem])
def test_the_changes_are_on_a_phones_first_screen(pages: dict[str, Path], browser: Browser, which: str) -> None:
    width, height = PHONE
    screen = browser.open(pages[which].as_uri(), width, height).evaluate(FIRST_SCREEN)
    assert screen["height"] == height and screen["bottom"] <= height, screen
    assert screen["legend"] > screen["bottom"] and screen["open"] is False  # folded, after the changes


def _smallest_text(browser: Browser, page: Path, width: int) -> None:
    sizes = browser.open(page.as_uri(), width).evaluate(TEXT_SIZES)
    assert sizes["count"] > 300 and sizes["svg"] >= 6, sizes  # the fleet picture's text is measured too
    assert sizes["smallest"][0][0] >= 11, (width, sizes["smallest"])


@pytest.mark.parametrize("width", [400, 1400])
@pytest.mark.parametrize("which", ["reference", "block7"])
def test_no_text_renders_under_11_px(pages: dict[str, Path], browser: Browser, which: str, width: int) -> None:
    _smallest_text(browser, pages[which], width)


@pytest.mark.parametrize("example", [p.name for p in EXAMPLES])
def test_no_text_of_a_shipped_example_renders_under_11_px(example: str, browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    result = run_cli("report", f"spec/profiles/examples/{example}", "-o", str(page))
    assert result.returncode == 0, result.stdout + result.stderr
    for width in (400, 1400):
        _smallest_text(browser, page, width)


def _capacity(profile: str) -> dict[str, dict[str, str]]:
    """`plan --capacity`'s table: rank → column → figure."""
    lines = run_cli("plan", profile, "--capacity").stdout.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("rank "))
    columns = re.split(r"\s{2,}", lines[header].strip())
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[header + 1:] if line[:1].isdigit()]
    return {row[0]: dict(zip(columns, row, strict=True)) for row in rows}


@pytest.mark.parametrize("width", [400, 1400])
def test_each_node_has_one_memory_bar_adding_up_to_its_total(pages: dict[str, Path], browser: Browser,
                                                            width: int) -> None:
    tab = browser.open(pages["reference"].as_uri(), width)
    bars = tab.evaluate(BARS)
    nodes = Elements(tab.evaluate("document.documentElement.outerHTML")).select("rect", "node")
    assert [b["rank"] for b in bars] == [a["data-rank"] for a, _ in nodes] == ["0", "1", "2", "3"]
    table = _capacity("spec/profiles/dsv41-4spark.yaml")
    column = {"weights": "weights", "draft": "draft", "kv": "kv pool", "nccl": "nccl", "http": "head"}
    for bar in bars:
        gib = {s["term"]: s["gib"] for s in bar["segments"]}
        assert bar["total"] == GB10.cuda_total_gib  # one pool: what CUDA reports of the GB10's memory
        assert abs(sum(gib.values()) - bar["total"] - bar["over"]) < 0.03, bar
        assert bar["over"] == 0 or "free" not in gib
        assert GB10.cuda_total_gib is not None and GB10.mem_available_gib is not None
        assert gib["os"] == round(GB10.cuda_total_gib - GB10.mem_available_gib, 2)  # MemTotal - MemAvailable
        assert {term: f"{gib.get(term, 0):.1f}" for term in column} == {
            term: table[bar["rank"]][name] for term, name in column.items()}
        # the row cache fills what SGLang leaves outside its pool; a worker keeps free what the fleet's minimum
        # (the head's) took for the head's own processes; the shm ceiling is not drawn
        assert abs(gib["outside"] + gib["engram"] - float(table[bar["rank"]]["outside"])) < 0.15, bar
        unused = float(table["0"]["head"]) - float(table[bar["rank"]]["head"])
        assert bar["over"] == 0 and "shm" not in gib and abs(gib.get("free", 0.0) - unused) < 0.15, bar
        drawn = sum(s["width"] for s in bar["segments"])  # the segments' lengths, as the figures say
        assert abs(drawn - bar["width"] * (bar["total"] + bar["over"]) / bar["total"]) < 1.5, bar


@pytest.mark.parametrize("example", [p.name for p in EXAMPLES])
def test_each_example_node_has_one_memory_bar(example: str, browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    assert run_cli("report", f"spec/profiles/examples/{example}", "-o", str(page)).returncode == 0
    tab = browser.open(page.as_uri(), 1400)
    bars = tab.evaluate(BARS)
    nodes = Elements(tab.evaluate("document.documentElement.outerHTML")).select("rect", "node")
    assert [b["rank"] for b in bars] == [a["data-rank"] for a, _ in nodes]
    for bar in bars:
        assert abs(sum(s["gib"] for s in bar["segments"]) - bar["total"] - bar["over"]) < 0.03, bar
        assert bar["over"] == 0 or "free" not in [s["term"] for s in bar["segments"]]


def _diff_counts(old: Path, new: Path) -> tuple[int, str]:
    """`diff`'s own count of the profile's changes, and its line counting the rendered files' changes."""
    lines = run_cli("diff", str(old), str(new)).stdout.splitlines()
    profile = re.fullmatch(r"profile: (\d+) changes?(?: \(.*\))?", lines[0])
    assert profile, lines[0]
    artifacts = next(line for line in lines if line.startswith("artifacts: "))
    return int(profile.group(1)), artifacts.removeprefix("artifacts: ").removesuffix("; --detail lists each")


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[new.stem for _, new in PAIRS])
def test_the_page_counts_the_changes_diff_counts(old: Path, new: Path, pages: dict[str, Path],
                                                  browser: Browser) -> None:
    count, artifacts = _diff_counts(old, new)
    dom = Elements(browser.open(pages[new.stem].as_uri(), 1400).evaluate("document.documentElement.outerHTML"))
    said = dom.select("p", "against")[0][1]
    assert said.endswith(f": {count} value{'s' * (count != 1)} changed."), said
    listed = [a for a, _ in dom.select("li", "change") if "data-path" in a]
    assert len(listed) == count
    per_section = [int(n) for _, text in dom.select("a") for n in re.findall(r"\((\d+) changed\)", text)]
    assert sum(per_section) == count
    assert [text for _, text in dom.select("p", "rendered-count")] == [
        f"The rendered files: {artifacts}, listed at the end of the page."]


def test_a_discrete_gpus_bar_holds_only_its_own_memory(browser: Browser, tmp_path: Path) -> None:
    """On an H100 the host's memory is another pool: the row cache and shm stay out of the GPU's bar."""
    for name in ("qwen3-30b-a3b.config.json", "single-node.yaml"):
        shutil.copy(PROFILES / "examples" / name, tmp_path / name)
    profile = tmp_path / "single-node.yaml"
    text = profile.read_text().replace("hardware: dgx-spark-gb10", "hardware: dgx-h100")
    profile.write_text(text.replace("parallel: {tp: 1}", "parallel: {tp: 8}"))
    page = tmp_path / "page.html"
    result = run_cli("report", str(profile), "-o", str(page))
    assert result.returncode == 0, result.stdout + result.stderr
    tab = browser.open(page.as_uri(), 1400)
    [bar] = tab.evaluate(BARS)
    terms = [s["term"] for s in bar["segments"]]
    assert "shm" not in terms and "engram" not in terms and terms[:1] == ["weights"]
    assert abs(sum(s["gib"] for s in bar["segments"]) - bar["total"]) < 0.03 and bar["over"] == 0
    lines = [text for a, text in Elements(tab.evaluate("document.documentElement.outerHTML")).select("text", "small")]
    assert any(line.startswith(f"{bar['total']:.1f} GiB GPU memory · ") for line in lines), lines
