"""The longest test files run first.

pytest-xdist's ``--dist loadfile`` hands whole files to the workers in collection order, so a long file
collected last runs alone while the other workers idle; moving the longest files to the front lets the short
ones fill in around them. Only the order changes: every test still runs, and each file keeps its own order.
"""

from __future__ import annotations

import pytest

# The longest files of a whole run (`--durations`, 2026-12-02), longest first: the fleet bed's windows and
# watchdog, then the files that resolve many profiles with SGLang or install the project again.
LONGEST_FIRST = (
    "tests/fleet/test_window.py",
    "tests/fleet/test_fleet_ops.py",
    "tests/diff/test_infra_repo_walk.py",
    "tests/test_hints.py",
    "tests/engine/test_kv_pool.py",
    "tests/engine/test_import_argv_oracle.py",
    "tests/engine/test_engine_check_exact.py",
    "tests/test_add_a_field.py",
    "tests/engine/test_catalog_sglang.py",
    "tests/test_style.py",
    "tests/fleet/test_fleet_audit.py",
)


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: the rest keep their collection order
