"""`spark-compile report PROFILE [--against OLD]`: one self-contained static HTML page to review a deployment.

Topology, each node's memory as stacked bars (against what CUDA reports, and the host side against the
container's limit), the Engram partition per rank, the overlay and NCCL settings with their defaults and where
the profile set each one, and with --against the changes highlighted. The page's template loads with autoescape
on (and redaction), so every value is HTML-escaped by construction; nothing on the page loads from the network.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_compile.artifact_diff import ProfileDiff
from spark_compile.capacity import Capacity, RankCapacity
from spark_compile.diff import diff_profiles, load_side
from spark_compile.diff_format import ARROW, ranks_text, show
from spark_compile.errors import EXIT_OK
from spark_compile.launch_plan import LaunchPlan, ProfilePath, dotted
from spark_compile.pipeline import Planned

TEMPLATE = "report.html.j2"
# The env files whose variables the page lists, with where each variable's default comes from.
SETTINGS = (("overlay.env", "overlay"), ("nccl.env", "nccl"))
# The command line's options the page lists: the engine's flags and docker's, each with its profile key.
OPTIONS = (("engine-flags", "engine"), ("docker-options", "docker"))


@dataclass
class SettingRow:
    """One variable of the page's settings tables: its value on each rank, default, where it was set."""

    name: str
    values: dict[int, str]
    default: str
    source: str
    where: str
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


@dataclass
class Page:
    """Everything the template formats (strings and numbers only)."""

    title: str
    facts: list[tuple[str, str]]
    ranks: list[dict[str, Any]]
    layers: list[dict[str, Any]]
    tables: list[tuple[str, list[SettingRow]]]
    against: str = ""
    profile_changes: list[tuple[str, str, str]] = field(default_factory=list)
    artifact_changes: list[tuple[str, str, str]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)


def where_set(validated: Planned, path: ProfilePath) -> str:
    """``file:line`` of the profile value at ``path``; a value derived from a whole section (or the nearest
    one that holds it) says so, since no single line set it; else the default."""
    origins = validated.resolved.origins
    while path and path not in origins:
        path = path[:-1]
    if not path:
        return "not in the profile (default)"
    pos = origins[path].spot.value
    value: Any = validated.resolved.data
    for part in path:
        if isinstance(value, dict):
            value = value.get(part)
        else:
            value = value[part] if isinstance(value, list) and isinstance(part, int) else None
    where = f"{pos.file}:{pos.line}"
    return f"derived from {dotted(path)} ({where})" if isinstance(value, dict | list) else where


def _defaults(kind: str) -> dict[str, str]:
    if kind == "overlay":
        from spark_compile.overlay.registry import FLAGS_BY_NAME

        return {name: ("-" if flag.default is None else flag.default or '""') for name, flag in FLAGS_BY_NAME.items()}
    from spark_compile.spec.catalog import nccl_catalog

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
    from spark_compile.spec.catalog import CatalogNotFound, engine_catalog

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
            row["left"] = f"{100 * row['lo'] / total:.3f}%"
            row["width"] = f"{100 * (row['hi'] - row['lo']) / total:.3f}%"
    return [layers[layer] for layer in sorted(layers)]


RANK_FIELDS = ("rank", "node", "role", "fabric_ip", "ssh", "start", "gid", "engram")
# The memory bars' segments, in order: (term, label, css class). The GPU bar: the static pool's share, then
# what lives outside it; headroom is what the outside share has left after graphs and the prefill transient.
# The host bar: what the container holds in host memory, against its --memory limit.
GPU_SEGMENTS = (("weights", "weights", "weights"), ("draft", "draft", "draft"), ("kv_pool", "KV pool", "kv"),
                ("cuda_graphs", "CUDA graphs", "graphs"), ("nccl", "NCCL", "nccl"),
                ("head_share", "HTTP/tokenizer", "http"), ("prefill_transient", "prefill transient", "transient"),
                ("headroom", "headroom", "headroom"))
HOST_SEGMENTS = (("head_share", "HTTP/tokenizer", "http"), ("nccl", "NCCL", "nccl"),
                 ("engram_host", "Engram rows", "engram"), ("shm", "shm", "shm"))


def _bar(rank: RankCapacity, parts: tuple[tuple[str, str, str], ...], amounts: dict[str, float],
         total: float) -> dict[str, Any]:
    scale = max(total, sum(amounts.values())) or 1.0
    at, segments = 0.0, []
    for name, label, css in parts:
        gib = amounts.get(name, 0.0)
        if gib <= 0:
            continue
        term = rank.terms.get(name)
        source = term.source if term is not None else "what the outside share has left"
        segments.append({"label": label, "css": css, "gib": f"{gib:.1f}", "left": f"{100 * at / scale:.3f}%",
                         "width": f"{100 * gib / scale:.3f}%", "source": source})
        at += gib
    return {"segments": segments, "used": f"{at:.1f}", "total": f"{total:.1f}", "over": at > total + 0.05,
            "limit": f"{100 * total / scale:.3f}%"}


def _memory(capacity: Capacity | None) -> list[dict[str, Any]]:
    """Each rank's memory as two stacked bars: the GPU's (against what CUDA reports) and the host side's
    (against the container's --memory limit, when it has one)."""
    out: list[dict[str, Any]] = []
    for rank in capacity.ranks if capacity is not None else ():
        amounts = {name: rank.gib(name) for name, _, _ in GPU_SEGMENTS if name in rank.terms}
        outside = rank.terms.get("outside_static")
        if outside is not None and outside.gib is not None:
            amounts["headroom"] = max(outside.gib - rank.gib("cuda_graphs") - rank.gib("prefill_transient"), 0.0)
        host = {name: rank.gib(name) for name, _, _ in HOST_SEGMENTS}
        limit = rank.terms["container_limit"].gib
        unknown = [name for name in ("weights", "kv_pool", "cuda_graphs") if name in rank.terms
                   and rank.terms[name].gib is None]
        out.append({"rank": rank.rank, "node": rank.node, "gpu": _bar(rank, GPU_SEGMENTS, amounts,
                                                                     rank.gib("cuda_total")),
                    "host": _bar(rank, HOST_SEGMENTS, host, limit or sum(host.values())),
                    "limited": limit is not None, "unknown": ", ".join(unknown),
                    "full_token": "-" if rank.kv is None or rank.kv.full_token is None else f"{rank.kv.full_token:,}"})
    return out


def _ranks(plan: LaunchPlan) -> list[dict[str, Any]]:
    order = plan.start_order
    return [{"rank": str(r.rank), "node": r.node, "role": "head" if r.is_head else "worker",
             "fabric_ip": r.fabric_ip, "ssh": r.ssh, "start": str(order.index(r.rank) + 1),
             "gid": str(r.gid_index) if r.gid_index is not None else
             "probed at start" if "NCCL_IB_GID_INDEX" in r.runtime_env else "-",
             "engram": "-" if r.engram is None else f"{r.engram.source}: {r.engram.directory}",
             "status": "same", "was": {}} for r in plan.ranks]


def _mark_ranks(new: list[dict[str, Any]], old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each rank's status against the old plan, and the old value of each field that changed."""
    before = {r["rank"]: r for r in old}
    for rank in new:
        previous = before.pop(rank["rank"], None)
        if previous is None:
            rank["status"] = "added"
            continue
        rank["was"] = {f: previous[f] for f in RANK_FIELDS if previous[f] != rank[f]}
        rank["status"] = "changed" if rank["was"] else "same"
    return new + [{**r, "status": "removed"} for r in before.values()]


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
    order = ", ".join(f"rank {r}" for r in plan.start_order)
    facts = [("profile", profile.name), ("release", profile.release or "-"),
             ("description", profile.description or "-"), ("image", plan.image),
             ("API", f"http://{plan.head_ip}:{plan.port}/v1 on the head"), ("unit", plan.unit_name),
             ("start order", f"{order} (workers first, the head last)")]
    tables = []
    for file, kind in SETTINGS:
        rows = _settings(new, file, kind)
        listed = _compare(rows, _settings(old, file, kind)) if old is not None else list(rows.values())
        tables.append((file, listed))
    for title, kind in OPTIONS:
        rows = _options(new, kind)
        tables.append((title, _compare(rows, _options(old, kind)) if old is not None else list(rows.values())))
    page = Page(f"{profile.name} ({profile.release or 'no release'})", facts, _ranks(plan), _layers(plan), tables,
                memory=_memory(new.capacity))
    if old is not None:
        old_plan = old.plan
        page.ranks = _mark_ranks(page.ranks, _ranks(old_plan))
        _mark_layers(page.layers, _layers(old_plan))
        _add_diff(page, diff_profiles(old, new), against)
    return page


def _add_diff(page: Page, result: ProfileDiff, against: str) -> None:
    page.against = against
    page.profile_changes = [(c.path, show(c.old), show(c.new)) for c in result.profile]
    for group in result.artifacts.changes:
        where = " ".join(x for x in (ranks_text(group.ranks), group.change.file) if x)
        key = group.change.key or "lines"
        page.artifact_changes.append((f"{where} {key}", show(group.change.old), show(group.change.new)))
    page.artifact_changes += [("", f"{f.path}: {show(f.old)}", f"{show(f.new)} (every mention follows)")
                              for f in result.artifacts.folds]


def render_page(page: Page) -> str:
    """The HTML text: deterministic for the same page."""
    from spark_compile.render import environment

    return environment(autoescape=True).get_template(TEMPLATE).render(page=page, arrow=ARROW)


def run_report(profile: str, against: str | None, output: Path | None) -> int:
    """Write the page to OUTPUT (or stdout)."""
    new = load_side(profile)
    old = load_side(against) if against else None
    text = render_page(build_page(new, old, against or ""))
    if output is None:
        sys.stdout.write(text)
        return EXIT_OK
    from spark_compile.write import write_file

    write_file(output, text.encode("utf-8"))
    sys.stdout.write(f"{output}: review page written\n")
    return EXIT_OK
