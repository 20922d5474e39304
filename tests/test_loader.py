"""The loader and the extends resolver: positions, YAML corner cases, merges and deletions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_compile.stages.load import MAX_BYTES, LoadError, load_file, parse_text
from spark_compile.stages.resolve import resolve

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS


def test_yaml_1_1_booleans_stay_strings() -> None:
    doc = parse_text("restart: no\nthinking: true\nwhen: 2026-09-21\nx: off\n", "p.yaml")
    assert doc.data == {"restart": "no", "thinking": True, "when": "2026-09-21", "x": "off"}


def test_every_value_keeps_its_position() -> None:
    doc = parse_text("engine:\n  port: 8210\n  args: [a, b]\n", "p.yaml")
    port = doc.spots[("engine", "port")]
    assert port.key is not None and (port.key.line, port.value.column) == (2, 9)
    assert doc.spots[("engine", "args", 1)].value.column == 13


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_BYTES + "\nname: big\n")
    with pytest.raises(LoadError) as failed:
        load_file(big)
    assert failed.value.finding.rule == "SC108"
    # Only MAX_BYTES + 1 bytes are read: the message cannot (and need not) give the whole size.
    assert failed.value.finding.message == "the file is over 1048576 bytes; profiles are limited to 1048576 bytes"


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: x\n")
    assert load_file(path).data == {"name": "x"}


def _child(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "child.yaml"
    path.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\n{body}")
    return path


def test_keyed_nodes_merge_by_name_and_delete(tmp_path: Path) -> None:
    resolved = resolve(_child(tmp_path, "fleet:\n  nodes:\n    - !delete spark-3\n"
                                        "    - {name: spark-1, home: /home/ops}\n"
                                        "    - {name: spark-4, fabric_ip: 192.0.2.15, ssh: s@192.0.2.15, home: /h}\n"))
    nodes = resolved.data["fleet"]["nodes"]
    assert [n["name"] for n in nodes] == ["spark-0", "spark-1", "spark-2", "spark-4"]
    assert nodes[1] == {"name": "spark-1", "fabric_ip": "192.0.2.12", "ssh": "spark@192.0.2.12",
                        "home": "/home/ops", "holds_checkpoint": True}
    home = resolved.origin(("fleet", "nodes", 1, "home"))
    assert (home.spot.value.file, home.spot.value.line, home.via) == (str(tmp_path / "child.yaml"), 5, ())
    ssh = resolved.origin(("fleet", "nodes", 1, "ssh"))
    assert ssh.spot.value.file.endswith("spec/profiles/dsv41-4spark.yaml")
    assert ssh.via == (str(tmp_path / "child.yaml"),)
    assert resolved.origin(("fleet", "nodes", 3, "name")).spot.value.line == 6


def test_delete_removes_an_inherited_key_and_lists_replace(tmp_path: Path) -> None:
    resolved = resolve(_child(tmp_path, "overlay:\n  roce_ar: !delete\nmodel:\n  aliases: [only-one]\n"))
    assert "roce_ar" not in resolved.data["overlay"]
    assert resolved.data["model"]["aliases"] == ["only-one"]
    assert resolved.data["overlay"]["roce_ar_max"] == "1MB"


def test_three_level_chain_reports_the_whole_route(tmp_path: Path) -> None:
    middle = _child(tmp_path, "engine:\n  port: 8888\n")
    leaf = tmp_path / "leaf.yaml"
    leaf.write_text("extends: child.yaml\nengine:\n  dist_init_port: 8888\n")
    from spark_compile.pipeline import Rejected, validate

    validated = validate(resolve(leaf))
    [finding] = [f for f in validated.findings if f.rule not in REFERENCE_WARNINGS]  # the reference's own
    assert (finding.rule, finding.position.file, finding.position.line) == ("SC210", str(leaf), 3)
    assert isinstance(validated, Rejected) and validated.planned is not None  # a rule refused it, not the schema
    port = validated.planned.resolved.origin(("engine", "port"))
    assert (port.spot.value.file, port.via) == (str(middle), (str(leaf),))


def _first_hidden_break(text: str) -> int:
    """The first character YAML reads as a line break that an editor shows inside a line, by the rule itself:
    NEL, U+2028, U+2029, or a carriage return not followed by a line feed."""
    for at, char in enumerate(text):
        if char in "\x85\u2028\u2029" or (char == "\r" and text[at + 1:at + 2] != "\n"):
            return at
    return -1


@given(st.text(st.sampled_from("a\n\r\x85\u2028\u2029\u2027"), max_size=8))
def test_the_first_hidden_break_is_refused_where_it_stands(text: str) -> None:
    source = "name: x\ndescription: '" + text + "'\n"
    at = _first_hidden_break(source)
    if at < 0:
        return  # nothing hidden: what YAML makes of it is other tests' business
    with pytest.raises(LoadError) as refused:
        parse_text(source, "p.yaml")
    finding = refused.value.finding
    line = source.count("\n", 0, at) + 1
    assert (finding.rule, finding.position.line, finding.position.column) == \
        ("SC113", line, at - (source.rfind("\n", 0, at) + 1) + 1)
