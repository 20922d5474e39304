"""The tool's surfaces beyond its command line's parsers: the environment variables it reads (found in its
sources), `regenerate`'s options (from its parser), and every list of numbers in the profile schema, with the
hostile values test_cli_inputs.py runs each with. A variable or an option with no entry here fails the suite.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from typing import Any

from cli_inputs import INTERPRETERS
from round2 import CANARY

from conftest import REFERENCE_PROFILE, ROOT

# The engine-side probes read SGLang's variables inside the engine's interpreter, not the tool's.
_ENGINE_SIDE = {"compiler/engine/resolve_probe.py", "spec/generators/sglang_probe.py",
                "spec/generators/sglang_environ.py"}
# os.environ.get("NAME"), environ["NAME"], os.getenv("NAME"), or the same through a constant NAME_ENV = "NAME".
_READ = re.compile(r"(?:environ(?:\.get|\.setdefault|\.pop)?[\[(]|getenv\()\s*(\"?)([A-Z][A-Z0-9_]*)\"?")
_CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*\"([A-Z][A-Z0-9_]*)\"", re.M)

_CODE = (f"$(touch {CANARY})", f"`touch {CANARY}`")
_WORDS = ("", "-1", "x", "\u0663", "9" * 400, "1" * 5000, "1e3", " 1", "a\nb", "\x1b[2J", *_CODE)
_FOLDERS = ("", "relative", "a\nb", "/dev/null", "/proc/self/mem", "@fifo", "@dir", "@dangling", "x" * 5000, *_CODE)
CHECK = ("check", str(REFERENCE_PROFILE))
# name -> (hostile values, the command line each runs with; "OUT" is the test's output folder)
TOOL_ENV: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ENGINE_PYTHON": (INTERPRETERS, ("check", "--engine", str(REFERENCE_PROFILE))),
    "NO_COLOR": (_WORDS, CHECK),
    "TERM": (("dumb", *_WORDS), CHECK),
    "XDG_CACHE_HOME": (_FOLDERS, CHECK),
    "PYDANTIC_DISABLE_PLUGINS": (_WORDS, CHECK),
    # Fault injection of the crash test: a whole number kills the compile on purpose, anything else is ignored.
    "SPARK_COMPILE_TEST_KILL_AFTER": (tuple(w for w in _WORDS if not w.isdecimal() or len(w) > 18),
                                      ("compile", str(REFERENCE_PROFILE), "--out", "OUT")),
}
# Read at start-up, before main(), by the program only: run as the installed console script.
PROGRAM_ENV: dict[str, tuple[str, ...]] = {"SPARK_COMPILE_TEST_READY_FD": _WORDS}


def tool_env_vars() -> set[str]:
    """Every environment variable the tool's own code reads (compiler/ and spec/; overlay/ runs in the engine's
    container), by name or through a constant."""
    names: set[str] = set()
    constants: dict[str, str] = {}
    for path in [*ROOT.glob("compiler/**/*.py"), *ROOT.glob("spec/**/*.py")]:
        if str(path.relative_to(ROOT)) in _ENGINE_SIDE:
            continue
        text = path.read_text()
        names |= {name if quoted else f"${name}" for quoted, name in _READ.findall(text)}
        constants |= dict(_CONSTANT.findall(text))
    return {constants.get(name[1:], name) if name.startswith("$") else name for name in names}


class _ParserFoundError(Exception):
    """Carries the parser out of main() before it parses anything."""


def regenerate_options() -> set[str]:
    """The options of `regenerate`'s own parser, read from the parser main() builds."""
    from spark_compile.commands import regenerate

    def caught(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _ParserFoundError(self)

    original = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = caught  # type: ignore[assignment,method-assign]
    try:
        regenerate.main([])
    except _ParserFoundError as parsed:
        parser: argparse.ArgumentParser = parsed.args[0]
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    return {action.option_strings[-1] for action in parser._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)}


# Command lines argparse must refuse (2) or answer (--help, 0): none may start a regeneration.
REGENERATE: dict[str, tuple[tuple[str, ...], ...]] = {
    "--check": (("--check=1",), ("--check", "extra"), ("--check", "-x"), ("--check", "a\nb"), ("--check", "x" * 5000),
                ("--check", "--check=x"), ("-x",), ("-",), ("\x1b[2J",), (f"$(touch {CANARY})",), ("--help",)),
}


def number_lists() -> set[str]:
    """Dotted paths of every list of numbers in the profile schema ("*": a mapping's value)."""
    schema: dict[str, Any] = json.loads((ROOT / "generated" / "profile.schema.json").read_text())
    defs = schema.get("$defs", {})

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> Iterator[str]:
        node = defs[node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else node
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                yield from walk(sub, path)
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict):
            kinds = {sub.get("type") for sub in [items, *items.get("anyOf", [])]}
            if kinds & {"integer", "number"}:
                yield ".".join(path)
        for name, sub in node.get("properties", {}).items():
            yield from walk(sub, (*path, name))
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], (*path, "*"))

    return set(walk(schema, ()))


HUGE_NUMBERS = (10**40, int("9" * 400), 2**63, 1e308, -(10**40))
