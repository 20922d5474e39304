"""compiler/common/quoting.py's character classes, written here from their sources (C0/C1 controls, Unicode line and
paragraph separators, the bidi controls of Trojan Source, CVE-2021-42574): each function escapes or refuses exactly
its class, on texts made of every class's edges."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from spark_compile.common import quoting
from spark_compile.common.errors import UnquotableError

from conftest import refuses

# The classes as one regex each.
CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
UNSAFE_LINE = re.compile(r"[\n\t]|" + UNSAFE.pattern)
EDGES = ("a é\t\n\r\x00\x1b\x1f\x7f\x80\x85\x9f\xa0"  # each class's edges, inside and out
         "\u061b\u061c\u200d\u200e\u200f\u2027\u2028\u2029\u202e\u202f\u2065\u2066\u2069\u206a")
TEXTS = st.text(st.sampled_from(EDGES), max_size=10)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(match.group(), f"\\x{code:02x}" if code < 0x100
                                                     else f"\\u{code:04x}")


@given(TEXTS)
def test_terminal_text_escapes_exactly_the_unsafe_class(value: str) -> None:
    assert quoting.terminal_text(value) == UNSAFE.sub(_escape, value)
    assert quoting.terminal_text(value, one_line=True) == UNSAFE_LINE.sub(_escape, value)


@given(TEXTS)
def test_a_systemd_setting_refuses_exactly_the_control_class(value: str) -> None:
    assert refuses(quoting.systemd_text, value, UnquotableError) == bool(CONTROL.search(value))
    assert refuses(quoting.markdown_code, value, UnquotableError) == bool(CONTROL.search(value))


@given(TEXTS)
def test_a_here_document_line_escapes_exactly_the_control_class(value: str) -> None:
    line = quoting.heredoc_line(value)
    assert not CONTROL.search(line)
    assert (line == value) == (not CONTROL.search(value))
