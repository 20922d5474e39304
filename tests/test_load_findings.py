"""compiler/stages/load.py: what a profile file may hold, and the whole finding for what it may not — rule,
line:column as an editor counts them, message, hint and the quoted source line. Positions were counted by
hand on each text (1-based, only LF or CRLF ends a line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_compile.common.errors import InputError
from spark_compile.common.findings import Finding, Position
from spark_compile.stages.load import Delete, LoadError, decode, load_file, parse_text, read_bytes

SYNTAX = "check indentation, quotes and colons on this line"
TAG_HINT = ("remove the tag; a profile takes only !delete (to remove an inherited key or, in a keyed list, the "
            "item of a name) and !replace (on a mapping, to replace the inherited one whole)")
BREAK = ": YAML reads it as a line break, but editors, terminals, grep and git diff show one line"
BREAK_HINT = "delete the character; write a real line break if one is meant"
MAPPING = ("a profile must be a YAML mapping at the top level", "start the file with `name: <profile-name>`")


def _finding(text: str) -> Finding:
    with pytest.raises(LoadError) as refused:
        parse_text(text, "p.yaml")
    return refused.value.finding


def _whole(rule: str, line: int, column: int, message: str, hint: str, source: str) -> Finding:
    return Finding(rule, "error", Position("p.yaml", line, column), message, hint, source)


@pytest.mark.parametrize(("text", "expected"), [
    # The flow list is never closed: the end of the file is no place to point at, its opening bracket is.
    ("a: [1, 2\n", ("SC105", 1, 4, "YAML syntax error: did not find expected ',' or ']'", SYNTAX, "a: [1, 2")),
    ("a: b: c\n", ("SC105", 1, 5, "YAML syntax error: mapping values are not allowed in this context", SYNTAX,
                   "a: b: c")),
    ("name: x\n  bad: 1\n", ("SC105", 2, 6, "YAML syntax error: mapping values are not allowed in this context",
                             SYNTAX, "  bad: 1")),
    ("a: 'open\n", ("SC105", 1, 4, "YAML syntax error: found unexpected end of stream", SYNTAX, "a: 'open")),
    ("a: 1\n\tb: 2\n", ("SC105", 2, 1, "YAML syntax error: found a tab character that violates indentation",
                        SYNTAX, "\tb: 2")),
    ("a: \x1b[2J\n", ("SC113", 1, 4, "the file holds the control character U+001B, which YAML does not allow",
                      "delete it (write it as an escape inside a double-quoted string if a value needs it)",
                      "a: \x1b[2J")),
    ("a: 1\rb: 2\n", ("SC113", 1, 5, "U+000D (a carriage return without a line feed)" + BREAK, BREAK_HINT,
                      "a: 1\rb: 2")),
    ("x: 0\na: 1\u2028b: 2\n", ("SC113", 2, 5, "U+2028 (a line or paragraph separator)" + BREAK, BREAK_HINT,
                                "a: 1\u2028b: 2")),
    ("a: \x85\n", ("SC113", 1, 4, "U+0085 (a line or paragraph separator)" + BREAK, BREAK_HINT, "a: \x85")),
    ('a: "x\\ay"\n', ("SC113", 1, 4, "the value holds the control character U+0007, which no consumer of a "
                      "profile value takes", "remove it", 'a: "x\\ay"')),
    ("- a\n", ("SC106", 1, 1, *MAPPING, "- a")),
    ("just text\n", ("SC106", 1, 1, *MAPPING, "just text")),
    ("", ("SC106", 1, 1, *MAPPING, "")),
    ("# only a comment\n", ("SC106", 1, 1, *MAPPING, "# only a comment")),
    ("a: !!binary aGk=\n", ("SC105", 1, 4, "unknown YAML tag !!binary", TAG_HINT, "a: !!binary aGk=")),
    ("a: !!python/object:os.system x\n", ("SC105", 1, 4, "unknown YAML tag !!python/object:os.system", TAG_HINT,
                                          "a: !!python/object:os.system x")),
    ("a:\n  b: !custom x\n", ("SC105", 2, 6, "unknown YAML tag !custom", TAG_HINT, "  b: !custom x")),
    ("!delete a: 1\n", ("SC105", 1, 1, "a mapping key must be a plain scalar", "write the key as a plain word",
                        "!delete a: 1")),
    ("? [a]\n: 1\n", ("SC105", 1, 3, "a mapping key must be a plain scalar", "write the key as a plain word",
                      "? [a]")),
    ("base: &b {a: 1}\nx:\n  <<: *b\n", ("SC105", 3, 3, "YAML merge keys (<<) are not supported in profiles",
                                         "share common settings with `extends:` instead", "  <<: *b")),
    ("a: 1\nb: 2\na: 3\n", ("SC104", 3, 1, "duplicate key 'a' (first at line 1)",
                            "a key may appear once per mapping; delete one of them", "a: 3")),
    ("a: &a [*a]\n", ("SC108", 1, 4, "an alias refers to the value that contains it (a cycle)",
                      "write the value out instead of aliasing its own parent", "a: &a [*a]")),
    ("a: " + "9" * 101 + "\n", ("SC109", 1, 4, "a number of 101 digits; profile numbers have at most 100",
                                "write the intended value", "a: " + "9" * 101)),
])
def test_a_refused_file_gets_its_whole_finding(text: str, expected: tuple[str, int, int, str, str, str]) -> None:
    assert _finding(text) == _whole(*expected)
    assert _finding(text).source_line == expected[5]  # compare=False on the field: checked on its own


@pytest.mark.parametrize(("number", "plain"), [("017", "17 (YAML 1.1 reads 017 as 15: write that if it was meant)"),
                                               ("-017", "-17 (YAML 1.1 reads -017 as -15: write that if it was meant)"),
                                               ("1_000", "1000"), ("0b101", "5"), ("1:30", "90"), ("1_0.5", "10.5")])
def test_yaml_1_1_number_forms_are_refused_not_converted(number: str, plain: str) -> None:
    """A key the profile does not have (here `port` at the top) may mean either form: the hint gives both."""
    assert _finding(f"port: {number}\n") == _whole(
        "SC114", 1, 7, f"{number} is a YAML 1.1 number form (leading 0 = octal, '_' separators, ':' base 60, 0b "
        "binary) whose value surprises readers",
        f"write {plain}, in plain decimal digits (no leading 0, '_', ':' or 0b), or '{number}' quoted if text is "
        "meant", f"port: {number}")


@pytest.mark.parametrize(("text", "hint"), [
    ("engine:\n  port: 017\n", "write 17 (YAML 1.1 reads 017 as 15: write that if it was meant), in plain decimal "
                                "digits (no leading 0, '_', ':' or 0b)"),
    ("description: 0_1\n", "write '0_1': quoted, as the key takes text"),
])
def test_the_yaml_1_1_hint_gives_the_form_the_key_takes(text: str, hint: str) -> None:
    """An integer field refuses a quoted number, a text field a number: the hint names only the form that fits."""
    assert _finding(text).hint == hint


def test_numbers_both_yamls_agree_on_are_read() -> None:
    doc = parse_text("a: 0\nb: -7\nc: +7\nd: 0x1F\ne: 1.5\nf: -.inf\ng: '017'\nh: 100000000000000000000\n", "p")
    assert doc.data == {"a": 0, "b": -7, "c": 7, "d": 31, "e": 1.5, "f": float("-inf"), "g": "017",
                        "h": 10**20}


def test_keys_are_text_except_integers() -> None:
    """Integer keys stay integers (Engram layer ids); any other scalar key becomes its text."""
    doc = parse_text("1: x\n~: z\n3.5: w\n'2': v\n", "p.yaml")
    assert doc.data == {1: "x", "null": "z", "3.5": "w", "2": "v"}


def test_an_alias_bomb_stops_at_the_node_budget() -> None:
    levels = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 6)]
    finding = _finding("\n".join(levels) + "\n")
    assert (finding.rule, finding.message, finding.hint) == (
        "SC108", "the document expands to more than 100000 values (anchors and aliases)",
        "write the values out, or share them through `extends:` instead of aliases")
    small = parse_text("\n".join(levels[:3]) + "\n", "p.yaml")  # 1,000 values: an honest use of aliases
    assert small.data["a2"] == [[[1] * 10] * 10] * 10


def test_delete_tags_are_counted_and_carry_their_target() -> None:
    doc = parse_text("a: !delete\nnodes:\n  - !delete spark-3\n  - name: x\n", "p.yaml")
    assert doc.data == {"a": Delete(""), "nodes": [Delete("spark-3"), {"name": "x"}]}
    assert doc.edits == 2
    assert parse_text("a: 1\n", "p.yaml").edits == 0


def test_positions_count_crlf_as_one_break_and_lines_drop_the_cr() -> None:
    doc = parse_text("a: 1\r\nb:\r\n  c: [x, 'y']\r\n", "p.yaml")
    spot = doc.spots[("b", "c", 1)]
    assert spot.value == Position("p.yaml", 3, 10) and spot.key is None
    key = doc.spots[("b", "c")].key
    assert key == Position("p.yaml", 3, 3)
    assert (doc.line(3), doc.line(0), doc.line(5)) == ("  c: [x, 'y']", "", "")


def test_a_byte_order_mark_and_utf8_values_are_read() -> None:
    assert decode("\ufeffname: é\n".encode(), "p.yaml") == "name: é\n"


@pytest.mark.parametrize(("raw", "line", "column", "message"), [
    (b"a: \xff\n", 1, 4, "the file is not UTF-8 (byte 0xff at offset 3)"),
    (b"a: 1\nb: \xc3(\n", 2, 4, "the file is not UTF-8 (byte 0xc3 at offset 8)"),  # a sequence cut short
    (b"\xfe\xffa: 1\n", 1, 1, "the file is not UTF-8 (byte 0xfe at offset 0)"),  # UTF-16's byte order mark
])
def test_a_file_that_is_not_utf8_is_placed_at_its_first_bad_byte(raw: bytes, line: int, column: int,
                                                                message: str) -> None:
    with pytest.raises(LoadError) as refused:
        decode(raw, "p.yaml")
    assert refused.value.finding == _whole("SC107", line, column, message, "save the file as UTF-8", "")


def test_unreadable_paths_are_input_errors_with_the_reason(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # opened without blocking: a FIFO never hangs the read
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    (tmp_path / "dir.yaml").mkdir()
    expected = {
        "missing.yaml": f"{tmp_path}/missing.yaml: no such file",
        "dir.yaml": f"{tmp_path}/dir.yaml: is a directory, expected a profile file",
        "pipe.yaml": f"{tmp_path}/pipe.yaml: not a regular file (a FIFO, device or socket); a profile is a file",
        "loop.yaml": f"{tmp_path}/loop.yaml: cannot read: a symlink loop",
    }
    for name, message in expected.items():
        with pytest.raises(InputError) as refused:
            read_bytes(tmp_path / name)
        assert str(refused.value) == message


def test_reading_stops_a_byte_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (3 << 20))
    assert len(read_bytes(path)) == (1 << 20) + 1


def test_load_file_names_the_file_as_displayed(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\nname: y\n")
    with pytest.raises(LoadError) as refused:
        load_file(path, "spec/profiles/p.yaml")
    assert refused.value.finding.position == Position("spec/profiles/p.yaml", 2, 1)
    assert load_file(_written(tmp_path, "name: x\n")).path == str(tmp_path / "q.yaml")


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "q.yaml"
    path.write_text(text)
    return path
