"""The deployment README says where the API is reachable from, for each kind of bind address."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, ROOT, run_cli


@pytest.mark.parametrize(("host", "line"), [
    ("127.0.0.1", "- API: `http://127.0.0.1:8210/v1` on spark-0 only (bound to loopback: call it there, "
                  "or over ssh to spark-0)"),
    ("192.0.2.11", "- API: `http://192.0.2.11:8210/v1` on the head, spark-0, bound to that address only"),
])
def test_readme_api_line_says_where_the_api_is_reachable(tmp_path: Path, host: str, line: str) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\nname: api-{host.replace('.', '-')}\n"
                       f"engine: {{host: {host}}}\n")
    result = run_cli("compile", str(profile), "--out", str(tmp_path / "out"), "--root", str(ROOT))
    assert result.returncode == 0, result.stdout + result.stderr
    readme = (tmp_path / "out" / f"api-{host.replace('.', '-')}" / "README.md").read_text().splitlines()
    assert [entry for entry in readme if entry.startswith("- API:")] == [line]


def test_reference_readme_api_line() -> None:
    readme = (ROOT / "generated" / "dsv41-4spark" / "README.md").read_text().splitlines()
    assert "- API: `http://192.0.2.11:8210/v1` on the head, spark-0, which listens on every address" in readme
