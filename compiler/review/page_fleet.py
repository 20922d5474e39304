"""The review page's picture of the fleet: one inline SVG with the fabric, each node (rank, role, start
order, address, what it reads from where) and, inside each node's box, its memory as two stacked bars;
beside it the memory terms per rank with where each figure comes from.

Shapes are plain data (kind, coordinates, css class, text, title); the autoescaping template draws them,
so every text reaches the SVG escaped by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_compile.capacity.budget import Capacity, RankCapacity
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan

WIDTH = 480  # the viewBox's width: readable when scaled to a narrow window's ~370 px
TOP = 58  # the fabric's box
NODE_H = 188
BOX_X = 50
BAR_X, BAR_W = 100, WIDTH - 100 - 12
CHARS = 56  # the characters a box line holds at 12 px monospace

# The memory bars' segments, in order: (term, label, css class). The GPU bar: the static pool's share, then
# what lives outside it; headroom is what the outside share has left after graphs and the prefill transient.
# The host bar: what the container holds in host memory, against its --memory limit.
GPU_SEGMENTS = (("weights", "weights", "weights"), ("draft", "draft", "draft"), ("kv_pool", "KV pool", "kv"),
                ("cuda_graphs", "CUDA graphs", "graphs"), ("nccl", "NCCL", "nccl"),
                ("head_share", "HTTP/tokenizer", "http"), ("prefill_transient", "prefill transient", "transient"),
                ("headroom", "headroom", "headroom"), ("before_load", "not SGLang's", "before"))
# The GPU bar's segments that are no budget term, and where each comes from.
DERIVED = {"headroom": "what the outside share has left",
           "before_load": "held before the load (the OS, page cache, other processes), and on a rank freer than "
                          "the fleet's minimum what the minimum leaves unused"}
HOST_SEGMENTS = (("head_share", "HTTP/tokenizer", "http"), ("nccl", "NCCL", "nccl"),
                 ("engram_host", "Engram rows", "engram"), ("shm", "shm", "shm"))
LEGEND = tuple(dict.fromkeys((css, label) for _, label, css in (*GPU_SEGMENTS, *HOST_SEGMENTS)))


@dataclass(slots=True)
class Shape:
    """One SVG element: a rect (x, y, w, h), line (x, y to w, h), circle (centre x, y, radius w, with ``text``
    inside) or text at (x, y); ``title`` is its tooltip."""

    kind: str
    css: str
    x: str
    y: str
    w: str = "0"
    h: str = "0"
    text: str = ""
    title: str = ""
    data: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Picture:
    """The whole SVG: its height in viewBox units and its shapes in drawing order."""

    height: str
    shapes: list[Shape]
    width: str = str(WIDTH)


def _n(value: float) -> str:
    return f"{value:.1f}"


def _fit(text: str, chars: int = CHARS) -> str:
    """``text`` cut in the middle to ``chars`` (the whole text stays in the tooltip)."""
    if len(text) <= chars:
        return text
    half = (chars - 1) // 2
    return text[:half] + "\u2026" + text[len(text) - (chars - 1 - half):]


def _text(x: float, y: float, css: str, text: str, title: str = "") -> Shape:
    return Shape("text", css, _n(x), _n(y), text=_fit(text), title=title or text)


def _fabric(plan: LaunchPlan, fabric: str) -> list[Shape]:
    last = TOP + 10 + (len(plan.ranks) - 1) * NODE_H + 22
    first, _, second = fabric.partition("\n")
    return [Shape("rect", "fabric", "2", "2", _n(WIDTH - 4), "46"),
            _text(12, 20, "label", first), _text(12, 38, "mono", second),
            Shape("line", "bus", "24", "48", "24", _n(max(last, 48)))] if fabric else []


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _node(plan: LaunchPlan, rank: RankPlan, top: float, memory: tuple[RankCapacity | None, RankCapacity | None],
          notes: tuple[str, str]) -> list[Shape]:
    """One node's box: who it is, when it starts, what it reads from where, and (``memory``: now, before)
    its memory; ``notes``: where its weights come from, and what changed on it."""
    weights, changed = notes
    start = plan.start_order.index(rank.rank) + 1
    role = "head" if rank.is_head else "worker"
    last = " (last: the head)" if start == len(plan.ranks) and len(plan.ranks) > 1 else ""
    engram = "no tables" if rank.engram is None else f"{rank.engram.source}: {rank.engram.directory}"
    shapes = [Shape("rect", f"node {role}" + " changed" * bool(changed), _n(BOX_X), _n(top), _n(WIDTH - BOX_X - 2),
                    _n(NODE_H - 12), title=changed, data={"rank": str(rank.rank)}),
              Shape("line", "tap", "24", _n(top + 22), _n(BOX_X), _n(top + 22)),
              Shape("circle", "start", "24", _n(top + 22), "11", text=str(start),
                    title=f"starts {_ordinal(start)}{last}"),
              _text(BOX_X + 10, top + 20, "label", f"rank {rank.rank} \u00b7 {rank.node} \u00b7 {role}"),
              _text(BOX_X + 10, top + 38, "mono", f"{rank.fabric_ip} \u00b7 starts {_ordinal(start)}{last}"),
              _text(BOX_X + 10, top + 56, "mono", f"weights: {weights}"),
              _text(BOX_X + 10, top + 74, "mono", f"Engram: {engram}")]
    if changed:
        shapes.append(Shape("text", "tag", _n(WIDTH - 12), _n(top + 20), text="changed", title=changed))
    now, before = memory
    return shapes + (_bars(now, top + 80, before) if now is not None else [])


def _tokens(memory: RankCapacity | None) -> str:
    full = None if memory is None or memory.kv is None else memory.kv.full_token
    return "not known here" if full is None else f"{full:,}"


def _bars(memory: RankCapacity, top: float, before: RankCapacity | None) -> list[Shape]:
    gpu, host = gpu_amounts(memory), host_amounts(memory)
    limit = memory.terms["container_limit"].gib
    shapes = [_text(BOX_X + 10, top + 11, "small", "GPU"), _text(BOX_X + 10, top + 35, "small", "host")]
    shapes += _bar(memory, GPU_SEGMENTS, gpu, memory.gib("cuda_total"), top, "gpu")
    shapes += _bar(memory, HOST_SEGMENTS, host, limit or sum(host.values()), top + 24, "host")
    of_host = f"of the {limit:.1f} GiB --memory limit" if limit else "GiB (no --memory limit)"
    shapes += [_text(BOX_X + 10, top + 56, "small", f"GPU: {sum(gpu.values()):.1f} of the "
                     f"{memory.gib('cuda_total'):.1f} GiB CUDA reports"),
               _text(BOX_X + 10, top + 71, "small", f"host: {sum(host.values()):.1f} {of_host}")]
    tokens, was = _tokens(memory), _tokens(before)
    moved = before is not None and was != tokens
    shapes.append(_text(BOX_X + 10, top + 86, "delta" if moved else "small",
                        f"KV cache tokens (full_token): {tokens}" + (f", was {was}" if moved else "")))
    return shapes


def _bar(memory: RankCapacity, parts: tuple[tuple[str, str, str], ...], amounts: dict[str, float], total: float,
         top: float, what: str) -> list[Shape]:
    scale = (max(total, sum(amounts.values())) or 1.0) / BAR_W
    shapes = [Shape("rect", "track", _n(BAR_X), _n(top), _n(BAR_W), "16", data={"bar": what})]
    at = 0.0
    for name, label, css in parts:
        gib = amounts.get(name, 0.0)
        if gib <= 0:
            continue
        term = memory.terms.get(name)
        source = term.source if term is not None else DERIVED[name]
        x, w = BAR_X + at / scale, gib / scale
        data = {"rank": str(memory.rank), "bar": what, "term": css, "gib": f"{gib:.1f}"}
        shapes.append(Shape("rect", f"seg {css}", _n(x), _n(top), _n(w), "16",
                            title=f"{label}: {gib:.1f} GiB ({source})", data=data))
        if w >= 6 * (len(label) + 5):  # the label fits inside its segment
            shapes.append(Shape("text", "seglabel", _n(x + 3), _n(top + 12), text=f"{label} {gib:.1f}"))
        at += gib
    end = _n(BAR_X + total / scale)
    return [*shapes, Shape("line", "limit", end, _n(top - 3), end, _n(top + 19), title=f"{total:.1f} GiB")]


def gpu_amounts(rank: RankCapacity) -> dict[str, float]:
    """The GPU bar's GiB per term; headroom is what the outside share leaves after graphs and prefill."""
    amounts = {name: rank.gib(name) for name, _, _ in GPU_SEGMENTS if name in rank.terms}
    outside = rank.terms.get("outside_static")
    if outside is not None and outside.gib is not None:
        amounts["headroom"] = max(outside.gib - rank.gib("cuda_graphs") - rank.gib("prefill_transient"), 0.0)
    # What SGLang never counts: held before the load (the OS, page cache, other processes) and, on a rank freer
    # than the fleet's minimum, what the minimum leaves unused.
    amounts["before_load"] = max(rank.gib("cuda_total") - sum(amounts.values()), 0.0)
    return amounts


def host_amounts(rank: RankCapacity) -> dict[str, float]:
    """The host bar's GiB per term."""
    return {name: rank.gib(name) for name, _, _ in HOST_SEGMENTS}


def picture(plan: LaunchPlan, fabric: str, weights: list[str], capacity: tuple[Capacity | None, Capacity | None],
            changed: dict[int, str]) -> Picture:
    """The fleet as an SVG: ``fabric`` is two lines (kind and interface; subnet and RDMA devices);
    ``weights`` where each rank reads the checkpoint; ``capacity`` the memory budget now and in the older
    profile; ``changed`` what changed on each rank."""
    now, before = ({m.rank: m for m in side.ranks} if side is not None else {} for side in capacity)
    height = TOP + len(plan.ranks) * NODE_H
    shapes = _fabric(plan, fabric)
    for index, rank in enumerate(plan.ranks):
        memory = (now.get(rank.rank), before.get(rank.rank))
        notes = (weights[rank.rank], changed.get(rank.rank, ""))
        shapes += _node(plan, rank, TOP + index * NODE_H, memory, notes)
    return Picture(_n(height), shapes)


def memory_terms(capacity: Capacity | None) -> dict[str, Any]:
    """The memory terms beside the picture: one row per term (GPU side, then host side) with each rank's GiB
    and where the figure comes from."""
    ranks = capacity.ranks if capacity is not None else ()
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for column, rank in enumerate(ranks):
        for side, parts, amounts in (("GPU", GPU_SEGMENTS, gpu_amounts(rank)), ("host", HOST_SEGMENTS,
                                                                                host_amounts(rank))):
            for name, label, css in parts:
                term = rank.terms.get(name)
                unknown = term is not None and term.gib is None
                if amounts.get(name, 0.0) <= 0 and not unknown:
                    continue
                row = rows.setdefault((side, name), {"side": side, "label": label, "css": css, "sources": [],
                                                     "gib": ["-"] * len(ranks), "was": [""] * len(ranks)})
                row["gib"][column] = "?" if unknown else f"{amounts[name]:.1f}"
                source = term.source if term is not None else "what the outside share has left"
                if source not in row["sources"]:
                    row["sources"].append(source)
    return {"ranks": [(r.rank, r.node) for r in ranks], "rows": list(rows.values())}


def mark_memory(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Each figure of the memory terms that differs from the older profile's keeps that one as ``was``."""
    before = {(row["side"], row["css"], rank): gib for row in old["rows"]
              for (rank, _), gib in zip(old["ranks"], row["gib"], strict=True)}
    for row in new["rows"]:
        for column, (rank, _) in enumerate(new["ranks"]):
            was = before.get((row["side"], row["css"], rank), "-")
            row["was"][column] = was if was != row["gib"][column] else ""
