"""The command line's arguments: one parser, each command's options and their help."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from spark_compile import __version__
from spark_compile.errors import UsageError

ROOT_HELP = "a directory `extends:` may also lead into (default: only the profile's repository)"
TARGETS = ("kubernetes",)  # targets beyond the per-node artifacts, which are always built


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser (every command but `catalog`, which has its own).

    Given the `command` a run names, only that command's subparser is built: a run needs no other, and the
    other thirteen cost a pre-commit hook a few milliseconds (argparse looks up translations per parser)."""
    # With the command known, the top level takes nothing of its own: -h and --version come before a command.
    parser = _Parser(prog="spark-compile", description="Compile fleet profiles into launch artifacts.",
                     add_help=command is None)
    if command is None:
        parser.add_argument("--version", action="version", version=f"spark-compile {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, (help_text, add_arguments) in _COMMANDS.items():
        if command is None or command == name:
            add_arguments(sub.add_parser(name, help=help_text))
    if command is None:
        # Listed for --help only: `run` hands `catalog ...` to the catalog generator's own parser first.
        sub.add_parser("catalog", add_help=False,
                       help="build the engine catalogs from SGLang (`catalog sglang --python PY` or `--source DIR`)")
    return parser


def _compile(comp: argparse.ArgumentParser) -> None:
    comp.add_argument("profile", type=Path)
    comp.add_argument("--out", type=Path, default=None, help="output root (default: generated/ beside spec/)")
    comp.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    comp.add_argument("--force", action="store_true",
                      help="replace an output directory another profile of the same name wrote")
    _target_option(comp)


def _check(check: argparse.ArgumentParser) -> None:
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


def _plan(plan: argparse.ArgumentParser) -> None:
    plan.add_argument("profile", type=Path)
    plan.add_argument("--json", action="store_true", help="machine-readable plan (the default form)")
    plan.add_argument("--capacity", action="store_true", help="print the per-rank memory budget as a table instead")
    plan.add_argument("--root", type=Path, default=None, help=ROOT_HELP)


def _no_arguments(_: argparse.ArgumentParser) -> None:
    pass


def _explain(explain: argparse.ArgumentParser) -> None:
    explain.add_argument("rule")


def _flags(flags: argparse.ArgumentParser) -> None:
    flags.add_argument("--json", action="store_true")


def _diff(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("profiles", nargs="+", metavar="OLD NEW", help="the two sides (with --since: the paths)")
    diff.add_argument("--since", metavar="GITREV", default=None,
                      help="diff each path against itself at GITREV (pre-commit); prints, exits 0 unless unreadable")
    diff.add_argument("--unified", action="store_true")
    diff.add_argument("--format", choices=("text", "json", "markdown"), default="text")


def _history(history: argparse.ArgumentParser) -> None:
    history.add_argument("directory", type=Path)
    history.add_argument("--format", choices=("text", "markdown"), default="text")


def _report(report: argparse.ArgumentParser) -> None:
    report.add_argument("profile")
    report.add_argument("--against", default=None, help="an older profile (path or GITREV:path) to highlight")
    report.add_argument("-o", "--output", type=Path, default=None, help="the HTML file (default: stdout)")


def _import(imp: argparse.ArgumentParser) -> None:
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


def _export(exp: argparse.ArgumentParser) -> None:
    exp.add_argument("profile", type=Path)
    exp.add_argument("--sparkrun", action="store_true", required=True, help="as a sparkrun 0.4.2 recipe")
    exp.add_argument("-o", "--output", type=Path, default=None, help="the recipe to write (default: stdout)")
    exp.add_argument("--force", action="store_true", help="replace an -o file spark-compile did not write")
    exp.add_argument("--root", type=Path, default=None, help=ROOT_HELP)


def _audit(audit: argparse.ArgumentParser) -> None:
    audit.add_argument("profile", type=Path)
    audit.add_argument("--inspect", type=Path, required=True, metavar="DIR",
                       help="the captures, one per node (launch.sh audit --save DIR, launch.sh postmortem DIR)")
    audit.add_argument("--format", choices=("text", "json"), default="text")
    audit.add_argument("--root", type=Path, default=None, help=ROOT_HELP)


def _target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", action="append", choices=TARGETS, default=[],
                        help="also build this target, as if the profile had its section (e.g. `kubernetes: {}`)")


# Each command: its one line of help and what adds its arguments, in --help's order.
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "compile": ("compile a profile into generated/<profile>/ (the default command)", _compile),
    "check": ("validate profiles; with --generated also compare committed output", _check),
    "plan": ("print the launch plan", _plan),
    "schema": ("print the profile's JSON Schema", _no_arguments),
    "rules": ("list every rule", _no_arguments),
    "explain": ("print a rule's documentation", _explain),
    "flags": ("list the SPARK_* overlay flags", _flags),
    "diff": ("semantic diff of two profiles (path or GITREV:path)", _diff),
    "history": ("release table of the extends chains in a directory", _history),
    "report": ("write a self-contained HTML review page of a profile", _report),
    "import": ("write a profile from a sparkrun recipe, a docker run line or a launcher", _import),
    "export": ("write a profile as a sparkrun recipe", _export),
    "audit": ("compare a fleet's captured state with the profile, key by key, per rank", _audit),
}
COMMANDS = (*_COMMANDS, "catalog")
