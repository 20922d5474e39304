"""The memory budget as `plan --json` prints it (SGLang's own names for the KV figures) and as a table."""

from __future__ import annotations

from typing import Any

from spark_compile.capacity.budget import Capacity, RankCapacity, Term

# Columns of the table: (heading, term name); GiB with one decimal, '?' where a term is unknown here.
COLUMNS = (("total", "cuda_total"), ("weights", "weights"), ("draft", "draft"), ("nccl", "nccl"),
           ("head", "head_share"), ("static", "static_pool"), ("kv pool", "kv_pool"),
           ("outside", "outside_static"), ("graphs", "cuda_graphs"), ("transient", "prefill_transient"),
           ("host", "host_needs"), ("limit", "container_limit"))


def _term_json(term: Term) -> dict[str, Any]:
    return {"gib": None if term.gib is None else round(term.gib, 3), "source": term.source,
            "formula": term.formula}


def rank_json(rank: RankCapacity) -> dict[str, Any]:
    """One rank's budget; bytes_per_full_token and full_token as SGLang's boot line names them."""
    kv = rank.kv
    return {
        "rank": rank.rank, "node": rank.node, "context_length": rank.context_length,
        "bytes_per_full_token": None if kv is None or kv.bytes_per_full_token is None
        else round(kv.bytes_per_full_token, 2),
        "full_token": None if kv is None else kv.full_token,
        "requests_at_context_length": None if kv is None else kv.requests_at_context,
        "kv_model": None if kv is None else kv.note,
        "terms": {name: _term_json(term) for name, term in rank.terms.items()},
    }


def capacity_json(capacity: Capacity) -> dict[str, Any]:
    """The `capacity` section of `plan --json`."""
    return {"unit": "GiB", "ranks": [rank_json(rank) for rank in capacity.ranks]}


LEGEND = (
    "legend: GiB per rank. total = what CUDA reports; weights/draft = the load (pinned, from headers, or "
    "estimated: each term's source says which); static = mem_fraction_static x the minimum pre-load free memory; "
    "kv pool = what SGLang sizes from static - weights; outside = the rest, for activations and graphs; "
    "host = what the container holds in host memory; limit = --memory; full_token = KV tokens per rank; "
    "requests = full-context requests the pool holds at once; ? = not known here, - = not computed\n")


def verdict(capacity: Capacity) -> str:
    """One line a person reads first: fits, does not fit, or cannot tell, and why."""
    ranks = capacity.ranks
    unknown = next((r for r in ranks if r.terms["weights"].gib is None), None)
    if unknown is not None:
        return f"cannot tell: rank {unknown.rank}'s weights are unknown ({unknown.terms['weights'].source})"
    worst = min(ranks, key=lambda r: r.gib("available"))
    available = worst.terms["available"]
    if available.gib is not None and available.gib <= 0:
        return (f"does not fit: rank {worst.rank} ({worst.node}) loads {worst.gib('weights') + worst.gib('draft'):.1f} "
                f"GiB and its static pool leaves {available.gib:.1f} GiB for the KV cache")
    kv, context = worst.kv, worst.context_length
    if kv is None or kv.full_token is None or context is None:
        why = "the context length is not known here" if context is None else (kv.note if kv else available.source)
        return f"cannot tell: no KV token count ({why})"
    if kv.full_token < context:
        return (f"does not fit: rank {worst.rank} ({worst.node})'s KV pool holds {kv.full_token} tokens, less than "
                f"one request at context_length {context}")
    return (f"fits: {kv.full_token} KV tokens per rank ({kv.requests_at_context} requests at context_length "
            f"{context}), {worst.gib('weights') + worst.gib('draft'):.1f} GiB of weights per rank")


def _cell(term: Term | None) -> str:
    return "-" if term is None else "?" if term.gib is None else f"{term.gib:.1f}"


def capacity_table(capacity: Capacity) -> str:
    """One line per rank: each term in GiB, then the predicted full_token and full-context requests."""
    head = ["rank", "node", *(name for name, _ in COLUMNS), "full_token", "requests"]
    rows = [head]
    for rank in capacity.ranks:
        kv = rank.kv
        rows.append([str(rank.rank), rank.node, *(_cell(rank.terms.get(term)) for _, term in COLUMNS),
                     "?" if kv is None or kv.full_token is None else str(kv.full_token),
                     "?" if kv is None or kv.requests_at_context is None else str(kv.requests_at_context)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.rjust(w) if i > 1 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths,
                                                                                                      strict=True)))
             .rstrip() for row in rows]
    first = capacity.ranks[0] if capacity.ranks else None
    notes = [] if first is None else [f"{name}: {term.source}" + (f" ({term.formula})" if term.formula else "")
                                      for name, term in first.terms.items()]
    return (verdict(capacity) + "\n" + "\n".join(lines) + "\n" + LEGEND + "rank 0's terms:\n"
            + "".join(f"  {n}\n" for n in notes))
