"""A GITREV: side of a diff reads every file the profile reads (its extends chain, its committed config.json,
through in-tree symlinks) at that revision, through the loader the working-tree side uses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from spark_compile.review.diff import diff_profiles, load_side

from conftest import ROOT

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@e.invalid"}
SHIPPED = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "spec" / "profiles").rglob("*.yaml"))


def _repo(tmp_path: Path) -> Path:
    """A git repository holding the shipped profiles (symlinks kept as symlinks), committed."""
    repo = tmp_path / "infra"
    (repo / "spec").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(ROOT / "spec" / "profiles"), str(repo / "spec" / "profiles")], check=True)
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "profiles"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env={**os.environ, **ENV})
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _repo(tmp_path_factory.mktemp("git-side"))


def test_the_shipped_profiles_are_linked_config_files() -> None:
    """The releases name their config.json through a symlink: the case the revision's reader must follow."""
    assert (ROOT / "spec/profiles/releases/dsv41-flash.config.json").is_symlink()
    assert len(SHIPPED) >= 9


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_profile_against_head_has_no_change(repo: Path, profile: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    result = diff_profiles(load_side(f"HEAD:{profile}"), load_side(profile))
    assert (result.profile, result.artifacts.changes) == ([], [])
    assert result.identical


def test_the_revision_side_reads_the_revisions_config_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config.json changed only in the working tree is a change: the revision's side read its own copy."""
    repo = _repo(tmp_path)
    config = repo / "spec/profiles/dsv41-flash.config.json"
    text = config.read_text()
    assert '"num_hidden_layers": 40' in text
    config.write_text(text.replace('"num_hidden_layers": 40', '"num_hidden_layers": 44', 1))
    monkeypatch.chdir(repo)
    profile = "spec/profiles/releases/production-1.7.yaml"
    assert not diff_profiles(load_side(f"HEAD:{profile}"), load_side(profile)).identical
