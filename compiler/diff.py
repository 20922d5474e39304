"""`spark-compile diff OLD NEW`: what a profile change means, at the profile and at every artifact.

Each side is a profile path or GITREV:path (read through `git show`, extends chains too, no checkout).
Exit 0 when the two compile to the same thing, 1 when they differ, 2 when a side cannot be read.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from spark_compile.compile import Validated, validate
from spark_compile.errors import EXIT_FINDINGS, EXIT_OK, InputError
from spark_compile.launch_plan import LaunchPlan, Option, RankPlan, dotted
from spark_compile.load import Document, LoadError, parse_text
from spark_compile.report import render
from spark_compile.resolve import Resolved, resolve
from spark_compile.secrets import redact

UNSET = "(unset)"


@dataclass(frozen=True)
class ProfileChange:
    """One changed value of the resolved profile, with where each side set it."""

    path: str
    old: Any
    new: Any
    old_origin: str | None
    new_origin: str | None


@dataclass(frozen=True)
class ArtifactChange:
    """One changed variable, option or file of the ranks' artifacts."""

    ranks: tuple[int, ...]
    where: str  # engine.env, nccl.env, overlay.env, runtime, docker, engine, unit
    name: str
    old: str | None
    new: str | None


def _git_path(path: Path) -> str:
    return str(PurePosixPath(*Path(os.path.normpath(path)).parts))


def _git_exists(rev: str) -> Any:
    def exists(path: Path) -> bool:
        proc = subprocess.run(["git", "cat-file", "-e", f"{rev}:./{_git_path(path)}"], capture_output=True,
                              check=False)
        return proc.returncode == 0

    return exists


def _git_reader(rev: str) -> Any:
    def read(path: Path, display: str) -> Document:
        rel = _git_path(path)
        proc = subprocess.run(["git", "show", f"{rev}:./{rel}"], capture_output=True, check=False)
        if proc.returncode != 0:
            message = proc.stderr.decode(errors="replace").strip().splitlines()
            raise InputError(f"{rev}:{rel}: {message[-1] if message else 'git show failed'}")
        from spark_compile.load import decode

        return parse_text(decode(proc.stdout, f"{rev}:{rel}"), f"{rev}:{rel}")

    return read


def load_side(spec: str) -> Validated:
    """Resolve and validate one side: a path, or GITREV:path."""
    rev, sep, rest = spec.partition(":")
    from_git = bool(sep and rev) and not Path(spec).exists()
    try:
        if from_git:
            return validate(resolve(Path(rest), spec, _git_reader(rev), _git_exists(rev)))
        return validate(resolve(Path(spec)))
    except LoadError as failed:
        raise _BrokenProfileError([failed.finding]) from None


class _BrokenProfileError(Exception):
    def __init__(self, findings: list[Any]) -> None:
        super().__init__("broken profile")
        self.findings = findings


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
    if path not in resolved.origins:
        return None
    pos = resolved.origins[path].spot.value
    return f"{pos.file}:{pos.line}"


def profile_changes(old: Resolved, new: Resolved) -> list[ProfileChange]:
    """Changed leaf values of the two merged profiles, in the new profile's order."""
    a, b = _flatten(old.data), _flatten(new.data)
    changes = []
    for path in [*b, *(p for p in a if p not in b)]:
        if a.get(path, UNSET) != b.get(path, UNSET) or (path in a) != (path in b):
            changes.append(ProfileChange(dotted(path), a.get(path, UNSET), b.get(path, UNSET),
                                         _origin(old, path), _origin(new, path)))
    return changes


def _options(options: tuple[Option, ...]) -> dict[str, str]:
    """Options as {flag: value}; a bare flag is "on", a repeated option joins its values."""
    found: dict[str, list[str]] = {}
    for option in options:
        found.setdefault(option.flag, []).append(" ".join(option.values) or "on")
    return {flag: ", ".join(values) for flag, values in found.items()}


def _rank_items(rank: RankPlan) -> dict[tuple[str, str], str]:
    items: dict[tuple[str, str], str] = {}
    for env_file in rank.env_files:
        items.update({(env_file.name, name): value for name, value in env_file.values})
    items.update({("runtime.env", name): "(found at start)" for name in rank.runtime_env})
    entrypoint = Option("--entrypoint", rank.launcher[:1], ("engine", "launcher"))
    items.update({("docker", name): value for name, value in _options((*rank.docker_options, entrypoint)).items()})
    items[("docker", "image")] = rank.image
    if rank.launcher[1:]:
        items[("docker", "command")] = " ".join(rank.launcher[1:])
    items.update({("engine", name): value for name, value in _options(rank.engine_options).items()})
    return items


def artifact_changes(old: LaunchPlan, new: LaunchPlan) -> list[ArtifactChange]:
    """Per rank and per variable or option, what changed; identical changes of several ranks grouped."""
    grouped: dict[tuple[str, str, str | None, str | None], list[int]] = {}
    for rank in range(max(len(old.ranks), len(new.ranks))):
        a = _rank_items(old.ranks[rank]) if rank < len(old.ranks) else {}
        b = _rank_items(new.ranks[rank]) if rank < len(new.ranks) else {}
        for key in [*b, *(k for k in a if k not in b)]:
            if a.get(key, UNSET) != b.get(key, UNSET):
                grouped.setdefault((*key, a.get(key), b.get(key)), []).append(rank)
    return [ArtifactChange(tuple(ranks), where, name, old_value, new_value)
            for (where, name, old_value, new_value), ranks in grouped.items()]


def k8s_changes(old: Validated, new: Validated, plans: tuple[LaunchPlan, LaunchPlan]) -> list[ArtifactChange]:
    """Leaf by leaf changes of the Kubernetes manifests (the group's: no rank of their own)."""
    from spark_compile.k8s import diff_items

    a = diff_items(plans[0], old.planned()[0])
    b = diff_items(plans[1], new.planned()[0])
    return [ArtifactChange((), where, name, a.get((where, name)), b.get((where, name)))
            for where, name in [*b, *(k for k in a if k not in b)] if a.get((where, name)) != b.get((where, name))]


def _ranks_text(ranks: tuple[int, ...], total: int) -> str:
    del total
    if not ranks:
        return "group"
    if len(ranks) > 2 and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))


def _show(value: Any) -> str:
    if value is None or value == UNSET:
        return UNSET
    return redact(json.dumps(value) if not isinstance(value, str) else value)


def unified_diff(old: Validated, new: Validated) -> str:
    """The unified diff of every rendered file of the two profiles."""
    from spark_compile.compile import rendered_files

    a = {f.path: f.content.decode() for f in rendered_files(old)}
    b = {f.path: f.content.decode() for f in rendered_files(new)}
    chunks = []
    for path in sorted(set(a) | set(b)):
        before = a.get(path, "").splitlines(keepends=True)
        after = b.get(path, "").splitlines(keepends=True)
        lines = difflib.unified_diff(before, after, f"a/{path}" if path in a else "/dev/null",
                                     f"b/{path}" if path in b else "/dev/null")
        chunks.append("".join(lines))
    return redact("".join(chunks))


def _text(changes: list[ProfileChange], effects: list[ArtifactChange], total: int) -> str:
    lines = [f"profile: {len(changes)} change{'s' * (len(changes) != 1)}"]
    for c in changes:
        origin = c.new_origin if c.new != UNSET else c.old_origin
        lines.append(f"  {c.path}: {_show(c.old)} → {_show(c.new)}" + (f"  ({origin})" if origin else ""))
    lines.append(f"artifacts: {len(effects)} change{'s' * (len(effects) != 1)}")
    lines += [f"  {_ranks_text(e.ranks, total)} {e.where}: {e.name} {_show(e.old)} → {_show(e.new)}" for e in effects]
    return "\n".join(lines) + "\n"


def run_diff(old_spec: str, new_spec: str, *, unified: bool = False, fmt: str = "text") -> int:
    """Print the diff of two profiles; return the exit code."""
    try:
        old, new = load_side(old_spec), load_side(new_spec)
    except _BrokenProfileError as broken:
        sys.stdout.write(render(broken.findings, "text", 1))
        raise InputError("cannot diff a profile that does not load") from None
    for side in (old, new):
        errors = [f for f in side.findings if f.severity == "error"]
        if errors:
            sys.stdout.write(render(errors, "text", 1))
            raise InputError(f"cannot diff {side.resolved.path}: it has errors")
    changes = profile_changes(old.resolved, new.resolved)
    plans = old.planned()[1], new.planned()[1]
    effects = artifact_changes(*plans) + k8s_changes(old, new, plans)
    total = max(len(plans[0].ranks), len(plans[1].ranks))
    patch = unified_diff(old, new) if unified else ""
    if fmt == "json":
        body = {"identical": not changes and not effects,
                "profile": [{"path": c.path, "old": _json_value(c.old), "new": _json_value(c.new),
                             "old_origin": c.old_origin, "new_origin": c.new_origin} for c in changes],
                "artifacts": [{"ranks": list(e.ranks), "file": e.where, "name": e.name,
                               "old": _json_value(e.old), "new": _json_value(e.new)} for e in effects]}
        if unified:
            body["unified"] = patch
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    else:
        sys.stdout.write(_text(changes, effects, total) + patch)
    return EXIT_OK if not changes and not effects else EXIT_FINDINGS


def _json_value(value: Any) -> Any:
    if value is None or value == UNSET:
        return None
    return redact(value) if isinstance(value, str) else value
