"""`python -m spark_compile.commands.regenerate [--check]`: every generated file of the repository, from its source.

In order (each later step reads what an earlier one writes, so each runs in a fresh interpreter):
spec/overlay_section.py from overlay/registry.py; the NCCL catalog from its fact table; the SGLang catalogs
and the inventory of SGLang's judgements from the engine venv's SGLang ($ENGINE_PYTHON, else .venv-engine; skipped
with a note when there is none);
generated/profile.schema.json; generated/<profile>/ for every shipped profile (spec/profiles/*.yaml and
spec/profiles/examples/*.yaml). With --check nothing is written and the exit is 1 when any file is stale.
The SGLang 0.5.10.post1 catalogs are facts of a release no install here provides: they are not rebuilt.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from spark_compile.common.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from spark_compile.spec.generators.catalog_extract import default_engine_python
from spark_compile.stages.write import write_file

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python -m spark_compile.commands.regenerate"


def shipped_profiles(root: Path) -> list[Path]:
    """The profiles whose output generated/ commits."""
    profiles = root / "spec" / "profiles"
    return sorted(profiles.glob("*.yaml")) + sorted((profiles / "examples").glob("*.yaml"))


def _steps(root: Path, check: bool) -> list[tuple[str, list[str], Path | None]]:
    """(what, command, file its stdout is written to) for each step."""
    flag = ["--check"] if check else []
    python = [sys.executable, "-m"]
    steps: list[tuple[str, list[str], Path | None]] = [
        ("spec/overlay_section.py", [*python, "spark_compile.spec.generators.make_overlay_section", *flag], None),
        ("the NCCL catalog", [*python, "spark_compile.spec.generators.make_nccl_catalog", *flag], None),
    ]
    engine = default_engine_python()
    if engine is not None:
        steps.append(("the SGLang catalogs", [*python, "spark_compile.cli", "catalog", "sglang", "--python", engine,
                                              "--out", str(root / "spec" / "catalogs"), *flag], None))
        steps.append(("the SGLang judgements table", [*python, "spark_compile.spec.generators.sglang_judgements",
                                                       "--python", engine, "--out", str(root / "spec" / "catalogs"),
                                                       *flag], None))
    profiles = [str(p.relative_to(root)) for p in shipped_profiles(root)]
    if check:  # the schema and every profile's directory, compared file by file
        steps.append(("generated/", [*python, "spark_compile.cli", "check", "--generated", *profiles], None))
        return steps
    steps.append(("generated/profile.schema.json", [*python, "spark_compile.cli", "schema"],
                  root / "generated" / "profile.schema.json"))
    steps += [(f"generated/ of {Path(p).name}", [*python, "spark_compile.cli", "compile", p], None) for p in profiles]
    return steps


def _input_link(path: Path, root: Path) -> bool:
    """A symlink among the profiles (no step writes there) to a regular file of the checkout: a release
    reading its model config beside it."""
    target = path.resolve()
    return path.relative_to(root).parts[:2] == ("spec", "profiles") and target.is_file() and \
        target.is_relative_to(root.resolve())


def planted(root: Path) -> list[str]:
    """Every entry under generated/ and spec/ (what the steps write) that is neither a folder nor a regular
    file: a symlink there would have a step write through it, outside the checkout."""
    found = []
    for folder in ("generated", "spec"):
        for parent, dirs, files in os.walk(root / folder):
            for name in [*dirs, *files]:
                path = Path(parent, name)
                plain = not path.is_symlink() and (path.is_dir() or path.is_file())
                if not plain and not (path.is_symlink() and _input_link(path, root)):
                    found.append(path.relative_to(root).as_posix())
    return sorted(found)


def _run(what: str, command: list[str], out: Path | None, root: Path) -> bool:
    """Run one step; on failure show its output. True when it succeeded (with --check: nothing stale)."""
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        sys.stderr.write(f"regenerate: {what}: exit {result.returncode}\n")
        return False
    if out is not None:
        write_file(out, result.stdout.encode("utf-8"))
    return True


def main(argv: list[str]) -> int:
    """Regenerate (or with --check compare) everything; 0 ok, 1 stale or a step failed, 2 usage."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="Regenerate every generated file from its source.")
    parser.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 when a file is stale")
    try:
        check = parser.parse_args(argv).check
    except SystemExit as exc:  # argparse printed the help, or the usage and why it refused
        return int(exc.code or 0)
    if not (ROOT / "pyproject.toml").is_file() or not (ROOT / "generated").is_dir():
        sys.stderr.write(f"regenerate: {ROOT} is not a source checkout of spark-compile: run it from an editable "
                         "install (tests/run.sh makes one)\n")
        return EXIT_USAGE
    odd = planted(ROOT)
    if odd:
        sys.stderr.write(f"regenerate: refusing to run: {', '.join(odd)}: not a regular file or folder (a symlink, "
                         "a FIFO, a device); regenerate writes only regular files: remove it from the checkout\n")
        return EXIT_USAGE
    if default_engine_python() is None:
        sys.stderr.write("regenerate: note: the SGLang catalogs are not rebuilt: no engine interpreter (set "
                         "ENGINE_PYTHON, or make .venv-engine with .ci/install-engine)\n")
    steps = _steps(ROOT, check)
    failed = [what for what, command, out in steps if not _run(what, command, out, ROOT)]
    if not failed:
        done = "current" if check else "regenerated"
        sys.stdout.write(f"regenerate: {done}: {', '.join(what for what, _, _ in steps)}\n")
    else:
        verb = "stale" if check else "not regenerated"
        sys.stderr.write(f"regenerate: {verb}: {', '.join(failed)}" + (f"; run `{COMMAND}`\n" if check else "\n"))
    return EXIT_FINDINGS if failed else EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
