"""Hostile profile values on the review page: each new place the page shows a value (a value row, the
"what changed" line, a stale-description note, a finding's inheritance, the settings tables) gets it as
text (the fleet picture's shapes: test_report_page's redaction test). Python's parser and Chromium agree
that no element or script came of it; an identifier too long for a narrow window does not widen the page.
"""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

from hostile import run_main

from conftest import REFERENCE_PROFILE
from support.browser import Browser

DESCRIPTION = 'block 5 <script>document.title="pwned"</script> "><svg onload=alert(1)>'
REASON = '<img src=x onerror="document.title=1"> ]]> </title>'
ENV = "</text></svg><b>x</b>&amp;"
LONG = "SITE_" + "X" * 150  # an identifier wider than a narrow window
TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "code", "dl", "dt",
        "dd", "div", "span", "strong", "nav", "a", "section", "ul", "li", "table", "thead", "tbody", "tr", "th",
        "td", "figure", "figcaption", "svg", "rect", "line", "g", "circle", "text", "br", "details", "summary"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.handlers: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_hostile_values_in_the_new_places_stay_text(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    shutil.copy(REFERENCE_PROFILE.parent / "dsv41-flash.config.json", tmp_path / "dsv41-flash.config.json")
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: base.yaml\ndescription: {DESCRIPTION!r}\nrelease_notes:\n  reason: {REASON!r}\n"
                     f"engine:\n  speculative:\n    dspark_block_size: 7\n  env:\n    EVIL_VAR: {ENV!r}\n"
                     f"    {LONG}: '1'\n")
    page = tmp_path / "page.html"
    outcome = run_main("report", str(child), "--against", str(tmp_path / "base.yaml"), "-o", str(page))
    assert outcome.code == 0, outcome.err
    parsed = _Tags()
    parsed.feed(page.read_text())
    assert parsed.tags <= TAGS and parsed.handlers == []
    shown = "".join(parsed.text)
    # the value row, its change line, and the stale note quoting it
    assert shown.count(DESCRIPTION) == 2 and shown.count(REASON) == 2 and shown.count(ENV) >= 3
    assert "description says \u201cblock 5\u201d but engine.speculative.dspark_block_size is now 7" in shown
    assert f"inherited through: {child}" in shown  # SC312 of the base's image, through the child
    with Browser(tmp_path / "chromium") as browser:
        tab = browser.open(page.as_uri(), 1400)
        assert tab.evaluate("document.title") == "dsv41-4spark (production-1.7.1)"
        assert tab.evaluate("document.querySelectorAll('script, img, b, svg svg, [onload], [onerror]').length") == 0
        assert tab.requests() == [page.as_uri()]
        narrow = browser.open(page.as_uri(), 400)
        assert narrow.evaluate("document.documentElement.scrollWidth") == 400
