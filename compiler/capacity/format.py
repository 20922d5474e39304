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
    return "\n".join(lines) + "\nGiB per rank; rank 0's terms:\n" + "".join(f"  {n}\n" for n in notes)
