"""An infra repository's first day, through pre-commit's own installer and git's own commit: the README's
`.pre-commit-config.yaml` example as pasted (only `repo:`/`rev:` pointed at a snapshot of this checkout), a first
commit, a bad edit refused, a release change accepted, and a Kubernetes profile whose k8s/*.yaml are output; a new
release file the configuration does not name, refused by the drift hook until its committed output is current."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from support.precommit import HookRepo

PROFILE = "profiles/dsv41-4spark.yaml"


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- infra-precommit-example -->\n```yaml\n(.*?)```", text, re.S)
    assert found, "the README's .pre-commit-config.yaml example is missing"
    return found.group(1)


class Infra:
    """A git repository with the README's hooks installed by pre-commit."""

    def __init__(self, tmp_path: Path, hooks: HookRepo) -> None:
        tool = shutil.which("pre-commit")
        if tool is None:
            pytest.fail("pre-commit is not installed (it is a dev dependency)")
        self.tool, self.repo = tool, tmp_path / "infra"
        self.env = hooks.env  # its git identity too
        (self.repo / "profiles").mkdir(parents=True)
        for name in ("dsv41-4spark.yaml", "dsv41-flash.config.json"):
            shutil.copy(ROOT / "spec" / "profiles" / name, self.repo / "profiles" / name)
        config = _readme_example().replace("https://example.invalid/spark-compile.git", str(hooks.source))
        self.config = self.repo / ".pre-commit-config.yaml"
        self.config.write_text(config.replace("rev: FILL-IN", f"rev: {hooks.rev}"))
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

    def commit(self, message: str) -> tuple[int, str]:
        """git commit through the installed hooks: the exit code and everything printed (hooks use stderr)."""
        self.git("add", "-A")
        result = self.git("commit", "-m", message)
        return result.returncode, result.stdout + result.stderr

    def edit(self, old: str, new: str) -> None:
        path = self.repo / PROFILE
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))


def test_infra_repo_walk(tmp_path: Path, hook_repo: HookRepo) -> None:
    infra = Infra(tmp_path, hook_repo)
    infra.compile(PROFILE)
    code, out = infra.commit("first release")
    assert code == 0, out
    for hook in ("spark-compile check", "spark-compile drift", "spark-compile diff against HEAD"):
        assert re.search(rf"{hook}\.+Passed", out), out

    infra.edit("parallel: {tp: 4, ep: 4}", "parallel: {tp: 3, ep: 4}")
    code, out = infra.commit("a bad edit")
    assert code != 0
    assert re.search(r"spark-compile check\.+Failed", out), out
    # Printed once, by spark-compile-check; the drift and diff hooks each say in one line why they stopped.
    assert out.count("SC401 error: tp 3 does not fit 4 node(s) x 1 GPU(s) of dgx-spark-gb10: expected tp 4") == 1
    # One root cause, one error: neither SC201 (ep 4 does not divide tp 3) nor SC441 (tp 3's shards leave no KV
    # cache) follows SC401; of the capacity warnings none fires on a pool of nothing. SC312 stays.
    assert "SC441" not in out and "SC442" not in out and out.count("SC312 warning") == 1, out
    assert "\nprofiles/dsv41-4spark.yaml: not diffed: 1 error, 1 warning in 1 profile (`spark-compile check` " \
           "lists them)\n" in out, out
    assert "\n1 error, 1 warning in 1 profile (`spark-compile check` lists them)\n" in out
    assert infra.git("log", "-1", "--format=%s").stdout.strip() == "first release"  # nothing was committed

    infra.edit("parallel: {tp: 3, ep: 4}", "parallel: {tp: 4, ep: 4}")
    infra.edit("max_running_requests: 16", "max_running_requests: 24")
    code, out = infra.commit("release: 24 requests, not recompiled")
    assert code != 0 and re.search(r"spark-compile drift\.+Failed", out), out
    # The request cap reaches each rank's argv, the fleet's per-rank flags, the plan and the audit's copy of it
    # (and so the manifest).
    stale = [f"profiles/generated/dsv41-4spark/{path}: differs from what {PROFILE} produces"
             for path in (*(f"{rank}-spark-{rank}/docker-run.sh" for rank in range(4)), "MANIFEST.json",
                          "fleet/audit.json", "fleet/fleet.env", "plan.json")]
    assert "\n".join([*stale, f"drift: 8 files stale; run `spark-compile` on {PROFILE} and commit the result"]) in out
    infra.compile(PROFILE)
    code, out = infra.commit("release: 24 requests")
    assert code == 0, out
    assert "engine.limits.max_running_requests: 16 → 24" in out

    # The drift hook names the folder: the new profile is checked without a change to the configuration, and
    # its compiled k8s/*.yaml are output, not profiles.
    (infra.repo / "profiles" / "k8s.yaml").write_text(
        "extends: dsv41-4spark.yaml\nname: dsv41-k8s\nkubernetes: {}\n")
    infra.compile("profiles/k8s.yaml")
    assert list((infra.repo / "profiles" / "generated" / "dsv41-k8s" / "k8s").glob("*.yaml"))
    code, out = infra.commit("a Kubernetes target")
    assert code == 0, out
    assert ("profiles/k8s.yaml: new profile, against the profile it extends (profiles/dsv41-4spark.yaml at HEAD)\n"
            in out)


def test_a_new_release_file_with_stale_output_is_refused_by_name(tmp_path: Path, hook_repo: HookRepo) -> None:
    """The README's drift hook covers every profile of the folder, not a list: a release added beside the
    committed profile is refused while its output is missing, then while it is stale, and accepted once
    compiled."""
    infra = Infra(tmp_path, hook_repo)
    infra.compile(PROFILE)
    code, out = infra.commit("first release")
    assert code == 0, out
    release, name = "profiles/dsv41-4spark-1.8.yaml", "dsv41-4spark-1-8"
    text = f"extends: dsv41-4spark.yaml\nname: {name}\nrelease: candidate-1.8\n"
    (infra.repo / release).write_text(text + "engine:\n  limits: {max_running_requests: 20}\n")
    code, out = infra.commit("release 1.8, never compiled")
    assert code != 0 and re.search(r"spark-compile drift\.+Failed", out), out
    assert f"profiles/generated/{name}/plan.json: missing (the profile produces it)\n" in out, out
    assert f"run `spark-compile` on {release} and commit the result" in out and f"on {PROFILE}" not in out

    infra.compile(release)
    (infra.repo / release).write_text(text + "engine:\n  limits: {max_running_requests: 24}\n")
    code, out = infra.commit("release 1.8, edited after compiling")
    assert code != 0 and re.search(r"spark-compile drift\.+Failed", out), out
    assert f"profiles/generated/{name}/plan.json: differs from what {release} produces\n" in out, out
    assert f"run `spark-compile` on {release} and commit the result" in out

    infra.compile(release)
    code, out = infra.commit("release 1.8")
    assert code == 0 and re.search(r"spark-compile drift\.+Passed", out), out
