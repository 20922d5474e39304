"""The command line's arguments: each command's arguments as data, the argparse parser built from them (for
--help and every error), and a quick reader of the plain command lines hooks and scripts run."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from spark_compile import __version__
from spark_compile.common.errors import UsageError

if TYPE_CHECKING:
    import argparse

ROOT_HELP = "a directory `extends:` may also lead into (default: only the profile's repository)"
TARGETS = ("kubernetes",)  # targets beyond the per-node artifacts, which are always built


class Arguments(SimpleNamespace):
    """A command line, read: the command and each argument's value, by its dest."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument of a command: its option strings (or a positional's name) and what it takes."""

    names: tuple[str, ...]
    action: str = "store"  # store | store_true | append; a positional is a store, of one word or (nargs +) many
    nargs: str | None = None
    path: bool = False  # the value is a Path
    default: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    help: str | None = None
    metavar: str | None = None

    @property
    def positional(self) -> bool:
        return not self.names[0].startswith("-")

    @property
    def dest(self) -> str:
        """The attribute it fills, named as argparse names it."""
        if self.positional:
            return self.names[0]
        return next((n for n in self.names if n.startswith("--")), self.names[0]).lstrip("-").replace("-", "_")

    def typed(self, text: str) -> str | Path:
        """A value of it, as argparse's type makes it."""
        return Path(text) if self.path else text

    def initial(self) -> Any:
        """Its value when the command line does not give it."""
        return False if self.action == "store_true" else [] if self.action == "append" else self.default


def _root() -> Arg:
    return Arg(("--root",), path=True, help=ROOT_HELP)


def _target() -> Arg:
    return Arg(("--target",), action="append", choices=TARGETS,
               help="also build this target, as if the profile had its section (e.g. `kubernetes: {}`)")


def _switch(*names: str, help: str | None = None, required: bool = False) -> Arg:
    return Arg(names, action="store_true", help=help, required=required)


_FORCE_OUTPUT = "replace an -o file spark-compile did not write"

def _compile_args() -> tuple[Arg, ...]:
    return (
        Arg(("profile",), path=True),
        Arg(("--out",), path=True, help="output root (default: generated/ beside spec/)"),
        _root(),
        _switch("--force", help="replace an output directory another profile of the same name wrote"),
        _target(),
    )


def _check_args() -> tuple[Arg, ...]:
    return (
        Arg(("profiles",), nargs="+", path=True),
        Arg(("--format",), choices=("text", "json", "github", "summary"), default="text",
            help="summary: only the counts line (a hook beside one that prints the findings)"),
        _root(),
        _switch("--strict", help="warnings fail the check too"),
        _switch("--generated", help="also fail when the committed output of each profile is stale (drift)"),
        Arg(("--out",), path=True, help="with --generated: the output root (default: generated/ beside spec/)"),
        _switch("--engine",
                help="also run SGLang's own resolution and boot checks on every rank (in the engine venv)"),
        Arg(("--engine-python",), help="with --engine: the engine venv's interpreter (default: $ENGINE_PYTHON, "
            "else the .venv-engine of spark-compile's own checkout, never the current directory's)"),
        _target(),
    )


def _plan_args() -> tuple[Arg, ...]:
    return (
        Arg(("profile",), path=True),
        _switch("--json", help="machine-readable plan (the default form)"),
        _switch("--capacity", help="print the per-rank memory budget as a table instead"),
        _root(),
    )


def _explain_args() -> tuple[Arg, ...]:
    return (Arg(("rule",)),)


def _flags_args() -> tuple[Arg, ...]:
    return (_switch("--json"),)


def _diff_args() -> tuple[Arg, ...]:
    return (
        Arg(("profiles",), nargs="+", metavar="OLD NEW", help="the two sides (with --since: the paths)"),
        Arg(("--since",), metavar="GITREV",
            help="diff each path against itself at GITREV (pre-commit); prints, exits 0 unless unreadable"),
        _switch("--unified"),
        Arg(("--format",), choices=("text", "json", "markdown"), default="text"),
    )


def _history_args() -> tuple[Arg, ...]:
    return (
        Arg(("directory",), path=True),
        Arg(("--format",), choices=("text", "markdown"), default="text"),
    )


def _report_args() -> tuple[Arg, ...]:
    return (
        Arg(("profile",)),
        Arg(("--against",), help="an older profile (path or GITREV:path) to highlight"),
        Arg(("-o", "--output"), path=True, help="the HTML file (default: stdout)"),
    )


def _import_args() -> tuple[Arg, ...]:
    return (
        Arg(("sources",), nargs="+", path=True, metavar="SOURCE"),
        Arg(("-o", "--output"), path=True, help="the profile to write (default: stdout)"),
        Arg(("--hosts",), default="", help="the nodes, head first: H1,H2,... (address or user@address)"),
        Arg(("--architecture",), help="the model's architecture (config.json architectures[0])"),
        Arg(("--fabric",), choices=("roce", "infiniband", "tcp"),
            help="the network between the nodes, when the source does not say (a recipe never does)"),
        Arg(("--interface",), help="the fabric's network interface on every node"),
        Arg(("--rdma-devices",), default="", help="the RDMA devices (HCAs) of a roce/infiniband fabric: A,B"),
        _switch("--force", help=_FORCE_OUTPUT),
        _switch("--trace", help="RUN each SOURCE (a launcher script) in a sandbox and import the docker run "
                "lines it records"),
        Arg(("--env",), action="append", metavar="NAME=VALUE",
            help="with --trace: a variable of the script's environment (repeatable)"),
    )


def _export_args() -> tuple[Arg, ...]:
    return (
        Arg(("profile",), path=True),
        _switch("--sparkrun", required=True, help="as a sparkrun 0.4.2 recipe"),
        Arg(("-o", "--output"), path=True, help="the recipe to write (default: stdout)"),
        _switch("--force", help=_FORCE_OUTPUT),
        _root(),
    )


def _audit_args() -> tuple[Arg, ...]:
    return (
        Arg(("profile",), path=True),
        Arg(("--inspect",), path=True, required=True, metavar="DIR",
            help="the captures, one per node (launch.sh audit --save DIR, launch.sh postmortem DIR)"),
        Arg(("--format",), choices=("text", "json"), default="text"),
        _root(),
    )


def _no_args() -> tuple[Arg, ...]:
    return ()


# Each command: its one line of help and what makes its arguments (made for the command a run names only:
# the table of all costs a pre-commit run a third of a millisecond), in --help's order.
_COMMANDS: dict[str, tuple[str, Callable[[], tuple[Arg, ...]]]] = {
    "compile": ("compile a profile into generated/<profile>/ (the default command)", _compile_args),
    "check": ("validate profiles; with --generated also compare committed output", _check_args),
    "plan": ("print the launch plan", _plan_args),
    "schema": ("print the profile's JSON Schema", _no_args),
    "rules": ("list every rule", _no_args),
    "explain": ("print a rule's documentation", _explain_args),
    "flags": ("list the SPARK_* overlay flags", _flags_args),
    "diff": ("semantic diff of two profiles (path or GITREV:path)", _diff_args),
    "history": ("release table of the extends chains in a directory", _history_args),
    "report": ("write a self-contained HTML review page of a profile", _report_args),
    "import": ("write a profile from a sparkrun recipe, a docker run line or a launcher", _import_args),
    "export": ("write a profile as a sparkrun recipe", _export_args),
    "audit": ("compare a fleet's captured state with the profile, key by key, per rank", _audit_args),
}
COMMANDS = (*_COMMANDS, "catalog")


def quick_read(argv: list[str]) -> Arguments | None:
    """``argv`` (a command and its arguments) as argparse reads it, when every option is written out whole
    and takes a plain value; None for anything else (help, an abbreviation, a missing, refused or
    dash-led value, words on both sides of an option), which is argparse's to read or refuse.

    Importing argparse and building a parser (it looks up translations for each) cost 2.5 ms of every
    pre-commit run; tests/test_cli_parser.py holds this reader to argparse's answers."""
    if not argv or argv[0] not in _COMMANDS:
        return None
    args = _COMMANDS[argv[0]][1]()
    by_name = {name: arg for arg in args if not arg.positional for name in arg.names}
    values = {arg.dest: arg.initial() for arg in args}
    given: set[str] = set()
    words: list[str] = []
    index, closed = 1, False
    while index < len(argv):
        token = argv[index]
        if not token.startswith("-"):
            if closed:
                return None
            words.append(token)
        else:
            closed = bool(words)
            name, equals, inline = token.partition("=")
            arg = by_name.get(name)
            if arg is None:
                return None
            if arg.action == "store_true":
                if equals:
                    return None
                values[arg.dest] = True
            else:
                if not equals:
                    index += 1
                    if index == len(argv) or argv[index].startswith("-"):
                        return None
                    inline = argv[index]
                if arg.choices is not None and inline not in arg.choices:
                    return None
                value = arg.typed(inline)
                values[arg.dest] = [*values[arg.dest], value] if arg.action == "append" else value
            given.add(arg.dest)
        index += 1
    return _with_positional(argv[0], args, values, given, words)


def _with_positional(command: str, args: tuple[Arg, ...], values: dict[str, Any], given: set[str],
                     words: list[str]) -> Arguments | None:
    if any(arg.required and arg.dest not in given for arg in args):
        return None
    positional = next((arg for arg in args if arg.positional), None)
    if positional is None:
        return Arguments(command=command, **values) if not words else None
    if not words or (positional.nargs is None and len(words) > 1):
        return None
    typed = [positional.typed(word) for word in words]
    values[positional.dest] = typed if positional.nargs else typed[0]
    return Arguments(command=command, **values)


@functools.cache
def _parser_class() -> type[argparse.ArgumentParser]:
    """argparse's parser, refusing with a UsageError; made (and argparse imported) only for a command line
    the quick reader leaves to it."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(f"{self.prog}: {message} (see --help)")

    return Parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser (every command but `catalog`, which has its own).

    Given the `command` a run names, only that command's subparser is built: a run needs no other, and the
    other thirteen cost a few milliseconds (argparse looks up translations per parser)."""
    # With the command known, the top level takes nothing of its own: -h and --version come before a command.
    parser = _parser_class()(prog="spark-compile", description="Compile fleet profiles into launch artifacts.",
                             add_help=command is None)
    if command is None:
        parser.add_argument("--version", action="version", version=f"spark-compile {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=type(parser))
    for name, (help_text, args) in _COMMANDS.items():
        if command is None or command == name:
            _add_arguments(sub.add_parser(name, help=help_text), args())
    if command is None:
        # Listed for --help only: `run` hands `catalog ...` to the catalog generator's own parser first.
        sub.add_parser("catalog", add_help=False,
                       help="build the engine catalogs from SGLang (`catalog sglang --python PY` or `--source DIR`)")
    return parser


def _add_arguments(parser: argparse.ArgumentParser, args: tuple[Arg, ...]) -> None:
    for arg in args:
        given: dict[str, Any] = {"help": arg.help, "required": arg.required or None}
        if arg.action != "store_true":  # a switch takes no value, so none of a value's settings
            given.update(metavar=arg.metavar, nargs=arg.nargs, choices=arg.choices, type=Path if arg.path else None)
        if arg.action == "append" or arg.default is not None:
            given["default"] = arg.initial()
        if arg.action != "store":
            given["action"] = arg.action
        parser.add_argument(*arg.names, **{key: value for key, value in given.items() if value is not None})


def parse(argv: list[str]) -> Arguments:
    """``argv`` read: by the quick reader when it can, else by argparse (which prints help or refuses)."""
    quick = quick_read(argv)
    if quick is not None:
        return quick
    namespace = Arguments()
    build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv, namespace=namespace)
    return namespace
