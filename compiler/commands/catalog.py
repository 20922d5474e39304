"""`spark-compile catalog sglang`: the engine catalogs written, or with --check compared, from a real SGLang."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

from spark_compile.common.errors import EXIT_FINDINGS, EXIT_OK, InputError, UsageError
from spark_compile.spec.generators.catalog_extract import (
    ENGINE_PYTHON_ENV,
    CatalogError,
    check_catalogs,
    default_catalog_dir,
    default_engine_python,
    extract_from_source,
    extract_sglang_catalog,
    write_catalogs,
)
from spark_compile.stages.write import write_file

PROG = "spark-compile catalog"


def run_catalog(args: Namespace) -> int:
    """Write the catalogs (0), or with --check compare them: 0 current, 1 differ."""
    python = args.python or default_engine_python()
    if args.source is None and python is None:
        raise UsageError(f"{PROG}: error: no engine interpreter: pass --python or set {ENGINE_PYTHON_ENV} "
                         "(make one with .ci/install-engine)")
    out_dir = args.out or default_catalog_dir()
    try:
        flags, env = extract_from_source(args.source, args.name) if args.source else \
            extract_sglang_catalog(str(python))
        if args.check:
            return _compared(check_catalogs(flags, env, out_dir), str(flags["catalog"]), out_dir)
        flags_path, env_path = write_catalogs(flags, env, out_dir, write_file)
    except CatalogError as exc:
        raise InputError(f"{PROG}: error: {exc}") from None
    sys.stdout.write(f"wrote {flags_path} ({len(flags['flags'])} flags)\n")
    sys.stdout.write(f"wrote {env_path} ({len(env['variables'])} variables)\n")
    return EXIT_OK


def _compared(problems: list[str], name: str, out_dir: Path) -> int:
    """Print the differences from the committed catalogs; 1 when there are any."""
    for line in problems:
        sys.stdout.write(f"{line}\n")
    if problems:
        sys.stderr.write(f"{PROG}: {len(problems)} difference(s) from the catalogs in {out_dir}; regenerate with: "
                         "spark-compile catalog sglang\n")
        return EXIT_FINDINGS
    sys.stdout.write(f"catalogs {name} are up to date\n")
    return EXIT_OK
