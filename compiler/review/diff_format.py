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
# Under the 65,536 characters a GitHub comment holds, with room for the header a bot adds.
MAX_COMMENT = 60_000
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


OTHER = ""  # the effects no changed profile key is found behind


def effects(result: ProfileDiff) -> dict[str, list[Grouped]]:
    """Each artifact change once, under the first changed profile key it comes from, else its first source (a
    value the plan derives, e.g. from a changed limit), else OTHER."""
    keys = {c.path for c in result.profile}
    out: dict[str, list[Grouped]] = {}
    for group in result.artifacts.changes:
        named = [k for k in (result.sources.get(group.change) or "").split(", ") if k]
        out.setdefault(next((k for k in named if k in keys), named[0] if named else OTHER), []).append(group)
    return out


def effect_count(groups: list[Grouped], untraced: bool = False) -> str:
    """``6 changes in 4 files, ranks 0-3``: what one profile change does, counted; ``untraced`` when some file
    changes were traced to no key (one of them may be this key's)."""
    if not groups:
        return "no file change traced to it" if untraced else "no effect on the rendered files"
    files = len({g.change.file for g in groups})
    ranks = tuple(sorted({r for g in groups for r in g.ranks}))
    on = f", {ranks_text(ranks)}" if ranks else ""
    return f"{len(groups)} change{'s' * (len(groups) != 1)} in {files} file{'s' * (files != 1)}{on}"


def _change_lines(result: ProfileDiff, group: Grouped, key: str) -> list[str]:
    """One artifact change, indented under its profile key; the other keys it comes from named."""
    change = group.change
    others = [k for k in (result.sources.get(change) or "").split(", ") if k and k != key]
    tail = f"  (with {', '.join(others)})" if others else ""
    if change.key:
        old, new = (show(v).replace("\n", "; ") if v is not None else UNSET for v in (change.old, change.new))
        return [f"      {where(group)}: {redact(change.key)} {old} {ARROW} {new}{tail}"]
    return [f"      {where(group)}:{tail}",
            *(f"        - {redact(line)}" for line in (change.old or "").split("\n") if change.old is not None),
            *(f"        + {redact(line)}" for line in (change.new or "").split("\n") if change.new is not None)]


def _profile_lines(result: ProfileDiff, detail: bool) -> list[str]:
    count, folds = len(result.profile), result.artifacts.folds
    effect = " (no effect: the rendered files are byte-identical)" if result.identical and count else ""
    lines = [f"profile: {count} change{'s' * (count != 1)}{effect}"]
    found, folded = effects(result), {f.path: f for f in folds}
    for c in result.profile:
        origin = _origin(c)
        lines.append(f"  {c.path}: {show(c.old)} {ARROW} {show(c.new)}" + (f"  ({origin})" if origin else ""))
        fold = folded.get(c.path)
        counted = effect_count(found.get(c.path, []), OTHER in found)
        lines.append(f"    {fold_text(fold).split('; ', 1)[1]}" if fold else f"    {counted}")
        lines += [line for g in found.get(c.path, []) if detail for line in _change_lines(result, g, c.path)]
    keys = {c.path for c in result.profile}
    for key in (k for k in found if k not in keys):
        what = f"{key} (a value derived from the changes above)" if key else "(no profile key found behind)"
        lines.append(f"  {what}: {effect_count(found[key])}")
        lines += [line for g in found[key] if detail for line in _change_lines(result, g, key)]
    return lines + [f"  stale: {redact(line)}" for line in result.stale]


def artifact_count(result: ProfileDiff) -> str:
    """``27 changes in 6 files besides 1 rename``: the rendered files' changes, counted (the page says the same)."""
    changes, folds = result.artifacts.changes, len(result.artifacts.folds)
    files = len({g.change.file for g in changes})
    where_ = f" in {files} file{'s' * (files != 1)}" if changes else ""
    return (f"{len(changes)} change{'s' * (len(changes) != 1)}{where_}"
            + (" (byte-identical)" if result.identical else "")
            + (f" besides {folds} rename{'s' * (folds != 1)}" if folds else ""))


def _artifact_lines(result: ProfileDiff, detail: bool) -> list[str]:
    hint = "" if detail or not result.artifacts.changes else "; --detail lists each"
    return [f"artifacts: {artifact_count(result)}{hint}"]


def text(result: ProfileDiff, detail: bool = False) -> str:
    """The terminal form: each profile change once, its effects counted under it (listed with ``detail``)."""
    return ("\n".join([*_profile_lines(result, detail), *_artifact_lines(result, detail)]) + "\n"
            + redact(result.unified))


def as_json(result: ProfileDiff, detail: bool = True) -> str:
    """The machine form (every change, whatever ``detail`` says)."""
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


def markdown(result: ProfileDiff, detail: bool = False) -> str:
    """The pull-request comment form: the profile table with each change's effects counted, renames said once;
    the artifact table (open with ``detail``) and the unified diff folded in <details>."""
    out = [f"### spark-compile diff: {md(result.old_name)} {ARROW} {md(result.new_name)}", ""]
    if result.identical:
        out += ["**The rendered files are byte-identical**: the profile changes below have no effect.", ""]
    if result.profile:
        found = effects(result)
        out += ["| profile key | old | old set at | new | new set at | effect |", "|---|---|---|---|---|---|"]
        out += [f"| {md(c.path)} | {md(c.old)} | {md(c.old_origin or '')} | {md(c.new)} | {md(c.new_origin or '')} | "
                f"{md(effect_count(found.get(c.path, []), OTHER in found))} |" for c in result.profile]
        out.append("")
    out += [f"- stale: {md(line)}" for line in result.stale]
    out += [""] if result.stale else []
    out += [f"- {md(fold_text(fold))}" for fold in result.artifacts.folds]
    out += [""] if result.artifacts.folds else []
    changes = result.artifacts.changes
    out += [f"**Artifacts: {len(changes)} change{'s' * (len(changes) != 1)}**", ""]
    if changes:
        out += [f"<details{' open' if detail else ''}><summary>each artifact change</summary>", "",
                "| ranks | file | key | old | new | from |", "|---|---|---|---|---|---|"]
        for group in changes:
            c = group.change
            out.append(f"| {md(ranks_text(group.ranks) or 'shared')} | {md(c.file)} | {md(c.key or 'lines')} | "
                       f"{md(c.old)} | {md(c.new)} | {md(result.sources.get(c) or '')} |")
        out += ["", "</details>", ""]
    if result.unified:
        out += _folded_patch(redact(result.unified), MAX_COMMENT - len("\n".join(out)))
    return "\n".join(out) + "\n"


def _folded_patch(patch: str, room: int) -> list[str]:
    """The unified diff in <details>, cut at a line so the comment stays within ``room`` characters."""
    lines, kept, size = patch.rstrip("\n").split("\n"), [], 200  # the fences, tags and the cut's note
    for line in lines:
        size += len(line) + 1
        if size > room:
            break
        kept.append(line)
    cut = len(lines) - len(kept)
    note = [f"({cut} more lines: run `spark-compile diff --unified` for the whole diff)", ""] if cut else []
    fence = _fence("\n".join(kept))
    return ["<details><summary>unified diff</summary>", "", f"{fence}diff", *kept, fence, "", *note, "</details>", ""]


FORMATS: dict[str, Callable[[ProfileDiff, bool], str]] = {"text": text, "json": as_json, "markdown": markdown}
