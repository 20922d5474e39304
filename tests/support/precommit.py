"""pre-commit running this checkout's hooks, with one hook environment for the whole test session.

pre-commit installs a hook repository from a commit into a virtualenv of its own (a pip install of
spark-compile and its dependencies: the slow part). `try-repo` builds that environment anew on every call;
here the checkout is committed once into a snapshot repository and every test names that commit in its
configuration, under one PRE_COMMIT_HOME, so the environment is built once and reused as pre-commit
reuses it for an infra repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e.invalid"}


@dataclass(frozen=True)
class HookRepo:
    """The snapshot repository of this checkout, its commit, and the session's pre-commit home."""

    source: Path
    rev: str
    home: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment pre-commit and git run in: this session's pre-commit home, a git identity."""
        return {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(self.home)}

    def run(self, cwd: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
        """`pre-commit run HOOK --files FILES` in ``cwd`` from a configuration naming the snapshot's commit
        (kept beside ``cwd``, not in it), as `pre-commit try-repo` runs one hook."""
        config = cwd.parent / f"{cwd.name}-pre-commit-config.yaml"
        config.write_text(f"repos:\n  - repo: {self.source}\n    rev: {self.rev}\n    hooks:\n      - id: {hook}\n")
        return subprocess.run([_tool(), "run", "--config", str(config), hook, "--files", *files], cwd=cwd,
                              env=self.env, capture_output=True, text=True, check=False)


def _tool() -> str:
    found = shutil.which("pre-commit")
    assert found is not None, "pre-commit is not installed (it is a dev dependency)"
    return found


def snapshot(root: Path, dest: Path, home: Path) -> HookRepo:
    """``root``'s files as they are (uncommitted edits too), committed into a repository of their own:
    pre-commit installs hooks from a commit, and the tests must see the code under test."""
    _tool()
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (root / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, dest / name)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "snapshot"]):
        subprocess.run(["git", *args], cwd=dest, env=env, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=dest, capture_output=True, text=True, check=True)
    return HookRepo(dest, head.stdout.strip(), home)
