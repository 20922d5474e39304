"""SGLang's own verdict on the negative profiles of the SGLang rules, and on their fixes.

A negative profile whose rule stands for a judgement of SGLang records, in `# engine:` lines, what
`check --engine` (SGLang 0.5.23's parser, resolution, check_server_args and model stage, GB10 simulated)
says about the same command line: whole messages, or `none (why)` where SGLang judges it only later at boot.
Applied, each profile's `# fix:` must leave SGLang nothing to refuse or rewrite.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from test_fixes import fixed_text, fixes_of

from conftest import ROOT, run_cli
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

NEGATIVE = ROOT / "tests" / "profiles" / "negative"
_ENGINE = re.compile(rb"^# engine: (.*)$", re.MULTILINE)
_SPOT = re.compile(r"^(\d+):(\d+) (SC\d+) (.*)$")
JUDGED = sorted(p for p in NEGATIVE.glob("*.yaml") if _ENGINE.search(p.read_bytes()))


def verdict(path: Path) -> list[tuple[int, int, str, str]]:
    out = []
    for raw in _ENGINE.findall(path.read_bytes()):
        text = raw.decode()
        if text.startswith("none ("):
            continue
        match = _SPOT.match(text)
        assert match, f"{path.name}: malformed engine line {text!r}"
        out.append((int(match[1]), int(match[2]), match[3], match[4]))
    return out


def engine_check(paths: list[Path]) -> list[dict[str, Any]]:
    proc = run_cli("check", "--engine", "--format", "json", *(str(p.relative_to(ROOT)) for p in paths),
                   env={"ENGINE_PYTHON": engine_python()})
    assert proc.returncode in (0, 1), proc.stderr
    findings: list[dict[str, Any]] = json.loads(proc.stdout)["findings"]
    return findings


def engine_spots(findings: list[dict[str, Any]], path: Path) -> list[tuple[int, int, str, str]]:
    own = str(path.relative_to(ROOT))
    return sorted((f["line"], f["column"], f["rule"], f["message"]) for f in findings
                  if f["file"] == own and f["rule"].startswith("SC6"))


@pytest.fixture(scope="module")
def judged() -> list[dict[str, Any]]:
    return engine_check(JUDGED)


@pytest.fixture(scope="module")
def fixed() -> Any:
    """Each judged profile with its fix applied, beside copies of the negative directory's config.json files
    (at the same depth, so their relative paths still resolve)."""
    work = Path(tempfile.mkdtemp(prefix="fixed-", dir=NEGATIVE.parent))
    try:
        for config in NEGATIVE.glob("*.config.json"):
            shutil.copy(config, work / config.name)
        paths = []
        for path in JUDGED:
            target = work / path.name
            target.write_text(fixed_text(path, fixes_of(path)), encoding="utf-8")
            paths.append(target)
        yield paths, engine_check(paths)
    finally:
        shutil.rmtree(work)


def test_every_sglang_rule_records_sglangs_verdict() -> None:
    from spark_compile.rules import load_all

    rules = {rule for rule in load_all() if "SC240" <= rule <= "SC253"}
    recorded = {m.group(1) for p in JUDGED for m in re.finditer(r"^# expect: \d+:\d+ (SC\d+)", p.read_text(),
                                                                re.MULTILINE)}
    assert rules <= recorded, f"no negative profile with SGLang's verdict for {sorted(rules - recorded)}"


@pytest.mark.parametrize("path", JUDGED, ids=lambda p: p.stem)
def test_sglang_says_what_the_profile_records(path: Path, judged: list[dict[str, Any]]) -> None:
    assert engine_spots(judged, path) == sorted(verdict(path))


def test_each_fix_is_one_sglang_accepts(fixed: Any) -> None:
    paths, findings = fixed
    for path in paths:
        refused = [s for s in engine_spots(findings, path) if s[2] in ("SC601", "SC602")]
        assert refused == [], f"{path.name} after its fix: {refused}"
