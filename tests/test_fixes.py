"""Messages point at the fix: every negative profile carries its fix (`# fix: LINE: new text`, `!drop` to remove
the line); applied, the profile is clean, and every finding in the profile's own file is on a line the fix
touches. Every finding also carries a hint that says what to write or change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REFERENCE_WARNINGS, ROOT

NEGATIVE = sorted((ROOT / "tests" / "profiles" / "negative").glob("*.yaml"))
_FIX = re.compile(rb"^# fix: (.*)$", re.MULTILINE)
_LINE_FIX = re.compile(r"^(\d+): (.*)$")
# Findings about the file as a whole (it does not parse, or its chain does not resolve) have no line to fix.
WHOLE_FILE_RULES = {"SC104", "SC105", "SC106", "SC107", "SC108", "SC112"}


def fixes_of(path: Path) -> dict[int, str | None]:
    """{line: replacement text, or None to drop it}; empty for a `# fix: none (...)` profile."""
    found: dict[int, str | None] = {}
    for raw in _FIX.findall(path.read_bytes()):
        text = raw.decode()
        if text.startswith("none ("):
            continue
        match = _LINE_FIX.match(text)
        assert match, f"{path.name}: malformed fix line {text!r}"
        found[int(match[1])] = None if match[2] == "!drop" else match[2].replace("\\n", "\n")
    return found


def fixed_text(path: Path, fixes: dict[int, str | None]) -> str:
    lines = path.read_text(encoding="utf-8").split("\n")
    out = [fixes.get(n, line) for n, line in enumerate(lines, start=1) if not (n in fixes and fixes[n] is None)]
    return "\n".join(line for line in out if line is not None)


def findings(path: Path, text: str | None = None) -> list[object]:
    """The findings of the profile at ``path``, read with ``text`` instead of the file when given."""
    import os

    from spark_compile.pipeline import validate
    from spark_compile.stages.load import LoadError, load_file, parse_text
    from spark_compile.stages.resolve import resolve

    def reader(source: Path, display: str) -> object:
        if text is not None and source.resolve() == path.resolve():
            return parse_text(text, display)
        return load_file(source, display)

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        return list(validate(resolve(path.relative_to(ROOT), reader=reader)).findings)  # type: ignore[arg-type]
    except LoadError as failed:
        return [failed.finding]
    finally:
        os.chdir(here)


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_the_fix_clears_the_profile_and_is_where_the_findings_point(path: Path) -> None:
    before = findings(path)
    assert before, f"{path.name} is a negative profile without findings"
    declared = _FIX.findall(path.read_bytes())
    assert declared, f"{path.name} has no `# fix:` line"
    fixes = fixes_of(path)
    rules = {f.rule for f in before}  # type: ignore[attr-defined]
    if not fixes:
        assert rules <= WHOLE_FILE_RULES, f"{path.name}: only whole-file findings may go without a line fix"
        return
    own = str(path.relative_to(ROOT))
    after = [f for f in findings(path, fixed_text(path, fixes))
             if not (f.rule in REFERENCE_WARNINGS and f.position.file != own)]  # type: ignore[attr-defined]
    # (SC312/SC442 there: the shipped profile's own warnings it extends, not this example's subject)
    assert after == [], f"{path.name} still has findings after its fix: {after}"
    for finding in before:
        if finding.position.file == own and finding.rule not in WHOLE_FILE_RULES:  # type: ignore[attr-defined]
            assert finding.position.line in fixes, (path.name, finding)  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_every_finding_has_a_hint_that_is_not_the_field_description(path: Path) -> None:
    from spark_compile.spec.model import Profile

    descriptions = set()
    stack: list[type] = [Profile]
    while stack:
        model = stack.pop()
        for field in getattr(model, "model_fields", {}).values():
            descriptions.add(field.description or "")
            stack += [a for a in getattr(field.annotation, "__args__", (field.annotation,))
                      if isinstance(a, type) and hasattr(a, "model_fields")]
    for finding in findings(path):
        hint = finding.hint  # type: ignore[attr-defined]
        assert hint, (path.name, finding)
        assert hint not in descriptions, (path.name, hint)
