"""Issue 18's 24 findings, one regression test each (named after its item), each asserting what the user
or the consumer gets: a finding at the right line, the exit code, or the bytes bash/systemd/docker read."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import CORPUS, Outcome, assert_handled, child_profile, run_main

from conftest import REFERENCE_PROFILE, ROOT, run_cli
from support.tools import require_tool, systemd_verify

FINDING = re.compile(r"^(?P<file>.*):(?P<line>\d+):(?P<col>\d+): (?P<rule>SC\d+) (?:error|warning): (?P<msg>.*)$",
                     re.MULTILINE)


def findings(outcome: Outcome) -> list[tuple[int, int, str, str]]:
    """(line, column, rule, message) of every finding in a text report."""
    return [(int(m["line"]), int(m["col"]), m["rule"], m["msg"]) for m in FINDING.finditer(outcome.out)]


def check_text(tmp: Path, text: str, *extra: str) -> Outcome:
    """`check` on a profile file holding ``text`` (extends lines relative to tmp)."""
    path = tmp / "p.yaml"
    path.write_text(text)
    outcome = run_main("check", *extra, str(path))
    assert_handled(outcome)
    return outcome


def _extends(tmp: Path) -> str:
    return f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp)}\n"


def _bash_word_reads_back(value: str) -> str:
    from spark_compile.quoting import bash_word

    proc = subprocess.run([require_tool("bash"), "-c", f"printf '%s' {bash_word(value)}"], capture_output=True,
                          check=True)
    return proc.stdout.decode()


# -- injection ------------------------------------------------------------------------------------------
def test_item_01_paths_with_command_substitution(tmp_path: Path) -> None:
    body = _extends(tmp_path) + ("deploy:\n  runtime_dir: /run/$(touch /tmp/spark-compile-pwned)\n"
                                 "  install_dir: /opt/a\"b\n")
    got = findings(check_text(tmp_path, body))
    assert [(line, rule) for line, _, rule, _ in got] == [(3, "SC111"), (4, "SC111")]
    assert "is not a clean absolute path" in got[0][3]
    # Quoting by construction: every hostile value reaches bash as exactly itself.
    for value in (v for v in CORPUS if "\0" not in v):
        assert _bash_word_reads_back(value) == value


def test_item_02_heredoc_terminator_in_engine_arg(tmp_path: Path) -> None:
    body = _extends(tmp_path) + 'engine:\n  args:\n    chat-template: "a\\nDRYRUN\\ntouch /tmp/x"\n'
    got = findings(check_text(tmp_path, body))
    assert got[0][:3] == (4, 20, "SC111") and "line break" in got[0][3]
    # A word with a line break is quoted on one line ($'...'), so no value can end a here-document early.
    from spark_compile.quoting import bash_word, heredoc_line

    value = "a\nDRYRUN\ntouch /tmp/spark-compile-pwned"
    script = f"cat <<'DRYRUN'\n  {bash_word(value)} {heredoc_line(value)}\nDRYRUN\n"
    proc = subprocess.run([require_tool("bash"), "-c", script], capture_output=True, text=True, check=True)
    assert proc.stdout.count("\n") == 1 and not Path("/tmp/spark-compile-pwned").exists()
    assert _bash_word_reads_back(value) == value


def _unit(exec_path: str, env_file: str = "/etc/x.env") -> str:
    return ("[Unit]\nDescription=probe\n[Service]\nType=oneshot\n"
            f"EnvironmentFile=-{env_file}\nExecStart={exec_path} arg\n")


@pytest.mark.parametrize("path", ["/opt/sc%n/run", "/opt/a$b/run", "/opt/a b/run", "/opt/é%%$x/run"])
def test_item_03_systemd_percent_specifier(path: str, tmp_path: Path) -> None:
    from spark_compile.quoting import systemd_exec_path, systemd_path_setting

    # The real systemd finds the program at exactly `path`: a stub there is all it needs.
    unit = _unit(systemd_exec_path(path), systemd_path_setting("/etc/sc%n.env"))
    assert systemd_verify({"probe.service": unit}, extra_executables=[path], stub_unit_executables=False) == ""
    # The profile refuses such paths anyway, with a finding on the line.
    body = _extends(tmp_path) + f"deploy:\n  install_dir: {json.dumps(path)}\n"
    assert [g[:3] for g in findings(check_text(tmp_path, body))] == [(3, 16, "SC111")]


@pytest.mark.parametrize("path", ['/opt/a"b/run', "/opt/a'b/run", "/opt/a\\b/run", "/opt/a\nb/run"])
def test_item_03_systemd_refuses_special_characters(path: str, tmp_path: Path) -> None:
    from spark_compile.errors import UnquotableError
    from spark_compile.quoting import systemd_exec_arg, systemd_exec_path

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
    assert "cannot start with '-'" in result.stderr
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


# -- data loss ------------------------------------------------------------------------------------------
def test_item_09_foreign_directory_is_not_adopted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "dsv41-4spark").mkdir(parents=True)
    readme = out / "dsv41-4spark" / "README.md"
    readme.write_text("hand-written\n")
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "did not write" in outcome.err
    assert readme.read_text() == "hand-written\n"
    assert sorted(p.name for p in out.iterdir()) == ["dsv41-4spark"]


def test_item_10_foreign_directories_and_modes_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    target = out / "dsv41-4spark"
    (target / "notes").mkdir()
    (target / "notes").chmod(0o700)
    (target / "0-spark-0").chmod(0o700)
    changed = child_profile(tmp_path, {"engine": {"port": 8888}}, relocate=False)
    assert run_main("compile", str(changed), "--out", str(out)).code == 0
    assert (target / "notes").is_dir() and (target / "notes").stat().st_mode & 0o777 == 0o700
    assert (target / "0-spark-0").stat().st_mode & 0o777 == 0o700
    assert "--port 8888" in (target / "0-spark-0" / "docker-run.sh").read_text()


def test_item_11_files_created_during_a_compile_survive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile import write

    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    target = out / "dsv41-4spark"
    real_stage = write._stage

    def stage_while_someone_writes(*args: object) -> None:
        real_stage(*args)  # type: ignore[arg-type]
        (target / "0-spark-0" / "operator.log").write_text("written during the compile\n")
        (target / "late").mkdir()
        (target / "late" / "x").write_text("x\n")

    monkeypatch.setattr(write, "_stage", stage_while_someone_writes)
    changed = child_profile(tmp_path, {"engine": {"port": 8888}}, relocate=False)
    assert run_main("compile", str(changed), "--out", str(out)).code == 0
    assert (target / "0-spark-0" / "operator.log").read_text() == "written during the compile\n"
    assert (target / "late" / "x").read_text() == "x\n"
    assert not list(out.glob(".dsv41-4spark.*"))


def test_item_12_target_that_is_a_file_or_a_symlink(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "dsv41-4spark").write_text("the user's file\n")
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "is not a directory" in outcome.err
    assert (out / "dsv41-4spark").read_text() == "the user's file\n"
    (out / "dsv41-4spark").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep\n")
    (out / "dsv41-4spark").symlink_to(elsewhere)
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "symlink" in outcome.err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in out.iterdir()) == ["dsv41-4spark"]  # no staging left behind


def test_item_13_enospc_removes_the_staging_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile import write

    real = write._write_new
    count = {"n": 0}

    def fill_up(path: Path, artifact: object) -> None:
        count["n"] += 1
        if count["n"] > 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, artifact)  # type: ignore[arg-type]

    monkeypatch.setattr(write, "_write_new", fill_up)
    out = tmp_path / "out"
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "No space left on device" in outcome.err
    assert list(out.iterdir()) == []


def test_item_13_enospc_on_a_full_tmpfs(tmp_path: Path) -> None:
    """The real thing: a 120 KiB tmpfs in a private mount namespace (root and unshare, as CI has)."""
    unshare = require_tool("unshare")
    mount = tmp_path / "small"
    mount.mkdir()
    script = (f"mount -t tmpfs -o size=120k none {mount} || exit 99; "
              f"{sys.executable} -m spark_compile.cli {REFERENCE_PROFILE} --out {mount}/out; echo rc=$?; "
              f"ls -A {mount}/out")
    proc = subprocess.run([unshare, "-m", "sh", "-c", script], capture_output=True, text=True, check=False,
                          cwd=ROOT)
    if proc.returncode == 99 or "Operation not permitted" in proc.stderr:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs: {proc.stderr}")
        pytest.skip("needs root to mount a tmpfs")
    assert "No space left on device" in proc.stderr
    assert proc.stdout == "rc=2\n"  # and `ls -A out` printed nothing: no staging directory is left


# -- internal errors, hangs, blow-ups -------------------------------------------------------------------
@pytest.mark.parametrize(("text", "rule"), [
    ("name: !!python/name:os.system x\n", "SC105"),
    ("name: !!python/str x\n", "SC105"),
    ("name: !!python/bytes eA==\n", "SC105"),
    ("!!python/str name: x\n", "SC105"),
    ("name: &a [*a]\n", "SC108"),
    ("name: x\nengine: {port: " + "9" * 5000 + "}\n", "SC109"),
    ('extends: "a\\0b.yaml"\n', "SC113"),
    ("extends: loop.yaml\n", "SC112"),
    ("EXTENDS\nfleet: {nodes: [{name: [a]}]}\n", "SC102"),
    ("EXTENDS\nfleet: {nodes: [{name: {a: 1}}]}\n", "SC102"),
    ("EXTENDS\nengine: {launcher: []}\n", "SC109"),
])
def test_item_14_no_internal_error(text: str, rule: str, tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    outcome = check_text(tmp_path, text.replace("EXTENDS\n", _extends(tmp_path)))
    assert outcome.code == 1
    assert rule in {g[2] for g in findings(outcome)}


def test_item_15_fifo_and_dev_zero_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    for path in (fifo, Path("/dev/zero")):
        outcome = run_main("check", str(path))
        assert outcome.code == 2 and "not a regular file" in outcome.err
    assert time.monotonic() - start < 5
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte that must not be read whole
    outcome = run_main("check", str(big))
    assert outcome.code == 1 and "SC108" in outcome.out
    # The write stage reads what it finds in the output directory the same way.
    target = tmp_path / "out" / "dsv41-4spark"
    target.mkdir(parents=True)
    os.mkfifo(target / "MANIFEST.json")
    start = time.monotonic()
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(tmp_path / "out"))
    assert outcome.code == 2 and time.monotonic() - start < 10


def test_item_16_many_bad_keys_stay_fast_and_bounded(tmp_path: Path) -> None:
    many = tmp_path / "many.yaml"
    many.write_text("name: x\n" + "".join(f"k{i}: 1\n" for i in range(20_000)))
    start = time.monotonic()
    outcome = run_main("check", str(many))
    assert time.monotonic() - start < 10
    assert outcome.out.count(" SC101 ") == 20_000
    wide = tmp_path / "wide.yaml"
    wide.write_text("name: x\nengine: {" + ", ".join(f"bad{i}: 1" for i in range(4000)) + "}\n")
    outcome = run_main("check", str(wide))
    assert outcome.out.count(" SC101 ") == 4000
    assert len(outcome.out) < 4000 * 600  # each finding quotes a bounded excerpt, not the 60 KB line


def test_item_17_interrupt_closed_stdout_and_full_disk() -> None:
    profile = str(REFERENCE_PROFILE)
    closed = subprocess.run([sys.executable, "-m", "spark_compile.cli", "check", profile], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, check=False, close_fds=True,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and "standard output is closed" in closed.stderr
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "spark_compile.cli", "schema"], stdout=full,
                                stderr=subprocess.PIPE, text=True, check=False)
    assert result.returncode == 2 and "No space left on device" in result.stderr
    assert "Traceback" not in result.stderr
    # Ctrl-C once the program runs (the interpreter's own start-up, before any of our code, aside).
    for delay in (0.15, 0.3, 0.45, 0.6):
        proc = subprocess.Popen([sys.executable, "-m", "spark_compile.cli", "check", profile], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, err)


def test_item_17_keyboard_interrupt_in_a_stage_is_130(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile import cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.HANDLERS, "check", interrupted)
    outcome = run_main("check", str(REFERENCE_PROFILE))
    assert (outcome.code, outcome.err) == (130, "spark-compile: interrupted\n")


# -- secrets --------------------------------------------------------------------------------------------
def test_item_18_every_output_is_redacted(tmp_path: Path) -> None:
    body = _extends(tmp_path) + "container:\n  HF_TOKEN: hunter2\nengine:\n  env: {HF_TOKEN: [hunter2]}\n"
    path = tmp_path / "p.yaml"
    path.write_text(body)
    for argv in (["check"], ["check", "--format", "json"], ["check", "--format", "github"], ["plan"], ["compile"]):
        outcome = run_main(*argv, str(path))
        assert outcome.code == 1, argv
        assert "hunter2" not in outcome.out + outcome.err, argv
    outcome = run_main("diff", str(REFERENCE_PROFILE), str(path))
    assert outcome.code == 2 and "hunter2" not in outcome.out + outcome.err
    from spark_compile.secrets import redact

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
        result = run_cli("check", str(profile), env=env)
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


# -- accepted by check, refused by the consumer later ---------------------------------------------------
@pytest.mark.parametrize(("yaml_text", "line"), [
    ("engine:\n  env: {MY_SITE_VAR: " + "x" * 70_000 + "}\n", 3),
    ("container:\n  gpus: some text\n", 3),
    ("container:\n  devices: [dev/null]\n", 3),
    ("container:\n  ulimits: {nofiles: 1024}\n", 3),
    ("container:\n  ulimits: {nofile: '99999999999999999999'}\n", 3),
    ("model:\n  repo: /data/a:b\n", 3),
    ("engine:\n  args: {chat-template: " + "y" * 140_000 + "}\n", 3),
    ('engine:\n  args: {chat-template: "a\\0b"}\n', 3),
])
def test_item_21_consumer_limits_are_findings(yaml_text: str, line: int, tmp_path: Path) -> None:
    outcome = check_text(tmp_path, _extends(tmp_path) + yaml_text)
    got = findings(outcome)
    assert got and got[0][0] == line, outcome.out[:2000]
    assert len(outcome.out) < 5000


@pytest.mark.parametrize("yaml_text", [
    "container:\n  stop_timeout: 1000000000000\n",
    "deploy:\n  unit_name: -x.service\n",
    "deploy:\n  unit_name: " + "u" * 300 + ".service\n",
])
def test_item_22_systemd_limits_are_findings(yaml_text: str, tmp_path: Path) -> None:
    got = findings(check_text(tmp_path, _extends(tmp_path) + yaml_text))
    assert [g[0] for g in got] == [3]


def test_item_23_aliases_without_the_overlay(tmp_path: Path) -> None:
    base = ROOT / "tests" / "profiles" / "positive" / "llama-2node-h100.yaml"
    got = findings(check_text(tmp_path, f"extends: {os.path.relpath(base, tmp_path)}\nmodel:\n  aliases: [x]\n"))
    assert [g[:3] for g in got] == [(3, 3, "SC111")] and "dropped silently" in got[0][3]


def test_item_23_drift_sees_modes_and_explains_foreign_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    target = out / "dsv41-4spark"
    (target / "0-spark-0" / "docker-run.sh").chmod(0o644)
    (target / "notes.txt").write_text("mine\n")
    (out / "profile.schema.json").write_text(run_main("schema").out)
    outcome = run_main("check", "--generated", "--out", str(out), str(REFERENCE_PROFILE))
    assert outcome.code == 1
    assert f"{target}/0-spark-0/docker-run.sh: mode 644, the profile produces 755" in outcome.out
    assert f"{target}/notes.txt: not generated by spark-compile (compiling keeps it): delete it" in outcome.out


# -- silent or confusing --------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["017", "5:35:0", "8_210", "0b1", "1_0.5"])
def test_item_24_yaml11_numbers_are_refused(value: str, tmp_path: Path) -> None:
    got = findings(check_text(tmp_path, _extends(tmp_path) + f"engine:\n  port: {value}\n"))
    assert [g[:3] for g in got] == [(3, 9, "SC114")]


def test_item_24_tags_deletes_messages_and_every_file(tmp_path: Path) -> None:
    tagged = findings(check_text(tmp_path, _extends(tmp_path) + "engine: !custom {port: 1}\n"))
    assert [g[:3] for g in tagged] == [(2, 9, "SC105")]
    tagged = findings(check_text(tmp_path, _extends(tmp_path) + "model:\n  aliases: !!set {a: null}\n"))
    assert [g[:3] for g in tagged] == [(3, 12, "SC105")]
    deleted = findings(check_text(tmp_path, _extends(tmp_path) + "engine:\n  prot: !delete\n"))
    assert [g[:3] for g in deleted] == [(3, 9, "SC112")]
    typed = check_text(tmp_path, _extends(tmp_path) + "fleet:\n  fabric: {gid_index: x}\n")
    assert "constrained-int" not in typed.out and ".int:" not in typed.out
    good, bad = tmp_path / "a.yaml", tmp_path / "c.yaml"
    good.write_text(_extends(tmp_path))
    bad.write_text(_extends(tmp_path) + "engine:\n  prot: 1\n")
    outcome = run_main("check", str(good), str(tmp_path / "missing.yaml"), str(bad))
    assert outcome.code == 2 and "missing.yaml: no such file" in outcome.err
    assert f"{bad}:3:3: SC101" in outcome.out and "in 2 profiles" in outcome.out


def test_item_24_description_is_escaped_in_the_readme(tmp_path: Path) -> None:
    nul = findings(check_text(tmp_path, _extends(tmp_path) + 'description: "a\\0b"\n'))
    assert [g[2] for g in nul] == ["SC113"]
    out = tmp_path / "out"
    profile = child_profile(tmp_path, {"description": "# Owned\n<img src=x onerror=alert(1)> [x](javascript:y)"})
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    readme = (out / "dsv41-4spark" / "README.md").read_text()
    assert "\\# Owned" in readme and "&lt;img src=x onerror=alert(1)&gt; \\[x\\](javascript:y)" in readme
    assert "<img" not in readme
    tab = child_profile(tmp_path, {"description": "columns:\ta\tb"})  # a tab is text, not a control character
    assert run_main("compile", str(tab), "--out", str(tmp_path / "out2")).code == 0


def test_item_23_docker_run_uses_the_configured_client(tmp_path: Path) -> None:
    client = tmp_path / "client" / "docker-client"
    client.parent.mkdir()
    client.write_text(f"#!/bin/sh\necho \"$1\" > {tmp_path}/client-called\n")
    client.chmod(0o755)
    decoy = tmp_path / "path-bin" / "docker"
    decoy.parent.mkdir()
    decoy.write_text(f"#!/bin/sh\ntouch {tmp_path}/path-docker-called\n")
    decoy.chmod(0o755)
    profile = child_profile(tmp_path, {"deploy": {"docker": str(client)}})
    out = tmp_path / "out"
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    (tmp_path / "run" / "dsv41-4spark").mkdir(parents=True)
    (tmp_path / "run" / "dsv41-4spark" / "runtime.env").write_text("NCCL_IB_GID_INDEX=3\n")
    env = {"PATH": f"{decoy.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(out / "dsv41-4spark" / "0-spark-0" / "docker-run.sh")], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "client-called").read_text() == "run\n"
    assert not (tmp_path / "path-docker-called").exists()
