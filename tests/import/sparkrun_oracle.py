"""sparkrun 0.4.2 itself, in its own venv (.cache/sparkrun-0.4.2, made by .ci/install-sparkrun): its dry-run serve
command and the per-node commands its launcher generates, offline, with a throwaway HOME."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".cache" / "sparkrun-0.4.2"
NODES = Path(__file__).with_name("sparkrun_nodes.py")


def venv() -> Path:
    """sparkrun's venv, installed on first use; the test skips (a failure under CI) when it cannot be."""
    if not (VENV / "bin" / "sparkrun").exists():
        done = subprocess.run(["bash", str(REPO / ".ci" / "install-sparkrun"), str(VENV)], capture_output=True,
                              text=True, timeout=900, check=False)
        if done.returncode != 0:
            pytest.skip(f"sparkrun 0.4.2 could not be installed: {done.stderr.strip()[-400:]}")
    return VENV


def _env(home: str) -> dict[str, str]:
    # HF_HUB_OFFLINE: sparkrun's model probes would otherwise retry the hub for half a minute with no network.
    # An ssh that refuses at once: the dry run asks each host for its occupancy over ssh, and the profiles'
    # hosts are private addresses no test may reach (each attempt waited out ConnectTimeout's 10 s).
    shim = Path(home) / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "ssh").write_text("#!/bin/sh\necho 'ssh: the tests reach no host' >&2\nexit 255\n")
    (shim / "ssh").chmod(0o755)
    return {"PATH": f"{shim}:{os.environ.get('PATH', '')}", "HOME": home, "HF_HUB_OFFLINE": "1", "LANG": "C.UTF-8"}


def _words(text: str) -> list[str]:
    """A printed command as bash would split it (sparkrun runs it with bash -c)."""
    return shlex.split(text.replace("\\\n", " "))


def dry_run(recipe: Path, hosts: list[str]) -> list[str]:
    """The serve command `sparkrun run … --dry-run` prints, as words."""
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run([str(venv() / "bin" / "sparkrun"), "run", str(recipe), "--hosts", ",".join(hosts),
                               "--dry-run", "--no-auto-detect", "--no-sync-tuning"], capture_output=True, text=True,
                              timeout=300, env=_env(home), check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.split("Serve command:\n", 1)[1].split("\n\n", 1)[0]
    return _words(lines)


def node_commands(recipe: Path, hosts: list[str]) -> list[list[str]]:
    """Each node's serve command, as sparkrun's launcher generates it (head first), as words."""
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run([str(venv() / "bin" / "python"), str(NODES), str(recipe), ",".join(hosts)],
                              capture_output=True, text=True, timeout=300, env=_env(home), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return [[w for w in words if w != "\n"] for words in json.loads(done.stdout)]


def load_errors(recipe: Path) -> str:
    """What sparkrun's own loader and validator say of a recipe ("" when it accepts it)."""
    script = ("import sys\nfrom sparkrun.core.recipe import Recipe\nfrom sparkrun.runtimes.sglang import "
              "SglangRuntime\nr = Recipe.load(sys.argv[1], offline=True)\n"
              "issues = [str(i) for i in SglangRuntime().validate_recipe(r)]\nprint('\\n'.join(issues))\n")
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run([str(venv() / "bin" / "python"), "-c", script, str(recipe)], capture_output=True,
                              text=True, timeout=300, env=_env(home), check=False)
    return done.stdout.strip() + done.stderr.strip()[-2000:] if done.returncode else done.stdout.strip()
