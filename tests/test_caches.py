"""A run's output does not depend on what earlier runs left in the user's cache: every shipped profile compiles
to the same bytes warm (a second run on the same HOME) as cold (a fresh HOME), and an
edit of a template, of a Jinja environment option or of a catalog changes a warm run's output exactly as it
changes a cold one's.

Each run is a new interpreter (a cache kept between processes is what is under test) driven by DRIVER, which can
point the renderer at another templates folder, the catalogs at another folder, or add Jinja options."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_compile.spec import catalog
from spark_compile.stages import render

from conftest import REFERENCE_PROFILE, ROOT

PROFILES = sorted(str(p.relative_to(ROOT)) for folder in ("", "releases", "examples")
                  for p in (ROOT / "spec" / "profiles" / folder).glob("*.yaml"))

# Runs each argv of a list through the CLI's main(); the first non-zero exit code is the process's.
DRIVER = """
import json, sys
from pathlib import Path
import jinja2
from spark_compile.cli import main
from spark_compile.spec import catalog
from spark_compile.stages import render

job = json.loads(sys.argv[1])
if job["templates"]:
    render.TEMPLATES = Path(job["templates"])
if job["catalogs"]:
    catalog._directories = lambda: (Path(job["catalogs"]),)
if job["options"]:
    class Options(jinja2.Environment):
        def __init__(self, **options):
            super().__init__(**{**options, **job["options"]})
    jinja2.Environment = Options
codes = [main(argv) for argv in job["runs"]]
sys.exit(next((code for code in codes if code), 0))
"""


def _run(home: Path, runs: list[list[str]], *, templates: Path | None = None, catalogs: Path | None = None,
         options: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a new interpreter with HOME and XDG_CACHE_HOME at ``home`` (a fresh one: a cold run)."""
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    job = {"runs": runs, "templates": str(templates or ""), "catalogs": str(catalogs or ""), "options": options or {}}
    return subprocess.run([sys.executable, "-c", DRIVER, json.dumps(job)], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)


def _compile(home: Path, out: Path, profiles: list[str], **how: Any) -> dict[str, bytes]:
    """Every file the profiles compile to under ``out`` (one folder each), by path."""
    result = _run(home, [["compile", p, "--out", str(out / str(i))] for i, p in enumerate(profiles)], **how)
    assert result.returncode == 0, result.stdout + result.stderr
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_every_shipped_profile_compiles_the_same_warm_and_cold(tmp_path: Path) -> None:
    assert {path.split("/")[2] for path in PROFILES} >= {"releases", "examples"}
    home = tmp_path / "home"
    first = _compile(home, tmp_path / "first", PROFILES)
    warm = _compile(home, tmp_path / "warm", PROFILES)
    cold = _compile(tmp_path / "fresh", tmp_path / "cold", PROFILES)
    assert len(warm) > 10 * len(PROFILES)
    assert warm == first
    assert warm == cold


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    assert before.keys() == after.keys()
    return [path for path in before if before[path] != after[path]]


def _edited_warm_and_cold(tmp_path: Path, edit: Callable[[], None], before: dict[str, Any],
                          after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The reference profile's files that an edit changes, compiled on a HOME whose cache the run before the
    edit filled (warm) and compiled cold; both runs' files must be the same."""
    profile = [str(REFERENCE_PROFILE)]
    home = tmp_path / "home"
    unedited = _compile(home, tmp_path / "before", profile, **before)
    edit()
    warm = _compile(home, tmp_path / "warm", profile, **after)
    cold = _compile(tmp_path / "fresh", tmp_path / "cold", profile, **after)
    assert warm == cold
    return _changed(unedited, warm), _changed(unedited, cold)


def _keep_time(path: Path, edit: Callable[[str], str]) -> None:
    """Rewrite the file through ``edit`` and give it back its modification time: a cache that knew a file by
    its size and time alone would take the edited file for the old one."""
    status = path.stat()
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def test_an_edited_template_changes_a_warm_run_as_a_cold_one(tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(render.TEMPLATES, templates)
    how = {"templates": templates}
    edit = functools.partial(_keep_time, templates / "unit.service.j2", lambda text: "# edited\n" + text)
    warm, cold = _edited_warm_and_cold(tmp_path, edit, how, how)
    assert warm == cold
    # Each rank's unit, and the two files that list the units' digests.
    assert sorted({path.rsplit("/", 1)[-1] for path in warm}) == \
        ["MANIFEST.json", "audit.json", "sglang-dsv41-4spark.service"]
    assert sum(path.endswith(".service") for path in warm) == 4


def test_a_jinja_option_changes_a_warm_run_as_a_cold_one(tmp_path: Path) -> None:
    warm, cold = _edited_warm_and_cold(tmp_path, lambda: None, {}, {"options": {"trim_blocks": False}})
    assert warm == cold
    assert len(warm) > 10


def test_an_edited_catalog_changes_a_warm_check_as_a_cold_one(tmp_path: Path) -> None:
    catalogs = tmp_path / "catalogs"
    shutil.copytree(Path(catalog.__file__).with_name("catalogs"), catalogs)
    check = [["check", str(REFERENCE_PROFILE)]]
    home = tmp_path / "home"
    before = _run(home, check, catalogs=catalogs)
    assert before.returncode == 0, before.stdout + before.stderr
    env = catalogs / "sglang-env-0.5.23.json"
    size = env.stat().st_size
    _keep_time(env, lambda text: text.replace('"SGLANG_FLASHINFER_MOE_FUSED_FINALIZE"', '"SGLANG_FLASHINFER_X"'))
    assert env.stat().st_size < size
    warm, cold = _run(home, check, catalogs=catalogs), _run(tmp_path / "fresh", check, catalogs=catalogs)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert warm.returncode == 1
    assert "SC307 error: sglang-0.5.23 does not read SGLANG_FLASHINFER_MOE_FUSED_FINALIZE\n" in warm.stdout
