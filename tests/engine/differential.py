"""One-value mutants of every shipped profile, example and release, for the differential suite (test_differential.py).

Each mutant extends a shipped profile and changes one typed engine setting (parallelism, speculative decoding,
backends, graphs, limits, chat parsers, load format, KV cache dtype, page size) or the model's quantization to a
value SGLang's parser accepts; a value the parent already has is skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conftest import ROOT

SHIPPED = [ROOT / "spec" / "profiles" / "dsv41-4spark.yaml",
           *sorted((ROOT / "spec" / "profiles" / "examples").glob("*.yaml"))]
# The release history: each release mutated in its parallelism and speculative settings only (the rest of
# each is the reference's, mutated in full above).
RELEASES = sorted((ROOT / "spec" / "profiles" / "releases").glob("*.yaml"))
RELEASE_SECTIONS = (("engine", "parallel"), ("engine", "speculative"))

# (path in the profile, values): every value is one SGLang 0.5.23's parser takes for the flag.
MUTATIONS: list[tuple[tuple[str, ...], list[Any]]] = [
    (("engine", "parallel", "tp"), [2, 3, 8]),
    (("engine", "parallel", "ep"), [1, 2, 3]),
    (("engine", "parallel", "pp"), [2]),
    (("engine", "parallel", "dp"), [2]),
    (("engine", "parallel", "dp_attention"), [True]),
    (("engine", "speculative", "algorithm"), ["none", "EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE", "DSPARK"]),
    (("engine", "speculative", "num_steps"), [1, 3]),
    (("engine", "speculative", "eagle_topk"), [1, 4]),
    (("engine", "speculative", "num_draft_tokens"), [4, 6]),
    (("engine", "speculative", "dspark_block_size"), [3]),
    (("engine", "backends", "attention"), ["flashinfer", "triton", "fa3", "trtllm_mha", "dsv4"]),
    (("engine", "backends", "moe_runner"), ["auto", "triton", "flashinfer_cutlass", "cutlass"]),
    (("engine", "backends", "fp8_gemm"), ["auto", "triton"]),
    (("engine", "backends", "fp4_gemm"), ["auto", "flashinfer_cutlass", "marlin"]),
    (("engine", "cuda_graph", "enabled"), [False]),
    (("engine", "cuda_graph", "max_bs_decode"), [4]),
    (("engine", "cuda_graph", "batch_sizes"), [[1, 2, 4]]),
    (("engine", "limits", "context_length"), [4096, 4194304]),
    (("engine", "limits", "chunked_prefill_size"), [1000, 4096]),
    (("engine", "limits", "mem_fraction_static"), [0.5, 1.5]),
    (("engine", "limits", "max_running_requests"), [1]),
    (("engine", "limits", "max_total_tokens"), [4096]),
    (("engine", "limits", "random_seed"), [1]),
    (("engine", "chat", "tool_call_parser"), ["glm45", "qwen25", "deepseekv3"]),
    (("engine", "chat", "reasoning_parser"), ["qwen3"]),
    (("engine", "load_format"), ["dummy"]),
    (("engine", "trust_remote_code"), [True, False]),
    (("engine", "kv_cache_dtype"), ["fp8_e4m3", "fp8_e5m2", "bfloat16", "fp4_mx_block16"]),
    (("model", "quantization"), ["fp8", "modelopt_fp4"]),
    (("engine", "speculative", "draft", "quantization"), ["unquant", "fp8"]),
    (("engine", "page_size"), [64]),
]


@dataclass(frozen=True)
class Mutant:
    """One mutant: its id (parent:engine.path=value), its parent and the YAML text that makes it."""

    id: str
    parent: Path
    text: str


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {path[-1]: value}
    for key in reversed(path[:-1]):
        out = {key: out}
    return out


def _resolved_of(parent: Path) -> dict[str, Any]:
    """The parent as spark-compile resolves it (extends folded in, !delete applied)."""
    from spark_compile.stages.resolve import resolve

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        data = resolve(parent.relative_to(ROOT)).data
    finally:
        os.chdir(here)
    return data if isinstance(data, dict) else {}


def mutants(where: Path) -> list[Mutant]:
    """Every mutant, as YAML text meant to be written in the folder ``where`` (its `extends:` is relative to it)."""
    out: list[Mutant] = []
    for parent in [*SHIPPED, *RELEASES]:
        resolved = _resolved_of(parent)
        extends = Path(os.path.relpath(parent, where)).as_posix()
        for path, values in MUTATIONS:
            if parent in RELEASES and path[:2] not in RELEASE_SECTIONS:
                continue
            for value in values:
                if _get(resolved, path) == value or (len(path) > 3 and _get(resolved, path[:-1]) is None):
                    continue  # the parent's own value, or a setting of a section it does not have (no draft)
                body = yaml.safe_dump({"extends": extends, **_nest(path, value)}, sort_keys=False)
                shown = str(value).lower() if isinstance(value, bool) else value
                out.append(Mutant(f"{parent.stem}:{'.'.join(path)}={shown}", parent, body))
    return out
