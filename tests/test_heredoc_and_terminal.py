"""Two quoting functions held to what reads their output: a value in a here-document line (common/quoting.
heredoc_line, written after the line's own text: it never starts a line) is printed by bash's `cat <<'EOF'` on
that one line, whatever it holds — `EOF`, line breaks, escapes; and terminal text (terminal_text) shows every
control and bidi character as an escape a reader can decode."""

from __future__ import annotations

import codecs
import subprocess
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_compile.common.quoting import heredoc_line, terminal_text

from support.tools import require_tool

VALUES = st.one_of(st.sampled_from(["EOF", "EOF\n", "a\nEOF\nrm -rf /", "$(id)", "`id`", "\\", "\r\n", "\u2028EOF"]),
                   st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=16))


def _cat(lines: list[str]) -> str:
    """What bash prints for a quoted here-document holding ``lines``."""
    body = "".join(f"{line}\n" for line in lines)
    proc = subprocess.run([require_tool("bash"), "--norc", "-c", f"cat <<'EOF'\n{body}EOF\necho done"],
                          capture_output=True, check=True, env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    return proc.stdout.decode()


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(VALUES, min_size=1, max_size=6))
def test_a_here_document_prints_each_value_on_one_line_and_ends_where_it_should(values: list[str]) -> None:
    lines = [f"value: {heredoc_line(value)}" for value in values]
    assert _cat(lines) == "".join(f"{line}\n" for line in lines) + "done\n"


def test_an_eof_of_the_value_cannot_end_the_document() -> None:
    """Only a line that is exactly the delimiter ends it: a value's own break is shown escaped, so the value
    stays on the line it was written on."""
    assert heredoc_line("x\nEOF") == "x\\nEOF"
    assert _cat(["- " + heredoc_line("x\nEOF\necho pwned")]) == "- x\\nEOF\\necho pwned\ndone\n"
    assert _cat(["EOF-like"]) == "EOF-like\ndone\n"


def _visible(char: str) -> bool:
    """A character a terminal shows as itself: no control (Cc), no bidi or line/paragraph separator."""
    if unicodedata.category(char) == "Cc" and char not in "\n\t":
        return False
    return char not in "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@settings(deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=30))
def test_terminal_text_leaves_only_visible_characters(value: str) -> None:
    shown = terminal_text(value)
    assert all(_visible(char) for char in shown)
    one_line = terminal_text(value, one_line=True)
    assert all(_visible(char) and char not in "\n\t" for char in one_line)


@settings(deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\\"), max_size=30))
def test_terminal_text_escapes_decode_back_to_the_value(value: str) -> None:
    """Without a backslash of its own, the shown text decodes (Python's unicode_escape) to the value."""
    shown = terminal_text(value, one_line=True)
    decoded = codecs.decode(shown.encode("latin-1", "backslashreplace"), "unicode_escape")
    assert decoded == value
