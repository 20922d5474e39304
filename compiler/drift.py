"""`spark-compile check --generated`: fail when committed output differs from what the profiles produce."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from spark_compile.compile import SCHEMA_FILE, artifacts, validate
from spark_compile.errors import EXIT_FINDINGS, EXIT_OK
from spark_compile.resolve import resolve


def drift_lines(profile: Path, root: Path, targets: Sequence[str] = ()) -> list[str]:
    """One line per file under root/<profile name>/ that differs, is missing, or is extra."""
    resolved = resolve(profile)
    for section in targets:
        resolved.data.setdefault(section, {})
    validated = validate(resolved)
    name = validated.resolved_name
    expected = {a.path: a.content for a in artifacts(validated, root)}
    target = root / name
    present = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()} if target.is_dir() else set()
    lines = []
    for path in sorted(set(expected) | present):
        shown = target / path
        if path not in present:
            lines.append(f"{shown}: missing (the profile produces it)")
        elif path not in expected:
            lines.append(f"{shown}: extra (not produced by {profile})")
        elif shown.read_bytes() != expected[path]:
            lines.append(f"{shown}: differs from what {profile} produces")
    return lines


def _schema_line(root: Path) -> list[str]:
    from spark_compile.schema import schema_text

    path = root / SCHEMA_FILE
    if not path.is_file() or path.read_text() != schema_text():
        return [f"{path}: differs from `spark-compile schema`"]
    return []


def check_drift(profiles: list[Path], out: Path | None, targets: Sequence[str] = ()) -> int:
    """Compare every profile's committed output (under ``out``, else generated/ beside spec/); 1 on drift."""
    from spark_compile.compile import default_out

    lines: list[str] = []
    for root in sorted({out or default_out(p) for p in profiles}):
        lines += _schema_line(root)
    for profile in profiles:
        lines += drift_lines(profile, out or default_out(profile), targets)
    for line in lines:
        sys.stdout.write(line + "\n")
    if lines:
        names = " ".join(str(p) for p in profiles)
        sys.stdout.write(f"drift: {len(lines)} file{'s' * (len(lines) != 1)} stale; run `spark-compile` on "
                         f"{names} and commit the result\n")
        return EXIT_FINDINGS
    return EXIT_OK
