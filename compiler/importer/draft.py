"""The profile an import builds: values by profile path, each with the source line it came from, written as
YAML whose every string is double-quoted by the emitter (so newlines, `#`, quotes and control characters
round-trip) and whose comments cannot be broken out of."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, get_args

import yaml
from pydantic import BaseModel

from spark_compile.importer.source import Leftover, Origin
from spark_compile.spec.model import Profile

Path = tuple[str | int, ...]
Scalar = str | int | float | bool
_UNSAFE_COMMENT = re.compile(r"[^\x20-\x7e]")


@dataclass(slots=True)
class Draft:
    """The imported profile: values by path (in the order set), what was left out, and what was normalised."""

    values: dict[Path, tuple[Scalar | list[Scalar], str]] = field(default_factory=dict)
    left: list[Leftover] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def set(self, path: Path, value: Scalar | list[Scalar], origin: Origin | str) -> None:
        """Set one leaf; ``origin`` is a source line or a short reason ("assumed: ...")."""
        self.values[path] = (value, f"from {origin}" if isinstance(origin, Origin) else origin)

    def leave(self, origin: Origin, text: str, why: str) -> None:
        self.left.append(Leftover(origin, text, why))

    def tree(self) -> dict[str, Any]:
        """The values as the nested mapping the YAML holds."""
        root: dict[str | int, Any] = {}
        for path, (value, _) in self.values.items():
            node: Any = root
            for key, nxt in itertools.pairwise(path):
                node = node.setdefault(key, [] if isinstance(nxt, int) else {}) if isinstance(node, dict) \
                    else _item(node, key, nxt)
            last = path[-1]
            if isinstance(node, list) and isinstance(last, int):
                _item(node, last, None)
                node[last] = value
            else:
                node[path[-1]] = value
        tree: dict[str, Any] = _lists(root)
        return tree


def _item(items: list[Any], index: str | int, nxt: str | int | None) -> Any:
    assert isinstance(index, int)
    while len(items) <= index:
        items.append([] if isinstance(nxt, int) else {})
    return items[index]


def _lists(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _lists(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_lists(value) for value in node]
    return node


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"})


def key_text(key: str | int) -> str:
    """A mapping key: plain when it can only be read back as the same string, else double-quoted."""
    text = str(key)
    return text if _PLAIN_KEY.fullmatch(text) and text.lower() not in _YAML_WORDS else scalar(text)


def ordered(node: Any, model: Any) -> Any:
    """``node`` with every mapping's keys in the order the profile model declares them (others after)."""
    if isinstance(node, list):
        return [ordered(item, model) for item in node]
    if not isinstance(node, dict) or not (isinstance(model, type) and issubclass(model, BaseModel)):
        return node
    fields = list(model.model_fields)
    rank = {name: i for i, name in enumerate(fields)}
    out = {}
    for key in sorted(node, key=lambda k: (rank.get(k, len(fields)), list(node).index(k))):
        info = model.model_fields.get(key)
        out[key] = ordered(node[key], _inner(info.annotation) if info else None)
    return out


def _inner(annotation: Any) -> Any:
    """The model class inside an annotation (X, X | None, list[X]), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in get_args(annotation) if (found := _inner(arg)) is not None), None)


def scalar(value: Scalar) -> str:
    """One YAML scalar: booleans and numbers plain, every string double-quoted with YAML's own escapes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        mantissa, exponent, power = repr(value).partition("e")
        # YAML 1.1 (the loader's) reads an exponent as a number only after a '.': 1e-05 would come back as text.
        return f"{mantissa}.0e{power}" if exponent and "." not in mantissa else repr(value)
    if isinstance(value, int):
        return repr(value)
    text = yaml.dump(value, default_style='"', width=1 << 30, allow_unicode=False, explicit_end=False)
    return text.removesuffix("\n...\n").rstrip("\n")


def comment(text: str) -> str:
    """A comment that stays on its line: anything but printable ASCII shown as an escape."""
    return _UNSAFE_COMMENT.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _emit(node: Any, path: Path, draft: Draft, indent: str, lines: list[str]) -> None:
    for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
        here = (*path, key)
        lead = f"{indent}- " if isinstance(node, list) else f"{indent}{key_text(key)}:"
        if isinstance(value, dict | list) and value and here not in draft.values:
            lines.append(lead.rstrip() if isinstance(node, dict) else f"{indent}-")
            _emit(value, here, draft, indent + "  ", lines)
            continue
        note = draft.values.get(here, (None, ""))[1]
        text = "[" + ", ".join(scalar(v) for v in value) + "]" if isinstance(value, list) else scalar(value)
        sep = "" if isinstance(node, list) else " "
        lines.append(f"{lead}{sep}{text}" + (f"  # {comment(note)}" if note else ""))


def render(draft: Draft, header: list[str]) -> str:
    """The profile's YAML text."""
    lines = [f"# {comment(line)}" if line else "#" for line in header]

    _emit(ordered(draft.tree(), Profile), (), draft, "", lines)
    return "\n".join(lines) + "\n"
