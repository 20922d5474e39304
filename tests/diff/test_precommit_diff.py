"""The pre-commit hook that prints what each changed profile does, against the previous commit."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import ROOT, run_cli
from support.precommit import HookRepo

PROFILE = "spec/profiles/dsv41-4spark.yaml"
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@e.invalid"}


def _infra(tmp_path: Path) -> Path:
    repo = tmp_path / "infra"
    shutil.copytree(ROOT / "spec" / "profiles", repo / "spec" / "profiles")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "profiles"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env={**os.environ, **ENV})
    profile = repo / PROFILE
    profile.write_text(profile.read_text().replace("max_running_requests: 16", "max_running_requests: 24"))
    (repo / "spec" / "profiles" / "canary.yaml").write_text("extends: dsv41-4spark.yaml\nname: canary\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    return repo


def test_since_diffs_each_path_against_the_revision(tmp_path: Path) -> None:
    repo = _infra(tmp_path)
    result = run_cli("diff", "--since", "HEAD", PROFILE, "spec/profiles/canary.yaml", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(
        f"== {PROFILE} against HEAD\n"
        "profile: 1 change\n"
        f"  engine.limits.max_running_requests: 16 → 24  ({PROFILE}:73)\n"
        "    4 changes in 3 files, ranks 0-3\n"
        "  engine.cuda_graph.max_bs_decode (a value derived from the changes above): 2 changes in 2 files, ranks 0-3\n"
        "artifacts: 6 changes in 3 files; --detail lists each\n")
    canary = result.stdout.split("== spec/profiles/canary.yaml against HEAD\n", 1)[1]
    assert canary.startswith("spec/profiles/canary.yaml: new profile, against the profile it extends "
                             f"({PROFILE} at HEAD)\n"
                             "profile: 2 changes\n"
                             "  name: dsv41-4spark → canary  (spec/profiles/canary.yaml:2)\n"
                             "    every path follows (")


def test_since_says_new_profile_for_a_new_file_that_extends_nothing(tmp_path: Path) -> None:
    repo = _infra(tmp_path)
    shutil.copy(repo / PROFILE, repo / "spec" / "profiles" / "other.yaml")
    result = run_cli("diff", "--since", "HEAD", "spec/profiles/other.yaml", cwd=repo)
    assert (result.returncode, result.stdout) == (0, "== spec/profiles/other.yaml against HEAD\n"
                                                     "spec/profiles/other.yaml: new profile (not in HEAD)\n")


def test_since_refuses_an_option_shaped_revision(tmp_path: Path) -> None:
    repo = _infra(tmp_path)
    result = run_cli("diff", "--since=--output=x", PROFILE, cwd=repo)
    assert result.returncode == 2 and "may not be empty, start with '-' or hold control characters" in result.stderr
    assert not (repo / "x").exists()


def test_diff_needs_two_sides_without_since() -> None:
    result = run_cli("diff", PROFILE)
    assert result.returncode == 2 and "expected OLD and NEW" in result.stderr


def test_pre_commit_hook_prints_the_diff(tmp_path: Path, hook_repo: HookRepo) -> None:
    repo = _infra(tmp_path)
    result = hook_repo.run(repo, "spark-compile-diff", PROFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "engine.limits.max_running_requests: 16 → 24" in result.stdout
    assert "\n    4 changes in 3 files, ranks 0-3\n" in result.stdout


def test_report_against_a_git_revision(tmp_path: Path) -> None:
    repo = _infra(tmp_path)
    page = tmp_path / "page.html"
    result = run_cli("report", PROFILE, "--against", f"HEAD:{PROFILE}", "-o", str(page), cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    html = page.read_text()
    assert '<li class="change changed" data-path="engine.limits.max_running_requests">' in html
    assert 'Compared with <code class="val">HEAD:spec/profiles/dsv41-4spark.yaml</code>: 1 value changed.' in html
    refused = run_cli("report", PROFILE, f"--against=-x:{PROFILE}", cwd=repo)
    assert refused.returncode == 2 and "may not start with '-'" in refused.stderr
