"""The pipeline stages' layer split (compiler/capacity/pp_split.py) against SGLang 0.5.23's own get_pp_indices,
run in the engine venv for several (layers, pp) pairs, even, uneven and with SGLANG_PP_LAYER_PARTITION."""

from __future__ import annotations

import json
import subprocess

import pytest

from spark_compile.capacity.pp_split import PartitionError, pp_indices

from sglang_parse import engine_python

pytestmark = pytest.mark.engine

CASES = [(61, 2, None), (43, 2, None), (94, 4, None), (48, 3, None), (7, 4, None), (62, 8, None), (5, 5, None),
         (61, 2, "30,31"), (43, 2, "40,3"), (94, 4, "24,24,23,23")]
ORACLE = """
import json, os, sys
from sglang.srt.distributed.utils import get_pp_indices
out = []
for layers, pp, partition in json.load(sys.stdin):
    os.environ.pop("SGLANG_PP_LAYER_PARTITION", None)
    if partition is not None:
        os.environ["SGLANG_PP_LAYER_PARTITION"] = partition
    out.append([list(get_pp_indices(layers, rank, pp)) for rank in range(pp)])
print(json.dumps(out))
"""


def test_the_split_is_sglangs_own() -> None:
    done = subprocess.run([engine_python(), "-c", ORACLE], input=json.dumps(CASES), capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.splitlines()[-1])
    for (layers, pp, partition), stages in zip(CASES, theirs, strict=True):
        ours = [list(pp_indices(layers, rank, pp, partition)) for rank in range(pp)]
        assert ours == stages, (layers, pp, partition)


def test_a_partition_that_does_not_add_up_is_refused() -> None:
    with pytest.raises(PartitionError):
        pp_indices(61, 0, 2, "30,30")
    with pytest.raises(PartitionError):
        pp_indices(61, 0, 2, "30,x")
