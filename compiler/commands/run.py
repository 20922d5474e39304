"""The commands: each runs its stage and prints what it returns (commands/parser.py names each one's handler)."""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path

from spark_compile.capacity.format import capacity_json, capacity_table
from spark_compile.commands.audit import run_audit
from spark_compile.commands.catalog import run_catalog
from spark_compile.commands.compile import compile_profile
from spark_compile.commands.drift import check_drift
from spark_compile.commands.flags import flags_text
from spark_compile.commands.schema import schema_text
from spark_compile.common.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, InputError, UsageError
from spark_compile.common.findings import Finding, has_errors
from spark_compile.common.quoting import terminal_text
from spark_compile.common.secrets import redacted_json
from spark_compile.engine.check import engine_findings_many
from spark_compile.importer.profile import Request
from spark_compile.importer.run import run_import
from spark_compile.pipeline import Outcome, Planned, Rejected, planned, run
from spark_compile.review.diff import run_diff, run_since
from spark_compile.review.history import run_history
from spark_compile.review.page import run_report
from spark_compile.rules import load_all
from spark_compile.rules.capacity import CAPACITY_RULES
from spark_compile.spec.suggest import did_you_mean
from spark_compile.stages.report import render as render_report
from spark_compile.stages.write import MANIFEST
from spark_compile.targets.sparkrun import run_export

MAX_ERROR = 1000  # characters of an error line: a 5,000-character path is cut, not echoed whole


def render(findings: list[Finding], fmt: str, profiles: int) -> str:
    """The findings report (see report.render)."""
    return render_report(findings, fmt, profiles)  # type: ignore[arg-type]


def _planned(path: Path, targets: Sequence[str] = (), root: Path | None = None) -> Planned:
    """The planned profile (its warnings on stderr), or RejectedError."""
    outcome = planned(run(path, targets=targets, root=root))
    if outcome.findings:
        sys.stderr.write(render(outcome.findings, "text", 1))
    return outcome


def _with_engine_findings(outcomes: list[Outcome], python: str | None) -> list[list[Finding]]:
    """Each profile's findings with SGLang's own verdict added (every profile that passed the schema)."""
    per_profile = [list(o.findings) for o in outcomes]
    typed = [o.planned if isinstance(o, Rejected) else o for o in outcomes]
    checked = [(i, p) for i, p in enumerate(typed) if isinstance(p, Planned)]
    notes: list[str] = []
    verdicts = engine_findings_many([p for _, p in checked], python, notes)
    sys.stderr.write("".join(f"{note}\n" for note in notes))
    for (i, _), extra in zip(checked, verdicts, strict=True):
        per_profile[i] = sorted(per_profile[i] + extra, key=Finding.sort_key)
    return per_profile


def profile_files(paths: Sequence[Path]) -> list[Path]:
    """The profiles ``paths`` name: a file itself, a folder every ``*.yaml`` below it (a new release file
    too), but those in a folder spark-compile wrote (its MANIFEST.json: compiled k8s/*.yaml are output) and
    in hidden folders; folder links are not followed."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir() or path.is_symlink():
            found.append(path)
            continue
        below = []
        for top, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(top, d) / MANIFEST).exists())
            below += [Path(top, name) for name in sorted(files) if name.endswith(".yaml") and name[0] != "."]
        if not below:
            raise UsageError(f"no profile (*.yaml) under the folder {terminal_text(str(path))}")
        found += below
    return found


def cmd_check(args: Namespace) -> int:
    """Validate every profile named (or below a folder named); print all findings; exit 1 on errors (or
    warnings with --strict)."""
    outcomes: list[Outcome] = []
    unreadable = 0
    paths = profile_files(args.profiles)
    for path in paths:
        try:
            outcomes.append(run(path, targets=args.target, root=args.root))
        except InputError as exc:  # report it and go on: every other file still gets its findings
            sys.stderr.write(error_line(exc))
            unreadable += 1
    per_profile = _with_engine_findings(outcomes, args.engine_python) if args.engine else \
        [o.findings for o in outcomes]
    findings = [f for found in per_profile for f in found]
    if outcomes:
        sys.stdout.write(render(findings, args.format, len(outcomes)))
    status = EXIT_FINDINGS if has_errors(findings, strict=args.strict) else EXIT_OK
    if unreadable:
        return EXIT_USAGE
    if args.generated and status == EXIT_OK:
        status = check_drift([(p, o) for p, o in zip(paths, outcomes, strict=True)
                              if isinstance(o, Planned)], args.out)
    return status


def _capacity_only(args: Namespace) -> int | None:
    """`plan --capacity` on a profile whose only errors are the capacity rules': its findings, then the budget
    (that is when it is needed); None when the profile plans or other errors stop it."""
    outcome = run(args.profile, root=args.root)
    if not isinstance(outcome, Rejected) or outcome.planned is None or outcome.planned.capacity is None:
        return None
    if any(f.severity == "error" and not f.rule.startswith(CAPACITY_RULES) for f in outcome.findings):
        return None
    sys.stderr.write(render(outcome.findings, "text", 1))
    sys.stdout.write(capacity_table(outcome.planned.capacity))
    return EXIT_FINDINGS


def cmd_plan(args: Namespace) -> int:
    """Print the launch plan as JSON (with the memory budget under `capacity`), or the budget as a table."""
    if args.capacity:
        status = _capacity_only(args)
        if status is not None:
            return status
    validated = _planned(args.profile, root=args.root)
    capacity = validated.capacity
    if args.capacity and capacity is not None:
        sys.stdout.write(capacity_table(capacity))
        return EXIT_OK
    out = validated.plan.to_json()
    if capacity is not None:
        out["capacity"] = capacity_json(capacity)
    sys.stdout.write(redacted_json(out, indent=2))
    return EXIT_OK


def cmd_schema(_: Namespace) -> int:
    """Print the profile's JSON Schema."""
    sys.stdout.write(schema_text())
    return EXIT_OK


def cmd_rules(_: Namespace) -> int:
    """List every rule: id, severity, summary."""
    for rule in sorted(load_all().values(), key=lambda r: r.id):
        sys.stdout.write(f"{rule.id}  {rule.severity:<7}  {rule.summary}\n")
    return EXIT_OK


def cmd_explain(args: Namespace) -> int:
    """Print one rule's documentation with its bad and good examples."""
    rules = load_all()
    rule = rules.get(args.rule.upper())
    if rule is None:
        # Rule ids share their prefix and digits: only a one-character slip (SC230 for SC203) is a real match.
        hint = did_you_mean(args.rule.upper(), sorted(rules), cutoff=0.8)
        raise UsageError(f"no rule {args.rule!r}" + (f"; {hint}" if hint else "") + " (see `spark-compile rules`)")
    bad = "\n".join("    " + line for line in rule.bad.splitlines())
    good = "\n".join("    " + line for line in rule.good.splitlines())
    sys.stdout.write(f"{rule.id} ({rule.severity}): {rule.summary}\n\n{rule.doc}\n\nBad:\n{bad}\n\nGood:\n{good}\n")
    return EXIT_OK


def cmd_flags(args: Namespace) -> int:
    """List the overlay's SPARK_* flags."""
    sys.stdout.write(flags_text(as_json=args.json))
    return EXIT_OK


def cmd_compile(args: Namespace) -> int:
    """Compile a profile and write its artifacts atomically."""
    return compile_profile(_planned(args.profile, args.target, args.root), args.profile, args.out,
                           force=args.force)


def cmd_diff(args: Namespace) -> int:
    """Semantic diff of two profiles."""
    if args.since is not None:
        return run_since(args.since, args.profiles, fmt=args.format, detail=args.detail)
    if len(args.profiles) != 2:
        raise UsageError("spark-compile diff: expected OLD and NEW (or --since GITREV PATH...) (see --help)")
    return run_diff(*args.profiles, unified=args.unified, fmt=args.format, detail=args.detail)


def cmd_history(args: Namespace) -> int:
    """The release table of a directory's extends chains."""
    return run_history(args.directory, args.format)


def cmd_report(args: Namespace) -> int:
    """The HTML review page."""
    return run_report(args.profile, args.against, args.output)


def cmd_import(args: Namespace) -> int:
    """Import a deployment into a profile."""
    name = args.output.stem if args.output is not None else None
    hosts = tuple(h for h in args.hosts.split(",") if h)
    env = dict(item.partition("=")[::2] for item in args.env)
    if any("=" not in item or not item.partition("=")[0] for item in args.env):
        raise UsageError("spark-compile import: --env takes NAME=VALUE (see --help)")
    request = Request(hosts=hosts, name=name, architecture=args.architecture, fabric=args.fabric,
                      interface=args.interface, rdma_devices=tuple(d for d in args.rdma_devices.split(",") if d),
                      trace=args.trace, env=env)
    return run_import(args.sources, args.output, request, force=args.force)


def cmd_export(args: Namespace) -> int:
    """Export a profile as a sparkrun recipe."""
    planned = _planned(args.profile, root=args.root)
    return run_export(planned.plan, planned.profile, args.profile, args.output, force=args.force,
                      capacity=planned.capacity)


def cmd_audit(args: Namespace) -> int:
    """The fleet audit from captured state: 0 match, 1 drift, 2 a rank down or not captured (or usage)."""
    return run_audit(_planned(args.profile, root=args.root), args.inspect, args.format)


def cmd_catalog(args: Namespace) -> int:
    """Regenerate (or --check) the engine catalogs from a real SGLang install."""
    return run_catalog(args)


def error_line(exc: Exception) -> str:
    """An error's one line: a path or revision in it cannot add a line (a forged `::error::`) or move the
    cursor."""
    text = terminal_text(str(exc), one_line=True)
    if len(text) > MAX_ERROR:
        text = f"{text[:MAX_ERROR]}... ({len(text) - MAX_ERROR} more characters)"
    return f"{text}\n" if text.startswith("spark-compile") else f"spark-compile: error: {text}\n"
