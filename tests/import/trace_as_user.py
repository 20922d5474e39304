"""Run one traced launcher as the calling user and print what it did as JSON (the sandbox tests run this under
setpriv as an unprivileged user)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from spark_compile.common.errors import SparkCompileError
from spark_compile.importer.trace import run_traced


def main(request: str) -> None:
    """``request``: JSON of script, env, limit and args."""
    asked = json.loads(request)
    try:
        traced = asdict(run_traced(Path(asked["script"]), ("192.0.2.1",), asked["env"], limit=asked["limit"],
                                   args=tuple(asked["args"])))
    except SparkCompileError as error:
        traced = {"error": str(error)}
    sys.stdout.write(json.dumps(traced))


if __name__ == "__main__":
    main(sys.argv[1])
