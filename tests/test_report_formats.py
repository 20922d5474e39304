"""compiler/stages/report.py: a finding in each output form, written out whole; the excerpt's caret under the
character at fault, however long the line or whatever it holds; GitHub's workflow-command escapes; bounds on
what a message may print."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.common.findings import Finding, Position
from spark_compile.stages.report import excerpt, finding_json, render

PORT = Finding("SC210", "error", Position("p.yaml", 3, 10), "engine.port and dist_init_port are both 8888",
               "change one", source_line="  port: 8888")
TAG = Finding("SC312", "warning", Position("base.yaml", 47, 10), "the image is pinned by tag only", "",
              via=("mid.yaml", "leaf.yaml"))


def test_text_form_places_the_caret_and_names_the_route() -> None:
    inherited = Finding(PORT.rule, PORT.severity, PORT.position, PORT.message, PORT.hint, PORT.source_line,
                        ("mid.yaml", "leaf.yaml"))
    assert render([inherited, TAG], "text", 2) == (
        "p.yaml:3:10: SC210 error: engine.port and dist_init_port are both 8888\n"
        "    3 |   port: 8888\n"
        "      |          ^\n"
        "  hint: change one\n"
        "  inherited through: leaf.yaml -> mid.yaml\n"
        "base.yaml:47:10: SC312 warning: the image is pinned by tag only\n"
        "  inherited through: leaf.yaml -> mid.yaml\n"
        "1 error, 1 warning in 2 profiles\n")


@pytest.mark.parametrize(("findings", "profiles", "summary"), [
    ([], 1, "0 errors, 0 warnings in 1 profile\n"),
    ([PORT, PORT], 3, "2 errors, 0 warnings in 3 profiles\n"),
    ([TAG, TAG], 0, "0 errors, 2 warnings in 0 profiles\n"),
])
def test_the_summary_counts_each_severity_in_words(findings: list[Finding], profiles: int, summary: str) -> None:
    assert render(findings, "text", profiles).endswith(summary)


def test_the_summary_form_prints_nothing_when_clean() -> None:
    assert render([], "summary", 4) == ""
    assert render([PORT, TAG], "summary", 1) == "1 error, 1 warning in 1 profile (`spark-compile check` lists them)\n"


def test_github_form_escapes_properties_and_data() -> None:
    odd = Finding("SC105", "error", Position("a:b,c%.yaml", 1, 2), "50% done\nnext line", "fix: it, now")
    assert render([odd, TAG], "github", 1) == (
        "::error file=a%3Ab%2Cc%25.yaml,line=1,col=2,title=SC105::50%25 done%0Anext line (fix: it, now)\n"
        "::warning file=base.yaml,line=47,col=10,title=SC312::the image is pinned by tag only\n")


def test_json_form_is_sorted_and_counts() -> None:
    out = render([PORT, TAG], "json", 2)
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"  # sorted keys, indent 2, one newline
    assert json.loads(out) == {"profiles": 2, "errors": 1, "warnings": 1, "findings": [
        {"rule": "SC210", "severity": "error", "file": "p.yaml", "line": 3, "column": 10,
         "message": "engine.port and dist_init_port are both 8888", "hint": "change one", "via": []},
        {"rule": "SC312", "severity": "warning", "file": "base.yaml", "line": 47, "column": 10,
         "message": "the image is pinned by tag only", "hint": "", "via": ["mid.yaml", "leaf.yaml"]}]}


def test_json_redacts_a_secret_in_a_message_value_by_value() -> None:
    leak = Finding("SC601", "error", Position("p.yaml", 1, 1), "engine.env.HF_TOKEN: got 'hf_" + "x1" * 20 + "'",
                   "use {file: /etc/hf}")
    body = json.loads(render([leak], "json", 1))
    assert body["findings"][0]["message"] == "engine.env.HF_TOKEN: got (redacted)"  # the quoted value, whole
    assert body["findings"][0]["hint"] == "use {file: /etc/hf}"


def test_a_long_message_is_cut_with_the_count_left_out() -> None:
    long = Finding("SC105", "error", Position("p.yaml", 1, 1), "v" * 700, "h" * 601)
    data = finding_json(long)
    assert data["message"] == "v" * 600 + "... (100 more characters)"
    assert data["hint"] == "h" * 600 + "... (1 more characters)"
    assert render([long], "text", 1).splitlines()[0] == "p.yaml:1:1: SC105 error: " + "v" * 600 + \
        "... (100 more characters)"


def test_a_line_break_in_a_file_name_or_message_cannot_start_a_line_of_its_own() -> None:
    forged = Finding("SC105", "error", Position("x.yaml\nspec.yaml:1:1: SC000 error: forged", 1, 1),
                     "m\n0 errors, 0 warnings in 1 profile", "h\tint")
    assert render([forged], "text", 1).splitlines() == [
        "x.yaml\\nspec.yaml:1:1: SC000 error: forged:1:1: SC105 error: m\\n0 errors, 0 warnings in 1 profile",
        "  hint: h\\tint",
        "1 error, 0 warnings in 1 profile"]


def test_an_excerpt_of_a_long_line_is_cut_around_the_column() -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(300))
    shown, caret = excerpt(line, 200)
    assert shown == "..." + line[139:199] + line[199:259] + "..."
    assert (caret, shown[caret - 1]) == (64, line[199])
    assert excerpt(line, 1) == (line[:120] + "...", 1)
    assert excerpt(line, 300) == ("..." + line[239:300], 64)


def test_an_excerpt_escapes_controls_and_expands_tabs_keeping_the_caret() -> None:
    assert excerpt("\ta\x1bb: x\u202e", 7) == (" a\\x1bb: x\\u202e", 10)
    shown, caret = excerpt("\ta\x1bb: x\u202e", 7)
    assert shown[caret - 1] == "x"


def test_an_excerpt_hides_a_token_in_a_long_line() -> None:
    """A long line is cut, and a cut token is no longer recognisable: tokens are hidden before the cut."""
    token = "ghp_" + "Z" * 36
    line = "a" * 100 + f" image: {token} " + "b" * 100
    for column in (1, 109):  # before the token, at its first character
        shown, _ = excerpt(line, column)
        assert token[:12] not in shown and "(redacted)" in shown, column
    assert excerpt(line, 249)[0][excerpt(line, 249)[1] - 1] == "b"


# No dots: an ellipsis must not be mistaken for the line's own text.
_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E).filter(lambda c: c != ".")
PRINTABLE = st.one_of(st.text(_ASCII, min_size=1, max_size=120), st.text(_ASCII, min_size=121, max_size=700))


@settings(deadline=None)  # no wall-clock bound: the first example pays for imports
@given(PRINTABLE, st.data())
def test_the_caret_is_under_the_character_at_fault(line: str, data: st.DataObject) -> None:
    column = data.draw(st.integers(min_value=1, max_value=len(line)))
    shown, caret = excerpt(line, column)
    if "(redacted)" not in shown:
        assert shown[caret - 1] == line[column - 1]
    assert len(shown) <= 126  # 120 characters and the two ellipses
    assert (shown == line) == (len(line) <= 120)
