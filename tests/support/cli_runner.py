"""The spark-compile CLI run inside the test process: `main(argv)` with its own stdout, stderr and stdin,
environment and working directory, answering as subprocess.run would (a CompletedProcess of text).

A new interpreter per call costs a tenth of a second or more before the command starts; a test that checks
what a command prints and returns does not need one. What only a process shows (the console script, a
signal, a closed or full standard output, PYTHONHASHSEED, a cache bound at the first use in a process) stays
with tests/conftest.py's run_cli_process; tests/test_cli_process.py holds both runners to the same answers.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """os.environ with ``env`` added for the block, exactly as it was after it (main() sets a default too)."""
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _streams() -> Iterator[tuple[IO[str], IO[str]]]:
    """Real files for stdout and stderr (a command may ask for a file descriptor) and an empty stdin."""
    saved = sys.stdin, sys.stdout, sys.stderr
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out, \
            tempfile.TemporaryFile("w+", encoding="utf-8") as err, open(os.devnull, encoding="utf-8") as stdin:
        sys.stdin, sys.stdout, sys.stderr = stdin, out, err
        try:
            yield out, err
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved


def _read(stream: IO[str]) -> str:
    stream.flush()
    stream.seek(0)
    return stream.read()


def run_in_process(args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
                   ) -> subprocess.CompletedProcess[str]:
    """`spark-compile ARGS` run by the CLI's main() in ``cwd`` with ``env`` added to the environment."""
    from spark_compile.cli import main

    with _environment(env), contextlib.chdir(cwd), _streams() as (out, err):
        code = main(list(args))
        stdout, stderr = _read(out), _read(err)
    return subprocess.CompletedProcess(["spark-compile", *args], code, stdout, stderr)
