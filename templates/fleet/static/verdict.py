#!/usr/bin/env python3
"""A release window's verdict: a small JSON and Markdown record the operator commits beside the profile.

A static file of spark-compile, run by launch.sh window (window.sh). Standard library and fleet_io.py only.

    verdict.py baseline DIR      gate.py's bench baseline options from the newest verdict in DIR whose bench
                                 passed (nothing when there is none)
    verdict.py write --dir DIR --candidate FOLDER --gate FILE --memory FILE --nodes "N0 N1 ..."
                     --started EPOCH --stopped EPOCH --result PASS|FAIL|ABORTED --reason TEXT --restored 0|1
                     [--log FILE] [--files DIR]
                                 DIR/PROFILE.verdict.json and DIR/PROFILE.verdict.md (FOLDER is the
                                 candidate's installed folder): release, the profile
                                 file's sha256 (and its extends chain's, from the compile's MANIFEST.json),
                                 each gate check's result and figures, memory peaks per node
                                 (from the window's free -g samples), start and stop times
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_io import MAX_FIGURE, read_text, replace_text, whole

SUFFIX = ".verdict.json"
MAX_EPOCH = 253402300799  # the last second of 9999, the last a date can show


def when(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def gate_checks(text: str) -> list[dict[str, Any]]:
    """The gate's GATE-RESULT records, in order (a gate cut short leaves only those it finished)."""
    checks = []
    for line in text.splitlines():
        if line.startswith("GATE-RESULT "):
            try:
                checks.append(json.loads(line.removeprefix("GATE-RESULT ")))
            except ValueError:
                continue
    return checks


def memory_peaks(text: str, nodes: list[str]) -> dict[str, dict[str, Any]]:
    """Per node: highest used and lowest available GiB over the samples ("epoch rank used available", or
    "epoch rank unreachable" when ssh failed)."""
    peaks: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[1].isdigit() or int(fields[1]) >= len(nodes):
            continue
        node = peaks.setdefault(nodes[int(fields[1])], {"samples": 0, "unreachable": 0})
        if len(fields) != 4 or not (fields[2].isdigit() and fields[3].isdigit()):
            node["unreachable"] += 1
            continue
        used, available = int(fields[2]), int(fields[3])
        node["samples"] += 1
        node["peak_used_gib"] = max(node.get("peak_used_gib", used), used)
        node["least_available_gib"] = min(node.get("least_available_gib", available), available)
    return {node: peaks[node] for node in nodes if node in peaks}


def read(path: str) -> str:
    """A window's file (gate output, memory samples); empty when it is missing or not a bounded regular file."""
    try:
        return read_text(path)
    except OSError:
        return ""


def build(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(args.candidate)
    fleet = json.loads(read_text(folder / "fleet" / "fleet.json"))
    plan = json.loads(read_text(folder / "plan.json"))
    # The compile's MANIFEST.json: the profile chain it read, the candidate's own file first, with sha256s.
    sources = json.loads(read_text(folder / "MANIFEST.json")).get("sources") or [{}]
    checks = gate_checks(read(args.gate))
    bench = next((c["figures"] for c in checks if c["name"] == "bench" and c["result"] == "PASS"), None)
    return {
        "profile": plan["profile"], "release": plan["release"] or "", "profile_sha256": sources[0].get("sha256", ""),
        "profile_sources": sources,
        "result": args.result, "reason": args.reason, "production_restored": args.restored == "1",
        "started": when(args.started), "stopped": when(args.stopped), "seconds": args.stopped - args.started,
        "test_port": fleet["window"]["port"],
        "failed": [c["name"] for c in checks if c["result"] == "FAIL"],
        "why": [f"{c['name']}: {c['summary']}" for c in checks if c["result"] == "FAIL"],
        "checks": checks,
        "bench": {"tokens_per_s": bench["tokens_per_s"], "ttft_s": bench["ttft_s"]} if bench else None,
        "memory": {"interval_seconds": fleet["window"]["memory_interval_seconds"],
                   "nodes": memory_peaks(read(args.memory), args.nodes.split())},
        "log": args.log,
        "files": args.files,
    }


def markdown(verdict: dict[str, Any]) -> str:
    lines = [f"# Release window: {verdict['profile']} ({verdict['release'] or 'no release tag'}): {verdict['result']}",
             "", f"- {verdict['reason']}", *(f"- FAIL {why}" for why in verdict["why"]),
             f"- production restored: {'yes' if verdict['production_restored'] else 'NO'}",
             *(f"- profile `{source['path']}` sha256 `{source['sha256']}`" for source in verdict["profile_sources"]),
             f"- window: {verdict['started']} to {verdict['stopped']} ({verdict['seconds']} s), test port "
             f"{verdict['test_port']}", "", "| check | result | what it saw |", "|---|---|---|"]
    lines += [f"| {c['name']} | {c['result']} | {c['summary'].replace('|', '/')} |" for c in verdict["checks"]]
    if not verdict["checks"]:
        lines.append("| (no gate check ran) | | |")
    lines += ["", "| node | peak used GiB | least available GiB | samples |", "|---|---|---|---|"]
    lines += [f"| {node} | {m.get('peak_used_gib', '-')} | {m.get('least_available_gib', '-')} | {m['samples']}"
              f"{' (' + str(m['unreachable']) + ' unreachable)' if m['unreachable'] else ''} |"
              for node, m in verdict["memory"]["nodes"].items()]
    return "\n".join(lines) + "\n"


def write(args: argparse.Namespace) -> int:
    verdict = build(args)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{verdict['profile']}{SUFFIX}"
    replace_text(target, json.dumps(verdict, indent=2, sort_keys=True) + "\n")
    replace_text(target.with_suffix(".md"), markdown(verdict))
    print(f"verdict {verdict['result']}: {target} and {target.with_suffix('.md').name}")
    return 0


def _figure(value: Any) -> float | None:
    """A bench figure of a verdict file (which anyone with the folder may have edited): a number in
    (0, MAX_FIGURE], else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # An integer is bounded before float(): a 400-digit one overflows it.
    if isinstance(value, int) and not 0 < value <= MAX_FIGURE:
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 < number <= MAX_FIGURE else None


def _label(text: str) -> str:
    """The verdict's name for the gate's report: printable, one line, bounded."""
    return "".join(c if c.isprintable() else "?" for c in text)[:120]


def baseline_options(folder: str) -> list[str]:
    """gate.py's baseline options, one --name=value word each, from the newest verdict whose bench passed
    with sane figures (none when there is none). The values are parsed here, never split by a shell."""
    found = []
    for path in sorted(Path(folder).glob(f"*{SUFFIX}")):
        try:
            verdict = json.loads(read_text(path))
        except (OSError, ValueError, RecursionError):
            continue
        bench = verdict.get("bench") if isinstance(verdict, dict) else None
        tps, ttft = (_figure(bench.get(key)) for key in ("tokens_per_s", "ttft_s")) if isinstance(bench, dict) \
            else (None, None)
        if tps is not None and ttft is not None:
            found.append((str(verdict.get("stopped", "")), path.name, tps, ttft, verdict))
    if not found:
        return []
    stopped, name, tps, ttft, newest = max(found, key=lambda item: (item[0], item[1]))
    label = _label(f"{newest.get('profile', name)}@{stopped}")
    return [f"--baseline-tps={tps!r}", f"--baseline-ttft={ttft!r}", f"--baseline-from={label}"]


def baseline(folder: str) -> int:
    """Print gate.py's baseline options, one per line (window.sh reads them with mapfile, as words)."""
    for option in baseline_options(folder):
        print(option)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("baseline").add_argument("dir")
    out = sub.add_parser("write")
    for name in ("dir", "candidate", "gate", "memory", "nodes", "result", "reason", "restored"):
        out.add_argument(f"--{name}", required=True)
    out.add_argument("--started", type=whole(0, MAX_EPOCH), required=True)
    out.add_argument("--stopped", type=whole(0, MAX_EPOCH), required=True)
    out.add_argument("--log", default="")
    out.add_argument("--files", default="", help="the window's folder: gate output, memory samples, rank logs")
    args = parser.parse_args(argv)
    try:
        return baseline(args.dir) if args.command == "baseline" else write(args)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:  # a candidate folder that is not one
        print(f"verdict.py: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
