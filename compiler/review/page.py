"""`spark-compile report PROFILE [--against OLD]`: one self-contained static HTML page to review a deployment.

At the top what changed against OLD (each change linked to its row) and every finding of `check`; then the
engine, container, fabric, overlay, NCCL and model sections, each value with its source line and its change in
place, and the rendered settings each feeds; the fleet as a picture with each node's memory; the Engram
partition. The template loads with autoescape on (and redaction), so every value is HTML-escaped by
construction; nothing on the page loads from the network.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_compile.common.errors import EXIT_OK
from spark_compile.common.findings import dotted
from spark_compile.overlay.registry import FLAGS_BY_NAME
from spark_compile.pipeline import Planned
from spark_compile.review.artifact_diff import ProfileDiff
from spark_compile.review.diff import diff_profiles, load_side
from spark_compile.review.diff_format import ARROW, artifact_count, ranks_text, show
from spark_compile.review.page_fleet import LEGEND, Picture, mark_memory, memory_terms, picture
from spark_compile.review.page_values import (
    Anchors,
    ChangeLine,
    FindingLine,
    Section,
    change_lines,
    finding_lines,
    mark_stale,
    value_sections,
)
from spark_compile.spec.catalog import CatalogNotFound, engine_catalog, nccl_catalog
from spark_compile.spec.hardware import HARDWARE
from spark_compile.stages.launch_plan import LaunchPlan, ProfilePath
from spark_compile.stages.render import environment
from spark_compile.stages.write import write_file

TEMPLATE = "report.html.j2"
# The env files whose variables the page lists, with where each variable's default comes from.
SETTINGS = (("overlay.env", "overlay"), ("nccl.env", "nccl"))
# The command line's options the page lists: the engine's flags and docker's, each with its profile key.
OPTIONS = (("engine-flags", "engine"), ("docker-options", "docker"))


@dataclass(slots=True)
class SettingRow:
    """One variable of the page's settings tables: its value on each rank, default, where it was set (and
    the section it is derived from, when no single line set it)."""

    name: str
    values: dict[int, str]
    default: str
    source: str
    set_at: tuple[str, str]  # (derived from, file:line)
    status: str = "same"  # same, changed, added, removed
    old: str = ""

    @property
    def value(self) -> str:
        """One value when every rank has it; else one ``rank r: v`` per distinct value."""
        distinct = dict.fromkeys(self.values.values())
        if len(distinct) == 1:
            return next(iter(distinct))
        return "; ".join(f"{ranks_text(tuple(r for r, v in self.values.items() if v == value))}: {value}"
                         for value in distinct)


@dataclass(slots=True)
class Page:
    """Everything the template formats (strings and numbers only)."""

    title: str
    sections: list[Section]
    fleet: Picture
    layers: list[dict[str, Any]]
    findings: list[FindingLine]
    facts: list[tuple[str, str]] = field(default_factory=list)
    against: str = ""
    changes: list[ChangeLine] = field(default_factory=list)
    stale: list[tuple[str, str]] = field(default_factory=list)
    artifact_changes: list[tuple[str, str, str]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    artifact_count: str = ""  # the rendered files' changes counted as `diff` counts them


def where_set(validated: Planned, path: ProfilePath) -> tuple[str, str]:
    """``file:line`` of the profile value at ``path``, and the section it is derived from when no single
    line set it (a whole section, or the nearest one that holds it); else the default."""
    origins = validated.resolved.origins
    while path and path not in origins:
        path = path[:-1]
    if not path:
        return "", "not in the profile (default)"
    pos = origins[path].spot.value
    value: Any = validated.resolved.data
    for part in path:
        if isinstance(value, dict):
            value = value.get(part)
        else:
            value = value[part] if isinstance(value, list) and isinstance(part, int) else None
    return dotted(path) if isinstance(value, dict | list) else "", f"{pos.file}:{pos.line}"


def _defaults(kind: str) -> dict[str, str]:
    if kind == "overlay":
        return {name: ("-" if flag.default is None else flag.default or '""') for name, flag in FLAGS_BY_NAME.items()}

    catalog = nccl_catalog()
    return {var.name: "-" if var.default is None else str(var.default) for var in catalog.variables}


def _settings(validated: Planned, file: str, kind: str) -> dict[str, SettingRow]:
    plan = validated.plan
    defaults = _defaults(kind)
    rows: dict[str, SettingRow] = {}
    for rank in plan.ranks:
        for env_file in rank.env_files:
            if env_file.name != file:
                continue
            for var in env_file.variables:
                row = rows.setdefault(var.name, SettingRow(var.name, {}, defaults.get(var.name, "-"),
                                                           dotted(var.source) if var.source else "(fixed)",
                                                           where_set(validated, var.source)))
                row.values[rank.rank] = var.value
    return rows


def _options(validated: Planned, kind: str) -> dict[str, SettingRow]:
    """The engine's flags or docker's options of every rank as rows: each with its values per rank, the
    selected build's default (engine flags) and the profile key behind it; a flag given by several keys (-v,
    --cap-add) has a row per key."""
    profile, plan = validated.profile, validated.plan
    try:
        catalog = engine_catalog(profile.engine.catalog) if kind == "engine" else None
    except CatalogNotFound:
        catalog = None
    rows: dict[str, SettingRow] = {}
    for rank in plan.ranks:
        options = rank.engine_options if kind == "engine" else rank.docker_options
        flags = [o.flag for o in options]
        for option in options:
            source = dotted(option.source) if option.source else "(fixed)"
            name = option.flag if flags.count(option.flag) == 1 else f"{option.flag} [{source}]"
            entry = catalog.lookup(option.flag) if catalog is not None else None
            default = "-" if entry is None or entry.default is None else show(entry.default)
            row = rows.setdefault(name, SettingRow(name, {}, default, source, where_set(validated, option.source)))
            row.values[rank.rank] = " ".join(option.values) or "(on)"
    return rows


def _compare(new: dict[str, SettingRow], old: dict[str, SettingRow]) -> list[SettingRow]:
    rows = list(new.values())
    for row in rows:
        before = old.get(row.name)
        if before is None:
            row.status = "added"
        elif before.values != row.values:
            row.status, row.old = "changed", before.value
    for name, before in old.items():
        if name not in new:
            before.status, before.old = "removed", before.value
            rows.append(before)
    return rows


def _layers(plan: LaunchPlan) -> list[dict[str, Any]]:
    layers: dict[int, dict[str, Any]] = {}
    for rank in plan.ranks:
        if rank.engram is None:
            continue
        for layer, lo, hi in rank.engram.rows:
            entry = layers.setdefault(layer, {"layer": layer, "rows": []})
            entry["rows"].append({"rank": rank.rank, "node": rank.node, "lo": lo, "hi": hi,
                                  "source": rank.engram.source, "status": "same", "was": ""})
    for entry in layers.values():
        total = max(row["hi"] for row in entry["rows"]) or 1
        entry["total"] = total
        for row in entry["rows"]:
            row["width"] = f"{100 * (row['hi'] - row['lo']) / total:.3f}%"
    return [layers[layer] for layer in sorted(layers)]


def _fabric_text(validated: Planned) -> str:
    """The fleet picture's two fabric lines: kind, interface and subnet; RDMA devices and GID index."""
    fabric = validated.profile.fleet.fabric
    if fabric is None:
        return ""
    gid = f" \u00b7 GID index {fabric.gid_index}" if fabric.kind == "roce" else ""
    rdma = f"RDMA {', '.join(fabric.rdma_devices)}{gid}" if fabric.rdma_devices else "no RDMA device: NCCL over sockets"
    return f"fabric: {fabric.kind} on {fabric.interface}, {fabric.subnet}\n{rdma}"


def _weights(validated: Planned) -> list[str]:
    """Where each rank reads the checkpoint: its folder on the node, or the hub (into the node's cache)."""
    model = validated.profile.model
    hub = f"hub {model.hub_id} (cached on the node)" if model.hub_id else "-"
    return [node.repo or hub for node in validated.plan.checkpoint.nodes]


def _node_facts(plan: LaunchPlan) -> dict[int, dict[str, str]]:
    order = plan.start_order
    return {r.rank: {"node": r.node, "fabric address": r.fabric_ip, "ssh": r.ssh,
                     "start": str(order.index(r.rank) + 1), "weights": plan.checkpoint.nodes[r.rank].repo or "",
                     "Engram": "-" if r.engram is None else f"{r.engram.source}: {r.engram.directory}"}
            for r in plan.ranks}


def _changed_nodes(new: LaunchPlan, old: LaunchPlan | None) -> dict[int, str]:
    """Per rank of the new plan: what changed on it (``fabric address 192.0.2.13 → 192.0.2.23``)."""
    if old is None:
        return {}
    before, after = _node_facts(old), _node_facts(new)
    out = {}
    for rank, facts in after.items():
        was = before.get(rank)
        diffs = ["new rank"] if was is None else [f"{k} {was[k]} {ARROW} {v}" for k, v in facts.items() if was[k] != v]
        if diffs:
            out[rank] = "; ".join(diffs)
    return out


def _tables(new: Planned, old: Planned | None) -> dict[str, list[tuple[str, list[SettingRow]]]]:
    """The rendered settings per section: the engine's flags, docker's options and the env files."""
    def listed(rows: dict[str, SettingRow], before: dict[str, SettingRow] | None) -> list[SettingRow]:
        return _compare(rows, before) if before is not None else list(rows.values())

    out: dict[str, list[tuple[str, list[SettingRow]]]] = {}
    for (title, kind), section in zip(OPTIONS, ("engine", "container"), strict=True):
        out[section] = [(title, listed(_options(new, kind), _options(old, kind) if old else None))]
    for (file, kind), section in zip(SETTINGS, ("overlay", "nccl"), strict=True):
        out[section] = [(file, listed(_settings(new, file, kind), _settings(old, file, kind) if old else None))]
    return out


def _mark_layers(new: list[dict[str, Any]], old: list[dict[str, Any]]) -> None:
    """Each Engram range's status against the old plan (its old range when it moved)."""
    before = {(layer["layer"], row["rank"]): row for layer in old for row in layer["rows"]}
    for layer in new:
        for row in layer["rows"]:
            previous = before.get((layer["layer"], row["rank"]))
            moved = previous is not None and (previous["lo"], previous["hi"]) != (row["lo"], row["hi"])
            row["status"] = "added" if previous is None else "changed" if moved else "same"
            row["was"] = f"[{previous['lo']}, {previous['hi']})" if moved and previous else ""


def build_page(new: Planned, old: Planned | None = None, against: str = "") -> Page:
    """The page's content (pure apart from rendering the two sides' files for the diff)."""
    profile, plan = new.profile, new.plan
    result = diff_profiles(old, new) if old is not None else None
    changes = result.profile if result is not None else []
    anchors = Anchors()
    sections = value_sections(new, old, changes, anchors)
    tables = _tables(new, old)
    for section in sections:
        section.tables = tables.get(section.id, [])
    facts = [("API", f"http://{plan.head_ip}:{plan.port}/v1 on the head"), ("unit", plan.unit_name),
             ("image", plan.image)]
    unified = HARDWARE[profile.hardware].unified_memory
    page = Page(f"{profile.name} ({profile.release or 'no release'})", sections,
                picture(plan, _fabric_text(new), _weights(new), (new.capacity, old.capacity if old else None),
                        _changed_nodes(plan, old.plan if old else None), unified),
                _layers(plan), finding_lines(new.findings, sections), facts,
                memory=memory_terms(new.capacity, unified))
    if old is not None and result is not None:
        _mark_layers(page.layers, _layers(old.plan))
        mark_memory(page.memory, memory_terms(old.capacity, HARDWARE[old.profile.hardware].unified_memory))
        page.stale = mark_stale(sections, changes)
        _add_diff(page, result, against, anchors)
    return page


def _add_diff(page: Page, result: ProfileDiff, against: str, anchors: Anchors) -> None:
    page.against = against
    page.changes = change_lines(result.profile, anchors)
    page.artifact_count = artifact_count(result)
    for group in result.artifacts.changes:
        where = " ".join(x for x in (ranks_text(group.ranks), group.change.file) if x)
        key = group.change.key or "lines"
        page.artifact_changes.append((f"{where} {key}", show(group.change.old), show(group.change.new)))
    page.artifact_changes += [("", f"{f.path}: {show(f.old)}", f"{show(f.new)} (every mention follows)")
                              for f in result.artifacts.folds]


def render_page(page: Page) -> str:
    """The HTML text: deterministic for the same page."""
    return environment(autoescape=True).get_template(TEMPLATE).render(page=page, arrow=ARROW, legend=LEGEND)


def run_report(profile: str, against: str | None, output: Path | None) -> int:
    """Write the page to OUTPUT (or stdout)."""
    new = load_side(profile)
    old = load_side(against) if against else None
    text = render_page(build_page(new, old, against or ""))
    if output is None:
        sys.stdout.write(text)
        return EXIT_OK

    write_file(output, text.encode("utf-8"))
    sys.stdout.write(f"{output}: review page written\n")
    return EXIT_OK
