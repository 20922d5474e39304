"""The command line as a user meets it: exit codes, whole messages, and never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, REFERENCE_TAG_WARNING, REFERENCE_WARNINGS, ROOT, run_cli


def test_check_reference_has_only_its_own_warnings() -> None:
    result = run_cli("check", "spec/profiles/dsv41-4spark.yaml")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(REFERENCE_TAG_WARNING)
    assert result.stdout.endswith("\n0 errors, 2 warnings in 1 profile\n") and result.stdout.count(" SC") == 2
    assert " SC442 warning: " in result.stdout  # its KV pool holds fewer full-context requests than 16


def test_check_prints_the_whole_finding(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\nengine:\n  prot: 8210\n")
    result = run_cli("check", str(bad))
    assert result.returncode == 1
    assert result.stdout == (
        f"{bad}:3:3: SC101 error: unknown key 'prot' in engine\n"
        "    3 |   prot: 8210\n"
        "      |   ^\n"
        "  hint: did you mean 'port'?\n"
        "1 error, 0 warnings in 1 profile\n"
    )
    assert result.stderr == ""


def test_check_json_and_github_formats() -> None:
    path = "tests/profiles/negative/ep-not-dividing.yaml"
    result = run_cli("check", path, "--format", "json")
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["errors"] == 1 and body["warnings"] == 2 and body["profiles"] == 1  # the reference's own two
    assert [f for f in body["findings"] if f["rule"] not in REFERENCE_WARNINGS] == [{
        "rule": "SC201", "severity": "error", "file": path, "line": 3, "column": 18,
        "message": "ep 3 does not divide tp 4",
        "hint": "set engine.parallel.ep: 4 (the divisor of tp 4 closest to 3)", "via": [],
    }]
    github = run_cli("check", path, "--format", "github")
    assert [line for line in github.stdout.splitlines() if "title=SC312" not in line and "title=SC442" not in line] == [
        f"::error file={path},line=3,col=18,title=SC201::ep 3 does not divide tp 4 "
        "(set engine.parallel.ep: 4 (the divisor of tp 4 closest to 3))"]


def test_warnings_fail_only_with_strict() -> None:
    path = "tests/profiles/negative/per-rank-restart.yaml"
    assert run_cli("check", path).returncode == 0
    assert run_cli("check", "--strict", path).returncode == 1


def test_inherited_finding_names_the_child() -> None:
    result = run_cli("check", "tests/profiles/negative/dspark-block-without-dspark.yaml")
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith(REFERENCE_TAG_WARNING)
    assert "spec/profiles/dsv41-4spark.yaml:65:24: SC203 error: dspark_block_size is set but the algorithm is EAGLE" \
        in result.stdout.splitlines()
    assert "  inherited through: tests/profiles/negative/dspark-block-without-dspark.yaml" in result.stdout


def test_missing_file_is_a_usage_error() -> None:
    result = run_cli("check", "no/such/profile.yaml")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "spark-compile: error: no/such/profile.yaml: no such file\n"


def test_directory_is_refused_cleanly() -> None:
    """Only check reads a folder (every profile below it, as the drift hook does); a profile argument does not."""
    result = run_cli("plan", "spec")
    assert result.returncode == 2
    assert result.stderr == "spark-compile: error: spec: is a directory, expected a profile file\n"
    assert run_cli("check", "--format", "summary", "spec/profiles/examples").stdout.startswith("0 errors, ")
    empty = run_cli("check", "generated/fleet_scripts")
    assert (empty.returncode, empty.stderr) == (2, "spark-compile: error: no profile (*.yaml) under the folder "
                                                   "generated/fleet_scripts\n")


def test_bad_command_line() -> None:
    result = run_cli("check")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("spark-compile check: the following arguments are required: profiles")
    assert run_cli().returncode == 2


def test_explain_and_rules() -> None:
    explain = run_cli("explain", "sc201")
    assert explain.returncode == 0
    assert explain.stdout.startswith("SC201 (error): EP divides TP\n\nExpert parallelism splits the TP group")
    assert "Bad:\n    engine: {parallel: {tp: 4, ep: 3}}\n" in explain.stdout
    unknown = run_cli("explain", "SX401")
    assert unknown.returncode == 2
    assert unknown.stderr == ("spark-compile: error: no rule 'SX401'; did you mean 'SC401'? "
                              "(see `spark-compile rules`)\n")
    far = run_cli("explain", "SC999")  # no rule is one slip away: no suggestion of an unrelated one
    assert far.stderr == "spark-compile: error: no rule 'SC999' (see `spark-compile rules`)\n"
    rules = run_cli("rules").stdout.splitlines()
    assert len(rules) >= 40
    assert "SC401  error    TP ranks must fill the fleet's GPUs" in rules


def test_plan_json_contract() -> None:
    result = run_cli("plan", "spec/profiles/dsv41-4spark.yaml", "--json")
    assert result.returncode == 0
    plan = json.loads(result.stdout)
    assert (plan["profile"], plan["release"]) == ("dsv41-4spark", "production-1.7.1")
    assert [r["rank"] for r in plan["ranks"]] == [0, 1, 2, 3]
    assert plan["start_order"] == [3, 2, 1, 0]
    rank1 = plan["ranks"][1]
    assert rank1["env"]["SPARK_ENGRAM_ROWS"] == "1:96001542:192003084,14:96004170:192008341"
    assert rank1["env"]["HOST_IP"] == "192.0.2.12"
    assert rank1["runtime_env"] == ["NCCL_IB_GID_INDEX", "B12X_ROCE_GID_INDEX"]
    assert rank1["docker_argv"][:2] == ["docker", "run"]
    argv = rank1["docker_argv"]
    assert argv[argv.index("--node-rank") + 1] == "1"


def test_plan_of_a_broken_profile_prints_findings() -> None:
    result = run_cli("plan", "tests/profiles/negative/ep-not-dividing.yaml", "--json")
    assert result.returncode == 1
    assert "\ntests/profiles/negative/ep-not-dividing.yaml:3:18: SC201 error:" in result.stdout


def test_flags_lists_the_registry() -> None:
    from spark_compile.overlay.registry import FLAGS

    body = json.loads(run_cli("flags", "--json").stdout)
    assert [f["name"] for f in body["flags"]] == [f.name for f in FLAGS]


BROKEN = {  # one profile stopped at each stage: the loader, the schema, the rules
    "yaml": ("  parallel: {tp: 1}", "  parallel: {tp: 1"),
    "schema": ("  parallel: {tp: 1}", "  parallel: {tp: one}"),
    "rules": ("  parallel: {tp: 1}", "  parallel: {tp: 1}\n  port: 8210\n  dist_init_port: 8210"),
}


@pytest.mark.parametrize("stage", sorted(BROKEN))
def test_every_command_stops_on_a_broken_profile_with_the_same_findings(
        stage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """report, diff, plan, check, compile and history all print check's findings report and exit 1."""
    from spark_compile.cli import main

    good = (ROOT / "spec" / "profiles" / "examples" / "single-node.yaml").read_text()
    old, new = BROKEN[stage]
    assert old in good
    (tmp_path / "releases").mkdir()
    (tmp_path / "releases" / "broken.yaml").write_text(good.replace(old, new))
    (tmp_path / "good.yaml").write_text(good)
    monkeypatch.chdir(tmp_path)
    broken = "releases/broken.yaml"

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, expected, err = run("check", broken)
    assert (code, err) == (1, "") and " error" in expected, expected
    commands = [("plan", broken), ("compile", broken, "--out", "out"), (broken,), ("diff", broken, "good.yaml"),
                ("diff", "good.yaml", broken), ("history", "releases"),
                ("report", broken), ("report", "good.yaml", "--against", broken)]
    results = {" ".join(argv): run(*argv) for argv in commands}
    assert results == dict.fromkeys(results, (1, expected, ""))
    assert not (tmp_path / "out").exists()


def test_explain_shows_how_to_write_a_secret_reference() -> None:
    # The good example is a reference, not a secret: the redaction step must leave it readable.
    explain = run_cli("explain", "SC230")
    assert explain.stdout.endswith(
        "Good:\n    secrets:\n      env:\n        HF_TOKEN: {file: /etc/spark-compile/hf-token}\n")
    assert "HF_TOKEN: (redacted)" in explain.stdout  # the bad example's literal stays hidden


def test_help_lists_every_command() -> None:
    listed = run_cli("--help").stdout
    for command in ("compile", "check", "plan", "schema", "rules", "explain", "flags", "diff", "history", "report",
                    "catalog"):
        assert f"\n    {command} " in listed, command
