"""The profile key behind each artifact change of a diff: the flag or variable a change names (as the launch
plan records its source), else a changed profile value it spells out (an image), else, for a value fleet.env
derives (hook counts, memory predictions), the changed inputs it is derived from."""

from __future__ import annotations

import re
from collections.abc import Iterator

from spark_compile.common.findings import dotted
from spark_compile.fleet.data import DERIVED_FROM
from spark_compile.review.artifact_diff import UNSET, Change, Grouped, ProfileChange
from spark_compile.stages.launch_plan import LaunchPlan, ProfilePath, field_name

Known = dict[int, dict[str, ProfilePath]]
_WORD_EDGE = "`|'\"(),;:."
# A value this short ("1", "true", "16") is found in too many lines to say which key it came from.
_MIN_SPELLED = 6
_DOCKER_SIZE = re.compile(r"^(\d+)([kmg])$")


def _plan_inputs(plan: LaunchPlan) -> dict[int, dict[str, tuple[ProfilePath, tuple[str, ...]]]]:
    """Per rank: flag or variable name → the profile path that set it, and its value."""
    found: dict[int, dict[str, tuple[ProfilePath, tuple[str, ...]]]] = {}
    for rank in plan.ranks:
        mine = found.setdefault(rank.rank, {})
        for option in (*rank.docker_options, *rank.engine_options):
            if option.source:
                mine.setdefault(option.flag, (option.source, option.values))
        for var in rank.variables:
            mine.setdefault(var.name, (var.source, (var.value,)))
    return found


def known_sources(old: LaunchPlan, new: LaunchPlan) -> Known:
    """Per rank: every flag or variable of either plan → the profile path that set it (the new plan's wins)."""
    known: Known = {}
    for plan in (old, new):
        for rank, names in _plan_inputs(plan).items():
            known.setdefault(rank, {}).update({name: path for name, (path, _) in names.items()})
    return known


def _word_names(text: str) -> Iterator[str]:
    for word in text.split():
        yield word.strip(_WORD_EDGE).split("=", 1)[0]


def _names(change: Change) -> list[str]:
    """What a change may be about: a variable named by the key's last part, flags by the first word of each
    line (or the first flag of a slice of words), and every word only one side has (``NAME=value`` by NAME)."""
    last = change.key.rsplit(".", 1)[-1]
    names = [last] if last and not change.key.startswith("[") else []
    for text in (change.new, change.old):
        for line in (text or "").split("\n"):
            words = line.split()
            flag = next((w for w in words if w.startswith("-") and len(w) > 1), None) if change.key else \
                (words[0] if words else None)
            if flag and flag not in names:
                names.append(flag)
    old, new = set(_word_names(change.old or "")), set(_word_names(change.new or ""))
    names += [w for w in (*_word_names(change.new or ""), *_word_names(change.old or ""))
              if w and w not in names and (w in old) != (w in new)]
    return list(dict.fromkeys(names))


def _named(group: Grouped, known: Known) -> list[str]:
    """The sources of the flags and variables the change names; ``fleet.nodes[].x`` when each rank's comes
    from its own node."""
    found = []
    for name in _names(group.change):
        paths = {known[r][name] for r in (group.ranks or tuple(known)) if r in known and name in known[r]}
        text = (dotted(paths.pop()) if len(paths) == 1 else field_name(min(paths, key=str))) if paths else None
        if text and text not in found:
            found.append(text)
    return found


def _spelled(change: Change, profile: list[ProfileChange]) -> list[str]:
    """Changed profile values the change spells out on both sides (or on the one it has): a long value as
    written, a docker size (32g) also as a word in Kubernetes' form (32Gi)."""
    def has(text: str | None, value: object) -> bool:
        if value is None or value == UNSET:
            return False
        shown, size = str(value), _DOCKER_SIZE.match(str(value))
        if size:
            return bool({shown, f"{size[1]}{size[2].upper()}i"} & set(_word_names(text or "")))
        return len(shown) >= _MIN_SPELLED and shown in (text or "")

    return [c.path for c in profile
            if (change.new is None or has(change.new, c.new)) and (change.old is None or has(change.old, c.old))]


def _derived(group: Grouped, changed: Known, profile: list[ProfileChange]) -> list[str]:
    """A derived fleet.env value: the changed flags and variables, and profile keys, it is derived from."""
    key = group.change.key
    spec = next((d for prefix, d in DERIVED_FROM.items() if key.startswith(prefix)), None)
    if group.change.file != "fleet/fleet.env" or spec is None:
        return []
    ranks = group.ranks or tuple(changed)
    inputs = [dotted(path) for r in ranks for name, path in changed.get(r, {}).items()
              if name.startswith(spec.inputs)]
    return [*dict.fromkeys(inputs), *(c.path for c in profile if c.path.startswith(spec.fields))]


def changed_inputs(old: LaunchPlan, new: LaunchPlan) -> Known:
    """Per rank: each flag or variable whose value differs between the two plans, with its source."""
    before, after = _plan_inputs(old), _plan_inputs(new)
    out: Known = {}
    for rank in sorted({*before, *after}):
        a, b = before.get(rank, {}), after.get(rank, {})
        out[rank] = {name: (b.get(name) or a[name])[0] for name in [*b, *(n for n in a if n not in b)]
                     if (a.get(name) or (None, None))[1] != (b.get(name) or (None, None))[1]}
    return out


def source(group: Grouped, known: Known, changed: Known, profile: list[ProfileChange]) -> str | None:
    """The profile key (or keys) behind one artifact change; None when none is found."""
    found = _named(group, known) or _spelled(group.change, profile) or _derived(group, changed, profile)
    return ", ".join(dict.fromkeys(found)) or None
