"""Same profile, same bytes: across hash seeds, time zones and locales, and across runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

from conftest import run_cli, run_cli_process

ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C"},
    {"PYTHONHASHSEED": "12345", "TZ": "Pacific/Chatham", "LC_ALL": "C.UTF-8"},
    {"PYTHONHASHSEED": "random", "TZ": "Asia/Kathmandu", "LC_ALL": "POSIX", "LANG": "de_DE.UTF-8"},
]


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_plan_json_is_identical_everywhere() -> None:
    outputs = {run_cli_process("plan", "spec/profiles/dsv41-4spark.yaml", "--json", env=env).stdout
               for env in ENVIRONMENTS}
    assert len(outputs) == 1
    assert '"profile": "dsv41-4spark"' in outputs.pop()


def test_generated_tree_is_identical_everywhere(tmp_path: Path) -> None:
    digests = []
    for index, env in enumerate(ENVIRONMENTS):
        out = tmp_path / f"out{index}"
        result = run_cli_process("spec/profiles/dsv41-4spark.yaml", "--out", str(out), env=env)
        assert result.returncode == 0, result.stderr
        digests.append(_tree_digest(out))
    assert digests[0] == digests[1] == digests[2]
    assert len(digests[0]) > 20


def test_no_timestamps_in_generated_files(tmp_path: Path) -> None:
    import re

    assert run_cli("spec/profiles/dsv41-4spark.yaml", "--out", str(tmp_path)).returncode == 0
    stamp = re.compile(r"20\d\d-\d\d-\d\d|\d\d:\d\d:\d\d")
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert not stamp.search(path.read_text()), path
