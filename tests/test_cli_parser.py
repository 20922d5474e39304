"""The quick reader of command lines (compiler/cli_parser.quick_read) against argparse, the parser it stands in
for: whatever it reads, argparse reads the same; what it leaves, argparse reads or refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.commands.parser import _COMMANDS, Arg, Arguments, build_parser, parse, quick_read
from spark_compile.common.errors import UsageError


def _argparse(argv: list[str]) -> dict[str, Any] | None:
    """What argparse makes of ``argv``, or None when it refuses it."""
    namespace = Arguments()
    try:
        build_parser(argv[0]).parse_args(argv, namespace=namespace)
    except UsageError:
        return None
    return vars(namespace)


def _tokens(command: str) -> st.SearchStrategy[str]:
    """Words of a command line of ``command``: its option strings whole, cut short and with =values, the values
    its choices take, and words that look like options, paths or nothing."""
    names = [name for arg in _COMMANDS[command][1]() if not arg.positional for name in arg.names]
    choices = [choice for arg in _COMMANDS[command][1]() for choice in arg.choices or ()]
    words = ["a.yaml", "b.yaml", "dir", "", " ", "-", "--", "-x", "--x", "-1", "-a b", "a=b", "--help", "-h",
             *choices, "--version"]
    cut = [name[:-1] for name in names if len(name) > 3]
    joined = [f"{name}={word}" for name in names for word in ("", "d", *choices[:2], "-d")]
    return st.sampled_from(names + cut + joined + words)


def _given(arg: Arg) -> st.SearchStrategy[list[str]]:
    """``arg`` written as a command line would: a switch, an option and its value (or =value), or words."""
    value = st.sampled_from(arg.choices) if arg.choices else st.sampled_from(["a.yaml", "d", "x=1", ""])
    if arg.positional:
        return st.lists(value, min_size=1, max_size=3)
    name = st.sampled_from(arg.names)
    if arg.action == "store_true":
        return name.map(lambda one: [one])
    return st.tuples(name, value, st.booleans()).map(lambda t: [f"{t[0]}={t[1]}"] if t[2] else [t[0], t[1]])


@st.composite
def _command_lines(draw: st.DrawFn, command: str) -> list[str]:
    """Command lines of ``command`` as they are written: its positional and required arguments, some others,
    in any order, and now and then a stray word among them."""
    args = _COMMANDS[command][1]()
    chosen = [arg for arg in args if arg.positional or arg.required]
    chosen += draw(st.lists(st.sampled_from([arg for arg in args if not arg.positional]), max_size=4)) \
        if any(not arg.positional for arg in args) else []
    parts = draw(st.permutations([draw(_given(arg)) for arg in chosen]))
    words = [word for part in parts for word in part]
    if draw(st.integers(0, 4)) == 0:
        words.insert(draw(st.integers(0, len(words))), draw(_tokens(command)))
    return words


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_what_the_quick_reader_reads_argparse_reads_the_same(command: str, data: st.DataObject) -> None:
    argv = [command, *data.draw(st.one_of(st.lists(_tokens(command), max_size=7), _command_lines(command)))]
    quick = quick_read(argv)
    if quick is not None:
        assert vars(quick) == _argparse(argv), argv


READ_QUICKLY = [
    ["compile", "spec/profiles/dsv41-4spark.yaml"],
    ["compile", "p.yaml", "--out", "/tmp/o", "--force", "--target", "kubernetes", "--target=kubernetes"],
    ["compile", "--root=..", "p.yaml"],
    ["check", "a.yaml", "b.yaml", "--format", "json", "--strict"],
    ["check", "--generated", "--out", "generated", "a.yaml"],
    ["check", "--engine", "--engine-python", "/usr/bin/python3", "a.yaml"],
    ["plan", "p.yaml", "--json"],
    ["diff", "a.yaml", "b.yaml", "--format", "markdown"],
    ["diff", "--since", "HEAD", "a.yaml"],
    ["report", "p.yaml", "--against", "HEAD:p.yaml", "-o", "page.html"],
    ["import", "recipe.yaml", "--hosts", "h1,h2", "--env", "A=1", "--env", "B=2"],
    ["export", "p.yaml", "--sparkrun"],
    ["audit", "p.yaml", "--inspect", "caps"],
    ["explain", "SC312"], ["rules"], ["schema"], ["flags", "--json"], ["history", "spec/profiles"],
]


@pytest.mark.parametrize("argv", READ_QUICKLY, ids=" ".join)
def test_the_command_lines_hooks_and_scripts_run_are_read_quickly(argv: list[str]) -> None:
    quick = quick_read(argv)
    assert quick is not None
    assert vars(quick) == _argparse(argv)


LEFT_TO_ARGPARSE = [
    ["check", "--help"], ["compile", "-h"], ["compile", "p.yaml", "--ou", "o"], ["check", "a", "--strict", "b"],
    ["check", "a", "--format", "yaml"], ["compile", "p.yaml", "--out"], ["compile", "p.yaml", "--out", "-o"],
    ["compile", "a", "b"], ["compile"], ["export", "p.yaml"], ["audit", "p.yaml"], ["rules", "x"],
    ["compile", "--", "p.yaml"], ["compile", "-"], ["check", "--strict=yes", "a"], ["catalog", "sglang"], [],
]


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=lambda argv: " ".join(argv) or "(empty)")
def test_help_abbreviations_and_mistakes_are_left_to_argparse(argv: list[str]) -> None:
    assert quick_read(argv) is None


def test_a_mistake_is_refused_in_argparse_words() -> None:
    with pytest.raises(UsageError) as refused:
        parse(["check", "a.yaml", "--format", "yaml"])
    assert str(refused.value) == ("spark-compile check: argument --format: invalid choice: 'yaml' (choose from "
                                  "'text', 'json', 'github', 'summary') (see --help)")


def test_paths_are_paths_and_lists_are_fresh() -> None:
    first, second = parse(["compile", "p.yaml"]), parse(["compile", "p.yaml", "--target", "kubernetes"])
    assert first.profile == Path("p.yaml") and first.target == [] and second.target == ["kubernetes"]
