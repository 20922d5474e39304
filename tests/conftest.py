"""Shared fixtures: paths, the reference profile, and two runners of the real CLI (in this process, and in a
new interpreter where the process is what a test is about)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Hooks, registered by being names of this module: under CI a skip fails the run unless explicitly allowed.
from support.browser import Browser
from support.ci_skips import pytest_configure, pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
from support.cli_runner import run_in_process
from support.precommit import HookRepo, snapshot
from support.schedule import pytest_collection_modifyitems  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PROFILE = ROOT / "spec" / "profiles" / "dsv41-4spark.yaml"
DEPLOYMENT_TXT = ROOT / "tests" / "fixtures" / "reference" / "dsv41-4spark-rank0.txt"  # the fleet's rank-0 command
# The one finding of the reference profile: its image is pinned by tag only (the deployment records no digest).
REFERENCE_TAG_WARNING = "spec/profiles/dsv41-4spark.yaml:47:10: SC312 warning: "
# The reference's own warnings, which a profile extending it inherits at the reference's lines: its tag-only
# image (SC312) and its KV pool's shortfall of full-context requests against max_running_requests 16 (SC442).
REFERENCE_WARNINGS = ("SC312", "SC442")


def run_cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `spark-compile ARGS` through the CLI's main() in this process (support/cli_runner.py)."""
    return run_in_process(args, cwd, env)


def run_cli_process(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
                    ) -> subprocess.CompletedProcess[str]:
    """Run `spark-compile ARGS` in a fresh interpreter, as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "spark_compile.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, check=False)


def refuses(call: Callable[[str], object], value: str, error: type[Exception]) -> bool:
    """Whether ``call(value)`` raises ``error``: a check or a quoting function held to a pattern's verdict."""
    try:
        call(value)
    except error:
        return True
    return False


@pytest.fixture(scope="session")
def reference_plan() -> object:
    from spark_compile.pipeline import planned, validate
    from spark_compile.stages.plan import build_plan
    from spark_compile.stages.resolve import resolve

    validated = validate(resolve(REFERENCE_PROFILE))
    assert [f.rule for f in validated.findings] == list(REFERENCE_WARNINGS), validated.findings
    return build_plan(planned(validated).profile)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Headless Chromium, one per test module that asks (the review-page tests)."""
    with Browser(tmp_path_factory.mktemp("chromium")) as running:
        yield running


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> HookRepo:
    """This checkout as a pre-commit hook repository, with one hook environment for the session."""
    base = tmp_path_factory.mktemp("hooks")
    return snapshot(ROOT, base / "spark-compile", base / "pre-commit-home")
