"""The review page's value sections: every value the profile sets, where it is set, what it renders as and,
against an older profile, its change in place; with the findings at each value's line and the description
mentions a change left stale."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from spark_compile.common.findings import Finding, dotted
from spark_compile.pipeline import Planned
from spark_compile.review.artifact_diff import UNSET, ProfileChange
from spark_compile.review.diff import _flatten as leaves
from spark_compile.review.diff_format import show
from spark_compile.stages.launch_plan import LaunchPlan

# The page's sections in order: (id, title, the profile's top-level keys shown there). Keys no section
# names land in the last one, so every value (and every change) has its place.
SECTIONS = (("engine", "Engine", ("engine",)), ("container", "Container", ("container",)),
            ("fabric", "Fabric and nodes", ("fleet", "hardware")), ("overlay", "Overlay", ("overlay",)),
            ("nccl", "NCCL", ("nccl",)), ("model", "Model", ("model",)),
            ("profile", "Profile and operations", ()))


@dataclass(slots=True)
class ValueRow:
    """One value of the profile: its key, shown value, source line and status against the older profile."""

    path: str
    anchor: str
    group: str
    value: str
    where: str
    status: str = "same"  # same, changed, added, removed
    old: str = ""
    renders: list[str] = field(default_factory=list)  # the engine flags, docker options and variables it sets
    findings: list[str] = field(default_factory=list)  # rule ids of the findings at this value's line
    stale: list[str] = field(default_factory=list)  # what this text still says of a changed value


@dataclass(slots=True)
class Section:
    """A section of the page: its profile values, then the rendered settings tables they feed."""

    id: str
    title: str
    rows: list[ValueRow]
    tables: list[tuple[str, list[Any]]] = field(default_factory=list)


@dataclass(slots=True)
class ChangeLine:
    """One line of the page's "what changed" list, linked to the row where the change shows."""

    path: str
    old: str
    new: str
    anchor: str
    where: str
    status: str  # changed, added (no old value), removed (no new one)


@dataclass(slots=True)
class FindingLine:
    """One finding of `check`: rule, severity, where, what, how to fix, and the row it points at."""

    rule: str
    severity: str
    where: str
    message: str
    hint: str
    anchor: str
    via: str = ""  # the child profiles an inherited value arrived through


def _section(path: tuple[str | int, ...]) -> str:
    top = str(path[0]) if path else ""
    return next((sid for sid, _, keys in SECTIONS if top in keys), SECTIONS[-1][0])


def _group(path: tuple[str | int, ...]) -> str:
    """The sub-heading a row sits under: the first two keys of a nested value, its top-level key for one a
    level down, none for a top-level value."""
    return dotted(path[:2]) if len(path) > 2 else dotted(path[:1]) if len(path) == 2 else ""


def _where(planned: Planned, path: tuple[str | int, ...]) -> tuple[str, str, int]:
    origin = planned.resolved.origins.get(path)
    if origin is None:
        return "not in the profile (default)", "", 0
    pos = origin.spot.value
    return f"{pos.file}:{pos.line}", pos.file, pos.line


def _renders(plan: LaunchPlan) -> dict[str, list[str]]:
    """Profile key → the flags, options and variables it sets, in the plan's order."""
    found: dict[str, list[str]] = {}
    for rank in plan.ranks:
        named = [*((o.flag, o.source) for o in (*rank.engine_options, *rank.docker_options)),
                 *((v.name, v.source) for v in rank.variables)]
        for name, source in named:
            names = found.setdefault(dotted(source), []) if source else []
            if source and name not in names:
                names.append(name)
    return found


class Anchors:
    """Element ids for profile paths: readable, unique, and only characters that need no escaping."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.used: set[str] = set()

    def __call__(self, path: str) -> str:
        if path not in self.ids:
            slug = "v-" + re.sub(r"[^A-Za-z0-9_.-]", "-", path)[:120]
            while slug in self.used:
                slug += "-"
            self.ids[path] = slug
            self.used.add(slug)
        return self.ids[path]


def value_sections(new: Planned, old: Planned | None, changes: list[ProfileChange],
                   anchors: Anchors) -> list[Section]:
    """Every value of the new profile (and each the old one set that is gone), grouped into the sections."""
    by_path = {c.path: c for c in changes}
    renders = _renders(new.plan)
    values = leaves(new.resolved.data)
    paths = list(values)
    if old is not None:
        paths += [p for p in leaves(old.resolved.data) if p not in values]
    at_line = _findings_by_line(new.findings)
    sections = {sid: Section(sid, title, []) for sid, title, _ in SECTIONS}
    for path in paths:
        text = dotted(path)
        change = by_path.get(text)
        gone = change is not None and change.new == UNSET
        where, file, line = _where(old if gone and old is not None else new, path)
        row = ValueRow(text, anchors(text), _group(path), show(change.new if change else values[path]), where,
                       renders=renders.get(text, []), findings=at_line.get((file, line), []))
        if change is not None:
            row.status, row.old = _status(change), show(change.old)
        sections[_section(path)].rows.append(row)
    for path, row in _engine_defaults(new.plan, set(paths), anchors):
        sections[_section(path)].rows.append(row)
    for section in sections.values():
        order = list(dict.fromkeys(r.group for r in section.rows))
        section.rows.sort(key=lambda r: order.index(r.group))
    return list(sections.values())


def _engine_defaults(plan: LaunchPlan, shown: set[tuple[str | int, ...]],
                     anchors: Anchors) -> list[tuple[tuple[str | int, ...], ValueRow]]:
    """A row for each key the profile leaves to the engine build (quantization, KV dtype, page size...):
    the build's default and the flags the key would set."""
    rows: dict[tuple[str | int, ...], ValueRow] = {}
    for entry in plan.engine_defaults:
        if entry.field in shown:
            continue
        text = dotted(entry.field)
        default = "(unset: SGLang decides)" if entry.default is None else f"{show(entry.default)} (the build's default)"
        row = rows.setdefault(entry.field, ValueRow(text, anchors(text), _group(entry.field), default,
                                                    "not in the profile (default)", "default"))
        row.renders.append(entry.flag)
    return list(rows.items())


def _findings_by_line(findings: list[Finding]) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = {}
    for finding in findings:
        rules = out.setdefault((finding.position.file, finding.position.line), [])
        if finding.rule not in rules:
            rules.append(finding.rule)
    return out


def finding_lines(findings: list[Finding], sections: list[Section]) -> list[FindingLine]:
    """Every finding with a link to the value row at its line (none when no row is there)."""
    rows = {(r.where, rule): r.anchor for s in sections for r in s.rows for rule in r.findings}
    lines = []
    for f in sorted(findings, key=Finding.sort_key):
        where = f"{f.position.file}:{f.position.line}"
        lines.append(FindingLine(f.rule, f.severity, f"{where}:{f.position.column}", f.message, f.hint,
                                 rows.get((where, f.rule), ""), " -> ".join(reversed(f.via))))
    return lines


def change_lines(changes: list[ProfileChange], anchors: Anchors) -> list[ChangeLine]:
    """The "what changed" list: one line per changed value, linked to its row."""
    return [ChangeLine(c.path, show(c.old), show(c.new), anchors(c.path), c.new_origin or c.old_origin or "",
                       _status(c)) for c in changes]


def _status(change: ProfileChange) -> str:
    return "removed" if change.new == UNSET else "added" if change.old == UNSET else "changed"


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
TEXTS = ("description",)  # the profile's prose a reviewer reads as a statement of its values


def stale_mentions(text: str, changes: list[ProfileChange]) -> list[str]:
    """What ``text`` still says of a value that changed: a word of the key right before its old value
    ("block 5" after engine.speculative.dspark_block_size 5 → 7)."""
    found = []
    for c in changes:
        if c.path in TEXTS or not _scalar(c.old) or not _scalar(c.new) or show(c.old) == show(c.new):
            continue
        words = {w.lower() for w in _WORD.findall(c.path.rsplit(".", 1)[-1])}
        old = re.escape(show(c.old))
        for word in sorted(words):
            hit = re.search(rf"\b({re.escape(word)}\w*[\s:=-]{{0,2}}{old})(?!\w|\.\d)", text, re.IGNORECASE)
            if hit:
                found.append(f"says \u201c{hit.group(1)}\u201d but {c.path} is now {show(c.new)} "
                             f"(was {show(c.old)})")
                break
    return found


def _scalar(value: Any) -> bool:
    return value != UNSET and not isinstance(value, bool | list | dict) and value is not None


def mark_stale(sections: list[Section], changes: list[ProfileChange]) -> list[tuple[str, str]]:
    """Point out, on each prose row, what it still says of changed values; (anchor, note) for the top."""
    notes = []
    for row in (r for s in sections for r in s.rows if r.path in TEXTS):
        row.stale = stale_mentions(row.value, changes)
        notes += [(row.anchor, f"{row.path} {note}") for note in row.stale]
    return notes
