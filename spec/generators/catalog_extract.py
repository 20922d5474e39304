"""Stage: extract SGLang's flag and environment catalogs from a real install.

``spark-compile catalog sglang [--python PYTHON] [--out DIR] [--check]`` (its arguments are
add_catalog_arguments', compiler/commands/catalog.py runs it) runs ``sglang_probe.py`` with
the engine venv's interpreter (``.ci/install-engine`` makes one) in a subprocess, and writes
``sglang-VERSION.json`` and ``sglang-env-VERSION.json`` into ``spec/catalogs/`` — or, with ``--check``,
compares them with the committed files. Nothing heavy is imported here: sglang and torch are only
ever imported by the probe, in the other interpreter, never on the compile path.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_compile.spec.generators.sglang_environ import env_entries_static
from spark_compile.spec.generators.sglang_hardware import hardware_facts
from spark_compile.spec.generators.sglang_probe import FORMAT
from spark_compile.spec.generators.sglang_source import SourceError, find_package, source_catalog

PROBE = Path(__file__).resolve().with_name("sglang_probe.py")
CATALOG_FORMAT = 1
PROBE_TIMEOUT_S = 600.0
ENGINE_PYTHON_ENV = "ENGINE_PYTHON"
DEFAULT_ENGINE_PYTHON = Path(".venv-engine") / "bin" / "python"

Catalog = dict[str, Any]
Writer = Callable[[Path, bytes], None]
CATALOG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+.]*(?:-[A-Za-z0-9_+.]+)+")  # sglang-0.5.23, sglang-main-abc1234


class CatalogError(Exception):
    """A one-line, user-facing reason the catalogs could not be produced or read."""


def default_catalog_dir() -> Path:
    """``spec/catalogs`` of the installed ``spark_compile.spec`` package (the repo's, in a dev install)."""
    spec = importlib.util.find_spec("spark_compile.spec")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))) / "catalogs"
    return Path(__file__).resolve().parent.parent / "catalogs"


def default_engine_python() -> str | None:
    """$ENGINE_PYTHON, else the .venv-engine of spark-compile's own checkout; never one under the current
    directory (checking a pull request's branch must not run an interpreter the branch can add)."""
    from_env = os.environ.get(ENGINE_PYTHON_ENV)
    if from_env:
        return from_env
    candidate = Path(__file__).resolve().parents[2] / DEFAULT_ENGINE_PYTHON
    return str(candidate) if candidate.exists() else None


def named_paths(out_dir: Path, name: str) -> tuple[Path, Path]:
    """(flags, env) catalog paths of catalog ``name``: NAME.json and PACKAGE-env-REST.json (spec/catalog.py)."""
    package, _, rest = name.rpartition("-")
    return out_dir / f"{name}.json", out_dir / f"{package}-env-{rest}.json"


def render_catalog(doc: Catalog) -> str:
    """The exact bytes committed for one catalog document."""
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _probe_env() -> dict[str, str]:
    # The catalog describes sglang's defaults, not this shell's settings.
    # (-I already makes the probe ignore PYTHON* variables and the user's site-packages.)
    return {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}


def _validate(result: object) -> tuple[Catalog, Catalog]:
    if (
        not isinstance(result, dict)
        or not isinstance(result.get("flags"), dict)
        or not isinstance(result.get("env"), dict)
    ):
        raise CatalogError("the probe printed JSON without 'flags' and 'env' objects")
    flags: Catalog = result["flags"]
    env: Catalog = result["env"]
    name = flags.get("catalog")
    if not isinstance(name, str) or not CATALOG_NAME.fullmatch(name) or env.get("catalog") != name:
        raise CatalogError(f"catalog name {str(name)[:80]!r} is not PACKAGE-VERSION in letters, digits and . _ + - "
                           "(it names the files written: no '/', no '..'); pass --name")
    if flags.get("format") != CATALOG_FORMAT or env.get("format") != CATALOG_FORMAT:
        raise CatalogError(
            f"the probe printed catalog format {flags.get('format')!r}, expected {CATALOG_FORMAT}"
        )
    if not isinstance(flags.get("version"), str) or not isinstance(flags.get("flags"), list):
        raise CatalogError("the probe's flags catalog has no version or no flag list")
    if not isinstance(env.get("variables"), list):
        raise CatalogError("the probe's env catalog has no variable list")
    return flags, env


def extract_sglang_catalog(python: str) -> tuple[Catalog, Catalog]:
    """Run the probe with ``python`` (an interpreter that imports sglang); return (flags, env) catalogs, the
    flags with the hardware facts read from that install's source."""
    flags, env = _validate(_run_probe([python, "-I", str(PROBE)]))
    return with_hardware(flags, package_of(python)), env


def with_hardware(flags: Catalog, package: Path) -> Catalog:
    """The flag catalog with its ``hardware`` object (spec/generators/sglang_hardware.py), when the tree has one."""
    facts = hardware_facts(package, {str(flag["dest"]) for flag in flags["flags"]})
    return {**flags, "hardware": facts} if facts else flags


def package_of(python: str) -> Path:
    """The sglang package directory of an interpreter, found without importing sglang."""
    code = "import importlib.util; print(importlib.util.find_spec('sglang').submodule_search_locations[0])"
    try:
        proc = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True, timeout=60,
                              env=_probe_env())
    except (OSError, subprocess.SubprocessError) as exc:
        raise CatalogError(f"cannot find the sglang package of {python}: {exc}") from None
    return Path(proc.stdout.strip())


def _run_probe(command: list[str]) -> Any:
    python = command[0]
    try:
        proc = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=_probe_env(),
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise CatalogError(
            f"engine interpreter not found: {python} (make one with .ci/install-engine)"
        ) from None
    except PermissionError:
        raise CatalogError(f"engine interpreter is not executable: {python}") from None
    except subprocess.TimeoutExpired:
        raise CatalogError(f"the sglang probe did not finish within {PROBE_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        last = lines[-1].strip() if lines else "no output"
        raise CatalogError(f"the sglang probe failed with exit code {proc.returncode}: {last}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"the sglang probe printed invalid JSON: {exc}") from None


def write_catalogs(flags: Catalog, env: Catalog, out_dir: Path, write: Writer) -> tuple[Path, Path]:
    """Write both catalogs into ``out_dir`` with ``write`` (the CLI's one atomic write of an output file,
    compiler/stages/write.py; its refusals are the CLI's errors); return their paths."""
    paths = named_paths(out_dir, str(flags["catalog"]))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CatalogError(f"cannot write {exc.filename or out_dir}: {exc.strerror or exc}") from None
    for path, doc in zip(paths, (flags, env), strict=True):
        write(path, render_catalog(doc).encode("utf-8"))
    return paths


def _entry_key(entry: Any, key_field: str) -> str:
    if not isinstance(entry, dict):
        return repr(entry)
    if key_field == "dest":
        return "/".join(entry.get("options") or [str(entry.get("dest"))])
    return str(entry.get(key_field))


def diff_entries(old: list[Any], new: list[Any], key_field: str) -> list[str]:
    """Human-readable differences between two entry lists keyed by ``key_field``."""
    before = {_entry_key(e, key_field): e for e in old}
    after = {_entry_key(e, key_field): e for e in new}
    out = [f"added {k}" for k in sorted(after.keys() - before.keys())]
    out += [f"removed {k}" for k in sorted(before.keys() - after.keys())]
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            fields = sorted(f for f in a.keys() | b.keys() if a.get(f) != b.get(f))
            out.append(f"changed {key}: " + ", ".join(f"{f} {a.get(f)!r} -> {b.get(f)!r}" for f in fields))
        else:
            out.append(f"changed {key}")
    return out


def check_catalogs(flags: Catalog, env: Catalog, out_dir: Path) -> list[str]:
    """Differences between freshly extracted catalogs and the files in ``out_dir`` (empty: identical)."""
    problems: list[str] = []
    for path, doc, list_field, key_field in zip(
        named_paths(out_dir, str(flags["catalog"])),
        (flags, env),
        ("flags", "variables"),
        ("dest", "name"),
        strict=True,
    ):
        try:
            committed_text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append(f"{path.name}: missing (run without --check to write it)")
            continue
        except OSError as exc:
            raise CatalogError(f"cannot read {path}: {exc.strerror or exc}") from None
        if committed_text == render_catalog(doc):
            continue
        try:
            committed = json.loads(committed_text)
        except json.JSONDecodeError as exc:
            problems.append(f"{path.name}: not valid JSON ({exc})")
            continue
        details: list[str] = []
        if isinstance(committed, dict):
            for field in sorted((committed.keys() | doc.keys()) - {list_field}):
                if committed.get(field) != doc.get(field):
                    details.append(f"{field} {committed.get(field)!r} -> {doc.get(field)!r}")
            old_entries = committed.get(list_field)
            details += diff_entries(
                old_entries if isinstance(old_entries, list) else [], doc[list_field], key_field
            )
        problems += [f"{path.name}: {d}" for d in details] or [f"{path.name}: formatting differs"]
    return problems


def extract_from_source(root: Path, name: str | None) -> tuple[Catalog, Catalog]:
    """Catalogs of an SGLang source tree, by parsing it here: server_args.py for the flags, environ.py and
    the srt/ sources for the environment variables. Nothing of the tree is imported or run."""
    try:
        flags = with_hardware(source_catalog(root, name), find_package(root))
        variables = env_entries_static(find_package(root) / "srt")
    except (SourceError, OSError, SyntaxError) as exc:
        raise CatalogError(str(exc)) from None
    return _validate({"flags": flags, "env": {"format": FORMAT, "catalog": flags["catalog"], "variables": variables}})


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``spark-compile catalog`` (compiler/commands/catalog.py runs it)."""
    parser.add_argument("engine", choices=("sglang",), help="which engine's catalogs")
    parser.add_argument(
        "--python",
        help=f"interpreter that imports sglang (default: ${ENGINE_PYTHON_ENV}, else spark-compile's own "
        f"{DEFAULT_ENGINE_PYTHON})",
    )
    parser.add_argument("--source", type=Path, metavar="DIR",
                        help="build the catalogs from an SGLang source tree (a checkout, an unpacked sdist or wheel) "
                        "by parsing it, instead of importing an install")
    parser.add_argument("--name", help="with --source: the catalog's name (default: sglang-<the tree's version>)")
    parser.add_argument("--out", type=Path, help="catalog directory (default: spec/catalogs)")
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed catalogs, write nothing"
    )
