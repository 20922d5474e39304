"""The review page as a reviewer sees it, in headless Chromium: the reference profile against production-1.7,
and a DSpark block-size change 5 → 7. Each section and each highlighted change in the DOM; at 1400 px and at
400 px, light and dark, no horizontal overflow, no identifier or file:line broken across lines, no
identifier spilling out of its box, and no request beyond the file itself; and screenshots of each (the
whole page, its first screen, the fleet picture) kept under tests/artifacts/report/ (ignored by git), copied
to $SPARK_COMPILE_SCREENSHOTS when that names a folder, for a person to look at.

Expected values come from the profile files (their lines and values), not from the page's own code.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli
from support.browser import Browser, Tab
from support.dom import Elements

PROFILES = ROOT / "spec" / "profiles"
ARTIFACTS = ROOT / "tests" / "artifacts" / "report"
SECTIONS = ["changes", "findings", "engine", "container", "fabric", "overlay", "nccl", "model", "profile", "engram"]
BLOCK7 = "extends: dsv41-4spark.yaml\nengine:\n  speculative:\n    dspark_block_size: 7\n"


def _line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that starts with ``text`` (once)."""
    lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(text)]
    assert len(lines) == 1, (path, text, lines)
    return lines[0]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two pages: reference (dsv41-4spark against production-1.7) and block7 (a child setting block 7)."""
    work = tmp_path_factory.mktemp("pages")
    for name in ("dsv41-4spark.yaml", "dsv41-flash.config.json"):
        shutil.copy(PROFILES / name, work / name)
    (work / "block7.yaml").write_text(BLOCK7)
    out = {"reference": work / "reference.html", "block7": work / "block7.html"}
    for cwd, argv in ((ROOT, ("spec/profiles/dsv41-4spark.yaml", "--against",
                              "spec/profiles/releases/production-1.7.yaml", "-o", str(out["reference"]))),
                      (work, ("block7.yaml", "--against", "dsv41-4spark.yaml", "-o", str(out["block7"])))):
        result = run_cli("report", *argv, cwd=cwd)
        assert result.returncode == 0, result.stdout + result.stderr
    return out


def _dom(browser: Browser, page: Path) -> Elements:
    return Elements(browser.open(page.as_uri(), 1400).evaluate("document.documentElement.outerHTML"))


def _rows(dom: Elements) -> dict[str, tuple[str, str]]:
    return {a["data-path"]: (a["class"], text) for a, text in dom.select("tr", "value")}


def test_the_reference_page_has_each_section_and_each_change_in_place(pages: dict[str, Path],
                                                                      browser: Browser) -> None:
    dom = _dom(browser, pages["reference"])
    assert [a["id"] for a, _ in dom.select("section")] == [*SECTIONS, "rendered"]
    assert [text for a, text in dom.select("a") if a.get("href") in [f"#{s}" for s in SECTIONS]] == [
        "What changed", "Findings", "Engine (4 changed)", "Container", "Fabric and nodes", "Overlay (5 changed)",
        "NCCL", "Model", "Profile and operations (4 changed)", "Engram partition"]
    reference, old = PROFILES / "dsv41-4spark.yaml", PROFILES / "releases" / "production-1.7.yaml"
    rows = _rows(dom)
    block = _line_of(reference, "    dspark_block_size:")
    assert rows["engine.speculative.dspark_block_size"] == (
        "value changed", f"engine.speculative.dspark_block_size 15 → 5 {reference.relative_to(ROOT)}:{block} "
        "--speculative-dspark-block-size")
    mode = _line_of(old, "  lookup_mode:")
    assert rows["overlay.lookup_mode"] == ("value removed",
                                           f"overlay.lookup_mode wide → (unset) {old.relative_to(ROOT)}:{mode}")
    image = _line_of(reference, "  image:")
    assert rows["engine.image"][0] == "value changed"
    assert rows["engine.image"][1].startswith("engine.image SC312 aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7"
                                              " → aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7.1 ")
    assert rows["overlay.engram_mode"] == (
        "value same", f"overlay.engram_mode hostnode {reference.relative_to(ROOT)}:"
        f"{_line_of(reference, '  engram_mode:')} SPARK_ENGRAM_MODE")
    # what the profile leaves to the engine build: its default, and the flag the key would set
    assert rows["engine.kv_cache_dtype"] == ("value default", "engine.kv_cache_dtype auto (the build's default) "
                                             "not in the profile (default) --kv-cache-dtype")
    assert rows["model.quantization"] == ("value default", "model.quantization (unset: SGLang decides) "
                                          "not in the profile (default) --quantization")
    sections = {a["id"]: text for a, text in dom.select("section")}
    for key, section in (("engine.parallel.tp", "engine"), ("container.memory", "container"),
                         ("fleet.fabric.interface", "fabric"), ("overlay.roce_ar", "overlay"),
                         ("nccl.preset", "nccl"), ("model.repo", "model"), ("release", "profile")):
        assert f" {key} " in f" {sections[section]} ", key
    changes = [(a["data-path"], text) for a, text in dom.select("li", "change") if "data-path" in a]
    profile = yaml.safe_load(reference.read_text())
    assert [path for path, _ in changes] == [
        "release", "engine.image", "engine.speculative.dspark_block_size", "operations.verify.hooks_armed",
        "release_notes.date", "release_notes.reason", "engine.env.CUDA_LOG_FILE",
        "engine.env.SGLANG_RAGGED_VERIFY_MODE",
        *(f"overlay.lookup_{k}" for k in ("draft", "mode", "sync_gate", "narrow_slots", "fused_c2"))]
    assert dict(changes)["release"] == f"release: production-1.7 → {profile['release']} " \
        f"{reference.relative_to(ROOT)}:{_line_of(reference, 'release: ')}"
    links = [a["href"] for a, _ in dom.select("a") if a.get("href", "").startswith("#v-")]
    # each change, and each finding's line: SC312's at the image, SC442's at the request cap (unchanged since 1.7)
    assert sorted(links) == sorted([*(f"#v-{path}" for path, _ in changes), "#v-engine.image",
                                    "#v-engine.limits.max_running_requests"])
    for href in links:  # each link lands on its row, highlighted where the value changed
        tag, attrs, _ = dom.by_id(href[1:])
        same = href == "#v-engine.limits.max_running_requests"
        assert tag == "tr" and attrs["class"] in (("value same",) if same else
                                                  ("value changed", "value added", "value removed")), href
    for path, line in changes:  # which shows the same old → new in place
        shown = line.removeprefix(f"{path}: ").rsplit(" ", 1)[0]
        assert f"{path} {shown} " in rows[path][1] or f"{path} SC312 {shown} " in rows[path][1], (path, shown)
    findings = [(a["data-rule"], text) for a, text in dom.select("li", "finding")]
    cap = _line_of(reference, "    max_running_requests:")
    assert findings == [("SC312", f"SC312 warning at {reference.relative_to(ROOT)}:{image}:10: "
                         f"{profile['engine']['image']} is pinned by tag only; the tag can move to another build "
                         "(checked as sglang-0.5.23, engine.catalog) hint: append the digest the image has now: "
                         "<image>@sha256:<64 hex digits> (`docker buildx imagetools inspect <image>` prints it), and "
                         "keep engine.catalog naming the SGLang build it holds"),
                        # issue 34: the reference's KV pool holds 10 full-context requests of the 16 it admits
                        ("SC442", f"SC442 warning at {reference.relative_to(ROOT)}:{cap}:27: rank 0 (spark-0)'s KV "
                         "pool holds full_token=5591040 (1673.31 bytes_per_full_token over 9.8 GiB): 10 requests at "
                         "context_length 524288, fewer than max_running_requests 16 hint: set context_length to "
                         "349440, or max_running_requests to 10, or give the KV pool more memory")]
    assert not dom.select("li", "stale")  # "DSpark block 5" is true of 1.7.1


def test_a_block_size_change_shows_in_place_and_the_stale_description(pages: dict[str, Path],
                                                                      browser: Browser) -> None:
    dom = _dom(browser, pages["block7"])
    rows = _rows(dom)
    assert rows["engine.speculative.dspark_block_size"] == (
        "value changed", "engine.speculative.dspark_block_size 5 → 7 block7.yaml:4 --speculative-dspark-block-size")
    assert [r for r, (css, _) in rows.items() if css not in ("value same", "value default")] == [
        "engine.speculative.dspark_block_size"]
    changes = [text for _, text in dom.select("li", "change")]
    assert changes[0] == "engine.speculative.dspark_block_size: 5 → 7 block7.yaml:4"
    description = yaml.safe_load((PROFILES / "dsv41-4spark.yaml").read_text())["description"]
    assert "DSpark block 5." in description
    note = "description says “block 5” but engine.speculative.dspark_block_size is now 7 (was 5)"
    assert [(a.get("href"), text) for a, text in dom.select("a") if "stale" in text or "“" in text] == [
        ("#v-description", f"⚠ {note}")]
    _, attrs, text = dom.by_id("v-description")
    line = _line_of(PROFILES / "dsv41-4spark.yaml", "description:")
    assert attrs["class"] == "value same"
    assert text == f"description {description} ⚠ {note.removeprefix('description ')} dsv41-4spark.yaml:{line}"
    assert any("→ --speculative-dspark-block-size 7" in text for text in changes[1:])  # the rendered files
    # a longer block takes more KV per token: each node's token count moves, in the picture as in fleet.env
    tokens = next(text for text in changes if text.startswith("fleet/fleet.env predicted_full_token: "))
    before, after = (side.strip(" ()").split() for side in tokens.split(": ", 1)[1].split("→"))
    assert [text for a, text in dom.select("text", "delta")] == [
        f"KV tokens (full_token): {int(new):,}, was {int(old):,}" for old, new in zip(before, after, strict=True)]


LAYOUT = """(() => {
  const root = document.documentElement, width = innerWidth;
  const broken = [], outside = [], spilling = [];
  for (const el of document.querySelectorAll('.id, .src, .loc')) {
    const box = el.getBoundingClientRect(), cell = el.parentElement.getBoundingClientRect();
    if (el.matches('.id') && box.width && box.right > cell.right + 0.5) spilling.push(el.textContent);
    for (const node of el.childNodes) {
      if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
      if (!el.matches('.id') && / /.test(node.textContent.trim())) continue;  // only a bare file:line
      const range = document.createRange(); range.selectNodeContents(node);
      const rects = [...range.getClientRects()], tops = new Set(rects.map(r => Math.round(r.top)));
      // a file:line or a very long identifier wider than its whole column may break; one that fits never
      // does, and a usual identifier never
      const room = el.closest('td, th, li, dd, p, div').clientWidth;
      const fits = el.matches('.id:not(.long)') || rects.reduce((sum, r) => sum + r.width, 0) < room - 16;
      if (tops.size > 1 && fits) broken.push(node.textContent);
    }
  }
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('.scroll')) continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.right > width + 0.5) outside.push(el.tagName + ' ' + (el.textContent || '').slice(0, 40));
  }
  // a box that scrolls sideways hides part of its table; fine on a phone, not on a reviewer's screen
  const scrolled = [...document.querySelectorAll('.scroll')].filter(el => el.scrollWidth > el.clientWidth + 0.5)
    .map(el => el.firstElementChild ? el.firstElementChild.className : el.className);
  return {scroll: root.scrollWidth, width, broken, spilling, outside: outside.slice(0, 5), scrolled,
          dark: matchMedia('(prefers-color-scheme: dark)').matches,
          background: getComputedStyle(root).backgroundColor, ids: document.querySelectorAll('.id').length,
          text: getComputedStyle(document.body).color,
          changed: [...document.querySelectorAll('tr.value.changed td')].map(td => getComputedStyle(td)
            .backgroundColor).slice(0, 1)[0] || null};
})()"""


def _keep(tab: Tab, name: str) -> list[Path]:
    """Screenshots kept under tests/artifacts/report/ (and copied to $SPARK_COMPILE_SCREENSHOTS): the whole
    page, its first screen, and the fleet picture with its memory terms."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = [ARTIFACTS / f"{name}{part}.png" for part in ("", "-top", "-fleet")]
    tab.screenshot(shots[0])
    tab.screenshot(shots[1], height=1000)
    tab.screenshot(shots[2], selector=".fleet-wrap")
    extra = os.environ.get("SPARK_COMPILE_SCREENSHOTS")
    for shot in shots:
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(extra) / shot.name)
        print(f"screenshot of the review page: {shot}")
    return shots


@pytest.mark.parametrize("which", ["reference", "block7"])
@pytest.mark.parametrize(("width", "scheme"), [(1400, "light"), (1400, "dark"), (400, "light"), (400, "dark")])
def test_the_page_reads_at_each_width_in_each_scheme(pages: dict[str, Path], browser: Browser, which: str,
                                                      width: int, scheme: str) -> None:
    tab = browser.open(pages[which].as_uri(), width, scheme=scheme)
    layout = tab.evaluate(LAYOUT)
    assert layout["width"] == width and layout["dark"] == (scheme == "dark")
    dark = scheme == "dark"  # the page's own palette for each scheme (the template's :root variables)
    assert (layout["background"], layout["text"], layout["changed"]) == (
        ("rgb(13, 17, 23)", "rgb(230, 237, 243)", "rgb(59, 46, 0)") if dark else
        ("rgb(255, 255, 255)", "rgb(27, 31, 36)", "rgb(255, 248, 197)"))
    assert layout["scroll"] <= width, layout["outside"]
    assert layout["outside"] == []
    assert width < 1400 or layout["scrolled"] == []
    assert layout["ids"] > 300 and layout["broken"] == [] and layout["spilling"] == []
    assert tab.requests() == [pages[which].as_uri()]
    page, top, fleet = (_png_size(shot) for shot in _keep(tab, f"{which}-{width}-{scheme}"))
    assert page[0] == top[0] == width and page[1] > 3000 and top[1] == 1000
    assert fleet[0] <= width and fleet[1] > 600


def _png_size(shot: Path) -> tuple[int, int]:
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", shot
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


@pytest.mark.parametrize("example", sorted(p.name for p in (PROFILES / "examples").glob("*.yaml")))
def test_every_shipped_example_reads_on_a_narrow_window(example: str, browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    result = run_cli("report", f"spec/profiles/examples/{example}", "-o", str(page))
    assert result.returncode == 0, result.stdout + result.stderr
    for width in (400, 1400):
        layout = browser.open(page.as_uri(), width).evaluate(LAYOUT)
        assert (layout["scroll"], layout["outside"], layout["broken"], layout["spilling"]) == (width, [], [], [])
