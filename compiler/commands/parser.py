"""The command line's one argparse parser: a subparser per command, each naming the handler that runs it."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from spark_compile import __version__
from spark_compile.commands import run
from spark_compile.common.errors import EXIT_CODES, UsageError
from spark_compile.spec.generators.catalog_extract import add_catalog_arguments
from spark_compile.spec.suggest import did_you_mean

ROOT_HELP = "a directory `extends:` may also lead into (default: only the profile's repository)"
TARGETS = ("kubernetes",)  # targets beyond the per-node artifacts, which are always built
FORCE_OUTPUT = "replace an -o file spark-compile did not write"
TRACEBACK_HELP = "on an internal error, print its traceback instead of writing it to the log file (before the command)"
DEFAULT_COMMAND = "compile"  # `spark-compile profile.yaml` compiles it


class Parser(argparse.ArgumentParser):
    """argparse's parser, refusing with a UsageError (one line, exit 2) instead of printing its usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")

    @property
    def commands(self) -> dict[str, Parser]:
        """The subparsers, by command name."""
        return next((action.choices for action in self._actions if isinstance(action, argparse._SubParsersAction)),
                    {})


Handler = Callable[[argparse.Namespace], int]


def _command(sub: argparse._SubParsersAction[Parser], name: str, handler: Handler, help_text: str,
             description: str | None = None) -> Parser:
    """The subparser of command ``name``, which ``handler`` runs."""
    parser = sub.add_parser(name, help=help_text, description=description)
    parser.set_defaults(func=handler)
    return parser


def _root(parser: Parser) -> None:
    parser.add_argument("--root", type=Path, help=ROOT_HELP)


def _target(parser: Parser) -> None:
    parser.add_argument("--target", action="append", choices=TARGETS, default=[],
                        help="also build this target, as if the profile had its section (e.g. `kubernetes: {}`)")


def _output(parser: Parser, what: str) -> None:
    parser.add_argument("-o", "--output", type=Path, help=f"{what} (default: stdout)")


def _add_compile(sub: argparse._SubParsersAction[Parser]) -> None:
    compile_ = _command(sub, "compile", run.cmd_compile,
                        "compile a profile into generated/<profile>/ (the default command)")
    compile_.add_argument("profile", type=Path)
    compile_.add_argument("--out", type=Path, help="output root (default: generated/ beside spec/)")
    _root(compile_)
    compile_.add_argument("--force", action="store_true",
                          help="replace an output directory another profile of the same name wrote")
    _target(compile_)


def _add_check(sub: argparse._SubParsersAction[Parser]) -> None:
    check = _command(sub, "check", run.cmd_check, "validate profiles; with --generated also compare committed output")
    check.add_argument("profiles", nargs="+", type=Path,
                       help="a profile, or a folder: every *.yaml below it (compiled output folders left out)")
    check.add_argument("--format", choices=("text", "json", "github", "summary"), default="text",
                       help="summary: only the counts line (a hook beside one that prints the findings)")
    _root(check)
    check.add_argument("--strict", action="store_true", help="warnings fail the check too")
    check.add_argument("--generated", action="store_true",
                       help="also fail when the committed output of each profile is stale (drift)")
    check.add_argument("--out", type=Path,
                       help="with --generated: the output root (default: generated/ beside spec/)")
    check.add_argument("--engine", action="store_true",
                       help="also run SGLang's own resolution and boot checks on every rank (in the engine venv)")
    check.add_argument("--engine-python", help="with --engine: the engine venv's interpreter (default: "
                       "$ENGINE_PYTHON, else the .venv-engine of spark-compile's own checkout, never the current "
                       "directory's)")
    _target(check)


def _add_plan_and_listings(sub: argparse._SubParsersAction[Parser]) -> None:
    plan = _command(sub, "plan", run.cmd_plan, "print the launch plan")
    plan.add_argument("profile", type=Path)
    plan.add_argument("--json", action="store_true", help="machine-readable plan (the default form)")
    plan.add_argument("--capacity", action="store_true", help="print the per-rank memory budget as a table instead")
    _root(plan)
    _command(sub, "schema", run.cmd_schema, "print the profile's JSON Schema")
    _command(sub, "rules", run.cmd_rules, "list every rule")
    _command(sub, "explain", run.cmd_explain, "print a rule's documentation").add_argument("rule")
    _command(sub, "flags", run.cmd_flags, "list the SPARK_* overlay flags").add_argument("--json", action="store_true")


def _add_review(sub: argparse._SubParsersAction[Parser]) -> None:
    diff = _command(sub, "diff", run.cmd_diff, "semantic diff of two profiles (path or GITREV:path)")
    diff.add_argument("profiles", nargs="+", metavar="OLD NEW", help="the two sides (with --since: the paths)")
    diff.add_argument("--since", metavar="GITREV",
                      help="diff each path against itself at GITREV (pre-commit); prints, exits 0 unless unreadable")
    diff.add_argument("--unified", action="store_true")
    diff.add_argument("--detail", action="store_true", help="list each file change under the profile change behind it")
    diff.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    history = _command(sub, "history", run.cmd_history, "release table of the extends chains in a directory")
    history.add_argument("directory", type=Path)
    history.add_argument("--format", choices=("text", "markdown"), default="text")
    report = _command(sub, "report", run.cmd_report, "write a self-contained HTML review page of a profile")
    report.add_argument("profile")
    report.add_argument("--against", help="an older profile (path or GITREV:path) to highlight")
    _output(report, "the HTML file")


def _add_import(sub: argparse._SubParsersAction[Parser]) -> None:
    imp = _command(sub, "import", run.cmd_import,
                   "write a profile from a sparkrun recipe, a docker run line or a launcher")
    imp.add_argument("sources", nargs="+", type=Path, metavar="SOURCE")
    _output(imp, "the profile to write")
    imp.add_argument("--hosts", default="", help="the nodes, head first: H1,H2,... (address or user@address)")
    imp.add_argument("--architecture", help="the model's architecture (config.json architectures[0])")
    imp.add_argument("--fabric", choices=("roce", "infiniband", "tcp"),
                     help="the network between the nodes, when the source does not say (a recipe never does)")
    imp.add_argument("--interface", help="the fabric's network interface on every node")
    imp.add_argument("--rdma-devices", default="", help="the RDMA devices (HCAs) of a roce/infiniband fabric: A,B")
    imp.add_argument("--force", action="store_true", help=FORCE_OUTPUT)
    imp.add_argument("--trace", action="store_true",
                     help="RUN the first SOURCE (a launcher script) with the other SOURCEs as its arguments "
                          "(`import --trace run.sh 0`) in a sandbox, and import the docker run lines it records")
    imp.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="with --trace: a variable of the script's environment (repeatable)")


def _add_export_audit_catalog(sub: argparse._SubParsersAction[Parser]) -> None:
    export = _command(sub, "export", run.cmd_export, "write a profile as a sparkrun recipe")
    export.add_argument("profile", type=Path)
    export.add_argument("--sparkrun", action="store_true", required=True, help="as a sparkrun 0.4.2 recipe")
    _output(export, "the recipe to write")
    export.add_argument("--force", action="store_true", help=FORCE_OUTPUT)
    _root(export)
    audit = _command(sub, "audit", run.cmd_audit,
                     "compare a fleet's captured state with the profile, key by key, per rank")
    audit.add_argument("profile", type=Path)
    audit.add_argument("--inspect", type=Path, required=True, metavar="DIR",
                       help="the captures, one per node (launch.sh audit --save DIR, launch.sh postmortem DIR)")
    audit.add_argument("--format", choices=("text", "json"), default="text")
    _root(audit)
    catalog = _command(sub, "catalog", run.cmd_catalog,
                       "build the engine catalogs from SGLang (`catalog sglang --python PY` or `--source DIR`)",
                       description="Extract the engine's flag and environment-variable catalogs from a real install.")
    add_catalog_arguments(catalog)


def build_parser() -> Parser:
    """The parser of every command line of spark-compile."""
    parser = Parser(prog="spark-compile", description="Compile fleet profiles into launch artifacts.",
                    epilog="exit codes:\n" + "\n".join(textwrap.fill(meaning, 79, initial_indent=f"  {code:<4} ",
                                                                      subsequent_indent=" " * 7)
                                                        for code, meaning in EXIT_CODES),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"spark-compile {__version__}")
    parser.add_argument("--traceback", action="store_true", help=TRACEBACK_HELP)
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for add in (_add_compile, _add_check, _add_plan_and_listings, _add_review, _add_import, _add_export_audit_catalog):
        add(sub)
    return parser


def _refuse_mistyped_command(word: str, commands: list[str]) -> None:
    """A UsageError for a first word that is no file and reads as a mistyped command (`chek`), so it is not
    compiled as a profile of that name; a word that could be a path (a separator, a suffix, a file) is left."""
    path = Path(word)
    if path.suffix or len(path.parts) != 1 or path.exists():
        return
    hint = did_you_mean(word, commands)
    if hint:
        raise UsageError(f"spark-compile: {word!r} is not a command; {hint} (see --help)")


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` read (a first word that is neither an option nor a command is a profile to compile); every
    refusal is a UsageError, and --help or --version print and raise SystemExit(0)."""
    parser = build_parser()
    words = list(argv)
    first = next((i for i, word in enumerate(words) if word != "--traceback"), len(words))
    if first < len(words) and not words[first].startswith("-") and words[first] not in parser.commands:
        _refuse_mistyped_command(words[first], list(parser.commands))
        words.insert(first, DEFAULT_COMMAND)
    args = parser.parse_args(words)
    if args.command is None:
        raise UsageError("spark-compile: name a profile to compile, or a command (see --help)")
    return args
