"""Compare two profiles' rendered files: key by key where a file has keys, line by line elsewhere.

Pure: takes {path: bytes} of each side with the ranks' folder names, returns the changes grouped by the
ranks they happen on. A rename of the profile (or a release label) is folded into one "follows" line
instead of churning every path and header: the old text is rewritten with the rename before comparing.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

# Unit-like files systemd reads as [Section] Key=Value.
UNIT_SUFFIXES = (".service", ".timer", ".socket", ".path", ".mount", ".target")
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_UNIT_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9]*)=(.*)$")
_MASK = "\x00{}\x00"


@dataclass(frozen=True, slots=True)
class Change:
    """One changed key (or block of lines, key "") of one file; old/new None when absent on that side."""

    file: str  # the file inside a rank's folder for rank files, else its path under generated/<profile>/
    key: str
    old: str | None
    new: str | None


@dataclass(frozen=True, slots=True)
class Grouped:
    """A change with the ranks it happens on (empty for a shared file's key of no rank); ``shared`` when the
    file is not in a rank's folder (plan.json, fleet/, k8s/), though a key of it may belong to a rank."""

    ranks: tuple[int, ...]
    change: Change
    shared: bool = False


@dataclass(frozen=True, slots=True)
class Fold:
    """A rename folded out of the artifacts: the profile path, its two values, what followed it."""

    path: str
    old: str
    new: str
    lines: int = 0
    files: int = 0
    renamed: int = 0


@dataclass(slots=True)
class Side:
    """One side's rendered files and the folder name of each rank."""

    files: dict[str, bytes]
    rank_dirs: dict[str, int]


@dataclass(slots=True)
class Comparison:
    """The outcome: identical bytes or not, the grouped changes, the folded renames, the file renames."""

    identical: bool
    changes: list[Grouped] = field(default_factory=list)
    folds: list[Fold] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)


def file_kind(path: str) -> str:
    """env, unit, json, yaml or lines: how a file is compared."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".env"):
        return "env"
    if name.endswith(UNIT_SUFFIXES):
        return "unit"
    if name.endswith(".json"):
        return "json"
    if name.endswith((".yaml", ".yml")):
        return "yaml"
    return "lines"


class Renamer:
    """Rewrites old text with the folded renames; values that contain a rename's old text (an image tag
    holding the release name) are masked first, so their change stays visible."""

    def __init__(self, folds: Sequence[tuple[str, str, str]], claimers: Iterable[str]) -> None:
        self.folds = sorted(folds, key=lambda f: -len(f[1]))
        # Whole words only: a name "prod" does not rename "production", "1.7" is not part of "1.7.1".
        self.patterns = [re.compile(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9]|\.[0-9])")
                         for _, old, _ in self.folds]
        self.claimers = sorted({c for c in claimers if any(old in c for _, old, _ in self.folds)},
                               key=lambda c: (-len(c), c))
        self.counts: dict[str, list[int]] = {path: [0, 0] for path, _, _ in self.folds}

    def line(self, text: str) -> tuple[str, set[str]]:
        """The line with every folded rename applied, and the fold paths that applied."""
        masked = text
        for index, claimer in enumerate(self.claimers):
            masked = masked.replace(claimer, _MASK.format(index))
        used = set()
        for (path, _, new), pattern in zip(self.folds, self.patterns, strict=True):
            masked, count = pattern.subn(functools.partial(_constant, new), masked)
            if count:
                used.add(path)
        for index, claimer in enumerate(self.claimers):
            masked = masked.replace(_MASK.format(index), claimer)
        return masked, used

    def text(self, text: str) -> str:
        """The whole file rewritten; counts lines and files per fold."""
        lines = text.split("\n")
        touched: set[str] = set()
        for index, line in enumerate(lines):
            lines[index], used = self.line(line)
            for path in used:
                self.counts[path][0] += 1
            touched |= used
        for path in touched:
            self.counts[path][1] += 1
        return "\n".join(lines)


def _constant(text: str, _: re.Match[str]) -> str:
    return text


def _env_items(text: str) -> tuple[dict[str, str], list[str]]:
    items: dict[str, str] = {}
    rest = []
    for line in text.splitlines():
        found = _ENV_LINE.match(line)
        if found and not line.startswith("#"):
            items[found[1]] = found[2]
        else:
            rest.append(line)
    return items, rest


def _unit_items(text: str) -> tuple[dict[str, str], list[str]]:
    items: dict[str, str] = {}
    rest = []
    section = ""
    for line in text.splitlines():
        found = _UNIT_LINE.match(line)
        if line.startswith("[") and line.rstrip().endswith("]"):
            section = line.strip()
            rest.append(line)
        elif found:
            key = f"{section} {found[1]}"
            items[key] = f"{items[key]}\n{found[2]}" if key in items else found[2]
        else:
            rest.append(line)
    return items, rest


def _leaf(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys to leaves; lists of scalars stay whole (compared as sequences)."""
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(data, list) and data and any(isinstance(item, dict | list) for item in data):
        out = {}
        for index, item in enumerate(data):
            out.update(flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix: data}


def _structured(kind: str, text: str) -> dict[str, Any] | None:
    try:  # a file that does not parse is compared line by line
        if kind == "json":
            return flatten(json.loads(text))
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except (ValueError, yaml.YAMLError):
        return None
    out: dict[str, Any] = {}
    for index, doc in enumerate(docs):
        meta = doc.get("metadata", {}) if isinstance(doc, dict) else {}
        name = f"{doc.get('kind', 'doc')}/{meta.get('name', index)}" if isinstance(meta, dict) else str(index)
        out.update(flatten(doc, name if len(docs) > 1 else ""))
    return out


def _sequence_changes(file: str, key: str, a: list[Any], b: list[Any]) -> list[Change]:
    """A list of words compared as a sequence: each changed run with the word before it as context."""
    words_a, words_b = [_leaf(x) for x in a], [_leaf(x) for x in b]
    out = []
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        context = 1 if i1 > 0 and j1 > 0 else 0
        old = " ".join(words_a[i1 - context:i2]) or None
        new = " ".join(words_b[j1 - context:j2]) or None
        out.append(Change(file, key, old, new))
    return out


# A one-line value longer than this is compared word by word (a whole argv in one variable).
LONG_VALUE = 120


_WORDS = re.compile(r"[^\s,()']+")  # fleet.env's bash arrays of comma-joined names count name by name


def _long_line(value: str) -> bool:
    return len(value) > LONG_VALUE and "\n" not in value


def _keyed_changes(file: str, a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    out = []
    for key in [*b, *(k for k in a if k not in b)]:
        old, new = a.get(key), b.get(key)
        if key in a and key in b and old == new:
            continue
        if isinstance(old, list) and isinstance(new, list):
            out += _sequence_changes(file, key, old, new)
        elif isinstance(old, str) and isinstance(new, str) and _long_line(old) and _long_line(new):
            # A command line, or lists of names in one value: the words that changed.
            out += _sequence_changes(file, key, _WORDS.findall(old), _WORDS.findall(new))
        else:
            out.append(Change(file, key, None if key not in a else _leaf(old), None if key not in b else _leaf(new)))
    return out


def _compared(line: str) -> str:
    """A line as compared: trailing spaces, and a shell line continuation, are not what changed (a flag added
    after the last one moves the continuation, not the line before it)."""
    return line.rstrip().removesuffix("\\").rstrip()


def line_changes(file: str, a: list[str], b: list[str]) -> list[Change]:
    """Blocks of changed lines (trailing spaces and continuations ignored), in file order."""
    a, b = [line.rstrip() for line in a], [line.rstrip() for line in b]
    out = []
    matcher = difflib.SequenceMatcher(None, [_compared(x) for x in a], [_compared(x) for x in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out.append(Change(file, "", "\n".join(a[i1:i2]) if i2 > i1 else None,
                              "\n".join(b[j1:j2]) if j2 > j1 else None))
    return out


def file_changes(name: str, kind: str, old: str | None, new: str | None) -> list[Change]:
    """What changed in one file (``old`` None: added; ``new`` None: removed)."""
    if old is None or new is None:
        return [Change(name, "(file)", None if old is None else "present", None if new is None else "present")]
    if old == new:
        return []
    if kind in ("env", "unit"):
        split = _env_items if kind == "env" else _unit_items
        (items_a, rest_a), (items_b, rest_b) = split(old), split(new)
        return [*_keyed_changes(name, items_a, items_b), *line_changes(name, rest_a, rest_b)]
    if kind in ("json", "yaml"):
        data_a, data_b = _structured(kind, old), _structured(kind, new)
        if data_a is not None and data_b is not None:
            return _keyed_changes(name, data_a, data_b)
    return line_changes(name, old.splitlines(), new.splitlines())


def _rank_of(path: str, rank_dirs: dict[str, int]) -> tuple[int | None, str]:
    head, sep, rest = path.partition("/")
    if sep and head in rank_dirs:
        return rank_dirs[head], rest
    return None, path


_PER_RANK_KEY = re.compile(r"^(?:ranks\[(\d+)\]\.?(.*)|rank(\d+)_(.*))$")


def _rank_split(change: Change) -> tuple[int | None, Change]:
    """A key of a shared file that belongs to one rank: plan.json's ``ranks[2].env.X`` (as ``ranks[].env.X``)
    and fleet.env's ``rank2_docker`` (as ``rank_docker``)."""
    found = _PER_RANK_KEY.match(change.key)
    if not found:
        return None, change
    if found[1] is not None:
        return int(found[1]), Change(change.file, f"ranks[].{found[2]}", change.old, change.new)
    return int(found[3]), Change(change.file, f"rank_{found[4]}", change.old, change.new)


# plan.json restates each variable in its env file and its source, and the engine argv inside the docker argv;
# fleet/audit.json restates the whole plan: those copies change with the one value they restate.
AUDIT_FILE = "fleet/audit.json"
_ENV_COPY = re.compile(r"^ranks\[\]\.(?:env_files\.[A-Za-z0-9_-]+\.env|sources\.env)\.(.+)$")


def _without_copies(changes: list[Grouped]) -> list[Grouped]:
    """The changes, less plan.json's restatements of a change already listed for the same ranks and
    audit.json's of the plan (only its appearing or going is shown)."""
    plan = [g for g in changes if g.change.file == "plan.json"]
    env = {(g.ranks, g.change.key.removeprefix("ranks[].env."))
           for g in plan if g.change.key.startswith("ranks[].env.")}
    argv = {(g.ranks, g.change.old, g.change.new) for g in plan if g.change.key == "ranks[].docker_argv"}

    def copy(group: Grouped) -> bool:
        if group.change.file == AUDIT_FILE:
            return group.change.key != "(file)"
        if group.change.file != "plan.json":
            return False
        found = _ENV_COPY.match(group.change.key)
        if found:
            return (group.ranks, found[1]) in env
        return group.change.key == "ranks[].engine_argv" and (group.ranks, group.change.old, group.change.new) in argv

    return [g for g in changes if not copy(g)]


def compare(old: Side, new: Side, renamer: Renamer) -> Comparison:
    """Every file of both sides, renamed files matched, changes grouped by identical change over ranks."""
    result = Comparison(identical=old.files == new.files)
    if result.identical:
        return result
    new_by_id = {_rank_of(path, new.rank_dirs): path for path in new.files}
    matched: dict[str, str] = {}
    for path in old.files:
        rank, rest = _rank_of(path, old.rank_dirs)
        target = new_by_id.get((rank, renamer.line(rest)[0]))
        if target is not None:
            matched[path] = target
            if target != path:
                result.renamed.append((path, target))
    grouped: dict[Change, list[int]] = {}
    shared: set[Change] = set()
    targets = set(matched.values())
    pairs = [*matched.items(), *((p, None) for p in old.files if p not in matched),
             *((None, p) for p in new.files if p not in targets)]
    for old_path, new_path in sorted(pairs, key=lambda p: p[1] or p[0] or ""):
        path = new_path or old_path or ""
        rank, name = _rank_of(path, new.rank_dirs if new_path else old.rank_dirs)
        before = renamer.text(old.files[old_path].decode()) if old_path else None
        after = new.files[new_path].decode() if new_path else None
        for found in file_changes(name, file_kind(name), before, after):
            change_rank, change = _rank_split(found) if rank is None else (rank, found)
            grouped.setdefault(change, [])
            if rank is None:
                shared.add(change)
            if change_rank is not None:
                grouped[change].append(change_rank)
    result.changes = _without_copies([Grouped(tuple(sorted(set(ranks))), change, change in shared)
                                      for change, ranks in grouped.items()])
    result.folds = [Fold(path, old_value, new_value, renamer.counts[path][0], renamer.counts[path][1],
                         renamed=len(result.renamed) if path == "name" else 0)
                    for path, old_value, new_value in renamer.folds]
    return result


UNSET = "(unset)"


@dataclass(frozen=True, slots=True)
class ProfileChange:
    """One changed value of the resolved profile, with where each side set it."""

    path: str
    old: Any
    new: Any
    old_origin: str | None
    new_origin: str | None


@dataclass(frozen=True, slots=True)
class ProfileDiff:
    """Everything `diff` reports: the profile-level changes and what they do to the rendered files."""

    old_name: str
    new_name: str
    profile: list[ProfileChange]
    artifacts: Comparison
    sources: dict[Change, str]  # the profile key behind an artifact change
    unified: str = ""
    stale: tuple[str, ...] = ()  # free text still stating a value that changed (diff_stale)

    @property
    def identical(self) -> bool:
        """The two profiles render byte-identical files."""
        return self.artifacts.identical
