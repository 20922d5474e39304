"""Run a traced launcher as root (in this process) or as an unprivileged user (under setpriv), the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from spark_compile.common.errors import SparkCompileError
from spark_compile.importer.trace import run_traced

NOBODY = 65534
HELPER = Path(__file__).with_name("trace_as_user.py")
Runner = Callable[..., dict[str, Any]]


def launcher(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    """A launcher ``name`` alone in a folder of its own under ``tmp_path``."""
    folder = tmp_path / "launcher"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def _open_to_nobody(tmp_path: Path) -> None:
    # pytest's own folders above tmp_path (pytest-of-root/pytest-N[/popen-gwN under xdist]) are 0700 root: let
    # nobody (the sandbox's host user, and the test user) through them to tmp_path; the system temp dir is not ours.
    system_tmp = Path(tempfile.gettempdir()).resolve()
    for folder in (tmp_path.resolve(), *tmp_path.resolve().parents):
        if folder in {system_tmp, folder.parent}:
            break
        folder.chmod(folder.stat().st_mode | 0o001)


def _as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runner:
    _open_to_nobody(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the staging folder, inside tmp_path

    def run(script: Path, env: dict[str, str] | None = None, limit: int = 20,
            args: tuple[str, ...] = ()) -> dict[str, Any]:
        try:
            return asdict(run_traced(script, ("192.0.2.1",), env or {}, limit=limit, args=args))
        except SparkCompileError as error:
            return {"error": str(error)}
    return run


def _as_user(tmp_path: Path) -> Runner:
    _open_to_nobody(tmp_path)
    os.chown(tmp_path, NOBODY, NOBODY)

    def run(script: Path, env: dict[str, str] | None = None, limit: int = 20,
            args: tuple[str, ...] = ()) -> dict[str, Any]:
        for path in [script.parent, *script.parent.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)
        request = json.dumps({"script": str(script), "env": env or {}, "limit": limit, "args": list(args)})
        done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                               sys.executable, str(HELPER), request], capture_output=True, check=True,
                              env={"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path),
                                   "PYTHONPATH": os.pathsep.join(sys.path)})
        result: dict[str, Any] = json.loads(done.stdout)
        return result
    return run


@pytest.fixture(params=["root", "user"])
def traced(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """Run a launcher in the sandbox, as root and as an unprivileged user."""
    if request.param == "root":
        return _as_root(tmp_path, monkeypatch)
    return _as_user(tmp_path)
