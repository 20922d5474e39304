"""spark-compile runs without the cycle collector (compiler/__init__.py): sound only while checking and compiling
leave next to no cyclic garbage per profile, which is what this holds. What importing the modules a run needs
leaves (a few hundred objects of class and enum construction, once) is collected before the count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REFERENCE_PROFILE, ROOT

PROBE = """
import gc, sys
gc.disable()
from spark_compile.cli import main
main(["check", *sys.argv[2:]])
main([sys.argv[2], "--out", sys.argv[1]])
gc.collect()
for _ in range(3):
    main(["check", *sys.argv[2:]])
    main([sys.argv[2], "--out", sys.argv[1]])
print(gc.collect())
"""


def test_checking_every_shipped_profile_and_compiling_leaves_next_to_no_cyclic_garbage(tmp_path: Path) -> None:
    profiles = [str(REFERENCE_PROFILE), *sorted(str(p) for p in (ROOT / "spec" / "profiles").rglob("*.yaml")
                                                 if p != REFERENCE_PROFILE)]
    result = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "out"), *profiles], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    unreachable = int(result.stdout.strip().splitlines()[-1])
    assert len(profiles) > 10
    # Three more checks of every profile and three compiles: measured 210, about 4 objects a profile (the cells
    # of nested functions that call themselves, JSON encoders with a default).
    assert unreachable < 3 * 10 * len(profiles), f"{unreachable} objects in reference cycles after the runs"
