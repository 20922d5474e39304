"""Under CI a skip fails the run unless the test is marked allowed_skip with a reason (support/ci_skips.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

SUPPORT_PARENT = Path(__file__).resolve().parent

SAMPLE = '''
import pytest

def test_plain_skip():
    pytest.skip("tool missing")

@pytest.mark.skipif(True, reason="never here")
def test_skipif():
    pass

@pytest.mark.allowed_skip(reason="only meaningful on aarch64")
def test_allowed():
    pytest.skip("not aarch64")

@pytest.mark.allowed_skip
def test_allowed_without_reason():
    pytest.skip("no reason given")

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False

def test_pass():
    pass
'''
MODULE_SKIP = 'import pytest\npytest.skip("whole module", allow_module_level=True)\n'


def _run(tmp_path: Path, ci: str | None) -> dict[str, str]:
    """Run the sample under the plugin; {test name: outcome} read from the JUnit report."""
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(SUPPORT_PARENT)}
    if ci is not None:
        env["CI"] = ci
    junit = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "support.ci_skips", "-p", "no:cacheprovider", "-q",
         "--strict-markers", "--continue-on-collection-errors", "-c", os.devnull, "--rootdir", str(tmp_path),
         f"--junitxml={junit}", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        kinds = ["pytest.xfail" if child.get("type") == "pytest.xfail" else child.tag
                 for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[case.get("name", "")] = kinds[0] if kinds else "passed"
    return outcomes


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_skip_fails_unless_allowed(tmp_path: Path, ci: str) -> None:
    assert _run(tmp_path, ci) == {
        "test_plain_skip": "failure", "test_skipif": "error", "test_allowed": "skipped",
        "test_allowed_without_reason": "failure", "test_xfail": "pytest.xfail", "test_pass": "passed",
        "test_module_skip": "error"}


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_outside_ci_a_skip_is_a_skip(tmp_path: Path, ci: str | None) -> None:
    assert _run(tmp_path, ci) == {
        "test_plain_skip": "skipped", "test_skipif": "skipped", "test_allowed": "skipped",
        "test_allowed_without_reason": "skipped", "test_xfail": "pytest.xfail", "test_pass": "passed",
        "test_module_skip": "skipped"}
