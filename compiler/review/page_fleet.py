"""The review page's picture of the fleet: one inline SVG with the fabric, each node (rank, role, start
order, address, what it reads from where) and, inside each node's box, its memory as one bar; beside it the
memory per rank with where each figure comes from.

Shapes are plain data (kind, coordinates, css class, text, title); the autoescaping template draws them,
so every text reaches the SVG escaped by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_compile.capacity.budget import Capacity, RankCapacity
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan

# The picture scales with its column; the template's SVG font sizes (14.5 units and up) keep every text at
# 11 px or more where the column is narrowest: 376 px of a 400 px window show the 480 units at 0.78.
WIDTH = 480
TOP = 58  # the fabric's box
NODE_H = 196
BOX_X = 50
BAR_X, BAR_W, BAR_H = BOX_X + 10, WIDTH - BOX_X - 10 - 12, 22
CHARS = {"mono": 46}  # the characters a box line holds at 14.5 units in monospace
SANS_CHARS = 50  # and in bold sans, the widest of the other styles
LABEL_CHAR = 8.0  # the width of one character of a segment's label, in viewBox units

# The memory bar's segments in order, as (term, label, css): SGLang's static pool (weights, draft, KV pool), the
# share it leaves outside the pool, what fills that share after SGLang measured, what the node held before, and
# what is left. On unified memory (GB10) the GPU's memory is the host's, so the bar is the node's one pool.
SEGMENTS = (("weights", "weights", "weights"), ("draft", "draft", "draft"), ("kv_pool", "KV pool", "kv"),
            ("outside_static", "outside the pool", "outside"), ("engram_host", "Engram row cache", "engram"),
            ("nccl", "NCCL", "nccl"), ("head_share", "HTTP/tokenizer", "http"),
            ("os", "page cache/OS", "os"), ("free", "free", "free"))
LATER = ("engram_host",)  # host memory that fills after SGLang measured: from its outside share
# --shm-size is a tmpfs's ceiling, charged only as it fills (the capacity budget's shm term): a row of the table,
# not a segment, or every node with a 32g shm would be drawn over its memory by what it may never hold.
SHM = ("shm", "shm ceiling (not drawn)", "shm")
# The segments that are no budget term (or not the term itself), and where each comes from.
DERIVED = {"outside_static": "what SGLang leaves outside its pool for activations, CUDA graphs and transients, "
                             "less what fills it after SGLang measured (the Engram row cache)",
           "os": "held before SGLang measures: the total less the pre-load free memory (MemAvailable) and what "
                 "NCCL and the head's processes took of it",
           "free": "what none of the other segments holds"}
LEGEND = tuple((css, label) for _, label, css in SEGMENTS)
OVER = ("what fills after SGLang measured (the Engram row cache) needs more than "
        "the share SGLang leaves outside its pool")


@dataclass(frozen=True, slots=True)
class Memory:
    """One node's memory as one bar: GiB per segment, summing to ``total`` (or to ``total + over`` when the
    figures add up to more than the node has); ``unknown``: the labels of terms not known here."""

    total: float
    amounts: dict[str, float]
    over: float
    unknown: tuple[str, ...]
    unified: bool


def node_memory(rank: RankCapacity, unified: bool) -> Memory:
    """The bar's GiB per segment, from the rank's budget terms. What fills after SGLang measured takes from the
    share it left outside its pool (where the GPU's memory is the host's); page cache/OS and free are what the
    terms leave."""
    total = rank.gib("cuda_total")
    names = [name for name, _, _ in SEGMENTS if name in rank.terms and (unified or name not in LATER)]
    amounts = {name: rank.gib(name) for name in names}
    unknown = tuple(label for name, label, _ in SEGMENTS[:-2] if (unified or name not in LATER)
                    and (name not in rank.terms or rank.terms[name].gib is None))
    later = sum(amounts.get(name, 0.0) for name in LATER)
    if "outside_static" in amounts:
        amounts["outside_static"] = max(amounts["outside_static"] - later, 0.0)
    amounts["os"] = max(total - rank.gib("pre_load") - rank.gib("nccl") - rank.gib("head_share"), 0.0)
    spare = round(total - sum(amounts.values()), 2)  # to the hundredth the page shows, so a fit is exact
    amounts["free"] = max(spare, 0.0)
    return Memory(total, amounts, max(0.0, -spare), unknown, unified)  # never -0.0


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


def _fit(text: str, chars: int) -> str:
    """``text`` cut in the middle to ``chars`` (the whole text stays in the tooltip)."""
    if len(text) <= chars:
        return text
    half = (chars - 1) // 2
    return text[:half] + "\u2026" + text[len(text) - (chars - 1 - half):]


def _text(x: float, y: float, css: str, text: str, title: str = "") -> Shape:
    return Shape("text", css, _n(x), _n(y), text=_fit(text, CHARS.get(css, SANS_CHARS)), title=title or text)


def _fabric(plan: LaunchPlan, fabric: str) -> list[Shape]:
    last = TOP + 10 + (len(plan.ranks) - 1) * NODE_H + 24
    first, _, second = fabric.partition("\n")
    wider = (WIDTH - 24) / (WIDTH - BOX_X - 22)  # the fabric's lines start left of the nodes'
    return [Shape("rect", "fabric", "2", "2", _n(WIDTH - 4), "48"),
            Shape("text", "label", "12", "21", text=_fit(first, int(SANS_CHARS * wider)), title=first),
            Shape("text", "mono", "12", "41", text=_fit(second, int(CHARS["mono"] * wider)), title=second),
            Shape("line", "bus", "24", "50", "24", _n(max(last, 50)))] if fabric else []


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _node(plan: LaunchPlan, rank: RankPlan, top: float, memory: tuple[RankCapacity | None, RankCapacity | None],
          notes: tuple[str, str], unified: bool) -> list[Shape]:
    """One node's box: who it is, when it starts, what it reads from where, and (``memory``: now, before)
    its memory; ``notes``: where its weights come from, and what changed on it."""
    weights, changed = notes
    start = plan.start_order.index(rank.rank) + 1
    role = "head" if rank.is_head else "worker"
    last = " (last: the head)" if start == len(plan.ranks) and len(plan.ranks) > 1 else ""
    engram = "no tables" if rank.engram is None else f"{rank.engram.source}: {rank.engram.directory}"
    shapes = [Shape("rect", f"node {role}" + " changed" * bool(changed), _n(BOX_X), _n(top), _n(WIDTH - BOX_X - 2),
                    _n(NODE_H - 12), title=changed, data={"rank": str(rank.rank)}),
              Shape("line", "tap", "24", _n(top + 24), _n(BOX_X), _n(top + 24)),
              Shape("circle", "start", "24", _n(top + 24), "13", text=str(start),
                    title=f"starts {_ordinal(start)}{last}"),
              _text(BOX_X + 10, top + 24, "label", f"rank {rank.rank} \u00b7 {rank.node} \u00b7 {role}"),
              _text(BOX_X + 10, top + 46, "mono", f"{rank.fabric_ip} \u00b7 starts {_ordinal(start)}{last}"),
              _text(BOX_X + 10, top + 68, "mono", f"weights: {weights}"),
              _text(BOX_X + 10, top + 90, "mono", f"Engram: {engram}")]
    if changed:
        shapes.append(Shape("text", "tag", _n(WIDTH - 12), _n(top + 24), text="changed", title=changed))
    now, before = memory
    return shapes + (_memory(now, node_memory(now, unified), top + 102, before) if now is not None else [])


def _tokens(memory: RankCapacity | None) -> str:
    full = None if memory is None or memory.kv is None else memory.kv.full_token
    return "not known here" if full is None else f"{full:,}"


def _summary(memory: Memory) -> tuple[str, str]:
    """The line under the bar, and its tooltip: the node's memory and what is left of it (or how far over)."""
    kind = "unified" if memory.unified else "GPU memory"
    state = f"{memory.over:.1f} GiB over if all fill" if memory.over else f"{memory.amounts['free']:.1f} GiB free"
    line = f"{memory.total:.1f} GiB {kind} \u00b7 {state}" + (f" \u00b7 ? {', '.join(memory.unknown)}"
                                                             if memory.unknown else "")
    why = f"{memory.over:.1f} GiB more than the node's {memory.total:.1f}: {OVER}" if memory.over else line
    unknown = f"; not known here, drawn as 0: {', '.join(memory.unknown)}" if memory.unknown else ""
    return line, why + unknown


def _source(rank: RankCapacity, name: str, unified: bool) -> str:
    """Where a segment's figure comes from: its budget term's source, or how the page derives it."""
    term = rank.terms.get(name)
    if term is None or (name == "outside_static" and unified):
        return DERIVED[name] + (f"; the share is {term.gib or 0:.1f} GiB: {term.source}" if term else "")
    return term.source


def _memory(rank: RankCapacity, memory: Memory, top: float, before: RankCapacity | None) -> list[Shape]:
    """The node's memory bar, the line saying what is left of it, and the KV cache's size in tokens."""
    scale = (memory.total + memory.over or 1.0) / BAR_W
    end = BAR_X + memory.total / scale
    data = {"rank": str(rank.rank), "total": f"{memory.total:.2f}", "over": f"{memory.over:.2f}"}
    shapes = [Shape("rect", "track", _n(BAR_X), _n(top), _n(end - BAR_X), _n(BAR_H), data=data)]
    at = float(BAR_X)
    for name, label, css in SEGMENTS:
        gib = memory.amounts.get(name, 0.0)
        if gib <= 0:
            continue
        width = gib / scale
        shapes.append(Shape("rect", f"seg {css}", _n(at), _n(top), _n(width), _n(BAR_H),
                            title=f"{label}: {gib:.1f} GiB ({_source(rank, name, memory.unified)})",
                            data={"rank": str(rank.rank), "term": css, "gib": f"{gib:.2f}"}))
        if width >= LABEL_CHAR * (len(label) + 5):  # the label fits inside its segment
            shapes.append(Shape("text", f"seglabel {css}", _n(at + 3), _n(top + 16), text=f"{label} {gib:.1f}"))
        at += width
    line, why = _summary(memory)
    tokens, was = _tokens(rank), _tokens(before)
    moved = before is not None and was != tokens
    return [*shapes, Shape("line", "limit", _n(end), _n(top - 3), _n(end), _n(top + BAR_H + 3),
                           title=f"{memory.total:.1f} GiB: the node's memory as CUDA reports it"),
            _text(BOX_X + 10, top + 44, "overline" if memory.over else "small", line, why),
            _text(BOX_X + 10, top + 66, "delta" if moved else "small",
                  f"KV tokens (full_token): {tokens}" + (f", was {was}" if moved else ""))]


def picture(plan: LaunchPlan, fabric: str, weights: list[str], capacity: tuple[Capacity | None, Capacity | None],
            changed: dict[int, str], unified: bool) -> Picture:
    """The fleet as an SVG: ``fabric`` is two lines (kind and interface; subnet and RDMA devices);
    ``weights`` where each rank reads the checkpoint; ``capacity`` the memory budget now and in the older
    profile; ``changed`` what changed on each rank; ``unified``: the GPU's memory is the host's."""
    now, before = ({m.rank: m for m in side.ranks} if side is not None else {} for side in capacity)
    height = TOP + len(plan.ranks) * NODE_H
    shapes = _fabric(plan, fabric)
    for index, rank in enumerate(plan.ranks):
        memory = (now.get(rank.rank), before.get(rank.rank))
        notes = (weights[rank.rank], changed.get(rank.rank, ""))
        shapes += _node(plan, rank, TOP + index * NODE_H, memory, notes, unified)
    return Picture(_n(height), shapes)


def memory_terms(capacity: Capacity | None, unified: bool) -> dict[str, Any]:
    """The memory beside the picture: one row per segment of the bar with each rank's GiB and where the
    figure comes from (and a row of how far over the total the figures go, where they do)."""
    ranks = capacity.ranks if capacity is not None else ()
    bars = [node_memory(rank, unified) for rank in ranks]
    rows: dict[str, dict[str, Any]] = {}
    for column, (rank, memory) in enumerate(zip(ranks, bars, strict=True)):
        for name, label, css in SEGMENTS:
            term = rank.terms.get(name)
            unknown = term is not None and term.gib is None
            kept = name == "outside_static" and name in memory.amounts  # listed even when nothing is left of it
            if memory.amounts.get(name, 0.0) <= 0 and not unknown and not kept:
                continue
            row = rows.setdefault(css, {"label": label, "css": css, "sources": [], "gib": ["-"] * len(ranks),
                                        "was": [""] * len(ranks)})
            row["gib"][column] = "?" if unknown else f"{memory.amounts[name]:.1f}"
            source = _source(rank, name, unified)
            if source not in row["sources"]:
                row["sources"].append(source)
    out = [rows[css] for _, _, css in SEGMENTS if css in rows]
    shm = [rank.gib(SHM[0]) for rank in ranks]
    if unified and any(shm):
        out.append({"label": SHM[1], "css": SHM[2], "gib": [f"{gib:.1f}" for gib in shm], "was": [""] * len(ranks),
                    "sources": [ranks[0].terms[SHM[0]].source + "; a ceiling, so not in the bar"]})
    if any(memory.over for memory in bars):
        out.append({"label": "over the total", "css": "over", "gib": [f"{m.over:.1f}" for m in bars],
                    "was": [""] * len(ranks), "sources": [OVER]})
    return {"ranks": [(r.rank, r.node) for r in ranks], "rows": out,
            "totals": [f"{m.total:.1f}" for m in bars], "unified": unified}


def mark_memory(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Each figure of the memory table that differs from the older profile's keeps that one as ``was``."""
    before = {(row["css"], rank): gib for row in old["rows"]
              for (rank, _), gib in zip(old["ranks"], row["gib"], strict=True)}
    for row in new["rows"]:
        for column, (rank, _) in enumerate(new["ranks"]):
            was = before.get((row["css"], rank), "-")
            row["was"][column] = was if was != row["gib"][column] else ""
