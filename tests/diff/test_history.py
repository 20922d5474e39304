"""`spark-compile history`: the release table of spec/profiles/releases/, golden and reviewed by hand.

tests/diff/golden/history-releases.txt was checked row by row against the peer launcher's release table
(peer-launcher-facts.md §5 and its "Wide mode in 1.7" note) and the deployment document's release notes and
1.7.1 command (dsv41-4spark-deployment.txt lines 16-34, 56-72); the issue-17 report lists which row
was checked against which line. Regenerate only by hand, after reading the change.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from conftest import REFERENCE_PROFILE, ROOT, run_cli

GOLDEN = Path(__file__).parent / "golden" / "history-releases.txt"


def test_history_of_the_releases_reproduces_1_1_to_1_7_1() -> None:
    result = run_cli("history", "spec/profiles/releases")
    assert result.returncode == 0, result.stderr
    assert result.stdout == GOLDEN.read_text()


def test_history_orders_parents_first_and_branches_by_version(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "a-1.yaml")
    (tmp_path / "a-1.10.yaml").write_text("extends: a-1.yaml\nrelease: a-1.10\ncontainer:\n  stop_timeout: 61\n")
    (tmp_path / "a-1.9.yaml").write_text("extends: a-1.yaml\nrelease: a-1.9\nengine:\n  port: 8211\n")
    result = run_cli("history", str(tmp_path), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    starts = [line.split(" |")[0].strip() for line in result.stdout.splitlines()]
    assert [s for s in starts if s.startswith("a-1.") and not s.endswith(".yaml")] == ["a-1.9", "a-1.10"]
    assert "container.stop_timeout: 60 (default) → 61" in result.stdout
    # Release notes belong to the file that writes them: the children inherit the reference's, and show none.
    assert result.stdout.count("2026-09-29") == 1
    assert result.stdout.count("why: wide mode off after a device-side assert") == 1
    assert "sglang-dsv41-4spark.service: [Service] TimeoutStopSec 90 → 91" in result.stdout


def test_history_of_a_file_is_a_usage_error() -> None:
    result = run_cli("history", "spec/profiles/dsv41-4spark.yaml")
    assert result.returncode == 2 and "not a directory" in result.stderr


def test_history_markdown_renders_as_one_table_on_github() -> None:
    import cmarkgfm

    result = run_cli("history", "--format", "markdown", "spec/profiles/releases")
    assert result.returncode == 0, result.stderr
    html = cmarkgfm.github_flavored_markdown_to_html(result.stdout)
    assert html.count("<table>") == 1 and html.count("<tr>") == 1 + 8
    assert "engine.limits.max_running_requests: 8 → 16" in html.replace("\\_", "_")
    # The same information as the text table: date, file, parent release and the release's reason.
    br = "<!-- raw HTML omitted -->"  # the safe renderer's <br>: GitHub's own renders a line break
    assert f"<td>production-1.2{br}2026-09-23{br}production-1.2.yaml{br}after production-1.1</td>" in html
    assert "why: sixteen streams: 1.9x the decode ceiling; Engram gathers early" in html


def _text_rows(text: str) -> list[list[list[str]]]:
    """The text table's rows as columns of lines (the padded blocks between rule lines)."""
    rows: list[list[list[str]]] = []
    for line in text.splitlines()[2:]:
        if set(line) <= {"-", "+"}:
            rows.append([[], [], []])
            continue
        if not rows:
            rows.append([[], [], []])
        for column, cell in zip(rows[-1], re.split(r" \|(?: |$)", line, maxsplit=2), strict=False):
            if cell.strip():
                column.append(cell.strip())
    return [row for row in rows if any(row)]


def _markdown_rows(text: str) -> list[list[list[str]]]:
    """The Markdown table's rows as columns of lines, unescaped as a renderer shows them."""
    rows = []
    for line in text.splitlines()[2:]:
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        rows.append([[html.unescape(re.sub(r"\\(.)", r"\1", part.strip())) for part in cell.split("<br>")
                      if part.strip()] for cell in cells])
    return rows


def test_history_text_and_markdown_carry_the_same_lines_row_by_row() -> None:
    text = run_cli("history", "spec/profiles/releases")
    markdown = run_cli("history", "--format", "markdown", "spec/profiles/releases")
    assert text.returncode == markdown.returncode == 0, text.stderr + markdown.stderr
    assert text.stdout == GOLDEN.read_text()
    rows = _text_rows(text.stdout)
    assert len(rows) == 8
    assert _markdown_rows(markdown.stdout) == rows
