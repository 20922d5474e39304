"""The loader's positions, held to documents built here with every key's and value's place known by construction
(block mappings and lists, nested, indented by any amount, with comments and blank lines between, LF or CRLF):
the position of each key and value is the line and column an editor shows."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.common.findings import Position
from spark_compile.stages.load import parse_text

KEYS = st.text(st.sampled_from("abcxyz_"), min_size=1, max_size=5)
SCALARS = st.one_of(st.integers(-1000, 1000), st.text(st.sampled_from("abc xyz-/"), min_size=1, max_size=6)
                    .filter(lambda t: t.strip() == t and not t.startswith("-")), st.booleans())
TREES = st.recursive(st.dictionaries(KEYS, SCALARS, min_size=1, max_size=3),
                     lambda inner: st.dictionaries(KEYS, st.one_of(SCALARS, inner, st.lists(SCALARS, min_size=1,
                                                                                         max_size=3)),
                                                   min_size=1, max_size=3), max_leaves=10)
Spots = dict[tuple[str | int, ...], tuple[tuple[int, int] | None, tuple[int, int]]]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else f"'{value}'"


class _Writer:
    """Writes a tree in block style, recording where each key and value starts (1-based)."""

    def __init__(self, step: int, noise: bool) -> None:
        self.lines: list[str] = []
        self.spots: Spots = {}
        self.step, self.noise = step, noise

    def mapping(self, tree: dict[str, Any], path: tuple[str | int, ...], indent: int) -> None:
        for key, value in tree.items():
            if self.noise:
                self.lines.append(" " * indent + "# a comment: with colons")
            line, here = len(self.lines) + 1, (*path, key)
            if isinstance(value, dict | list):
                self.lines.append(" " * indent + f"{key}:")
                self.spots[here] = ((line, indent + 1), (line + 1 + self.noise * isinstance(value, dict),
                                                         indent + self.step + 1))
                if isinstance(value, dict):
                    self.mapping(value, here, indent + self.step)
                else:
                    self.items(value, here, indent + self.step)
            else:
                self.lines.append(" " * indent + f"{key}: {_text(value)}")
                self.spots[here] = ((line, indent + 1), (line, indent + len(key) + 3))

    def items(self, values: list[Any], path: tuple[str | int, ...], indent: int) -> None:
        for index, value in enumerate(values):
            self.lines.append(" " * indent + f"- {_text(value)}")
            self.spots[(*path, index)] = (None, (len(self.lines), indent + 3))


@settings(deadline=None)
@given(TREES, st.integers(1, 4), st.booleans(), st.sampled_from(["\n", "\r\n"]))
def test_every_key_and_value_is_placed_where_an_editor_shows_it(tree: dict[str, Any], step: int, noise: bool,
                                                                  newline: str) -> None:
    writer = _Writer(step, noise)
    writer.mapping(tree, (), 0)
    doc = parse_text(newline.join(writer.lines) + newline, "p.yaml")
    assert doc.data == tree
    found = {path: (spot.key and (spot.key.line, spot.key.column), (spot.value.line, spot.value.column))
             for path, spot in doc.spots.items() if path}
    assert found == writer.spots
    for path, (_, (line, column)) in writer.spots.items():  # and the caret's line shows the value there
        value = _at(tree, path)
        if not isinstance(value, dict | list):
            assert doc.line(line)[column - 1:] == _text(value)


def _at(tree: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def test_the_document_itself_starts_at_its_first_key() -> None:
    doc = parse_text("# head\n\nname: x\n", "p.yaml")
    assert doc.spots[()].value == Position("p.yaml", 3, 1)
