"""`spark-compile history DIR`: per release of the `extends` chains in DIR, what changed in the profile and in
the rendered files, as one table (the release table an operator keeps by hand, generated)."""

from __future__ import annotations

import difflib
import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from spark_compile.common.errors import EXIT_OK, InputError, RejectedError
from spark_compile.pipeline import Planned
from spark_compile.review.artifact_diff import Grouped, ProfileDiff
from spark_compile.review.diff import diff_profiles, load_side
from spark_compile.review.diff_format import ARROW, fold_text, md, ranks_text, show
from spark_compile.spec.model import ReleaseNotes
from spark_compile.stages.load import LoadError, load_file
from spark_compile.stages.resolve import extends_roots


@dataclass(frozen=True, slots=True)
class Release:
    """One row: the release, its file, the release it extends, its date and notes, and the two columns."""

    release: str
    file: str
    parent: str | None
    date: str | None
    notes: tuple[str, ...]  # why, and where to read more: the first lines of the profile column
    profile: tuple[str, ...]
    artifacts: tuple[str, ...]

    def left(self) -> list[str]:
        """The release column's lines, the same in every format."""
        return [self.release, *([self.date] if self.date else []), self.file,
                *([f"after {self.parent}"] if self.parent else [])]


def _extends(path: Path) -> Path | None:
    try:
        data = load_file(path, os.path.relpath(path)).data  # named as the pipeline will name it
    except LoadError as failed:
        raise RejectedError([failed.finding]) from None
    parent = data.get("extends") if isinstance(data, dict) else None
    return Path(os.path.realpath(path.parent / parent)) if isinstance(parent, str) else None


def chain_order(directory: Path) -> list[tuple[Path, Path | None]]:
    """Every profile of DIR with its parent in DIR (None for a root), parents before children."""
    links = sorted(directory.glob("*.yaml"))
    files = sorted(Path(os.path.realpath(p)) for p in links)
    roots = extends_roots(directory / "profile.yaml")
    for link, real in zip(links, map(os.path.realpath, links), strict=True):
        if not any(os.path.commonpath([real, root]) == root for root in roots):
            raise InputError(f"{link} leads to {real}, outside the repository ({', '.join(roots)}): history reads "
                             "only the repository's profiles; remove the link or copy the profile in")
    if not files:
        raise InputError(f"{directory}: no profiles (*.yaml) here")
    parents = {path: _extends(path) for path in files}
    children: dict[Path | None, list[Path]] = {}
    for path, parent in parents.items():
        children.setdefault(parent if parent in parents else None, []).append(path)
    ordered: list[tuple[Path, Path | None]] = []

    def visit(parent: Path | None) -> None:
        for child in sorted(children.get(parent, []), key=lambda p: _version_key(p.stem)):
            ordered.append((child, parent))
            visit(child)

    visit(None)
    return ordered


def _version_key(stem: str) -> list[tuple[int, int | str]]:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in stem.replace("-", ".").split(".")]


def _elide(old: str, new: str) -> tuple[str, str]:
    """Two long values with a long shared head: the head cut at its last ``/`` or ``:`` and shown as ``…``."""
    head = old[:next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), min(len(old), len(new)))]
    cut = max(head.rfind(":"), head.rfind("/"))
    if cut < 12:
        return old, new
    return "…" + old[cut:], "…" + new[cut:]


def _words(old: str, new: str) -> str:
    """One changed line as its changed words with one word of context: ``--flag 8 → 16``."""
    a, b = old.split(), new.split()
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        context = a[i1 - 1] + " " if i1 > 0 and j1 > 0 and a[i1 - 1].startswith("-") else ""
        before, after = _elide(" ".join(a[i1:i2]) or "(none)", " ".join(b[j1:j2]) or "(none)")
        parts.append(f"{context}{show(before)} {ARROW} {show(after)}")
    return "; ".join(parts)


def _artifact_entry(group: Grouped, total: int) -> list[str]:
    change = group.change
    ranks = "" if len(group.ranks) == total else f" ({ranks_text(group.ranks)})"
    label = f"{change.file}{ranks}"
    if change.key:
        before, after = _elide(show(change.old), show(change.new))
        return [f"{label}: {change.key} {before} {ARROW} {after}"]
    old = (change.old or "").split("\n") if change.old is not None else []
    new = (change.new or "").split("\n") if change.new is not None else []
    if len(old) == len(new):
        return [f"{label}: {_words(a, b)}" for a, b in zip(old, new, strict=True)]
    return [f"{label}: - {show(line.strip())}" for line in old] + [f"{label}: + {show(line.strip())}" for line in new]


def _artifact_column(result: ProfileDiff, total: int) -> tuple[str, ...]:
    """What the rank files gained or lost, item by item; files that restate them (plan, README, fleet
    scripts) only named."""
    entries = [fold_text(fold) for fold in result.artifacts.folds if fold.path != "release"]
    others = []
    for group in result.artifacts.changes:
        if not group.shared:
            entries += _artifact_entry(group, total)
        elif group.change.file not in others:
            others.append(group.change.file)
    if others:
        entries.append("also: " + ", ".join(others))
    if result.identical:
        entries.append("(byte-identical)")
    return tuple(dict.fromkeys(entries))


def _profile_column(result: ProfileDiff) -> tuple[str, ...]:
    out = []
    for change in result.profile:
        if change.path == "release" or change.path.startswith("release_notes"):  # shown as the row's own notes
            continue
        before, after = _elide(show(change.old), show(change.new))
        out.append(f"{change.path}: {before} {ARROW} {after}")
    return tuple(out)


def _own_notes(validated: Planned) -> ReleaseNotes | None:
    """The release notes this file writes itself: a parent's describe the parent's release, not this one."""
    notes = validated.profile.release_notes
    origin = validated.resolved.origins.get(("release_notes",))
    return notes if notes is not None and origin is not None and not origin.via else None


def _first_release(validated: Planned) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The first release's two columns: what it deploys, and the files that deploys it."""
    profile, plan = validated.profile, validated.plan
    nodes, engine = len(profile.fleet.nodes), profile.engine
    fabric = f" over {profile.fleet.fabric.kind}" if profile.fleet.fabric is not None and nodes > 1 else ""
    speculative = engine.speculative.algorithm
    deploys = [f"first release: {profile.model.served_name} on {nodes} x {profile.hardware}{fabric}",
               f"TP {engine.parallel.tp}, EP {engine.parallel.ep}"
               + (f", {speculative} speculative decoding" if speculative != "none" else ""),
               f"image {engine.image}"]
    files = len(validated.files)
    ranks = len(plan.ranks)
    return tuple(deploys), (f"{files} files: per rank (x{ranks}) docker-run.sh, a unit, env files, preflight.sh; "
                            "the fleet's data; README.md, plan.json, MANIFEST.json",)


def _row(path: Path, parent: Path | None, validated: dict[Path, Planned]) -> Release:
    new = validated[path]
    release = new.profile.release or path.stem
    own = _own_notes(new)
    date = own.date if own else None
    notes = (f"why: {own.reason}", *([f"see: {own.link}"] if own.link else [])) if own else ()
    if parent is None:
        profile, artifacts = _first_release(new)
        return Release(release, path.name, None, date, notes, profile, artifacts)
    result = diff_profiles(validated[parent], new)
    parent_release = validated[parent].profile.release or parent.stem
    total = len(new.plan.ranks)
    return Release(release, path.name, parent_release, date, notes, _profile_column(result),
                   _artifact_column(result, total))


def history(directory: Path) -> list[Release]:
    """The rows of DIR's release table, parents first."""
    order = chain_order(directory)
    base = Path.cwd()
    ordered = {path for path, _ in order}
    for path in sorted(Path(os.path.realpath(p)) for p in directory.glob("*.yaml")):
        if path not in ordered:  # in an extends cycle: loading it reports the cycle with its finding
            load_side(os.path.relpath(path, base))
            raise InputError(f"{path}: its extends chain never reaches a profile without `extends`")
    validated = {path: load_side(os.path.relpath(path, base)) for path, _ in order}
    return [_row(path, parent, validated) for path, parent in order]


def text_table(rows: list[Release]) -> str:
    """The table for a terminal: one block of lines per release, columns padded."""
    head = ("release", "profile", "artifacts (every rank unless a rank is named)")
    width0 = max(len(head[0]), *(len(line) for r in rows for line in r.left()))
    width1 = max(len(head[1]), *(len(line) for r in rows for line in (*r.notes, *r.profile)))
    rule = f"{'-' * width0}-+-{'-' * width1}-+-{'-' * len(head[2])}"
    out = [f"{head[0]:<{width0}} | {head[1]:<{width1}} | {head[2]}", rule]
    for row in rows:
        for a, b, c in itertools.zip_longest(row.left(), (*row.notes, *row.profile), row.artifacts, fillvalue=""):
            out.append(f"{a:<{width0}} | {b:<{width1}} | {c}".rstrip())
        out.append(rule)
    return "\n".join(out) + "\n"


def markdown_table(rows: list[Release]) -> str:
    """The same table for a wiki or a pull request."""
    out = ["| release | profile | artifacts |", "|---|---|---|"]
    for row in rows:
        out.append(f"| {'<br>'.join(md(x) for x in row.left())} | "
                   f"{'<br>'.join(md(x) for x in (*row.notes, *row.profile))} | "
                   f"{'<br>'.join(md(x) for x in row.artifacts)} |")
    return "\n".join(out) + "\n"


def run_history(directory: Path, fmt: str = "text") -> int:
    """Print the release table of DIR."""
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    rows = history(directory)
    sys.stdout.write(markdown_table(rows) if fmt == "markdown" else text_table(rows))
    return EXIT_OK
