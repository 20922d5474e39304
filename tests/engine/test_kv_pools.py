"""The KV pool twins of every non-DeepSeek-V4 kind (compiler/capacity/kv_pools.py, kv_model.py) against SGLang
0.5.23's own code on the engine venv: KV heads per rank, the MLA latent's width, the GDN state of one request,
and the Default and hybrid-SWA configurators' token counts, for every shipped example's model and the MLA
fixture (tests/engine/kv_pools_oracle.py runs SGLang's side)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from spark_compile.capacity.kv_model import layout
from spark_compile.capacity.kv_pools import Layout, gdn_state_bytes, kv_heads_per_rank, mla_token_bytes, size_pool

from conftest import ROOT
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

EXAMPLES = ROOT / "spec" / "profiles" / "examples"
NEXT = json.loads((EXAMPLES / "qwen3-next-80b-a3b.config.json").read_text())
GPT_OSS = json.loads((EXAMPLES / "gpt-oss-120b.config.json").read_text())
AVAILABLE = 40 << 30


def _sglang(cases: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([engine_python(), str(Path(__file__).with_name("kv_pools_oracle.py"))],
                          input=json.dumps(cases), capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _gqa(name: str, tp: int) -> Layout:
    return layout("Qwen3MoeForCausalLM", json.loads((EXAMPLES / name).read_text()), tp, None, 0)


def test_every_pool_kind_is_sglangs_own_arithmetic() -> None:
    heads = [(4, 1), (4, 2), (4, 4), (4, 8), (8, 2), (2, 2), (2, 4)]
    gqa = [(_gqa("qwen3-30b-a3b.config.json", 1), 1), (_gqa("qwen3-235b-a22b-nvfp4.config.json", 2), 256)]
    swa = layout("GptOssForCausalLM", GPT_OSS, 1, None, 0)
    theirs = _sglang({
        "kv_heads": heads, "mla": [[512, 64]], "gdn": [[NEXT, 1], [NEXT, 2], [NEXT, 4]],
        "default": [[int(shape.cell_bytes), AVAILABLE, page] for shape, page in gqa],
        # gpt-oss: 18 full and 18 sliding layers of 8 KV heads x (64 + 64) x 2 B.
        "swa": [[2048, 2048, 18, 18, 0, AVAILABLE]],
    })
    assert theirs["kv_heads"] == [kv_heads_per_rank(total, tp) for total, tp in heads]
    assert theirs["mla"] == [mla_token_bytes(512, 64, 2) // 2]
    assert theirs["gdn"] == [gdn_state_bytes(16, 32, 128, 128, 4, 36, tp) for tp in (1, 2, 4)]
    assert theirs["default"] == [size_pool(shape, AVAILABLE, page).full_token for shape, page in gqa]
    pool = size_pool(swa, AVAILABLE, 1)
    assert swa.cell_bytes == 2048 * 18 + 0.8 * 2048 * 18
    assert theirs["swa"] == [[pool.full_token, pool.swa_token]]
