"""An infra repository's first day, through pre-commit's own installer and git's own commit: the README's
`.pre-commit-config.yaml` example as pasted (only `repo:`/`rev:` pointed at this checkout's HEAD), a first
commit, a bad edit refused, a release change accepted, and a Kubernetes profile whose k8s/*.yaml are output."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@e.invalid"}
PROFILE = "profiles/dsv41-4spark.yaml"


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- infra-precommit-example -->\n```yaml\n(.*?)```", text, re.S)
    assert found, "the README's .pre-commit-config.yaml example is missing"
    return found.group(1)


class Infra:
    """A git repository with the README's hooks installed by pre-commit."""

    def __init__(self, tmp_path: Path) -> None:
        tool = shutil.which("pre-commit")
        if tool is None:
            pytest.fail("pre-commit is not installed (it is a dev dependency)")
        self.tool, self.repo = tool, tmp_path / "infra"
        self.env = {**os.environ, **ENV, "PRE_COMMIT_HOME": str(tmp_path / "cache")}
        (self.repo / "profiles").mkdir(parents=True)
        for name in ("dsv41-4spark.yaml", "dsv41-flash.config.json"):
            shutil.copy(ROOT / "spec" / "profiles" / name, self.repo / "profiles" / name)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        config = _readme_example().replace("https://example.invalid/spark-compile.git", str(ROOT))
        self.config = self.repo / ".pre-commit-config.yaml"
        self.config.write_text(config.replace("rev: v0.2.0", f"rev: {head}"))
        self.git("init", "-q")
        installed = subprocess.run([tool, "install"], cwd=self.repo, env=self.env, capture_output=True, text=True,
                                   check=False)
        assert installed.returncode == 0, installed.stdout + installed.stderr

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=self.repo, env=self.env, capture_output=True, text=True,
                              check=False)

    def compile(self, profile: str) -> None:
        result = run_cli(profile, cwd=self.repo)
        assert result.returncode == 0, result.stdout + result.stderr

    def commit(self, message: str) -> subprocess.CompletedProcess[str]:
        self.git("add", "-A")
        return self.git("commit", "-m", message)

    def edit(self, old: str, new: str) -> None:
        path = self.repo / PROFILE
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))


def test_infra_repo_walk(tmp_path: Path) -> None:
    infra = Infra(tmp_path)
    infra.compile(PROFILE)
    first = infra.commit("first release")
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(r"spark-compile check\.+Passed", first.stdout), first.stdout

    infra.edit("parallel: {tp: 4, ep: 4}", "parallel: {tp: 3, ep: 4}")
    bad = infra.commit("a bad edit")
    assert bad.returncode != 0
    assert "SC401 error: tp 3 does not fit 4 node(s) x 1 GPU(s) of dgx-spark-gb10: expected tp 4" in bad.stdout
    assert "HEAD" in infra.git("log", "-1", "--format=%s%n%D").stdout  # nothing was committed
    assert infra.git("log", "-1", "--format=%s").stdout.strip() == "first release"

    infra.edit("parallel: {tp: 3, ep: 4}", "parallel: {tp: 4, ep: 4}")
    infra.edit("max_running_requests: 16", "max_running_requests: 24")
    stale = infra.commit("release: 24 requests, not recompiled")
    assert stale.returncode != 0 and "drift: " in stale.stdout, stale.stdout
    infra.compile(PROFILE)
    good = infra.commit("release: 24 requests")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "engine.limits.max_running_requests: 16 → 24" in good.stdout

    (infra.repo / "profiles" / "k8s.yaml").write_text(
        "extends: dsv41-4spark.yaml\nname: dsv41-k8s\nkubernetes: {}\n")
    infra.config.write_text(infra.config.read_text().replace(
        "args: [profiles/dsv41-4spark.yaml]", "args: [profiles/dsv41-4spark.yaml, profiles/k8s.yaml]"))
    infra.compile("profiles/k8s.yaml")
    assert list((infra.repo / "profiles" / "generated" / "dsv41-k8s" / "k8s").glob("*.yaml"))
    k8s = infra.commit("a Kubernetes target")
    assert k8s.returncode == 0, k8s.stdout + k8s.stderr
