"""How a ProfileDiff is printed: text for a terminal, JSON for tools, Markdown for a pull-request comment.

Every value passes `redact` on its way out; Markdown values are escaped as well (backticks, pipes, HTML).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

from spark_compile.common.quoting import terminal_text
from spark_compile.common.secrets import redact, redact_value, redacted_json
from spark_compile.review.artifact_diff import UNSET, Fold, Grouped, ProfileChange, ProfileDiff

ARROW = "→"
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def ranks_text(ranks: tuple[int, ...]) -> str:
    """``ranks 0-3``, ``rank 1``, ``ranks 0,2``; empty for a file of no rank."""
    if not ranks:
        return ""
    if len(ranks) > 2 and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))


def show(value: Any) -> str:
    """A profile or artifact value as printed: redacted, ``(unset)`` when absent."""
    if value is None or value == UNSET:
        return UNSET
    return redact(json.dumps(value) if not isinstance(value, str) else value)


def where(group: Grouped) -> str:
    """``ranks 0-3 engine.env`` or ``fleet/launch.sh``."""
    return " ".join(part for part in (ranks_text(group.ranks), group.change.file) if part)


def fold_text(fold: Fold) -> str:
    """``name: a → b; every path follows (…)`` - a rename said once."""
    what = "every path follows" if fold.path == "name" else "every mention follows"
    counted = f"{fold.lines} line{'s' * (fold.lines != 1)} in {fold.files} file{'s' * (fold.files != 1)}"
    renamed = f", {fold.renamed} file{'s' * (fold.renamed != 1)} renamed" if fold.renamed else ""
    return f"{fold.path}: {show(fold.old)} {ARROW} {show(fold.new)}; {what} ({counted}{renamed})"


def _origin(change: ProfileChange) -> str | None:
    return change.new_origin or change.old_origin


def _profile_lines(result: ProfileDiff) -> list[str]:
    count = len(result.profile)
    effect = " (no effect: the rendered files are byte-identical)" if result.identical and count else ""
    lines = [f"profile: {count} change{'s' * (count != 1)}{effect}"]
    for c in result.profile:
        origin = _origin(c)
        lines.append(f"  {c.path}: {show(c.old)} {ARROW} {show(c.new)}" + (f"  ({origin})" if origin else "")
                     + ("  no effect" if result.identical else ""))
    return lines + [f"  stale: {redact(line)}" for line in result.stale]


def _artifact_lines(result: ProfileDiff) -> list[str]:
    changes = result.artifacts.changes
    folds = len(result.artifacts.folds)
    lines = [f"artifacts: {len(changes)} change{'s' * (len(changes) != 1)}"
             + (" (byte-identical)" if result.identical else "")
             + (f" besides {folds} rename{'s' * (folds != 1)}" if folds else "")]
    lines += [f"  {fold_text(fold)}" for fold in result.artifacts.folds]
    for group in changes:
        change = group.change
        source = result.sources.get(change)
        tail = f"  (from {source})" if source else ""
        if change.key:
            old, new = (show(v).replace("\n", "; ") if v is not None else UNSET for v in (change.old, change.new))
            lines.append(f"  {where(group)}: {redact(change.key)} {old} {ARROW} {new}{tail}")
            continue
        lines.append(f"  {where(group)}:{tail}")
        lines += [f"    - {redact(line)}" for line in (change.old or "").split("\n") if change.old is not None]
        lines += [f"    + {redact(line)}" for line in (change.new or "").split("\n") if change.new is not None]
    return lines


def text(result: ProfileDiff) -> str:
    """The terminal form."""
    return "\n".join([*_profile_lines(result), *_artifact_lines(result)]) + "\n" + redact(result.unified)


def as_json(result: ProfileDiff) -> str:
    """The machine form."""
    def value(v: Any, path: str = "") -> Any:
        if v is None or v == UNSET:
            return None
        return redact_value(redact(v) if isinstance(v, str) else v, path.rsplit(".", 1)[-1])

    body: dict[str, Any] = {
        "identical": result.identical,
        "profile": [{"path": c.path, "old": value(c.old, c.path), "new": value(c.new, c.path),
                     "old_origin": c.old_origin, "new_origin": c.new_origin, "effect": not result.identical}
                    for c in result.profile],
        "folded": [{"path": f.path, "old": value(f.old), "new": value(f.new), "lines": f.lines, "files": f.files,
                    "renamed": f.renamed} for f in result.artifacts.folds],
        "renamed": [{"old": a, "new": b} for a, b in result.artifacts.renamed],
        "stale": [redact(line) for line in result.stale],
        "artifacts": [{"ranks": list(g.ranks), "file": g.change.file, "name": redact(g.change.key),
                       "old": value(g.change.old), "new": value(g.change.new),
                       "source": result.sources.get(g.change)} for g in result.artifacts.changes],
    }
    if result.unified:
        body["unified"] = redact(result.unified)
    return redacted_json(body, indent=2, ensure_ascii=False)


def md(value: Any) -> str:
    """A value for a Markdown table cell: redacted, HTML-escaped, Markdown punctuation escaped, lines <br>."""
    shown = html.escape(terminal_text(show(value)), quote=True)
    return _MD_SPECIAL.sub(r"\\\1", shown).replace("\r", "").replace("\n", "<br>")


def _fence(body: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


def markdown(result: ProfileDiff) -> str:
    """The pull-request comment form: two tables, renames said once, the unified diff folded away."""
    out = [f"### spark-compile diff: {md(result.old_name)} {ARROW} {md(result.new_name)}", ""]
    if result.identical:
        out += ["**The rendered files are byte-identical**: the profile changes below have no effect.", ""]
    if result.profile:
        out += ["| profile key | old | old set at | new | new set at |", "|---|---|---|---|---|"]
        out += [f"| {md(c.path)} | {md(c.old)} | {md(c.old_origin or '')} | {md(c.new)} | {md(c.new_origin or '')} |"
                for c in result.profile]
        out.append("")
    out += [f"- stale: {md(line)}" for line in result.stale]
    out += [""] if result.stale else []
    out += [f"- {md(fold_text(fold))}" for fold in result.artifacts.folds]
    out += [""] if result.artifacts.folds else []
    changes = result.artifacts.changes
    out += [f"**Artifacts: {len(changes)} change{'s' * (len(changes) != 1)}**", ""]
    if changes:
        out += ["| ranks | file | key | old | new | from |", "|---|---|---|---|---|---|"]
        for group in changes:
            c = group.change
            out.append(f"| {md(ranks_text(group.ranks) or 'shared')} | {md(c.file)} | {md(c.key or 'lines')} | "
                       f"{md(c.old)} | {md(c.new)} | {md(result.sources.get(c) or '')} |")
        out.append("")
    if result.unified:
        patch = redact(result.unified)
        fence = _fence(patch)
        out += ["<details><summary>unified diff</summary>", "", f"{fence}diff", patch.rstrip("\n"),
                fence, "", "</details>", ""]
    return "\n".join(out) + "\n"


FORMATS: dict[str, Callable[[ProfileDiff], str]] = {"text": text, "json": as_json, "markdown": markdown}
