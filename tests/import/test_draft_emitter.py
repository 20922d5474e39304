"""compiler/importer/draft.py writes the imported profile as YAML that spark-compile's own loader reads back as
the values set — every string, number (exponents too) and boolean, keys of any spelling, lists — each on the
line whose comment names its source; a comment can never be broken out of, whatever the file name holds."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.importer.draft import Draft, Scalar, comment, key_text, render, scalar
from spark_compile.importer.source import Origin
from spark_compile.stages.load import LoadError, parse_text

# What the loader refuses in a value (SC113): C0 controls but tab, LF and CR, and DEL.
REFUSED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
TEXTS = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.one_of(TEXTS, st.integers(min_value=-(10**30), max_value=10**30), FLOATS, st.booleans())
KEYS = st.one_of(st.sampled_from(["A", "B_1", "yes", "no", "null", "on", "1", "a b", "a:b", "#x", "-", "é"]),
                 st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=6))


def _draft(env: dict[str, str], args: dict[str, Scalar | list[Scalar]]) -> Draft:
    draft = Draft()
    draft.set(("name",), "p", "named by the test")  # a profile is never an empty document
    for line, (name, text) in enumerate(env.items(), 1):
        draft.set(("engine", "env", name), text, Origin("run.sh", line))
    for name, value in args.items():
        draft.set(("engine", "args", name), value, "assumed: a test value")
    return draft


@settings(deadline=None)  # no wall-clock bound: the first example pays for imports
@given(st.dictionaries(KEYS, TEXTS, max_size=4),
       st.dictionaries(KEYS, st.one_of(SCALARS, st.lists(st.one_of(st.integers(0, 99), TEXTS), max_size=3)),
                       max_size=4))
def test_the_loader_reads_back_every_value_the_draft_holds(env: dict[str, str],
                                                           args: dict[str, Scalar | list[Scalar]]) -> None:
    text = render(_draft(env, args), ["a header"])
    values = [*env.values(), *(v for value in args.values() for v in (value if isinstance(value, list) else [value]))]
    if any(isinstance(v, str) and REFUSED.search(v) for v in values):
        with pytest.raises(LoadError) as refused:
            parse_text(text, "p.yaml")
        assert refused.value.finding.rule == "SC113"
        return
    data = parse_text(text, "p.yaml").data
    assert data.get("engine", {}).get("env", {}) == env
    assert data.get("engine", {}).get("args", {}) == args


@pytest.mark.parametrize("value", [1e-05, 1e16, -3e20, 5e-324, 2.5e-07, 0.8, 1.0, 1.7976931348623157e308])
def test_a_float_is_written_as_a_number_the_loader_reads(value: float) -> None:
    """YAML 1.1 reads `1e-05` as text (it wants a '.'): the emitter writes `1.0e-05`."""
    read = parse_text(f"a: {scalar(value)}\n", "p.yaml").data["a"]
    assert isinstance(read, float) and math.isclose(read, value, rel_tol=0, abs_tol=0)


def test_scalars_are_spelled_as_yaml_reads_them() -> None:
    assert [scalar(v) for v in (True, False, 0, -7, "no", "", "a\nb", "é\u2028")] == [
        "true", "false", "0", "-7", '"no"', '""', '"a\\nb"', '"\\xE9\\L"']
    assert [key_text(k) for k in ("NCCL_DEBUG", "yes", "On", "1", "a b", 3)] == [
        "NCCL_DEBUG", '"yes"', '"On"', '"1"', '"a b"', '"3"']


def test_each_value_stands_on_the_line_that_names_its_source() -> None:
    draft = _draft({"A": "1", "B": "x # not a comment"}, {})
    text = render(draft, [])
    doc = parse_text(text, "p.yaml")
    for name, line in (("A", 1), ("B", 2)):  # the first line of the file holds the name
        spot = doc.spots[("engine", "env", name)].value
        assert doc.line(spot.line).endswith(f"  # from run.sh:{line}"), doc.line(spot.line)
    assert doc.data["engine"]["env"]["B"] == "x # not a comment"


@settings(deadline=None)  # no wall-clock bound: the first example pays for imports
@given(st.text(max_size=30))
def test_no_comment_can_be_broken_out_of(name: str) -> None:
    draft = Draft()
    draft.set(("engine", "env", "A"), "1", Origin(name, 1))
    text = render(draft, [f"from {name}", "", "Review it."])
    assert all(re.fullmatch(r"[\x20-\x7e]*", line) for line in text.splitlines())
    assert parse_text(text, "p.yaml").data == {"engine": {"env": {"A": "1"}}}  # the header stays comments
    assert comment(name).isascii()


def test_lists_of_mappings_are_written_item_by_item() -> None:
    draft = Draft()
    for rank, ip in enumerate(("192.0.2.1", "192.0.2.2")):
        draft.set(("fleet", "nodes", rank, "name"), f"node{rank}", "named after its host")
        draft.set(("fleet", "nodes", rank, "fabric_ip"), ip, Origin("run.sh", rank + 1))
    text = render(draft, [])
    assert text == ('fleet:\n  nodes:\n    -\n      name: "node0"  # named after its host\n'
                    '      fabric_ip: "192.0.2.1"  # from run.sh:1\n    -\n      name: "node1"  # named after its '
                    'host\n      fabric_ip: "192.0.2.2"  # from run.sh:2\n')
    assert parse_text(text, "p.yaml").data == {"fleet": {"nodes": [{"name": "node0", "fabric_ip": "192.0.2.1"},
                                                                   {"name": "node1", "fabric_ip": "192.0.2.2"}]}}
