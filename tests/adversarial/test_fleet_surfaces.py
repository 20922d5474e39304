"""Issue 37, item 5: the environment variables the fleet scripts read, enumerated from the scripts themselves,
each run with hostile values through launch.sh (which sources fleet-lib.sh as every shell script does). A
variable a script starts to read with no hostile values here fails the coverage test."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from support.fleet_install import installed_fleet

STATIC = ROOT / "templates" / "fleet" / "static"
_READ = re.compile(r"\$\{(SPARK_[A-Z0-9_]+)|environ(?:\.get\(|\[)\"(SPARK_[A-Z0-9_]+)")
CANARY = "/tmp/spark-compile-round3-env-pwned"
_CODE = (f"$(touch {CANARY})", f"`touch {CANARY}`", f"a[$(touch {CANARY})]", f"x\ntouch {CANARY}")
_NUMBERS = ("", "0", "-1", "1e400", "9" * 400, "0x10", "\u0663", " 5", *_CODE)
# name -> (hostile values, the largest value the scripts accept; None when it is text)
HOSTILE_ENV: dict[str, tuple[tuple[str, ...], int | None]] = {
    "SPARK_API_PORT": (_NUMBERS, 65535),
    "SPARK_HEALTH_POLL": (_NUMBERS, 3600),
    "SPARK_API_HOST": (("-x", "a b", "a\nb", *_CODE), None),
    "SPARK_API_KEY": (("a\nb", "-x", "'", *_CODE), None),
    "SPARK_SSH_OPTS": (("-oProxyCommand=touch " + CANARY, "a\nb", *_CODE), None),
    "SPARK_ON_HEAD": (("2", "1\n", *_CODE), None),
    "SPARK_WINDOW": (("2", "1\n", *_CODE), None),
    "SPARK_WATCHDOG_RELAUNCH": (("-1", "a\nb", *_CODE), None),
    "SPARK_LAUNCH_LOG_DIR": (("a\nb", "/dev/null", *_CODE), None),
}


def read_by_the_scripts() -> set[str]:
    """Every SPARK_* variable the shell and Python fleet scripts read."""
    return {a or b for path in STATIC.iterdir() for a, b in _READ.findall(path.read_text())}


def test_every_variable_the_fleet_scripts_read_has_hostile_values() -> None:
    assert read_by_the_scripts() == set(HOSTILE_ENV)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_fleet(ROOT / "generated" / "dsv41-4spark", tmp_path_factory.mktemp("fleet") / "dsv41-4spark")


CASES = [(name, value) for name, (values, _) in HOSTILE_ENV.items() for value in values]


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}={v!r}"[:60] for n, v in CASES])
def test_hostile_environment_through_the_fleet_scripts(fleet: Path, tmp_path: Path, name: str, value: str) -> None:
    Path(CANARY).unlink(missing_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "SPARK_LAUNCH_LOG_DIR": str(tmp_path / "logs"), name: value}
    proc = subprocess.run(["bash", str(fleet / "launch.sh"), "dry-run"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120, check=False)
    assert not Path(CANARY).exists(), f"{name}={value!r} ran code"
    assert proc.returncode in (0, 64), proc.stderr
    assert not re.search(r"unbound variable|syntax error|Traceback|command not found", proc.stderr), proc.stderr
    limit = HOSTILE_ENV[name][1]
    if limit is not None and value:  # an empty one is unset: the default
        assert proc.returncode == 64
        assert proc.stderr == f"{name}={_bash_q(value)}: expected a whole number from 1 to {limit}\n"


def _bash_q(value: str) -> str:
    return subprocess.run(["bash", "-c", 'printf %q "$1"', "q", value], capture_output=True, text=True,
                          check=True).stdout
