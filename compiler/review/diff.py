"""`spark-compile diff OLD NEW`: what a profile change means, at the profile and in every rendered file.

Each side is a profile path or GITREV:path (read through `git show`, extends chains too, no checkout).
Exit 0 when the two render byte-identical files, 1 when they differ or a side has errors (its findings are
printed, as by `check`), 2 when a side cannot be read.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from spark_compile.common.errors import EXIT_FINDINGS, EXIT_OK, InputError, RejectedError
from spark_compile.common.findings import dotted
from spark_compile.common.secrets import redact
from spark_compile.pipeline import Planned, planned, run
from spark_compile.review.artifact_diff import UNSET, ProfileChange, ProfileDiff, Renamer, Side, compare
from spark_compile.review.diff_format import FORMATS, md
from spark_compile.review.diff_sources import changed_inputs, known_sources, source
from spark_compile.review.diff_stale import stale_mentions
from spark_compile.stages.load import MAX_BYTES, Document, LoadError, decode, load_file, oversized, parse_text
from spark_compile.stages.report import render
from spark_compile.stages.resolve import BlobReader, Resolved


def _git_path(path: Path) -> str:
    return str(PurePosixPath(*Path(os.path.normpath(path)).parts))


def _git_object(rev: str, path: Path) -> tuple[str, int] | None:
    """The blob at ``rev:path`` (its id and size), following symlinks inside the tree as the working tree's
    open does (a release's config.json is often a link to the one beside the base); None when there is none."""
    rel = _git_path(path)
    if not rel.isprintable():  # one object name a line: a newline in a path would name a second one
        return None
    proc = subprocess.run(["git", "cat-file", "--batch-check", "--follow-symlinks"],
                          input=f"{rev}:./{rel}\n".encode(), capture_output=True, check=False)
    words = proc.stdout.decode(errors="replace").split()
    if proc.returncode != 0 or len(words) != 3 or words[1] != "blob" or not words[2].isdigit():
        return None
    return words[0], int(words[2])


def _git_exists(rev: str) -> Any:
    def exists(path: Path) -> bool:
        return _git_object(rev, path) is not None

    return exists


def _git_blob(rev: str) -> BlobReader:
    """A file at ``rev``, as read_bytes reads one from the working tree (at most MAX_BYTES + 1 bytes)."""
    def blob(path: Path) -> bytes:
        shown = f"{rev}:{_git_path(path)}"
        found = _git_object(rev, path)
        if found is None:
            raise InputError(f"{shown}: no such file at that revision")
        if found[1] > MAX_BYTES:  # sized before read: never a huge blob in memory
            raise oversized(shown)
        proc = subprocess.run(["git", "cat-file", "blob", found[0]], capture_output=True, check=False)
        if proc.returncode != 0:
            raise InputError(f"{shown}: git could not read it")
        return proc.stdout

    return blob


def _git_reader(rev: str) -> Any:
    def read(path: Path, display: str) -> Document:
        shown = f"{rev}:{_git_path(path)}"
        return parse_text(decode(_git_blob(rev)(path), shown), shown)

    return read


def load_side(spec: str) -> Planned:
    """One side through the pipeline: a path, or GITREV:path; RejectedError when it has errors."""
    rev, sep, rest = spec.partition(":")
    from_git = bool(sep and rev) and not Path(spec).exists()
    if from_git and (rev.startswith("-") or not rev.isprintable()):
        raise InputError(f"{spec[:80]!r}: a revision may not start with '-' (git would read it as an option) or "
                         "hold control characters")
    if from_git:
        return planned(run(Path(rest), display=spec, reader=_git_reader(rev), exists=_git_exists(rev),
                           blob=_git_blob(rev)))
    return planned(run(Path(spec)))


def _flatten(data: Any, prefix: tuple[str | int, ...] = ()) -> dict[tuple[str | int, ...], Any]:
    if isinstance(data, dict) and data:
        out: dict[tuple[str | int, ...], Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, (*prefix, key)))
        return out
    if isinstance(data, list) and data and all(isinstance(item, dict) for item in data):
        out = {}
        for index, item in enumerate(data):
            out.update(_flatten(item, (*prefix, index)))
        return out
    return {prefix: data}


def _origin(resolved: Resolved, path: tuple[str | int, ...]) -> str | None:
    """Where ``path`` was written; for a key the merge removed, the `!delete` that removed it (the nearest file
    of the chain that writes the key)."""
    if path in resolved.origins:
        pos = resolved.origins[path].spot.value
        return f"{pos.file}:{pos.line}"
    spots = (resolved.documents[d].spots.get(path) for d in resolved.chain if d in resolved.documents)
    spot = next((s for s in spots if s is not None), None)
    return f"{spot.value.file}:{spot.value.line}" if spot else None


def model_value(model: Any, path: tuple[str | int, ...]) -> Any:
    """The value the typed profile holds at ``path`` (its default when the file leaves it out), or UNSET."""
    for part in path:
        indexable = (isinstance(model, dict) and part in model) or (
            isinstance(model, list | tuple) and isinstance(part, int) and part < len(model))
        if isinstance(model, BaseModel) and isinstance(part, str) and part in type(model).model_fields:
            model = getattr(model, part)
        elif indexable:
            model = model[part]
        else:
            return UNSET
    if isinstance(model, BaseModel | dict | list | tuple) or model is None:
        return UNSET
    return model


class Default(str):
    """A value the profile left out, shown as ``60 (default)``."""

    def __new__(cls, value: Any) -> Default:
        shown = value if isinstance(value, str) else json.dumps(getattr(value, "value", value))
        return super().__new__(cls, f"{shown} (default)")


def _default(value: Any) -> Any:
    return UNSET if value is UNSET else Default(value)


def profile_changes(old: Resolved, new: Resolved, old_model: Any = None, new_model: Any = None,
                    ) -> list[ProfileChange]:
    """Changed leaf values of the two merged profiles, in the new profile's order; a side that leaves a key
    out shows the typed profile's default when the models are given."""
    a, b = _flatten(old.data), _flatten(new.data)
    changes = []
    for path in [*b, *(p for p in a if p not in b)]:
        if a.get(path, UNSET) != b.get(path, UNSET) or (path in a) != (path in b):
            before = a.get(path, _default(model_value(old_model, path)) if old_model else UNSET)
            after = b.get(path, _default(model_value(new_model, path)) if new_model else UNSET)
            changes.append(ProfileChange(dotted(path), before, after, _origin(old, path), _origin(new, path)))
    return changes


# Profile paths whose change renames things rather than changing them: folded into one line.
FOLDED = ("name", "release")


def _renamer(old: Resolved, changes: list[ProfileChange]) -> Renamer:
    folds = [(c.path, c.old, c.new) for c in changes
             if c.path in FOLDED and isinstance(c.old, str) and isinstance(c.new, str) and c.old]
    written = [value for path, value in _flatten(old.data).items()
               if isinstance(value, str) and dotted(path) not in FOLDED]
    return Renamer(folds, written)


def _side(validated: Planned) -> Side:
    plan = validated.plan
    return Side({f.path: f.content for f in validated.files},
                {rank.directory: rank.rank for rank in plan.ranks})


def diff_profiles(old: Planned, new: Planned, *, unified: bool = False) -> ProfileDiff:
    """Compare two validated profiles (pure apart from rendering)."""
    changes = profile_changes(old.resolved, new.resolved, old.profile, new.profile)
    comparison = compare(_side(old), _side(new), _renamer(old.resolved, changes))
    known, changed = known_sources(old.plan, new.plan), changed_inputs(old.plan, new.plan)
    renders = [c for c in changes if c.path not in FOLDED]  # a rename is said once, as a fold
    sources = {g.change: s for g in comparison.changes if (s := source(g, known, changed, renders))}
    patch = unified_diff(old, new, dict(comparison.renamed)) if unified else ""
    stale = tuple(stale_mentions(new.resolved, changes))
    return ProfileDiff(old.resolved.path, new.resolved.path, changes, comparison, sources, patch, stale)


def unified_diff(old: Planned, new: Planned, renamed: dict[str, str] | None = None) -> str:
    """The unified diff of every rendered file of the two profiles; renamed files are paired."""
    a = {f.path: f.content.decode() for f in old.files}
    b = {f.path: f.content.decode() for f in new.files}
    pairs = dict(renamed or {})
    pairs.update({path: path for path in a if path in b and path not in pairs})
    targets = set(pairs.values())
    rows = [*pairs.items(), *((p, None) for p in a if p not in pairs), *((None, p) for p in b if p not in targets)]
    chunks = []
    for before, after in sorted(rows, key=lambda r: r[1] or r[0] or ""):
        lines = difflib.unified_diff(a.get(before or "", "").splitlines(keepends=True),
                                     b.get(after or "", "").splitlines(keepends=True),
                                     f"a/{before}" if before else "/dev/null", f"b/{after}" if after else "/dev/null")
        chunks.append("".join(lines))
    return redact("".join(chunks))


def load_both(old_spec: str, new_spec: str) -> tuple[Planned, Planned]:
    """Both sides of a diff."""
    return load_side(old_spec), load_side(new_spec)


def run_diff(old_spec: str, new_spec: str, *, unified: bool = False, fmt: str = "text", detail: bool = False) -> int:
    """Print the diff of two profiles; return the exit code (from the artifacts)."""
    old, new = load_both(old_spec, new_spec)
    result = diff_profiles(old, new, unified=unified)
    sys.stdout.write(FORMATS[fmt](result, detail))
    return EXIT_OK if result.identical else int(EXIT_FINDINGS)


def _verify_revision(rev: str) -> bool:
    """Refuse a revision git cannot name a commit by here (misspelt, or outside a repository); False for
    HEAD of a repository without a commit yet (the first commit's pre-commit hook: every path is new)."""
    if not rev or rev.startswith("-") or not rev.isprintable():
        raise InputError(f"--since {rev[:80]!r}: a revision may not be empty, start with '-' or hold control "
                         "characters")
    try:
        proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                              capture_output=True, check=False)
    except OSError as exc:
        raise InputError(f"--since {rev[:80]!r}: cannot run git: {exc.strerror or exc}") from None
    if proc.returncode == 0:
        return True
    if rev == "HEAD" and _unborn_head():
        return False
    where = "here" if _in_repository() else "(the current directory is not in a git repository)"
    raise InputError(f"--since {rev[:80]!r}: git knows no commit by that name {where}; name a branch, tag "
                     "or commit (e.g. --since HEAD)")


def _in_repository() -> bool:
    proc = subprocess.run(["git", "rev-parse", "--git-dir"], capture_output=True, check=False)
    return proc.returncode == 0


def _unborn_head() -> bool:
    """HEAD names a branch with no commit yet (a repository before its first commit)."""
    proc = subprocess.run(["git", "symbolic-ref", "--quiet", "HEAD"], capture_output=True, check=False)
    return proc.returncode == 0 and _in_repository()


def _header(fmt: str, text: str) -> str:
    return f"#### {md(text)}\n\n" if fmt == "markdown" else f"{text}\n"


def _extended(rev: str, path: str) -> str | None:
    """The profile a new file extends, when it exists at ``rev``: a new release is diffed against its parent."""
    try:
        ref = load_file(Path(path)).data.get("extends")
    except (InputError, LoadError):  # the check hook reports why it cannot be read
        return None
    parent = os.path.normpath(Path(path).parent / ref) if isinstance(ref, str) and ref else None
    return parent if parent is not None and _git_exists(rev)(Path(parent)) else None


def _since_one(rev: str, path: str, has_commits: bool, fmt: str, detail: bool) -> int:
    """One path against itself at ``rev`` (a new one against the profile it extends there)."""
    old = path if has_commits and _git_exists(rev)(Path(path)) else _extended(rev, path) if has_commits else None
    if old is None:
        sys.stdout.write(_header(fmt, f"{path}: new profile (not in {rev})"))
        return EXIT_OK
    if old != path:
        sys.stdout.write(_header(fmt, f"{path}: new profile, against the profile it extends ({old} at {rev})"))
    try:
        sides = load_both(f"{rev}:{old}", path)
    except RejectedError as stop:  # the check hook prints these findings; one line says why no diff
        sys.stdout.write(_header(fmt, f"{path}: not diffed: {render(stop.findings, 'summary', 1).rstrip()}"))
        return EXIT_FINDINGS
    sys.stdout.write(FORMATS[fmt](diff_profiles(*sides), detail))
    return EXIT_OK


def run_since(rev: str, paths: list[str], *, fmt: str = "text", detail: bool = False) -> int:
    """Each path against itself at ``rev`` (the pre-commit hook), a new one against its parent: prints every
    diff; exits 0 (it informs), 1 when a side has errors, 2 when a side cannot be read or ``rev`` names no
    commit."""
    has_commits = _verify_revision(rev)
    status = EXIT_OK
    for path in paths:
        sys.stdout.write(_header(fmt, f"== {path} against {rev}"))
        status = max(status, _since_one(rev, path, has_commits, fmt, detail))
    return status
