"""Every surface under hostile input: each option of the command line that takes a path, a revision, a
pattern, an interpreter or a file's contents, enumerated from the real parsers, run with the hostile values of
its kind; the fleet scripts' commands and options (fleet_inputs.py); the environment the tool reads,
`regenerate`'s options and every list of numbers of the schema (tool_inputs.py). A surface with no hostile
values fails the coverage tests.

Every run must end in a code of the table (the fleet scripts': no crash, 64 for a usage error) with no
traceback, run nothing hidden in a value (the canary) and write nothing outside its temporary folder; the
tool's runs print nothing that moves the cursor or reorders text.
"""

from __future__ import annotations

import collections
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from cli_inputs import CAPTURES, CONTENTS, INPUTS, OUTPUTS, VICTIM_TEXT, cli_options, resolve_value
from fleet_inputs import (
    FLEET_INPUTS,
    PYTHON_SCRIPTS,
    RUN,
    STAND_INS,
    USAGE_LINES,
    case_options,
    python_surfaces,
    shell_surfaces,
)
from hostile import assert_handled, child_profile, run_main, setting
from round2 import CANARY, assert_terminal_safe, hostile_tree
from tool_inputs import HUGE_NUMBERS, PROGRAM_ENV, REGENERATE, TOOL_ENV, number_lists, regenerate_options, tool_env_vars

from conftest import ROOT
from support.fleet_install import installed_fleet

WRITES = {("compile", "--out"), ("report", "--output"), ("catalog", "--out"), ("import", "--output"),
          ("export", "--output")}


def test_every_option_that_takes_a_value_is_covered() -> None:
    options = cli_options()
    assert {("check", "profiles"), ("diff", "--since"), ("report", "--output"), ("catalog", "--source")} <= options
    assert options - set(INPUTS) == set(), "options with no hostile-input strategy in tests/adversarial/cli_inputs.py"
    assert set(INPUTS) - options == set(), "INPUTS names options the parsers no longer have"


def runs_per_command() -> dict[str, int]:
    """How many command lines the suite runs, per command."""
    counts: collections.Counter[str] = collections.Counter()
    for (command, _), spec in INPUTS.items():
        counts[command] += (len(spec.values) + (len(CONTENTS) if spec.contents else 0)
                            + (len(CAPTURES) if spec.captures else 0))
    return dict(sorted(counts.items()))


def test_the_suite_runs_every_command_with_many_inputs() -> None:
    counts = runs_per_command()
    assert set(counts) == {command for command, _ in cli_options()}
    assert min(counts.values()) >= 11, counts


def test_write_options_only_get_paths_inside_the_test_folder() -> None:
    assert {key for key, spec in INPUTS.items() if spec.values == OUTPUTS} == WRITES
    assert not [v for v in OUTPUTS if v.startswith("/") or "etc" in v]


def _listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("key", sorted(INPUTS), ids=[f"{c} {o}" for c, o in sorted(INPUTS)])
def test_hostile_values_through_each_option(key: tuple[str, str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    spec = INPUTS[key]
    tree = hostile_tree(tmp_path / "tree") if key[0] == "catalog" else None
    before = {folder: _listing(folder) for folder in (Path("/"), ROOT)}
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(ROOT if spec.in_repository else work)
    values = [*spec.values, *(CONTENTS if spec.contents else ()), *(CAPTURES if spec.captures else ())]
    for value in values:
        CANARY.unlink(missing_ok=True)
        argv = [str(tmp_path / "out") if word == "OUT" else str(tree) if word == "TREE" else word
                for word in spec.argv(tmp_path, resolve_value(tmp_path, value))]
        outcome = run_main(*argv)
        assert_handled(outcome)
        assert_terminal_safe(outcome)
        assert not CANARY.exists(), (argv, "ran a command hidden in a value")
    assert (tmp_path / "victim").read_text() == VICTIM_TEXT if (tmp_path / "victim").exists() else True
    after = {folder: _listing(folder) for folder in before}
    assert {folder: after[folder] - before[folder] for folder in before} == {folder: set() for folder in before}


# -- the fleet scripts' command lines (tests/adversarial/fleet_inputs.py) ----------------------------------------
@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_fleet(ROOT / "generated" / "dsv41-4spark", tmp_path_factory.mktemp("fleet") / "dsv41-4spark")


def test_every_fleet_script_surface_has_hostile_values(fleet: Path) -> None:
    assert {"launch.sh", *USAGE_LINES, "audit.py", *PYTHON_SCRIPTS} == RUN, "a script whose surfaces are not read"
    enumerated = shell_surfaces() | python_surfaces(fleet)
    assert {"launch.sh audit --save", "verify.sh --calibrate", "smoke.py --port", "verdict.py write --gate",
            "engram.py copy --rows"} <= enumerated
    assert enumerated - set(FLEET_INPUTS) == set(), "fleet script surfaces with no hostile values in fleet_inputs.py"
    assert set(FLEET_INPUTS) - enumerated == {"launch.sh start --rearm"}  # named only in the header's prose
    named = {word for surface in FLEET_INPUTS for word in surface.split()[1:] if word.startswith("--")}
    assert case_options() - named == set(), "options the scripts' case branches match with no hostile values"


def _stand_ins(tmp: Path) -> dict[str, str]:
    """An environment whose ssh, sudo, systemctl, docker, curl ... fail at once, HOME and logs in ``tmp``."""
    shim = tmp / "bin"
    shim.mkdir()
    for name in STAND_INS:
        (shim / name).write_text("#!/bin/sh\nexit 255\n")
        (shim / name).chmod(0o755)
    return {"PATH": f"{shim}:{os.environ['PATH']}", "HOME": str(tmp), "LANG": "C.UTF-8",
            "SPARK_LAUNCH_LOG_DIR": str(tmp / "logs"), "PYTHONDONTWRITEBYTECODE": "1"}


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # an unbounded read fails, not the machine


_BROKE = re.compile(r"Traceback|unbound variable|syntax error|command not found|bad substitution|integer expression")


@pytest.mark.parametrize("surface", sorted(FLEET_INPUTS))
def test_hostile_values_through_each_fleet_script_surface(surface: str, fleet: Path, tmp_path: Path) -> None:
    spec = FLEET_INPUTS[surface]
    env, work = _stand_ins(tmp_path), tmp_path / "cwd"
    work.mkdir()
    before = {folder: _listing(folder) for folder in (Path("/"), ROOT, fleet)}
    for value in spec.values:
        CANARY.unlink(missing_ok=True)
        script, *args = spec.argv(fleet, resolve_value(tmp_path, value))
        runner = ["bash"] if script.endswith(".sh") else [sys.executable]
        proc = subprocess.run([*runner, str(fleet / script), *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=60, check=False, stdin=subprocess.DEVNULL, preexec_fn=_bounded)
        assert not CANARY.exists(), (surface, value, "ran a command hidden in a value")
        assert not _BROKE.search(proc.stderr), (surface, value, proc.stderr[-3000:])
        assert proc.returncode == 64 if spec.usage else 0 <= proc.returncode < 126, (surface, value, proc.returncode,
                                                                                   proc.stderr[-2000:])
    assert (tmp_path / "victim").read_text() == VICTIM_TEXT if (tmp_path / "victim").exists() else True
    after = {folder: _listing(folder) for folder in before}
    assert {folder: after[folder] - before[folder] for folder in before} == {folder: set() for folder in before}


# -- the tool's environment, regenerate's options, lists of numbers (tests/adversarial/tool_inputs.py) -----------
def test_every_variable_and_regenerate_option_has_hostile_values() -> None:
    assert {"ENGINE_PYTHON", "NO_COLOR", "XDG_CACHE_HOME"} <= tool_env_vars()
    assert tool_env_vars() == set(TOOL_ENV) | set(PROGRAM_ENV), "variables the tool reads with no hostile values"
    assert regenerate_options() == set(REGENERATE), "regenerate options with no hostile values"
    assert {"engine.cuda_graph.batch_sizes", "operations.smoke.needle_tokens"} <= number_lists()


@pytest.mark.parametrize("name", sorted(TOOL_ENV))
def test_hostile_environment_through_the_tool(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    values, argv = TOOL_ENV[name]
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = {folder: _listing(folder) for folder in (Path("/"), ROOT)}
    for value in values:
        CANARY.unlink(missing_ok=True)
        monkeypatch.setenv(name, resolve_value(tmp_path, value))
        outcome = run_main(*[str(tmp_path / "out") if word == "OUT" else word for word in argv])
        assert_handled(outcome)
        assert_terminal_safe(outcome)
        assert not CANARY.exists(), (name, value, "ran a command hidden in a value")
    after = {folder: _listing(folder) for folder in before}
    assert {folder: after[folder] - before[folder] for folder in before} == {folder: set() for folder in before}


@pytest.mark.parametrize("name", sorted(PROGRAM_ENV))
def test_hostile_environment_read_at_start_up(name: str, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("spark-compile")
    for value in PROGRAM_ENV[name]:
        proc = subprocess.run([str(script), "schema"], capture_output=True, text=True, check=False, cwd=tmp_path,
                              env={**os.environ, name: value}, timeout=120)
        assert (proc.returncode, proc.stderr) == (0, ""), (name, value, proc.stderr[-2000:])


@pytest.mark.parametrize("argv", REGENERATE["--check"], ids=[repr(a)[:40] for a in REGENERATE["--check"]])
def test_hostile_regenerate_command_lines_never_regenerate(argv: tuple[str, ...], monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from spark_compile.commands import regenerate

    def refused(*args: object) -> object:
        raise AssertionError(f"{argv!r} started a regeneration")

    monkeypatch.setattr(regenerate, "_steps", refused)
    monkeypatch.setattr(regenerate, "planted", refused)
    code = regenerate.main(list(argv))
    out, err = capsys.readouterr()
    assert code == (0 if argv == ("--help",) else 2), (code, err)
    assert "Traceback" not in out + err


@pytest.mark.parametrize("huge", HUGE_NUMBERS, ids=lambda n: f"{str(n)[:6]}({len(str(n))} chars)")
@pytest.mark.parametrize("path", sorted(number_lists()))
def test_a_huge_number_in_a_list_of_numbers_is_a_finding(path: str, huge: float, tmp_path: Path) -> None:
    keys = tuple("x" if part == "*" else part for part in path.split("."))
    outcome = run_main("check", str(child_profile(tmp_path, setting(keys, [1, huge]))))
    assert_handled(outcome)
    assert outcome.code == 1 and " error: " in outcome.out, outcome.out[-2000:]
