"""compiler/importer/shell.py splits shell text as bash does, without running it: generated scripts of quoted,
escaped and continued words are split by the importer and by bash itself, and the two must agree word for
word, each word placed on the line it starts on. Expansions stay as written and are marked; unclosed quotes
and expansions are refused with the line they opened on."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_compile.common.errors import InputError
from spark_compile.importer.shell import commands

from support.tools import require_tool

# Plain characters: nothing bash would glob, expand, redirect or read as a comment or an assignment.
PLAIN = st.text(st.sampled_from("abcXYZ019_./=:@%+,-"), min_size=1, max_size=4)
# Any character but NUL and CR, the ones shells treat specially drawn most often.
QUOTABLE = st.one_of(st.sampled_from("\\\"' \t\n#;&|()<>*?~!{}"),
                     st.characters(exclude_categories=["Cs"], exclude_characters="\0\r"))


@dataclass(frozen=True)
class Piece:
    """One part of a word: how the script writes it, and what it means after quote removal."""

    written: str
    means: str


PIECES = st.one_of(
    PLAIN.map(lambda text: Piece(text, text)),
    st.text(QUOTABLE.filter(lambda c: c != "'"), max_size=5).map(lambda text: Piece(f"'{text}'", text)),
    st.text(QUOTABLE.filter(lambda c: c not in "$`"), max_size=5).map(
        lambda text: Piece('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"', text)),
    QUOTABLE.filter(lambda c: c != "\n").map(lambda c: Piece("\\" + c, c)),
    st.just(Piece("\\\n", "")),  # a continuation inside a word joins it with the next line
    st.sampled_from(["\\a", "\\n"]).map(lambda text: Piece(f'"{text}"', text)),  # kept in double quotes
)
# A word that starts with a continuation would start on the next line: the first piece is never one.
WORDS = st.lists(PIECES, min_size=1, max_size=3).filter(lambda word: word[0].written != "\\\n")
SEPARATORS = st.sampled_from([" ", "\t", "  ", " \\\n "])
# Operators bash runs in order, each command once (|| and | would skip or swallow the recording function).
OPERATORS = st.sampled_from([";", "\n", "&&", " ; ", " # a comment ' \" \\\n", "\n\n"])
COMMAND = st.lists(st.tuples(SEPARATORS, WORDS), max_size=4)
# The last command ends with a newline: a script may not end in `&&`.
SCRIPTS = st.lists(st.tuples(COMMAND, OPERATORS), min_size=1, max_size=4).map(
    lambda script: [*script[:-1], (script[-1][0], "\n")])
RECORDER = "w() { printf '%s\\0' w \"$@\"; printf '\\1'; }\n"


def _render(script: list[tuple[list[tuple[str, list[Piece]]], str]]) -> tuple[str, list[list[str]], list[list[int]]]:
    """The text of a generated script, the words of each command, and the line each word starts on."""
    text, meant, lines = "", [], []
    for command, operator in script:
        words, starts = ["w"], [text.count("\n") + 1]
        text += "w"
        for separator, pieces in command:
            text += separator
            starts.append(text.count("\n") + 1)
            text += "".join(piece.written for piece in pieces)
            words.append("".join(piece.means for piece in pieces))
        text += operator
        meant.append(words)
        lines.append(starts)
    return text, meant, lines


def _bash(text: str) -> list[list[str]]:
    bash = require_tool("bash")
    out = subprocess.run([bash, "--norc", "-c", RECORDER + text], capture_output=True, check=True,
                         env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}).stdout
    return [[word.decode() for word in chunk.split(b"\0")[:-1]] for chunk in out.split(b"\1")[:-1]]


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(SCRIPTS)
def test_the_importer_splits_words_as_bash_does(script: list[tuple[list[tuple[str, list[Piece]]], str]]) -> None:
    text, meant, lines = _render(script)
    found = commands(text, "run.sh")
    assert [[word.text for word in command] for command in found] == meant
    assert [[word.origin.line for word in command] for command in found] == lines
    assert _bash(text) == meant
    assert not any(word.expands for command in found for word in command)


def _split(text: str) -> list[list[tuple[str, bool]]]:
    return [[(word.text, word.expands) for word in command] for command in commands(text, "run.sh")]


def test_every_operator_ends_a_command_and_the_longest_spelling_wins() -> None:
    assert _split("a&&b||c;d&e|f;;g\nh(i)j") == [[(name, False)] for name in "abcdefghij"]
    assert _split("a &b") == [[("a", False)], [("b", False)]]
    assert _split("a\\;b 'c;d'") == [[("a;b", False), ("c;d", False)]]


@pytest.mark.parametrize(("text", "word"), [
    ("'$HOME'", ("$HOME", False)),  # single quotes keep a dollar literal
    ("\\$HOME", ("$HOME", False)),  # so does a backslash
    ('"\\$HOME"', ("$HOME", False)),  # and a backslash inside double quotes
    ('"$HOME"', ("$HOME", True)),
    ("a$b", ("a$b", True)),
    ('"`id`"', ("`id`", True)),
    ("${X:-a b}/c", ("${X:-a b}/c", True)),  # the expansion is one word, spaces and all
    ("$(basename $(pwd))", ("$(basename $(pwd))", True)),  # nested: the depth is counted
    ("$((1 + 2))", ("$((1 + 2))", True)),
    ("`a b`c", ("`a b`c", True)),
    ('"a\\\nb"', ("ab", False)),  # backslash-newline inside double quotes joins the lines
    ("'a\\\nb'", ("a\\\nb", False)),  # inside single quotes it is kept
])
def test_expansions_are_kept_as_written_and_marked(text: str, word: tuple[str, bool]) -> None:
    assert _split(text) == [[word]]


def test_a_comment_starts_only_where_a_word_could() -> None:
    assert _split("a#b # c 'unclosed\nd") == [[("a#b", False)], [("d", False)]]
    assert _split("# only a comment\\\nnext") == [[("next", False)]]  # a comment does not continue


def test_a_lone_trailing_backslash_is_dropped() -> None:
    assert _split("a b\\") == [[("a", False), ("b", False)]]


@pytest.mark.parametrize(("text", "message"), [
    ("a\nb 'c\n", "run.sh:2: a single quote opened here is never closed"),
    ('x "y\n\nz', "run.sh:1: a double quote opened here is never closed"),
    ("a\n\nb $(c\nd", "run.sh:3: an expansion opened here with '(' is never closed"),
    ("${HOME", "run.sh:1: an expansion opened here with '{' is never closed"),
    ("a\n`b", "run.sh:2: an expansion opened here with '`' is never closed"),
])
def test_an_unclosed_quote_or_expansion_names_the_line_it_opened_on(text: str, message: str) -> None:
    with pytest.raises(InputError) as refused:
        commands(text, "run.sh")
    assert str(refused.value) == message


def test_bash_agrees_the_error_examples_are_unclosed() -> None:
    """The refusals above are not the importer's taste: bash -n rejects each text as well."""
    bash = require_tool("bash")
    for text in ("a\nb 'c\n", 'x "y\n\nz', "a\n\nb $(c\nd", "${HOME", "a\n`b"):
        proc = subprocess.run([bash, "-n"], input=text.encode(), capture_output=True, check=False)
        assert proc.returncode != 0, text
