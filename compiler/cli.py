"""The command line: parses arguments, runs stages, prints, and maps every outcome to an exit code.

Exit codes: 0 fine; 1 findings (errors, or warnings with --strict), drift (of generated/, or of a fleet from
`audit`), or a diff that differs; 2 usage or I/O error (a closed or full standard output too), or for `audit`
a rank unreachable, not running or not captured; 3 an internal error (a bug: reported in one
line, never as a traceback); 130 interrupted (Ctrl-C), without a traceback.
Everything printed passes through one redaction step (spark_compile.secrets.redact; JSON is redacted value by
value before serialisation) and one terminal-safe escaping (spark_compile.quoting.terminal_text).
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_compile import __version__, _interrupted
from spark_compile.errors import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    InputError,
    RejectedError,
    SparkCompileError,
    UsageError,
)
from spark_compile.findings import Finding, has_errors

if TYPE_CHECKING:
    from spark_compile.pipeline import Outcome, Planned

ROOT_HELP = "a directory `extends:` may also lead into (default: only the profile's repository)"
TARGETS = ("kubernetes",)  # targets beyond the per-node artifacts, which are always built
MAX_ERROR = 1000  # characters of an error line: a 5,000-character path is cut, not echoed whole
COMMANDS = ("check", "plan", "schema", "rules", "explain", "flags", "catalog", "diff", "compile", "history",
            "report", "import", "export", "audit")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spark-compile", description="Compile fleet profiles into launch artifacts.")
    parser.add_argument("--version", action="version", version=f"spark-compile {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    comp = sub.add_parser("compile", help="compile a profile into generated/<profile>/ (the default command)")
    comp.add_argument("profile", type=Path)
    comp.add_argument("--out", type=Path, default=None, help="output root (default: generated/ beside spec/)")
    comp.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    comp.add_argument("--force", action="store_true",
                      help="replace an output directory another profile of the same name wrote")
    _target_option(comp)
    check = sub.add_parser("check", help="validate profiles; with --generated also compare committed output")
    check.add_argument("profiles", type=Path, nargs="+")
    check.add_argument("--format", choices=("text", "json", "github", "summary"), default="text",
                       help="summary: only the counts line (a hook beside one that prints the findings)")
    check.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    check.add_argument("--strict", action="store_true", help="warnings fail the check too")
    check.add_argument("--generated", action="store_true",
                       help="also fail when the committed output of each profile is stale (drift)")
    check.add_argument("--out", type=Path, default=None,
                       help="with --generated: the output root (default: generated/ beside spec/)")
    check.add_argument("--engine", action="store_true",
                       help="also run SGLang's own resolution and boot checks on every rank (in the engine venv)")
    check.add_argument("--engine-python", default=None,
                       help="with --engine: the engine venv's interpreter (default: $ENGINE_PYTHON, else the "
                       ".venv-engine of spark-compile's own checkout, never the current directory's)")
    _target_option(check)
    plan = sub.add_parser("plan", help="print the launch plan")
    plan.add_argument("profile", type=Path)
    plan.add_argument("--json", action="store_true", help="machine-readable plan (the default form)")
    plan.add_argument("--capacity", action="store_true", help="print the per-rank memory budget as a table instead")
    plan.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    sub.add_parser("schema", help="print the profile's JSON Schema")
    sub.add_parser("rules", help="list every rule")
    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("rule")
    flags = sub.add_parser("flags", help="list the SPARK_* overlay flags")
    flags.add_argument("--json", action="store_true")
    diff = sub.add_parser("diff", help="semantic diff of two profiles (path or GITREV:path)")
    diff.add_argument("profiles", nargs="+", metavar="OLD NEW", help="the two sides (with --since: the paths)")
    diff.add_argument("--since", metavar="GITREV", default=None,
                      help="diff each path against itself at GITREV (pre-commit); prints, exits 0 unless unreadable")
    diff.add_argument("--unified", action="store_true")
    diff.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    history = sub.add_parser("history", help="release table of the extends chains in a directory")
    history.add_argument("directory", type=Path)
    history.add_argument("--format", choices=("text", "markdown"), default="text")
    report = sub.add_parser("report", help="write a self-contained HTML review page of a profile")
    report.add_argument("profile")
    report.add_argument("--against", default=None, help="an older profile (path or GITREV:path) to highlight")
    report.add_argument("-o", "--output", type=Path, default=None, help="the HTML file (default: stdout)")
    _import_parsers(sub)
    _export_parser(sub)
    audit = sub.add_parser("audit", help="compare a fleet's captured state with the profile, key by key, per rank")
    audit.add_argument("profile", type=Path)
    audit.add_argument("--inspect", type=Path, required=True, metavar="DIR",
                       help="the captures, one per node (launch.sh audit --save DIR, launch.sh postmortem DIR)")
    audit.add_argument("--format", choices=("text", "json"), default="text")
    audit.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    # Listed for --help only: `run` hands `catalog ...` to the catalog generator's own parser before this one.
    sub.add_parser("catalog", add_help=False,
                   help="build the engine catalogs from SGLang (`catalog sglang --python PY` or `--source DIR`)")
    return parser


def _import_parsers(sub: Any) -> None:
    imp = sub.add_parser("import", help="write a profile from a sparkrun recipe, a docker run line or a launcher")
    imp.add_argument("sources", type=Path, nargs="+", metavar="SOURCE")
    imp.add_argument("-o", "--output", type=Path, default=None, help="the profile to write (default: stdout)")
    imp.add_argument("--hosts", default="", help="the nodes, head first: H1,H2,... (address or user@address)")
    imp.add_argument("--architecture", default=None, help="the model's architecture (config.json architectures[0])")
    imp.add_argument("--fabric", choices=("roce", "infiniband", "tcp"), default=None,
                     help="the network between the nodes, when the source does not say (a recipe never does)")
    imp.add_argument("--interface", default=None, help="the fabric's network interface on every node")
    imp.add_argument("--rdma-devices", default="", help="the RDMA devices (HCAs) of a roce/infiniband fabric: A,B")
    imp.add_argument("--force", action="store_true", help="replace an -o file spark-compile did not write")
    imp.add_argument("--trace", action="store_true",
                     help="RUN each SOURCE (a launcher script) in a sandbox and import the docker run lines it records")
    imp.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="with --trace: a variable of the script's environment (repeatable)")


def _export_parser(sub: Any) -> None:
    exp = sub.add_parser("export", help="write a profile as a sparkrun recipe")
    exp.add_argument("profile", type=Path)
    exp.add_argument("--sparkrun", action="store_true", required=True, help="as a sparkrun 0.4.2 recipe")
    exp.add_argument("-o", "--output", type=Path, default=None, help="the recipe to write (default: stdout)")
    exp.add_argument("--force", action="store_true", help="replace an -o file spark-compile did not write")
    exp.add_argument("--root", type=Path, default=None, help=ROOT_HELP)


def _target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", action="append", choices=TARGETS, default=[],
                        help="also build this target, as if the profile had its section (e.g. `kubernetes: {}`)")


def render(findings: list[Finding], fmt: str, profiles: int) -> str:
    """The findings report (see report.render)."""
    from spark_compile.report import render as render_report

    return render_report(findings, fmt, profiles)  # type: ignore[arg-type]


def _planned(path: Path, targets: Sequence[str] = (), root: Path | None = None) -> Planned:
    """The planned profile (its warnings on stderr), or RejectedError."""
    from spark_compile.pipeline import planned, run

    outcome = planned(run(path, targets=targets, root=root))
    if outcome.findings:
        sys.stderr.write(render(outcome.findings, "text", 1))
    return outcome


def _with_engine_findings(outcomes: list[Outcome], python: str | None) -> list[list[Finding]]:
    """Each profile's findings with SGLang's own verdict added (every profile that passed the schema)."""
    from spark_compile.engine_check import engine_findings_many
    from spark_compile.pipeline import Planned, Rejected

    per_profile = [list(o.findings) for o in outcomes]
    typed = [o.planned if isinstance(o, Rejected) else o for o in outcomes]
    checked = [(i, p) for i, p in enumerate(typed) if isinstance(p, Planned)]
    notes: list[str] = []
    verdicts = engine_findings_many([p for _, p in checked], python, notes)
    sys.stderr.write("".join(f"{note}\n" for note in notes))
    for (i, _), extra in zip(checked, verdicts, strict=True):
        per_profile[i] = sorted(per_profile[i] + extra, key=Finding.sort_key)
    return per_profile


def cmd_check(args: argparse.Namespace) -> int:
    """Validate every profile named; print all findings; exit 1 on errors (or warnings with --strict)."""
    from spark_compile.pipeline import Planned, run

    outcomes: list[Outcome] = []
    unreadable = 0
    for path in args.profiles:
        try:
            outcomes.append(run(path, targets=args.target, root=args.root))
        except InputError as exc:  # report it and go on: every other file still gets its findings
            sys.stderr.write(_error_line(exc))
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
        from spark_compile.drift import check_drift

        status = check_drift([(p, o) for p, o in zip(args.profiles, outcomes, strict=True)
                              if isinstance(o, Planned)], args.out)
    return status


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the launch plan as JSON (with the memory budget under `capacity`), or the budget as a table."""
    from spark_compile.capacity_format import capacity_json, capacity_table
    from spark_compile.secrets import redacted_json

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


def cmd_schema(_: argparse.Namespace) -> int:
    """Print the profile's JSON Schema."""
    from spark_compile.schema import schema_text

    sys.stdout.write(schema_text())
    return EXIT_OK


def cmd_rules(_: argparse.Namespace) -> int:
    """List every rule: id, severity, summary."""
    from spark_compile.rules import load_all

    for rule in sorted(load_all().values(), key=lambda r: r.id):
        sys.stdout.write(f"{rule.id}  {rule.severity:<7}  {rule.summary}\n")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    """Print one rule's documentation with its bad and good examples."""
    from spark_compile.rules import load_all
    from spark_compile.spec.suggest import did_you_mean

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


def cmd_flags(args: argparse.Namespace) -> int:
    """List the overlay's SPARK_* flags."""
    from spark_compile.flags import flags_text

    sys.stdout.write(flags_text(as_json=args.json))
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile a profile and write its artifacts atomically."""
    from spark_compile.compile import compile_profile

    return compile_profile(_planned(args.profile, args.target, args.root), args.profile, args.out,
                           force=args.force)


def cmd_diff(args: argparse.Namespace) -> int:
    """Semantic diff of two profiles."""
    from spark_compile.diff import run_diff, run_since

    if args.since is not None:
        return run_since(args.since, args.profiles, fmt=args.format)
    if len(args.profiles) != 2:
        raise UsageError("spark-compile diff: expected OLD and NEW (or --since GITREV PATH...) (see --help)")
    return run_diff(*args.profiles, unified=args.unified, fmt=args.format)


def cmd_history(args: argparse.Namespace) -> int:
    """The release table of a directory's extends chains."""
    from spark_compile.history import run_history

    return run_history(args.directory, args.format)


def cmd_report(args: argparse.Namespace) -> int:
    """The HTML review page."""
    from spark_compile.report_page import run_report

    return run_report(args.profile, args.against, args.output)


def cmd_import(args: argparse.Namespace) -> int:
    """Import a deployment into a profile."""
    from spark_compile.importer.profile import Request
    from spark_compile.importer.run import run_import

    name = args.output.stem if args.output is not None else None
    hosts = tuple(h for h in args.hosts.split(",") if h)
    env = dict(item.partition("=")[::2] for item in args.env)
    if any("=" not in item or not item.partition("=")[0] for item in args.env):
        raise UsageError("spark-compile import: --env takes NAME=VALUE (see --help)")
    request = Request(hosts=hosts, name=name, architecture=args.architecture, fabric=args.fabric,
                      interface=args.interface, rdma_devices=tuple(d for d in args.rdma_devices.split(",") if d),
                      trace=args.trace, env=env)
    return run_import(args.sources, args.output, request, force=args.force)


def cmd_export(args: argparse.Namespace) -> int:
    """Export a profile as a sparkrun recipe."""
    from spark_compile.export_sparkrun import run_export

    return run_export(_planned(args.profile, root=args.root), args.profile, args.output, force=args.force)


def cmd_audit(args: argparse.Namespace) -> int:
    """The fleet audit from captured state: 0 match, 1 drift, 2 a rank down or not captured (or usage)."""
    from spark_compile.audit_plan import run_audit

    return run_audit(_planned(args.profile, root=args.root), args.inspect, args.format)


def cmd_catalog(argv: list[str]) -> int:
    """Regenerate (or --check) the engine catalogs from a real SGLang install."""
    from spark_compile.spec.generators.catalog_extract import main_catalog
    from spark_compile.write import write_file

    return main_catalog(argv, write_file)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": cmd_check, "plan": cmd_plan, "schema": cmd_schema, "rules": cmd_rules, "explain": cmd_explain,
    "flags": cmd_flags, "compile": cmd_compile, "diff": cmd_diff, "history": cmd_history, "report": cmd_report,
    "import": cmd_import, "export": cmd_export,
    "audit": cmd_audit,
}


def run(argv: Sequence[str]) -> int:
    """Run one command line; returns its exit code."""
    args_list = list(argv)
    if args_list[:1] == ["catalog"]:
        return cmd_catalog(args_list[1:])
    if args_list and args_list[0] not in COMMANDS and not args_list[0].startswith("-"):
        args_list.insert(0, "compile")
    args = _parser().parse_args(args_list)
    if args.command is None:
        raise UsageError("spark-compile: name a profile to compile, or a command (see --help)")
    return HANDLERS[args.command](args)


class _Redacting(io.TextIOBase):
    """A text stream that passes everything written through the one redaction step (unless its values were
    redacted before serialisation) and the one terminal-safe escaping of control and bidi characters."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        from spark_compile.quoting import terminal_text
        from spark_compile.secrets import Redacted, redact

        self.stream.write(text if isinstance(text, Redacted) else terminal_text(redact(text)))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return int(self.stream.fileno())


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's own flush at exit cannot fail a second time."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the one place that turns every error into a message and an exit code."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stdout is None:
        sys.stderr.write("spark-compile: error: standard output is closed\n")
        return EXIT_USAGE
    # pydantic looks for plugins through importlib.metadata on first model build (~35 ms on a pre-commit
    # hot path); the compiler uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(stdout), _Redacting(stderr)
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # from here, cleanup runs on Ctrl-C
        code = _run_guarded(argv)
        try:
            sys.stdout.flush()
        except OSError as exc:
            code = _io_error(exc)
        return code
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _error_line(exc: Exception) -> str:
    """An error's one line: a path or revision in it cannot add a line (a forged `::error::`) or move the
    cursor."""
    from spark_compile.quoting import terminal_text

    text = terminal_text(str(exc), one_line=True)
    if len(text) > MAX_ERROR:
        text = f"{text[:MAX_ERROR]}... ({len(text) - MAX_ERROR} more characters)"
    return f"{text}\n" if text.startswith("spark-compile") else f"spark-compile: error: {text}\n"


def _io_error(exc: OSError) -> int:
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        return EXIT_OK  # the reader went away (`| head`): what it wanted, it got
    _silence_stdout()
    sys.stderr.write(f"spark-compile: error: cannot write the output: {exc.strerror or exc}\n")
    return EXIT_USAGE


def _run_guarded(argv: Sequence[str] | None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except RejectedError as stop:  # any command, any profile it needs: the findings report, exit 1
        sys.stdout.write(render(stop.findings, "text", 1))
        return stop.exit_code
    except SparkCompileError as exc:
        sys.stderr.write(_error_line(exc))
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("spark-compile: interrupted\n")
        return 130
    except OSError as exc:
        if exc.errno is None:
            return _internal(exc)
        if exc.filename is not None:  # a path the user named that the system refuses (too long, no access)
            sys.stderr.write(_error_line(InputError(f"{exc.filename}: {exc.strerror or exc}")))
            return EXIT_USAGE
        return _io_error(exc)
    except RecursionError:
        sys.stderr.write("spark-compile: error: the input nests too deeply\n")
        return EXIT_USAGE
    except Exception as exc:
        return _internal(exc)


def _internal(exc: BaseException) -> int:
    from spark_compile.quoting import terminal_text

    sys.stderr.write(f"spark-compile: internal error: {type(exc).__name__}: "
                     f"{terminal_text(str(exc)[:300], one_line=True)} (please report this)\n")
    return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
