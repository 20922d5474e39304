"""diff's output forms: Markdown for a pull request (escaped), JSON, and redaction of every value in each."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

from spark_compile.review.artifact_diff import Change, Comparison, Fold, Grouped, ProfileChange, ProfileDiff
from spark_compile.review.diff_format import FORMATS, md

from conftest import REFERENCE_PROFILE, run_cli

TOKEN = "hf_" + "A1b2C3d4E5" * 4


def test_markdown_escapes_html_pipes_and_backticks(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    hostile = "evil | `x` <script>alert(1)</script> *b* [l](http://e)"
    (tmp_path / "evil.yaml").write_text(f'extends: base.yaml\ndescription: "{hostile}"\n')
    result = run_cli("diff", "--format", "markdown", "base.yaml", "evil.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "<script>" not in result.stdout and "&lt;script&gt;" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    # Every table row keeps its columns: no pipe of a value is left unescaped.
    cells = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
    assert cells == {7}, rows  # the profile table's 6 columns and the artifact table's 6
    assert "| description | DeepSeek-V4.1-Flash" in result.stdout
    assert r"evil \| \`x\` &lt;script&gt;alert(1)&lt;/script&gt; \*b\* \[l\](http://e)" in result.stdout
    assert "| shared | README.md | lines |" in result.stdout


class _Cells(HTMLParser):
    """Tags seen, and the cells of each table row as GitHub's renderer built them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.rows: list[list[str]] = []
        self.in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.rows[-1].append("")
            self.in_cell = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.in_cell = False

    def handle_data(self, data: str) -> None:
        if self.in_cell:
            self.rows[-1][-1] += data


def test_github_renders_the_markdown_with_every_value_as_text(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    hostile = "evil | `x` <script>alert(1)</script> <img src=x onerror=alert(2)> *b*"
    (tmp_path / "evil.yaml").write_text(f"extends: base.yaml\ndescription: {hostile!r}\n")
    result = run_cli("diff", "--format", "markdown", "--unified", "base.yaml", "evil.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    # Raw HTML allowed, as the most permissive renderer would: only our escaping keeps values text.
    rendered = cmarkgfm.github_flavored_markdown_to_html(result.stdout, options=Options.CMARK_OPT_UNSAFE)
    cells = _Cells()
    cells.feed(rendered)
    assert not cells.tags & {"script", "img", "em"}, cells.tags
    assert {len(row) for row in cells.rows} == {6}
    assert ["description", "DeepSeek-V4.1-Flash, SGLang dev-dsv41 + Spark overlay, 4x DGX Spark, TP4/EP4, DSpark "
            "block 5.", "base.yaml:11", hostile, "evil.yaml:2", "no file change traced to it"] in cells.rows
    assert "<script>" not in rendered.split("<pre>")[0]


def test_md_escapes_newlines_and_entities() -> None:
    assert md("a\nb & <i>") == "a<br>b &amp; &lt;i&gt;"
    assert md(None) == "(unset)"


def _secret_diff() -> ProfileDiff:
    change = Change("engine.env", "HF_TOKEN", "old-" + TOKEN, "new-" + TOKEN)
    comparison = Comparison(False, [Grouped((0, 1), change), Grouped((), Change("README.md", "", TOKEN, None))],
                            [Fold("release", "r-" + TOKEN, "r2")])
    profile = [ProfileChange("engine.env.HF_TOKEN", TOKEN, "x" + TOKEN, None, "p.yaml:3")]
    return ProfileDiff("a.yaml", "b.yaml", profile, comparison, {}, unified=f"-{TOKEN}\n")


def test_every_format_redacts_every_value() -> None:
    for (name, render), detail in itertools.product(FORMATS.items(), (False, True)):
        out = render(_secret_diff(), detail)
        assert "A1b2C3d4E5" not in out, (name, detail)
        assert "(redacted)" in out, (name, detail)
    body = json.loads(FORMATS["json"](_secret_diff(), True))
    assert body["artifacts"][0] == {"ranks": [0, 1], "file": "engine.env", "name": "HF_TOKEN",
                                    "old": "old-(redacted)", "new": "new-(redacted)", "source": None}


def test_markdown_fences_the_unified_diff_beyond_its_longest_backtick_run() -> None:
    diff = _secret_diff()
    diff = ProfileDiff(diff.old_name, diff.new_name, diff.profile, diff.artifacts, {}, unified="+````\n")
    out = FORMATS["markdown"](diff, False)
    assert "`````diff\n+````\n`````\n" in out


def test_json_of_a_no_op_is_identical_with_no_effect(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    (tmp_path / "same.yaml").write_text("extends: base.yaml\ncontainer:\n  stop_timeout: 60\n")
    result = run_cli("diff", "--format", "json", "base.yaml", "same.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["identical"] is True and body["artifacts"] == [] and body["folded"] == []
    assert body["profile"] == [{"path": "container.stop_timeout", "old": "60 (default)", "new": 60,
                                "old_origin": None, "new_origin": "same.yaml:3", "effect": False}]


def test_markdown_keeps_the_rename_apart_from_the_artifacts_heading() -> None:
    result = run_cli("diff", "--format", "markdown", "spec/profiles/releases/production-1.1.yaml",
                     "spec/profiles/releases/production-1.2.yaml")
    html = cmarkgfm.github_flavored_markdown_to_html(result.stdout)
    assert re.search(r"<li>release: production-1\.1 → production-1\.2; every mention follows \(\d+ lines in \d+ "
                     r"files\)</li>", html)
    assert re.search(r"<p><strong>Artifacts: \d+ changes</strong></p>", html)


def test_every_format_is_deterministic_across_hash_seeds_locales_and_zones() -> None:
    sides = ("spec/profiles/releases/production-1.6.yaml", "spec/profiles/releases/production-1.7.yaml")
    for fmt in ("text", "json", "markdown"):
        runs = {run_cli("diff", "--format", fmt, "--unified", *sides,
                        env={"PYTHONHASHSEED": seed, "TZ": zone, "LC_ALL": locale}).stdout
                for seed, zone, locale in (("1", "UTC", "C"), ("2", "Asia/Tokyo", "C.UTF-8"))}
        assert len(runs) == 1, fmt
