"""The command line's one argparse parser (compiler/commands/parser.py): what each command line reads as, the
default command, and its refusals in whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_compile.commands import run
from spark_compile.commands.parser import build_parser, parse
from spark_compile.common.errors import UsageError

from conftest import run_cli

COMMON = {"traceback": False}
READ: list[tuple[list[str], dict[str, Any]]] = [
    (["compile", "spec/profiles/dsv41-4spark.yaml"],
     {"command": "compile", "func": run.cmd_compile, "profile": Path("spec/profiles/dsv41-4spark.yaml"), "out": None,
      "root": None, "force": False, "target": []}),
    (["compile", "p.yaml", "--out", "/tmp/o", "--force", "--target", "kubernetes", "--target=kubernetes"],
     {"command": "compile", "func": run.cmd_compile, "profile": Path("p.yaml"), "out": Path("/tmp/o"), "root": None,
      "force": True, "target": ["kubernetes", "kubernetes"]}),
    (["compile", "--root=..", "p.yaml"],
     {"command": "compile", "func": run.cmd_compile, "profile": Path("p.yaml"), "out": None, "root": Path(".."),
      "force": False, "target": []}),
    (["check", "a.yaml", "b.yaml", "--format", "json", "--strict"],
     {"command": "check", "func": run.cmd_check, "profiles": [Path("a.yaml"), Path("b.yaml")], "format": "json",
      "root": None, "strict": True, "generated": False, "out": None, "engine": False, "engine_python": None,
      "target": []}),
    (["check", "--engine", "--engine-python", "/usr/bin/python3", "a.yaml"],
     {"command": "check", "func": run.cmd_check, "profiles": [Path("a.yaml")], "format": "text", "root": None,
      "strict": False, "generated": False, "out": None, "engine": True, "engine_python": "/usr/bin/python3",
      "target": []}),
    (["plan", "p.yaml", "--json"],
     {"command": "plan", "func": run.cmd_plan, "profile": Path("p.yaml"), "json": True, "capacity": False,
      "root": None}),
    (["diff", "--since", "HEAD", "a.yaml"],
     {"command": "diff", "func": run.cmd_diff, "profiles": ["a.yaml"], "since": "HEAD", "unified": False,
      "detail": False, "format": "text"}),
    (["diff", "--detail", "--since", "HEAD", "a.yaml"],
     {"command": "diff", "func": run.cmd_diff, "profiles": ["a.yaml"], "since": "HEAD", "unified": False,
      "detail": True, "format": "text"}),
    (["report", "p.yaml", "--against", "HEAD:p.yaml", "-o", "page.html"],
     {"command": "report", "func": run.cmd_report, "profile": "p.yaml", "against": "HEAD:p.yaml",
      "output": Path("page.html")}),
    (["import", "recipe.yaml", "--hosts", "h1,h2", "--env", "A=1", "--env", "B=2"],
     {"command": "import", "func": run.cmd_import, "sources": [Path("recipe.yaml")], "output": None,
      "hosts": "h1,h2", "architecture": None, "fabric": None, "interface": None, "rdma_devices": "", "force": False,
      "trace": False, "env": ["A=1", "B=2"]}),
    (["export", "p.yaml", "--sparkrun"],
     {"command": "export", "func": run.cmd_export, "profile": Path("p.yaml"), "sparkrun": True, "output": None,
      "force": False, "root": None}),
    (["audit", "p.yaml", "--inspect", "caps"],
     {"command": "audit", "func": run.cmd_audit, "profile": Path("p.yaml"), "inspect": Path("caps"),
      "format": "text", "root": None}),
    (["history", "spec/profiles"],
     {"command": "history", "func": run.cmd_history, "directory": Path("spec/profiles"), "format": "text"}),
    (["explain", "SC312"], {"command": "explain", "func": run.cmd_explain, "rule": "SC312"}),
    (["flags", "--json"], {"command": "flags", "func": run.cmd_flags, "json": True}),
    (["rules"], {"command": "rules", "func": run.cmd_rules}),
    (["schema"], {"command": "schema", "func": run.cmd_schema}),
    (["catalog", "sglang", "--source", "tree", "--check"],
     {"command": "catalog", "func": run.cmd_catalog, "engine": "sglang", "python": None, "source": Path("tree"),
      "name": None, "out": None, "check": True}),
]


@pytest.mark.parametrize(("argv", "expected"), READ, ids=lambda value: " ".join(value) if isinstance(value, list)
                         else "")
def test_each_command_line_reads_as_its_command_and_values(argv: list[str], expected: dict[str, Any]) -> None:
    assert vars(parse(argv)) == {**COMMON, **expected}


def test_every_command_has_its_handler() -> None:
    commands = build_parser().commands
    assert sorted(commands) == ["audit", "catalog", "check", "compile", "diff", "explain", "export", "flags",
                                "history", "import", "plan", "report", "rules", "schema"]
    assert {name: parser.get_default("func") for name, parser in commands.items()} == {
        name: getattr(run, f"cmd_{name}") for name in commands}


@pytest.mark.parametrize("argv", [["p.yaml"], ["p.yaml", "--out", "o"], ["--traceback", "p.yaml"]],
                         ids=" ".join)
def test_a_first_word_that_is_no_command_is_a_profile_to_compile(argv: list[str]) -> None:
    args = parse(argv)
    assert (args.command, args.profile, args.traceback) == ("compile", Path("p.yaml"), "--traceback" in argv)


def test_traceback_is_a_global_option() -> None:
    assert parse(["--traceback", "check", "a.yaml"]).traceback is True
    assert parse(["check", "a.yaml"]).traceback is False


REFUSED = [
    ([], "spark-compile: name a profile to compile, or a command (see --help)"),
    (["--traceback"], "spark-compile: name a profile to compile, or a command (see --help)"),
    (["check"], "spark-compile check: the following arguments are required: profiles (see --help)"),
    (["check", "a.yaml", "--format", "yaml"], "spark-compile check: argument --format: invalid choice: 'yaml' "
                                              "(choose from 'text', 'json', 'github', 'summary') (see --help)"),
    (["compile", "a", "b"], "spark-compile: unrecognized arguments: b (see --help)"),
    (["-x"], "spark-compile: unrecognized arguments: -x (see --help)"),
    (["export", "p.yaml"], "spark-compile export: the following arguments are required: --sparkrun (see --help)"),
    (["audit", "p.yaml"], "spark-compile audit: the following arguments are required: --inspect (see --help)"),
    (["rules", "x"], "spark-compile: unrecognized arguments: x (see --help)"),
    (["check", "--strict=yes", "a"], "spark-compile check: argument --strict: ignored explicit argument 'yes' "
                                     "(see --help)"),
    (["compile", "p.yaml", "--out"], "spark-compile compile: argument --out: expected one argument (see --help)"),
    (["catalog", "nosuch"], "spark-compile catalog: argument engine: invalid choice: 'nosuch' (choose from "
                            "'sglang') (see --help)"),
    (["catalog"], "spark-compile catalog: the following arguments are required: engine (see --help)"),
]


@pytest.mark.parametrize(("argv", "message"), REFUSED, ids=lambda value: " ".join(value) if isinstance(value, list)
                         else "")
def test_a_mistake_is_refused_in_argparse_words(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse(argv)
    assert str(refused.value) == message


def test_a_refusal_is_one_line_and_exit_2() -> None:
    result = run_cli("check", "a.yaml", "--format", "yaml")
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", "spark-compile check: argument --format: invalid choice: 'yaml' (choose from 'text', 'json', "
        "'github', 'summary') (see --help)\n")


def test_an_abbreviated_option_reads_as_argparse_reads_it() -> None:
    assert parse(["compile", "p.yaml", "--ou", "o"]).out == Path("o")


def test_a_parse_leaves_the_parser_as_it_was() -> None:
    first, second = parse(["compile", "p.yaml"]), parse(["compile", "p.yaml", "--target", "kubernetes"])
    assert first.target == [] and second.target == ["kubernetes"]
    assert parse(["compile", "p.yaml"]).target == [] and parse(["import", "a"]).env == []


def test_version_and_help_print_and_exit_0() -> None:
    version = run_cli("--version")
    assert (version.returncode, version.stdout, version.stderr) == (0, "spark-compile 0.2.0\n", "")
    helped = run_cli("check", "--help")
    assert (helped.returncode, helped.stderr) == (0, "")
    assert helped.stdout.startswith("usage: spark-compile check [-h] [--format {text,json,github,summary}]")


MISTYPED = [
    (["chek", "spec/profiles/dsv41-4spark.yaml"], "spark-compile: 'chek' is not a command; did you mean 'check'? "
                                                   "(see --help)"),
    (["--traceback", "difff", "a.yaml", "b.yaml"], "spark-compile: 'difff' is not a command; did you mean 'diff'? "
                                                    "(see --help)"),
    (["plna"], "spark-compile: 'plna' is not a command; did you mean 'plan'? (see --help)"),
    (["chec\x1bk"], "spark-compile: 'chec\\x1bk' is not a command; did you mean 'check'? (see --help)"),
]


@pytest.mark.parametrize(("argv", "message"), MISTYPED, ids=lambda value: " ".join(value) if isinstance(value, list)
                         else "")
def test_a_mistyped_command_gets_the_command_it_is_closest_to(argv: list[str], message: str) -> None:
    result = run_cli(*argv)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message + "\n")


@pytest.mark.parametrize("word", ["chek.yaml", "profiles/chek", "nonsense"])
def test_a_word_that_may_be_a_path_or_is_like_no_command_is_still_a_profile(word: str) -> None:
    result = run_cli(word)
    assert (result.returncode, result.stderr) == (2, f"spark-compile: error: {word}: no such file\n")


def test_an_existing_file_named_like_a_mistyped_command_is_compiled(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "chek").write_text("name: x\n")
    monkeypatch.chdir(tmp_path)
    assert (parse(["chek"]).command, parse(["chek"]).profile) == ("compile", Path("chek"))
