"""Under CI a skipped test fails the run: a skip there hides a test nobody will see again.

A skip stays a skip in CI only when the test carries ``@pytest.mark.allowed_skip(reason=...)``, whose
reason says why skipping is right even there. Outside CI (``CI`` unset, empty, ``0`` or ``false``) skips
are reported as usual. xfail is not a skip and is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

MARKER = "allowed_skip"


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(reason): a skip that is right even in CI; the reason says why")


def _why(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def _fail(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.longrepr = (f"skipped under CI, which hides the test: {_why(report)}\n"
                       f"Make the test run here, or mark it @pytest.mark.{MARKER}(reason=...) saying why it may "
                       "skip in CI.")
    report.outcome = "failed"


def _allowed(item: pytest.Item) -> bool:
    marker = item.get_closest_marker(MARKER)
    return marker is not None and bool(marker.kwargs.get("reason"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and under_ci() and not _allowed(item):
        _fail(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if report.skipped and under_ci():  # a whole module skipped at import: no item to carry the marker
        _fail(report)
