"""Issue 18, injection (items 1-8) and secrets (18-20): each test names its item and asserts what the user
or the consumer (bash, systemd) gets."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hostile import CORPUS, child_profile, run_main
from items import bash_word_reads_back, check_text, findings
from items import extends_reference as _extends

from conftest import REFERENCE_PROFILE, ROOT, run_cli, run_cli_process
from support.fleet_install import installed_fleet
from support.tools import require_tool, systemd_verify


# -- injection ------------------------------------------------------------------------------------------
def test_item_01_paths_with_command_substitution(tmp_path: Path) -> None:
    body = _extends(tmp_path) + ("deploy:\n  runtime_dir: /run/$(touch /tmp/spark-compile-pwned)\n"
                                 "  install_dir: /opt/a\"b\n")
    got = findings(check_text(tmp_path, body))
    assert [(line, rule) for line, _, rule, _ in got] == [(3, "SC111"), (4, "SC111")]
    assert "is not a clean absolute path" in got[0][3]
    # Quoting by construction: every hostile value reaches bash as exactly itself.
    for value in (v for v in CORPUS if "\0" not in v):
        assert bash_word_reads_back(value) == value


def test_item_02_heredoc_terminator_in_engine_arg(tmp_path: Path) -> None:
    body = _extends(tmp_path) + 'engine:\n  args:\n    chat-template: "a\\nDRYRUN\\ntouch /tmp/x"\n'
    got = findings(check_text(tmp_path, body))
    assert got[0][:3] == (4, 20, "SC111") and "line break" in got[0][3]
    # A word with a line break is quoted on one line ($'...'), so no value can end a here-document early.
    from spark_compile.common.quoting import bash_word, heredoc_line

    value = "a\nDRYRUN\ntouch /tmp/spark-compile-pwned"
    script = f"cat <<'DRYRUN'\n  {bash_word(value)} {heredoc_line(value)}\nDRYRUN\n"
    proc = subprocess.run([require_tool("bash"), "-c", script], capture_output=True, text=True, check=True)
    assert proc.stdout.count("\n") == 1 and not Path("/tmp/spark-compile-pwned").exists()
    assert bash_word_reads_back(value) == value


def _unit(exec_path: str, env_file: str = "/etc/x.env") -> str:
    return ("[Unit]\nDescription=probe\n[Service]\nType=oneshot\n"
            f"EnvironmentFile=-{env_file}\nExecStart={exec_path} arg\n")


@pytest.mark.parametrize("path", ["/opt/sc%n/run", "/opt/a$b/run", "/opt/a b/run", "/opt/é%%$x/run"])
def test_item_03_systemd_percent_specifier(path: str, tmp_path: Path) -> None:
    from spark_compile.common.quoting import systemd_exec_path, systemd_path_setting

    # The real systemd finds the program at exactly `path`: a stub there is all it needs.
    unit = _unit(systemd_exec_path(path), systemd_path_setting("/etc/sc%n.env"))
    assert systemd_verify({"probe.service": unit}, extra_executables=[path], stub_unit_executables=False) == ""
    # The profile refuses such paths anyway, with a finding on the line.
    body = _extends(tmp_path) + f"deploy:\n  install_dir: {json.dumps(path)}\n"
    assert [g[:3] for g in findings(check_text(tmp_path, body))] == [(3, 16, "SC111")]


@pytest.mark.parametrize("path", ['/opt/a"b/run', "/opt/a'b/run", "/opt/a\\b/run", "/opt/a\nb/run"])
def test_item_03_systemd_refuses_special_characters(path: str, tmp_path: Path) -> None:
    from spark_compile.common.errors import UnquotableError
    from spark_compile.common.quoting import systemd_exec_arg, systemd_exec_path

    # systemd itself says "Executable name contains special characters" for these, however quoted:
    raw = _unit('"' + path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"')
    out = systemd_verify({"probe.service": raw}, extra_executables=[], stub_unit_executables=False)
    assert "special characters" in out or "bad unit file setting" in out
    with pytest.raises(UnquotableError):
        systemd_exec_path(path)
    # As an argument it is fine, and verify accepts the line.
    unit = _unit(f"/opt/run {systemd_exec_arg(path)}")
    assert systemd_verify({"probe.service": unit}, extra_executables=["/opt/run"], stub_unit_executables=False) == ""
    body = _extends(tmp_path) + f"deploy:\n  install_dir: {json.dumps(path)}\n"
    assert [g[:3] for g in findings(check_text(tmp_path, body))] == [(3, 16, "SC111")]


def test_item_03_unescaped_percent_is_what_broke(tmp_path: Path) -> None:
    unit = _unit("/opt/sc%n/run")  # written raw, as before: systemd expands %n (the unit's name)
    out = systemd_verify({"probe.service": unit}, extra_executables=["/opt/sc%n/run"], stub_unit_executables=False)
    assert "/opt/scprobe.service/run" in out


def test_item_04_list_arg_smuggles_flags(tmp_path: Path) -> None:
    body = _extends(tmp_path) + ("engine:\n  args:\n    allowed-media-domains: [a.example, --port, \"9999\", "
                                 "--api-key, hunter2]\n")
    outcome = check_text(tmp_path, body)
    got = findings(outcome)
    assert {(4, 40, "SC111"), (4, 56, "SC111")} <= {g[:3] for g in got}
    assert any("starts with '-'" in g[3] for g in got)
    assert "hunter2" not in outcome.out + outcome.err
    assert run_main("plan", str(tmp_path / "p.yaml")).code == 1


def test_item_05_diff_revision_starting_with_dash(tmp_path: Path) -> None:
    target = tmp_path / "written-by-git"
    result = run_cli("diff", "--", f"--output={target}:{REFERENCE_PROFILE.relative_to(ROOT)}",
                     str(REFERENCE_PROFILE))
    assert result.returncode == 2
    assert "may not start with '-'" in result.stderr
    assert not target.exists()


def test_item_06_github_annotation_file_property(tmp_path: Path) -> None:
    nasty = tmp_path / "a\n::error file=x::owned,b:c.yaml"
    nasty.write_text(_extends(tmp_path) + "engine:\n  prot: 1\n")
    outcome = run_main("check", "--format", "github", str(nasty))
    lines = outcome.out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("::error file=")
    props = lines[0].split("::")[1]
    assert "%0A%3A%3Aerror file=x%3A%3Aowned%2Cb%3Ac.yaml" in props
    assert props.count(",") == 3  # file, line, col, title: no property smuggled in


def test_item_07_paragraph_separator_hides_a_key(tmp_path: Path) -> None:
    body = _extends(tmp_path) + "engine:\n  port: 8210  # API port\u2029  host: 127.0.0.1\n"
    got = findings(check_text(tmp_path, body))
    assert got == [(3, 25, "SC113", got[0][3])] and "U+2029" in got[0][3]


def test_item_08_node_secret_with_newline_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    profile = child_profile(tmp_path, {"secrets": {"env": {"HF_TOKEN": {"env": "HF_SOURCE"}}}})
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    preflight = out / "dsv41-4spark" / "0-spark-0" / "preflight.sh"
    script = (f"source <(sed -n '/^read_secret()/,/^}}/p' {preflight}); rank=0; "
              "read_secret env HF_SOURCE")
    bad = subprocess.run(["bash", "-c", script], env={"HF_SOURCE": "tok\nSGLANG_EVIL=1", "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and bad.stdout == "" and "line break" in bad.stderr
    good = subprocess.run(["bash", "-c", script], env={"HF_SOURCE": "tok", "PATH": os.environ["PATH"]},
                          capture_output=True, text=True, check=False)
    assert (good.returncode, good.stdout) == (0, "tok")



# -- secrets --------------------------------------------------------------------------------------------
def test_item_18_every_output_is_redacted(tmp_path: Path) -> None:
    body = _extends(tmp_path) + "container:\n  HF_TOKEN: hunter2\nengine:\n  env: {HF_TOKEN: [hunter2]}\n"
    path = tmp_path / "p.yaml"
    path.write_text(body)
    for argv in (["check"], ["check", "--format", "json"], ["check", "--format", "github"], ["plan"], ["compile"]):
        outcome = run_main(*argv, str(path))
        assert outcome.code == 1, argv
        assert "hunter2" not in outcome.out + outcome.err, argv
    outcome = run_main("diff", str(REFERENCE_PROFILE), str(path))  # stops with check's report of the new side
    assert outcome.code == 1 and "SC101 error" in outcome.out and "hunter2" not in outcome.out + outcome.err
    from spark_compile.common.secrets import redact

    assert redact("  HF_TOKEN: hunter2\n--api-key=hunter2 'x'\n\"API_KEY\": \"hunter2\"").count("hunter2") == 0


@pytest.mark.parametrize("name", ["HF_TOKENS", "MAX_PASSWORD", "EXA_API_KEY", "api-key"])
def test_item_19_secret_names(name: str) -> None:
    from spark_compile.spec.secret_patterns import looks_secret

    assert looks_secret(name.upper().replace("-", "_"), "x")


@pytest.mark.parametrize("value", ["github_pat_11ABCDEFGHIJKLMNOPQRSTUV_abcdefghijk", "sk_live_0123456789abcdefghij",
                                   "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk",
                                   "AIzaSyA-0123456789abcdefghijklmnopqrstu"])
def test_item_19_token_formats(value: str, tmp_path: Path) -> None:
    from spark_compile.spec.secret_patterns import looks_secret

    assert looks_secret("SOME_VALUE", value)
    outcome = check_text(tmp_path, _extends(tmp_path) + f"engine:\n  env: {{MY_SITE_VAR: {value}}}\n")
    assert (3, 22, "SC230") in [g[:3] for g in findings(outcome)]
    assert value not in outcome.out + outcome.err


def test_item_19_api_key_in_the_launcher(tmp_path: Path) -> None:
    body = _extends(tmp_path) + "engine:\n  launcher: [python3, -m, sglang.launch_server, --api-key, hunter2]\n"
    outcome = check_text(tmp_path, body)
    assert (3, 49, "SC111") in [g[:3] for g in findings(outcome)]
    assert "hunter2" not in outcome.out
    assert not [n for n in ("MAX_TOKENS", "SGLANG_PATCH_TOKENIZER", "HF_TOKEN_PATH") if
                __import__("spark_compile.spec.secret_patterns").spec.secret_patterns.secret_name(n)]


def test_item_20_extends_stays_in_the_repository(tmp_path: Path) -> None:
    env = {"SPARK_COMPILE_CANARY": "canary-4f1d"}
    for target in ("../../../../../../../../proc/self/environ", "../../../../../../../../etc/passwd"):
        profile = tmp_path / "p.yaml"
        profile.write_text(f"extends: {target}\n")
        result = run_cli_process("check", str(profile), env=env)
        assert result.returncode == 1 and "SC112" in result.stdout
        assert "canary-4f1d" not in result.stdout and "root:" not in result.stdout
    (tmp_path / "parent.yaml").symlink_to("/etc/passwd")
    profile.write_text("extends: parent.yaml\n")
    result = run_cli("check", str(profile))
    assert "outside the repository" in result.stdout and "root:" not in result.stdout
    outside = tmp_path / "base" / "b.yaml"
    outside.parent.mkdir()
    outside.write_text(REFERENCE_PROFILE.read_text().replace("../", "../../"))
    child = ROOT / "tests" / "adversarial" / f"tmp-{os.getpid()}.yaml"
    try:
        child.write_text(f"extends: {os.path.relpath(outside, child.parent)}\n")
        refused = run_cli("check", str(child), cwd=ROOT)
        assert "outside the repository" in refused.stdout
        allowed = run_cli("check", "--root", str(tmp_path), str(child), cwd=ROOT)
        assert "outside the repository" not in allowed.stdout
    finally:
        child.unlink()


def test_item_18_redaction_leaves_legitimate_output_alone() -> None:
    """The step every output passes is not allowed to blank what is no secret (a schema description such
    as `full_token=`, a plan's flags, SecretRef)."""
    from spark_compile.commands.schema import schema_text

    assert run_main("schema").out == schema_text()
    for profile in [REFERENCE_PROFILE, *sorted((ROOT / "spec" / "profiles" / "examples").glob("*.yaml"))]:
        outcome = run_main("plan", str(profile))
        assert outcome.code == 0 and "(redacted)" not in outcome.out, profile


def test_item_02_dry_run_prints_a_hostile_arg_and_runs_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    value = f"$(touch {canary}) `touch {canary}` ; DRYRUN"
    profile = child_profile(tmp_path, {"engine": {"args": {"chat-template": value}}})
    out = tmp_path / "out"
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    fleet = installed_fleet(out / "dsv41-4spark", tmp_path / "deploy")
    proc = subprocess.run(["bash", str(fleet / "launch.sh"), "--dry-run"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    # The dry run shows the argument as a bash word that reads back as exactly the value.
    shown = next(line for line in proc.stdout.splitlines() if "--chat-template" in line)
    word = shown.split("--chat-template", 1)[1].strip().rstrip("\\").strip()
    assert bash_word_reads_back_word(word) == value


def bash_word_reads_back_word(word: str) -> str:
    """What bash makes of ``word``, a word as a generated script prints it."""
    proc = subprocess.run(["bash", "-c", f"printf '%s' {word}"], capture_output=True, text=True, check=True)
    return proc.stdout
