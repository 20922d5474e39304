"""`check`, `plan --json` and `check --engine` never import SGLang, torch or flashinfer: they are not even
installed where the compiler runs (SGLang's own resolution runs in the engine venv's interpreter, in a subprocess).

Each command runs in a fresh interpreter (``-X importtime``) through ``spark_compile.cli.main``; a spy on
``sys.meta_path`` records the Python stack of the first import of each forbidden package, and importtime's
nesting gives the module chain, so a failure names exactly which module pulled the package in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, ROOT

ENGINE = ("sglang", "torch", "flashinfer")
MARKER = "@@import-hygiene@@"

# Runs in the child: spy on first imports of the watched packages, run the CLI, report on stderr.
PROBE = f"""
import json, sys, traceback
WATCHED = set(sys.argv[1].split(","))
stacks = {{}}

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED and name not in stacks:
            frames = traceback.extract_stack()[:-1]
            stacks[name] = [f"{{f.filename}}:{{f.lineno}} ({{f.name}})" for f in frames
                            if not f.filename.startswith("<frozen")]
        return None

sys.meta_path.insert(0, Spy())
from spark_compile.cli import main
code = main(sys.argv[2:])
sys.stdout.flush()
report = {{"code": code, "modules": sorted(sys.modules), "stacks": stacks}}
sys.stderr.write("\\n{MARKER}" + json.dumps(report) + "\\n")
"""


def import_chain(importtime: str, package: str) -> list[str]:
    """The chain of imports that first loaded ``package``, innermost first, from ``-X importtime`` output.

    importtime prints a module after the modules it imports, indented two spaces per level: the importer
    of a line is the next line below it that is indented less.
    """
    rows = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and "|" in line:
            name_field = line.split("|", 2)[2]
            stripped = name_field.lstrip(" ")
            if stripped != "imported package":
                rows.append(((len(name_field) - len(stripped) - 1) // 2, stripped.strip()))
    for index, (depth, name) in enumerate(rows):
        if name == package:
            chain, level = [name], depth
            for up_depth, up_name in rows[index + 1:]:
                if up_depth < level:
                    chain.append(up_name)
                    level = up_depth
                if level == 0:
                    break
            return chain
    return []


def run_probe(*argv: str, watched: tuple[str, ...], cache: Path | None = None) -> tuple[dict[str, object], str]:
    """Run the CLI with ``argv`` in a fresh interpreter (its user cache under ``cache``); its report, and
    the importtime output."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)} if cache else None
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE, ",".join(watched), *argv],
                            cwd=ROOT, capture_output=True, text=True, check=False, timeout=120, env=env)
    head, marker, tail = result.stderr.rpartition(MARKER)
    assert marker, f"the probe did not report (exit {result.returncode}):\n{result.stderr[-3000:]}"
    return json.loads(tail), head


def leaks(report: dict[str, object], importtime: str, watched: tuple[str, ...]) -> dict[str, str]:
    """Each watched package that was imported, with how it got there."""
    modules: list[str] = report["modules"]  # type: ignore[assignment]
    loaded = {name.split(".")[0] for name in modules} | set(modules)
    stacks: dict[str, list[str]] = report["stacks"]  # type: ignore[assignment]
    found = {}
    for package in watched:
        if package in loaded:
            chain = " <- ".join(import_chain(importtime, package)) or "(not in importtime output)"
            if " <- " not in chain:
                chain += " (imported inside a function at run time: see the stack)"
            stack = "\n      ".join(stacks.get(package, ["(no stack recorded)"]))
            found[package] = f"{package}: chain {chain}\n    first imported from:\n      {stack}"
    return found


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user cache that one `check` has filled: the state of every run after the first."""
    cache = tmp_path_factory.mktemp("cache")
    report, _ = run_probe("check", str(REFERENCE_PROFILE), watched=(), cache=cache)
    assert report["code"] == 0
    return cache


@pytest.mark.parametrize(("command", "argv"), [
    ("check", ("check", str(REFERENCE_PROFILE))),
    ("plan", ("plan", str(REFERENCE_PROFILE), "--json")),
    ("check --engine", ("check", "--engine", str(REFERENCE_PROFILE))),
])
def test_command_does_not_import_the_engine(command: str, argv: tuple[str, ...], warm_cache: Path) -> None:
    report, importtime = run_probe(*argv, watched=ENGINE, cache=warm_cache)
    assert report["code"] == 0
    modules = set(report["modules"])  # type: ignore[call-overload]
    # The probe saw the run, and the profile was validated by the model itself (spec/model.py).
    assert {"spark_compile.cli", "spark_compile.stages.validate", "spark_compile.spec.model"} <= modules
    found = leaks(report, importtime, ENGINE)
    assert not found, f"`spark-compile {command}` imports what it must not:\n" + "\n".join(found.values())


def test_the_probe_sees_an_import_and_its_chain(tmp_path: Path) -> None:
    """A full compile renders templates, so it does import jinja2: the detector is not blind."""
    report, importtime = run_probe(str(REFERENCE_PROFILE), "--out", str(tmp_path), watched=("jinja2",))
    assert report["code"] == 0
    found = leaks(report, importtime, ("jinja2",))
    assert "jinja2" in found
    assert import_chain(importtime, "jinja2")[:1] == ["jinja2"]
    stack: list[str] = report["stacks"]["jinja2"]  # type: ignore[index]
    packages = {Path(frame.split(":", 1)[0]).parent.name for frame in stack}
    assert packages & {"compiler", "spark_compile"}, stack


def test_import_chain_reads_importtime_nesting() -> None:
    sample = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:        10 |         10 |     markupsafe",
        "import time:        20 |         30 |   jinja2",
        "import time:         5 |          5 |   other",
        "import time:        40 |         75 | app.render",
        "import time:         1 |          1 | jinja2.ext",
    ])
    assert import_chain(sample, "jinja2") == ["jinja2", "app.render"]
    assert import_chain(sample, "markupsafe") == ["markupsafe", "jinja2", "app.render"]
    assert import_chain(sample, "app.render") == ["app.render"]
    assert import_chain(sample, "torch") == []
