"""Every input of the command line that names a path, a revision, a pattern or an interpreter, or whose
file's contents the command reads, and the hostile values each one is run with.

`cli_options()` enumerates the real argparse parser (compiler/commands/parser.py); INPUTS
says, for each (command, option) that takes a value, how a hostile value reaches it. test_cli_inputs fails
when a parser grows an option INPUTS does not cover.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from round2 import CANARY

from conftest import REFERENCE_PROFILE, ROOT

Argv = Callable[[Path, str], list[str]]
POSITIVE = ROOT / "tests" / "profiles" / "positive" / "llama-2node-h100.yaml"


def cli_options() -> set[tuple[str, str]]:
    """(command, option or positional name) of every argument that takes a value, in every parser."""
    from spark_compile.commands.parser import build_parser

    found: set[tuple[str, str]] = set()
    for command, parser in build_parser().commands.items():
        for action in parser._actions:
            if action.nargs == 0 or isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue  # a switch takes no value
            found.add((command, action.option_strings[-1] if action.option_strings else action.dest))
    return found


VICTIM_TEXT = "a file the command must not touch\n"


def _special(tmp: Path) -> dict[str, str]:
    """Files that are not what a path should be: a FIFO, a symlink loop, a dangling link, a directory, a
    symlink to a victim file, and a victim behind a planted temporary's name (.NAME.tmp)."""
    fifo, loop, dangling = tmp / "fifo.yaml", tmp / "loop.yaml", tmp / "dangling.yaml"
    victim, link, planted = tmp / "victim", tmp / "victim-link", tmp / "planted.html"
    if not fifo.exists():
        os.mkfifo(fifo)
        loop.symlink_to(loop)
        dangling.symlink_to(tmp / "nowhere")
        victim.write_text(VICTIM_TEXT)
        link.symlink_to(victim)
        (tmp / f".{planted.name}.tmp").symlink_to(victim)
    return {"@fifo": str(fifo), "@loop": str(loop), "@dangling": str(dangling), "@dir": str(tmp),
            "@victim-link": str(link), "@planted": str(planted)}


# Contents of a file a command reads as a profile (the profile's own fields have their own suite), and of a
# node's capture that `audit --inspect` reads.
CONTENTS: dict[str, bytes] = {
    "@nul": b"name: a\x00b\n", "@latin1": b"name: caf\xe9\n", "@bom-cr": b"\xef\xbb\xbfname: x\r  host: y\n",
    "@esc": b"name: \x1b[2Jx\n", "@bidi": "name: \u202ex\n".encode(), "@list": b"- a\n- b\n",
    "@alias-bomb": b"a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                   b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
    "@deep": b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n", "@empty": b"",
}
CAPTURES: dict[str, bytes] = {
    "@cap-empty": b"", "@cap-magic": b"spark-audit 1\n", "@cap-cut": b"spark-audit 1\nrank 0 99999\nx",
    "@cap-rank": b"spark-audit 1\nrank 0 1\nx\n", "@cap-huge-length": b"spark-audit 1\nrank 0 " + b"9" * 400 + b"\n",
    "@cap-inspect": b"spark-audit 1\nrank 0 1\n0\ninspect 0 7\n[[[[[[[\n", "@cap-esc": b"spark-audit 1\nrank 0 1\n0\n"
    b"\x1b[2J\xe2\x80\xae 0 2\nab\n",
    "@cap-deep": b"spark-audit 1\nrank 0 1\n0\ninspect 0 20000\n" + b"[" * 20000 + b"\n",
}
PATHS = ("", ".", "/", "-", "-x", "--help=x", "/dev/null", "/dev/zero", "/proc/self/mem", "a\nb.yaml",
         "\x1b[31mred.yaml", "\u202eyaml.lmth", "x" * 5000, "../../../../etc/passwd", "~", "/etc/hostname",
         f"$(touch {CANARY})", "no/such/file.yaml", "@fifo", "@loop", "@dangling", "@dir")
REVISIONS = ("HEAD", "HEADD", "", "-x", "--output=/tmp/spark-compile-round2-out", "a\nb", "HEAD~99999", "@{-1}",
             "HEAD:spec", f"$(touch {CANARY})", "\x1b[2J", "HEAD..main", "x" * 5000, "\u202eDAEH")
TEXTS = ("", "-x", "a\nb", "\x1b[2J", "\u202ex", "x" * 5000, "../../x", "sc101", "SC999", "%n", "*")
# Where a command writes: only ever inside the test's folder (a relative name lands in its working folder
# there). A hostile write path must never name a real file of the machine: a regression would replace it.
OUTPUTS = ("", ".", "-", "-x", "a\nb", "\x1b[31mred", "\u202elmth.html", "x" * 5000, "~", "no/such/dir/x",
           "@fifo", "@loop", "@dangling", "@dir", "@victim-link", "@planted", "..", "sub/../../x")
INTERPRETERS = ("", "/dev/null", "/etc", "/bin/false", "no-such-python", "-c", "a\nb", "@dir", "@fifo")


@dataclass(frozen=True)
class Input:
    """How a hostile value of one kind reaches one option: the values, and the argv around one."""

    values: tuple[str, ...]
    argv: Argv
    contents: bool = False  # also run with each of CONTENTS written to a file
    captures: bool = False  # also run with each of CAPTURES in a folder
    in_repository: bool = False  # run in the project's checkout (git revisions), else in the test's folder


def resolve_value(tmp: Path, value: str) -> str:
    """A value with its @-name (a special file, a file holding CONTENTS) made real under ``tmp``."""
    special = _special(tmp)
    if value in special:
        return special[value]
    if value in CONTENTS:  # each in a folder of its own, so `history` reads it alone
        path = tmp / "contents" / value[1:] / "p.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(CONTENTS[value])
        return str(path)
    if value in CAPTURES:  # a folder of captures: this one, a FIFO and a symlink beside it
        folder = tmp / "captures" / value[1:]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "rank0-spark-0.audit").write_bytes(CAPTURES[value])
        os.mkfifo(folder / "rank1-spark-1.audit")
        (folder / "rank2-spark-2.audit").symlink_to("/dev/zero")
        return str(folder)
    return value


def _profile_at(command: str, *before: str) -> Argv:
    return lambda tmp, v: [command, *before, v]


def _out(command: str, *after: str) -> Argv:
    return lambda tmp, v: [command, str(REFERENCE_PROFILE), *after, v]


def _import(*before: str) -> Argv:
    """`import SOURCE ... VALUE` on a docker run line of our own, written where the test runs."""
    def argv(tmp: Path, value: str) -> list[str]:
        source = tmp / "run.sh"
        source.write_text("docker run --gpus all --network host lmsysorg/sglang:v0.5.23 \\\n"
                          "  python3 -m sglang.launch_server --model-path /models/m --port 30000\n")
        return ["import", str(source), *before, value]
    return argv


INPUTS: dict[tuple[str, str], Input] = {
    ("import", "sources"): Input(PATHS, lambda tmp, v: ["import", v], contents=True),
    ("import", "--output"): Input(OUTPUTS, _import("-o")),
    **{("import", option): Input(TEXTS, _import(option))
       for option in ("--hosts", "--architecture", "--fabric", "--interface", "--rdma-devices", "--env")},
    ("export", "profile"): Input(PATHS, lambda tmp, v: ["export", "--sparkrun", v], contents=True),
    ("export", "--output"): Input(OUTPUTS, lambda tmp, v: ["export", "--sparkrun", str(REFERENCE_PROFILE), "-o", v]),
    ("export", "--root"): Input(PATHS, lambda tmp, v: ["export", "--sparkrun", str(REFERENCE_PROFILE), "--root", v]),
    ("compile", "profile"): Input(PATHS, _profile_at("compile", "--out", "OUT"), contents=True),
    ("compile", "--out"): Input(OUTPUTS, _out("compile", "--out")),
    ("compile", "--root"): Input(PATHS, _out("compile", "--out", "OUT", "--root")),
    ("compile", "--target"): Input(TEXTS, _out("compile", "--out", "OUT", "--target")),
    ("check", "profiles"): Input(PATHS, lambda tmp, v: ["check", v, str(POSITIVE)], contents=True),
    ("check", "--format"): Input(TEXTS, _out("check", "--format")),
    ("check", "--root"): Input(PATHS, _out("check", "--root")),
    ("check", "--out"): Input(PATHS, _out("check", "--generated", "--out")),
    ("check", "--engine-python"): Input(INTERPRETERS, _out("check", "--engine", "--engine-python")),
    ("check", "--target"): Input(TEXTS, _out("check", "--target")),
    ("plan", "profile"): Input(PATHS, _profile_at("plan"), contents=True),
    ("plan", "--root"): Input(PATHS, _out("plan", "--root")),
    ("explain", "rule"): Input(TEXTS, _profile_at("explain")),
    ("diff", "profiles"): Input(PATHS + REVISIONS[:6], lambda tmp, v: ["diff", str(REFERENCE_PROFILE), v],
                                contents=True, in_repository=True),
    ("diff", "--since"): Input(REVISIONS, lambda tmp, v: ["diff", "--since", v, "spec/profiles/dsv41-4spark.yaml"],
                               in_repository=True),
    ("diff", "--format"): Input(TEXTS, lambda tmp, v: ["diff", "--format", v, str(POSITIVE), str(POSITIVE)]),
    ("history", "directory"): Input(PATHS, lambda tmp, v: ["history", os.path.dirname(v) if v.startswith(
        str(tmp / "contents")) else v], contents=True),
    ("history", "--format"): Input(TEXTS, lambda tmp, v: ["history", "--format", v, str(tmp)]),
    ("report", "profile"): Input(PATHS + tuple(f"{r}:spec/profiles/dsv41-4spark.yaml" for r in REVISIONS[:6]),
                                 _profile_at("report"), contents=True, in_repository=True),
    ("report", "--against"): Input(PATHS + REVISIONS[:6], _out("report", "--against"), contents=True),
    ("report", "--output"): Input(OUTPUTS, _out("report", "--output")),
    ("audit", "profile"): Input(PATHS, lambda tmp, v: ["audit", v, "--inspect", str(tmp)], contents=True),
    ("audit", "--inspect"): Input(PATHS, lambda tmp, v: ["audit", str(REFERENCE_PROFILE), "--inspect", v],
                                  captures=True),
    ("audit", "--format"): Input(TEXTS, lambda tmp, v: ["audit", str(REFERENCE_PROFILE), "--inspect", str(tmp),
                                                        "--format", v]),
    ("audit", "--root"): Input(PATHS, lambda tmp, v: ["audit", str(REFERENCE_PROFILE), "--inspect", str(tmp),
                                                      "--root", v]),
    ("catalog", "engine"): Input(TEXTS, lambda tmp, v: ["catalog", v, "--check"]),
    ("catalog", "--python"): Input(INTERPRETERS, lambda tmp, v: ["catalog", "sglang", "--check", "--python", v]),
    ("catalog", "--source"): Input(PATHS, lambda tmp, v: ["catalog", "sglang", "--check", "--source", v]),
    ("catalog", "--name"): Input(TEXTS, lambda tmp, v: ["catalog", "sglang", "--source", "TREE", "--out", "OUT",
                                                        "--name", v]),
    ("catalog", "--out"): Input(OUTPUTS, lambda tmp, v: ["catalog", "sglang", "--source", "TREE", "--out", v]),
}
