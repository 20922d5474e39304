"""Parse engine argv with SGLang's real parser, in the engine venv, in a subprocess.

``engine_python()`` finds that interpreter from $ENGINE_PYTHON (made by .ci/install-engine): when
it is missing the calling test fails under CI (``CI`` set) and is skipped, with the reason, elsewhere.

``parse_engine_argv(argv)`` takes everything after ``-m sglang.launch_server`` and returns the parsed
namespace as JSON (dest → value), exactly as ``sglang.srt.server_args.prepare_server_args`` builds its
parser: ``argparse.ArgumentParser(prog="sglang serve")`` + ``ServerArgs.add_cli_args`` (so argparse's
prefix abbreviations such as ``--tp`` for ``--tp-size`` are accepted, as they are at boot).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ENGINE_PYTHON_ENV = "ENGINE_PYTHON"
ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "spec" / "catalogs" / "sglang-0.5.23.json"

# Runs in the engine interpreter. stdin: a JSON list of argv lists. stdout: one JSON list of results,
# each {"namespace": {dest: value}, "abbreviations": {typed: canonical}} or {"error": message}.
_PARSE_SCRIPT = r"""
import argparse, contextlib, json, re, sys

class _Refused(Exception):
    pass

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # report instead of printing usage and exiting
        raise _Refused(message)

def _jsonable(value):
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))

argvs = json.load(sys.stdin)
with contextlib.redirect_stdout(sys.stderr):
    from sglang.srt.server_args import ServerArgs
    parser = _Parser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    results = []
    for argv in argvs:
        try:
            ns = parser.parse_args(argv)
        except _Refused as exc:
            results.append({"error": str(exc)})
            continue
        abbreviations = {}
        for token in argv:
            option = token.split("=", 1)[0]
            if option.startswith("--") and option not in parser._option_string_actions:
                hits = {o: a for o, a in parser._option_string_actions.items() if o.startswith(option)}
                if len(set(hits.values())) == 1:
                    abbreviations[option] = sorted(hits)[0]
        results.append({
            "namespace": {k: _jsonable(v) for k, v in sorted(vars(ns).items())},
            "abbreviations": abbreviations,
        })
sys.stdout.write(json.dumps(results) + "\n")
"""


class EngineArgvError(AssertionError):
    """SGLang's parser refused an argv."""


def engine_python() -> str:
    """The engine venv's interpreter; fails the test under CI when missing, skips it elsewhere."""
    python = os.environ.get(ENGINE_PYTHON_ENV, "")
    if python and Path(python).is_file() and os.access(python, os.X_OK):
        return python
    reason = (
        f"engine interpreter missing: ${ENGINE_PYTHON_ENV}={python!r} is not an executable file "
        "(make one with .ci/install-engine and export its python)"
        if python
        else f"${ENGINE_PYTHON_ENV} is not set (make the venv with .ci/install-engine and export its python)"
    )
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def parse_engine_argvs_full(argvs: list[list[str]], python: str | None = None) -> list[dict[str, Any]]:
    """Parse several argvs in one engine process (importing sglang costs seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}
    proc = subprocess.run(
        [python or engine_python(), "-I", "-c", _PARSE_SCRIPT],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"engine parser process failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    results: list[dict[str, Any]] = json.loads(proc.stdout)
    assert len(results) == len(argvs)
    return results


def parse_engine_argvs(argvs: list[list[str]], python: str | None = None) -> list[dict[str, Any]]:
    """The parsed namespaces (dest → value); raises EngineArgvError if SGLang refuses any argv."""
    out = []
    for argv, result in zip(argvs, parse_engine_argvs_full(argvs, python), strict=True):
        if "error" in result:
            raise EngineArgvError(f"sglang refused {argv}: {result['error']}")
        out.append(result["namespace"])
    return out


def parse_engine_argv(argv: list[str], python: str | None = None) -> dict[str, Any]:
    """The parsed namespace of one engine argv (everything after ``-m sglang.launch_server``)."""
    return parse_engine_argvs([argv], python)[0]


def engine_argv_of(docker_argv: list[str]) -> list[str]:
    """The engine arguments of a docker argv: everything after ``-m sglang.launch_server``."""
    for i in range(1, len(docker_argv)):
        if docker_argv[i] == "sglang.launch_server" and docker_argv[i - 1] == "-m":
            return docker_argv[i + 1 :]
    raise AssertionError(f"no '-m sglang.launch_server' in {docker_argv}")


def load_flag_catalog() -> dict[str, dict[str, Any]]:
    """The committed flag catalog, option string → entry."""
    doc = json.loads(CATALOG.read_text(encoding="utf-8"))
    return {option: entry for entry in doc["flags"] for option in entry["options"]}


def _convert(kind: str, raw: str) -> Any:
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "json":
        return json.loads(raw)
    return raw


def expected_values(argv: list[str], catalog: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """dest → the value the argv states, read with the committed catalog (canonical options only)."""
    expected: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        assert token.startswith("--"), f"expected an option at position {i}, got {token!r} in {argv}"
        option, eq, inline = token.partition("=")
        assert option in catalog, f"{option} is not an SGLang 0.5.23 option string (abbreviation or typo?)"
        entry = catalog[option]
        i += 1
        if entry["action"] == "store_true":
            expected[entry["dest"]] = True
        elif entry["action"] == "store_false":
            expected[entry["dest"]] = False
        elif entry["action"] == "boolean_optional":
            expected[entry["dest"]] = not option.startswith("--no-")
        elif entry["nargs"] in ("+", "*"):
            values = [inline] if eq else []
            while not eq and i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
            expected[entry["dest"]] = [_convert(entry["kind"], v) for v in values]
        else:
            raw = inline if eq else argv[i]
            i += 0 if eq else 1
            expected[entry["dest"]] = _convert(entry["kind"], raw)
    return expected
