"""`spark-compile audit PROFILE --inspect DIR`: a node's captured state against the profile's fleet/audit.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from spark_compile.common.errors import EXIT_DOWN, EXIT_FINDINGS, EXIT_OK, InputError
from spark_compile.fleet import audit
from spark_compile.fleet.audit_plan import AUDIT_FILE
from spark_compile.pipeline import Planned


def run_audit(planned: Planned, directory: Path, fmt: str) -> int:
    """`spark-compile audit PROFILE --inspect DIR`: the captures in DIR against the profile's audit.json, compared
    by audit.py as `launch.sh audit` compares them: 0 match, 1 drift, 4 a rank down or not captured (launch.sh
    audit says 2 for that: the fleet scripts keep their own codes, README.md's "Exit codes")."""
    if not directory.is_dir():
        raise InputError(f"{directory}: not a folder of captures (launch.sh audit --save DIR or launch.sh "
                         "postmortem DIR writes one)")
    plan = json.loads(next(a for a in planned.files if a.path == AUDIT_FILE).content)
    captures, errors = audit.read_captures(directory)
    for error in errors:
        sys.stderr.write(f"spark-compile: error: {audit.safe(error)}\n")
    differences, down = audit.compare(plan, captures, f"no capture in {audit.safe(str(directory))}")
    sys.stdout.write(audit.render(plan, differences, down, fmt, down_exit=EXIT_DOWN))
    if errors or down:
        return EXIT_DOWN
    return EXIT_FINDINGS if differences else EXIT_OK
