"""Issue 25 (hostile input, round 2), items 2-9: each test names its item and asserts what the user or the
consumer gets. Item 1 (the verdict) lives in tests/window/test_verdict.py, item 4's gate side in
tests/window/test_gate_scoring.py."""

from __future__ import annotations

import html.parser
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import assert_handled, child_profile, run_main
from items import check_text, findings
from items import extends_reference as _extends
from round2 import CANARY, assert_terminal_safe, clean_env, hostile_tree

from conftest import REFERENCE_PROFILE, ROOT
from support.fleet_install import SCRIPTS


# -- runs code or sends secrets where it must not --------------------------------------------------------
@pytest.mark.parametrize("check", [False, True], ids=["write", "check"])
def test_item02_catalog_source_parses_and_never_runs_the_tree(tmp_path: Path, check: bool) -> None:
    CANARY.unlink(missing_ok=True)
    tree = hostile_tree(tmp_path / "tree")
    out = tmp_path / "out"
    outcome = run_main("catalog", "sglang", "--source", str(tree), "--out", str(out), *(["--check"] if check else []))
    assert_handled(outcome)
    assert not CANARY.exists(), "catalog --source ran code from the tree"
    if check:
        assert outcome.code == 1 and "sglang-9.9.9.json: missing" in outcome.out
        return
    assert outcome.code == 0, outcome.err
    env = json.loads((out / "sglang-env-9.9.9.json").read_text())
    assert {v["name"]: (v["kind"], v["default"], v["replacement"]) for v in env["variables"]} == {
        "SGLANG_ROUND2_SWITCH": ("bool", False, None), "SGLANG_ROUND2_SIZE": ("int", 16384, None),
        "SGLANG_ROUND2_OLD_SIZE": ("int", None, "SGLANG_ROUND2_SIZE")}


def test_item03_no_engine_interpreter_from_the_current_directory(tmp_path: Path) -> None:
    CANARY.unlink(missing_ok=True)
    planted = tmp_path / ".venv-engine" / "bin" / "python"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"#!/bin/sh\ntouch {CANARY}\n")
    planted.chmod(0o755)
    from spark_compile.spec.generators.catalog_extract import default_engine_python

    env = clean_env()
    code = ("import sys; from spark_compile.cli import main; sys.exit(main(sys.argv[1:]))")
    own = default_engine_python()  # spark-compile's own checkout's engine venv (tests/run.sh makes one), if any
    for argv in (["check", "--engine", str(REFERENCE_PROFILE)], ["catalog", "sglang", "--check"]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, env=env, capture_output=True,
                              text=True, check=False, timeout=300)
        assert proc.returncode in (0, 1, 2), proc.stderr
        assert not CANARY.exists(), f"{argv[0]} ran {planted}"
        if own is None:
            assert "no engine interpreter" in proc.stdout + proc.stderr
    found = own
    assert found is None or not Path(found).is_relative_to(Path.cwd()) or Path.cwd() == ROOT


@pytest.mark.parametrize(("pattern", "why"), [
    ("a{4294967296}", "not a usable regular expression: the repetition number is too large"),
    ("a{2,5000}", "unsafe: a repeat count over 1000; write a simpler pattern"),
    ("(a+)+$", "unsafe: a quantifier over a group that repeats itself (like (a+)+), which takes exponential time "
               "on a near-miss; write a simpler pattern"),
    ("([a-z]+\\s?)*x", "unsafe: a quantifier over a group that repeats itself (like (a+)+), which takes "
                       "exponential time on a near-miss; write a simpler pattern"),
])
def test_item04_window_pattern_refused_at_check_time(tmp_path: Path, pattern: str, why: str) -> None:
    body = (_extends(tmp_path) + "operations:\n  window:\n    checks:\n      - name: sum\n"
            "        prompt: What is 2+2?\n        pattern: " + json.dumps(pattern) + "\n")
    outcome = check_text(tmp_path, body)
    assert outcome.code == 1
    assert [(rule, msg) for _, _, rule, msg in findings(outcome) if rule == "SC111"] == [
        ("SC111", f"operations.window.checks[0]: check 'sum': pattern '{pattern}' is {why}")]


# -- overwrites or deletes what it did not write ---------------------------------------------------------
def test_item05_report_output_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / "link.html").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo.html")
    (tmp_path / "dir.html").mkdir()
    for name, kind in (("link.html", "a symlink"), ("fifo.html", "a FIFO"), ("dir.html", "a directory")):
        outcome = run_main("report", str(REFERENCE_PROFILE), "-o", str(tmp_path / name))
        assert outcome.code == 2
        assert outcome.err.endswith(f"spark-compile: error: {tmp_path / name} is {kind}: spark-compile only "
                                    "replaces regular files; choose another path\n")
    assert victim.read_text() == "keep me\n"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo.html").st_mode)
    # A planted temporary of the old fixed name is never followed; the page lands in the file named.
    (tmp_path / ".page.html.tmp").symlink_to(victim)
    outcome = run_main("report", str(REFERENCE_PROFILE), "-o", str(tmp_path / "page.html"))
    assert outcome.code == 0, outcome.err
    assert victim.read_text() == "keep me\n"
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".page.html.tmp", "dir.html", "fifo.html", "link.html",
                                                           "page.html", "victim"]


def test_item06_a_users_staging_named_folder_is_never_deleted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    mine = out / ".dsv41-4spark.staging-4000000"  # no such pid, the name of a dead compile's staging
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine\n")
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 0, outcome.err
    assert (mine / "notes.txt").read_text() == "mine\n"


def test_item06_concurrent_compiles_into_one_folder_leave_no_kept_copies(tmp_path: Path) -> None:
    out = tmp_path / "out"
    profile = child_profile(tmp_path, {"description": "the first build"}, relocate=False)
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    child_profile(tmp_path, {"description": "the second build"}, relocate=False)  # every compile now writes
    code = "import sys; from spark_compile.cli import main; sys.exit(main(sys.argv[1:]))"
    procs = [subprocess.Popen([sys.executable, "-c", code, "compile", str(profile), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT) for _ in range(4)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    leftovers = [p for p in out.rglob("*") if ".kept-" in p.name or ".staging-" in p.name]
    assert leftovers == []
    (out / "profile.schema.json").write_text(run_main("schema").out)
    assert run_main("check", "--generated", "--out", str(out), str(profile)).code == 0


# -- hides a key, misplaces or spoofs output ---------------------------------------------------------------
def test_item07_a_lone_cr_cannot_hide_a_key(tmp_path: Path) -> None:
    outcome = check_text(tmp_path, _extends(tmp_path) + "engine:\n  port: 8210  # note\r  host: 127.0.0.1\n")
    assert outcome.code == 1
    assert findings(outcome) == [(3, 21, "SC113", "U+000D (a carriage return without a line feed): YAML reads it "
                                  "as a line break, but editors, terminals, grep and git diff show one line")]
    assert "\r" not in outcome.out and "# note\\r  host" in outcome.out
    assert_terminal_safe(outcome)


def test_item07_esc_is_reported_where_it_stands_and_shown_escaped(tmp_path: Path) -> None:
    outcome = check_text(tmp_path, _extends(tmp_path) + "description: red \x1b[31malert\n")
    assert findings(outcome) == [(2, 18, "SC113", "the file holds the control character U+001B, which YAML does "
                                  "not allow")]
    assert "    2 | description: red \\x1b[31malert\n      |                  ^\n" in outcome.out
    assert_terminal_safe(outcome)


def test_item07_a_cr_in_a_key_does_not_rewrite_the_line(tmp_path: Path) -> None:
    outcome = check_text(tmp_path, _extends(tmp_path) + 'engine:\n  "po\\rrt": 1\n  "x\\u2028y": 2\n')
    got = findings(outcome)
    assert [(line, rule) for line, _, rule, _ in got] == [(3, "SC101"), (4, "SC101")]
    assert "unknown key 'po\\rrt' in engine" in got[0][3]
    assert_terminal_safe(outcome)


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_item08_bidi_controls_cannot_reorder_the_review_page_or_readme(tmp_path: Path) -> None:
    profile = child_profile(tmp_path, {"description": "pay \u202eevil\u202c now \u2066x\u2069"})
    page = tmp_path / "page.html"
    assert run_main("report", str(profile), "-o", str(page)).code == 0
    parser = _Text()
    parser.feed(page.read_text())  # what a browser shows: the parsed text, entities decoded
    shown = "".join(parser.text)
    assert "pay \\u202eevil\\u202c now \\u2066x\\u2069" in shown
    assert not any(c in shown for c in "\u202e\u202c\u2066\u2069")
    assert run_main("compile", str(profile), "--out", str(tmp_path / "out")).code == 0
    readme = next(p for p in (tmp_path / "out").glob("*/README.md") if p.parent.name != SCRIPTS).read_text()
    assert not any(c in readme for c in "\u202e\u202c\u2066\u2069")
    assert "pay \\\\u202eevil\\\\u202c now" in readme  # Markdown shows one backslash


def test_item09_github_format_cannot_forge_a_workflow_command(tmp_path: Path) -> None:
    forged = str(tmp_path / "a\n::warning file=x::forged\n.yaml")
    outcome = run_main("check", "--format", "github", forged)
    assert outcome.code == 2
    assert outcome.err.count("\n") == 1 and not any(line.startswith("::") for line in outcome.err.splitlines())
    assert "a\\n::warning file=x::forged\\n.yaml: no such file" in outcome.err


def test_item09_since_revision_and_paths_cannot_add_lines(tmp_path: Path) -> None:
    outcome = run_main("diff", "--since", "HEAD\n== injected", str(REFERENCE_PROFILE))
    assert outcome.code == 2 and outcome.out == ""
    assert outcome.err == ("spark-compile: error: --since 'HEAD\\n== injected': a revision may not be empty, "
                           "start with '-' or hold control characters\n")
    new = ROOT / "tests" / "profiles" / "positive"
    path = os.path.relpath(next(new.glob("*.yaml")), ROOT)
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)
        outcome = run_main("diff", "--since", "HEAD", "--format", "markdown", path)
    finally:
        os.chdir(cwd)
    assert_handled(outcome)
    header = outcome.out.splitlines()[0]
    assert header.replace("\\", "") == f"#### == {path} against HEAD"  # a heading, its punctuation escaped
    assert_terminal_safe(outcome)
