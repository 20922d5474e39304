"""Issue 25 (hostile input, round 2), items 10-18: each test names its item."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hostile import assert_handled, child_profile, peak_rss_mib, run_main
from items import check_text, findings
from items import extends_reference as _extends
from round2 import assert_terminal_safe, fake_engine

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS, ROOT, run_cli

TOKEN = "hf_" + "Q" * 34


# -- redaction before serialisation ----------------------------------------------------------------------
def test_item10_plan_json_stays_valid_with_secrets_and_system_mounts(tmp_path: Path) -> None:
    profile = child_profile(tmp_path, {
        "container": {"mounts": [{"source": "/etc/passwd", "target": "/etc/passwd", "read_only": True}]},
        "secrets": {"api_key": {"file": "/etc/spark-compile/api-key"}}})
    outcome = run_main("plan", str(profile))
    assert outcome.code == 0, outcome.err
    plan = json.loads(outcome.out)  # the redaction step once ate the closing quotes here
    assert "/etc/passwd:/etc/passwd:ro" in plan["ranks"][0]["docker_argv"]
    assert f"{tmp_path}/run/dsv41-4spark/secrets:/run/spark-secrets:ro" in plan["ranks"][0]["docker_argv"]


def test_item10_json_reports_stay_valid_and_never_echo_a_token(tmp_path: Path) -> None:
    profile = child_profile(tmp_path, {"engine": {"env": {"SGLANG_X": TOKEN, "MY_PASSWORD": "p'\"}{,:x"}},
                                       "description": "passwd: \"x\" token=" + TOKEN})
    outcome = run_main("check", "--format", "json", str(profile))
    report = json.loads(outcome.out)
    assert TOKEN not in outcome.out and "p'\\\"}{,:x" not in outcome.out
    assert {f["rule"] for f in report["findings"]} >= {"SC230"}


# -- exit 3 ------------------------------------------------------------------------------------------------
def test_item11_non_finite_numbers_are_findings(tmp_path: Path) -> None:
    for value in (".inf", "-.inf", ".nan"):
        outcome = check_text(tmp_path, _extends(tmp_path) + f"overlay:\n  engram_cache_gb: {value}\n")
        assert findings(outcome) == [(3, 20, "SC111", "overlay.engram_cache_gb: Input should be a finite number")]
        compiled = run_main("compile", str(tmp_path / "p.yaml"), "--out", str(tmp_path / "out"))
        assert compiled.code == 1
        diffed = run_main("diff", str(REFERENCE_PROFILE), str(tmp_path / "p.yaml"))
        assert diffed.code == 1 and "Input should be a finite number" in diffed.out


@pytest.mark.parametrize(("files", "message"), [
    ({"a.yaml": "extends: b.yaml\n", "b.yaml": "extends: a.yaml\n"}, "extends cycle"),
    ({"c.yaml": "extends: c.yaml\nname: c\n"}, "extends cycle"),
    ({"broken.yaml": "name: [\n"}, "YAML syntax error"),
    ({"bad.yaml": "\x1b\n"}, "control character"),
])
def test_item11_history_on_broken_files_is_a_finding(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    outcome = run_main("history", str(tmp_path))
    assert_handled(outcome)
    assert outcome.code == 1 and message in outcome.out and outcome.out.endswith("1 error, 0 warnings in 1 profile\n")


@pytest.mark.parametrize("output", ["", ".", "./", "/"])
def test_item11_report_output_naming_no_file_exits_2(output: str) -> None:
    outcome = run_main("report", str(REFERENCE_PROFILE), "-o", output)
    assert outcome.code == 2
    assert outcome.err.endswith(f"spark-compile: error: {str(Path(output))!r} names no file: give the path of a "
                                "file to write, e.g. review.html\n")


ANSWERS = [
    [], "null", 7, {"sglang": 5}, {"sglang": "0.5.23", "jobs": "x"}, {"sglang": "0.5.23", "jobs": []},
    {"sglang": "0.5.23", "jobs": [[{"rank": "zero"}]]},
    {"sglang": "0.5.23", "jobs": [[{"rank": 0, "outcome": "ok", "written": {"x": {"value": 1}}}]]},
    {"sglang": "0.5.23", "standins": [1], "jobs": [[]]}, "[" * 100_000, "{" + '"a":' * 5 + "\n",
]


@pytest.mark.parametrize("answer", ANSWERS, ids=[f"shape{i}" for i in range(len(ANSWERS))])
def test_item11_engine_interpreter_output_shapes_are_sc603(tmp_path: Path, answer: object) -> None:
    engine = fake_engine(tmp_path, answer)
    outcome = run_main("check", "--engine", "--engine-python", str(engine), str(REFERENCE_PROFILE))
    assert_handled(outcome)
    assert outcome.code in (0, 1)
    assert re.search(r"SC603 warning: engine checks for sglang-\S+ did not run: the resolution probe printed "
                     r"(invalid JSON|JSON of another shape than it answers with)", outcome.out), outcome.out


def test_item12_a_nested_valid_config_json_is_one_finding(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["LlamaForCausalLM"], "x": ' + "[" * 50_000 + "]" * 50_000 + "}")
    profile = child_profile(tmp_path, {"model": {"config_json": "config.json"}}, relocate=False)
    engine = fake_engine(tmp_path, {"sglang": "0.5.23", "standins": [], "jobs": []})
    outcome = run_main("check", "--engine", "--engine-python", str(engine), str(profile), str(REFERENCE_PROFILE))
    assert_handled(outcome)
    assert f"did not run: {config} nests too deeply to be a model config.json" in outcome.out
    assert "SC312 warning" in outcome.out  # the other findings of both profiles are printed too


# -- silent drops, wrong answers -------------------------------------------------------------------------------
def test_item13_a_scalar_item_in_an_inherited_node_list_is_a_finding(tmp_path: Path) -> None:
    outcome = check_text(tmp_path, _extends(tmp_path) + "fleet:\n  nodes:\n    - spark-9\n")
    assert findings(outcome) == [(4, 7, "SC102", "fleet.nodes[4]: expected a mapping, got 'spark-9'")]


def test_item14_since_with_an_unknown_revision_or_outside_git_exits_2(tmp_path: Path) -> None:
    outcome = run_main("diff", "--since", "HEADD", str(REFERENCE_PROFILE))
    assert (outcome.code, outcome.err) == (2, "spark-compile: error: --since 'HEADD': git knows no commit by "
                                               "that name here; name a branch, tag or commit (e.g. --since HEAD)\n")
    proc = run_cli("diff", "--since", "HEAD", str(REFERENCE_PROFILE), cwd=tmp_path,
                   env={"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("spark-compile: error: --since 'HEAD': git knows no commit by that name (the current "
                           "directory is not in a git repository); name a branch, tag or commit (e.g. --since HEAD)\n")


@pytest.mark.parametrize("target", ["/etc/spark-compile", "/dev/shm", "/dev/infiniband"])
def test_item15_mounts_at_the_pods_own_paths_are_refused(tmp_path: Path, target: str) -> None:
    body = (_extends(tmp_path) + "kubernetes: {}\ncontainer:\n  mounts:\n"
            f"    - {{source: /srv/x, target: {target}}}\n")
    got = [g for g in findings(check_text(tmp_path, body)) if g[2] == "SC509"]
    assert got == [(5, 7, "SC509", f"{target} is where every pod mounts its own volume (the config, /dev/shm or "
                    "the HCAs): a bind mount there is a duplicate mountPath")]


def test_item15_a_long_mount_target_gives_a_dns_label_volume_name(tmp_path: Path) -> None:
    target = "/mnt/" + "a" * 44 + "-b" * 8
    profile = child_profile(tmp_path, {"kubernetes": {}, "container": {"mounts": [
        {"source": "/srv/x", "target": target}]}})
    assert run_main("compile", str(profile), "--out", str(tmp_path / "out")).code == 0
    lws = yaml.safe_load(next((tmp_path / "out").glob("*/k8s/leaderworkerset.yaml")).read_text())
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    names = [v["name"] for v in template["volumes"]]
    assert all(re.fullmatch(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", name) for name in names), names
    paths = [m["mountPath"] for m in template["containers"][0]["volumeMounts"]]
    assert len(paths) == len(set(paths)) and target in paths


def test_item15_kubernetes_check_refuses_the_fleet_the_compile_refuses(tmp_path: Path) -> None:
    nodes = [{"name": f"n{i}", "fabric_ip": f"10.{i // 250}.{i % 250 + 1}.2", "ssh": f"s@10.{i // 250}.0.{i % 250}",
              "home": "/home/s"} for i in range(1020)]  # with the reference's 4: the schema's cap of 1024 nodes
    profile = child_profile(tmp_path, {"kubernetes": {}, "fleet": {"nodes": nodes, "fabric": {"subnet": "10.0.0.0/8"}},
                                       "engine": {"parallel": {"tp": 1024}}})
    outcome = run_main("check", str(profile))
    assert outcome.code == 1
    assert [msg for _, _, rule, msg in findings(outcome) if rule == "SC509"] == [
        "the ConfigMap dsv41-4spark-config would take 1241875 bytes, over the 1048576 Kubernetes allows: 1024 "
        "ranks' env files do not fit one ConfigMap"]


# -- unbounded work ------------------------------------------------------------------------------------------
def _calls_to_check(tmp_path: Path, unknown: int) -> int:
    """Function calls (Python's and C's) a `check` makes of a profile with ``unknown`` unknown variables: the
    work done, the same on any machine however loaded."""
    items = ", ".join(f"SGLANG_NOPE_{i}: x" for i in range(unknown))
    path = tmp_path / f"p{unknown}.yaml"
    path.write_text(_extends(tmp_path) + "engine: {env: {" + items + "}}\n")
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        outcome = run_main("check", str(path))
    finally:
        sys.setprofile(None)
    assert outcome.code == 1 and len(findings(outcome)) == unknown + len(REFERENCE_WARNINGS)  # and the reference's
    return calls


def test_item16_the_text_report_is_linear(tmp_path: Path) -> None:
    """Doubling the unknown variables doubles the work (a quadratic merge of origins would quadruple it)."""
    _calls_to_check(tmp_path, 10)  # the first check in a process also loads the catalogs and the modules
    small, middle, large = (_calls_to_check(tmp_path, n) for n in (400, 800, 1600))
    growth = (large - middle) / (middle - small)
    assert 1.5 < growth < 2.6, growth


def test_item17_check_generated_never_follows_a_symlink(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    big = tmp_path / "big"
    with big.open("wb") as handle:
        handle.truncate(3 << 30)  # sparse: 3 GB that must never be read
    readme = out / "dsv41-4spark" / "README.md"
    readme.unlink()
    readme.symlink_to(big)
    outcome, peak = peak_rss_mib(["check", "--generated", "--out", str(out), str(REFERENCE_PROFILE)], ROOT)
    assert outcome.code == 1 and peak < 400, peak
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 < 3000


def test_item17_a_huge_gitrev_blob_is_sized_before_it_is_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with (repo / "p.yaml").open("w") as handle:  # written in pieces: this process's peak is the child's at start
        handle.write("name: x\n# ")
        for _ in range(200):
            handle.write("y" * (1 << 20))
    subprocess.run([*git, "add", "p.yaml"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "big"], cwd=repo, check=True)
    (repo / "p.yaml").write_text("name: x\n")
    outcome, peak = peak_rss_mib(["diff", "HEAD:p.yaml", "p.yaml"], repo)
    assert outcome.code == 1 and peak < 150, peak  # SC108 (over 1 MiB) on the old side, found without reading it


# -- secrets -------------------------------------------------------------------------------------------------
def test_item18_literal_secrets_in_three_more_shapes(tmp_path: Path) -> None:
    body = _extends(tmp_path) + (
        "engine:\n  env:\n    PYTORCH_AUTH_HEADER: \"Bearer abcdef0123456789xyz\"\n"
        "    HF_TOKEN_PATH: hfsecretvalue123\n"
        "operations:\n  previous_stack:\n    stop: [/usr/bin/old, stop, --password, hunter2]\n"
        "    relaunch: [/usr/bin/old, start, --password=hunter2]\n")
    outcome = check_text(tmp_path, body)
    assert [g[:3] for g in findings(outcome) if g[2] == "SC230"] == [(4, 26, "SC230"), (5, 20, "SC230"),
                                                                      (8, 44, "SC230"), (9, 37, "SC230")]
    assert "hunter2" not in outcome.out and "abcdef0123456789xyz" not in outcome.out
    assert "launch.sh logs every command it runs" in outcome.out
    assert run_main("compile", str(tmp_path / "p.yaml"), "--out", str(tmp_path / "out")).code == 1
    assert not (tmp_path / "out").exists()
    assert_terminal_safe(outcome)


def test_item14_head_of_a_repository_without_commits_is_every_path_new(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "p.yaml").write_text("name: x\n")
    proc = run_cli("diff", "--since", "HEAD", "p.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "== p.yaml against HEAD\np.yaml: new profile (not in "
                                                              "HEAD)\n", "")
    proc = run_cli("diff", "--since", "HEADD", "p.yaml", cwd=tmp_path)
    assert proc.returncode == 2
