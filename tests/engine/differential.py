"""The differential corpus, generated: mutants of every shipped profile, example and release and of the bases
under tests/engine/bases/ (other architectures), for the differential suite (test_differential.py).

A one-key mutant extends a base and changes one typed setting (MUTATIONS: parallelism, speculative decoding,
backends, graphs, limits, chat parsers, load format, KV cache dtype, page size, quantizations) to a value SGLang's
parser accepts; a two-key mutant changes two keys that one of SGLang's judgements reads together (the sites of
the judgement inventory, read from SGLang's source by spec/generators/sglang_judgements.py). A value the parent
already has, or a setting of a section it does not have, is skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml

from conftest import ROOT

SHIPPED = [ROOT / "spec" / "profiles" / "dsv41-4spark.yaml",
           *sorted((ROOT / "spec" / "profiles" / "examples").glob("*.yaml"))]
# Other architectures than the shipped ones: a dense model with a separate draft, a MoE without MTP layers, a
# hybrid sliding-window model and a hybrid linear-attention MoE with MTP layers (their config.json name a source).
BASES = sorted((ROOT / "tests" / "engine" / "bases").glob("*.yaml"))
# The release history: each release mutated in its parallelism and speculative settings only (the rest of
# each is the reference's, mutated in full above).
RELEASES = sorted((ROOT / "spec" / "profiles" / "releases").glob("*.yaml"))
RELEASE_SECTIONS = (("engine", "parallel"), ("engine", "speculative"))

ARGS_FLAGS = ("enable-hierarchical-cache", "disable-radix-cache", "enable-mixed-chunk")
# (path in the profile, values): every value is one SGLang 0.5.23's parser takes for the flag.
MUTATIONS: list[tuple[tuple[str, ...], list[Any]]] = [
    (("engine", "parallel", "tp"), [2, 3, 8]),
    (("engine", "parallel", "ep"), [1, 2, 3]),
    (("engine", "parallel", "pp"), [2]),
    (("engine", "parallel", "dp"), [2]),
    (("engine", "parallel", "dp_attention"), [True]),
    (("engine", "speculative", "algorithm"), ["EAGLE", "none", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE", "DSPARK"]),
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
    (("engine", "limits", "watchdog_timeout"), [30]),
    (("engine", "chat", "tool_call_parser"), ["glm45", "qwen25", "deepseekv3"]),
    (("engine", "chat", "reasoning_parser"), ["qwen3"]),
    (("engine", "load_format"), ["dummy"]),
    (("engine", "trust_remote_code"), [True, False]),
    (("engine", "kv_cache_dtype"), ["fp8_e4m3", "fp8_e5m2", "bfloat16", "fp4_mx_block16"]),
    (("model", "quantization"), ["fp8", "modelopt_fp4", "nvfp4_online", "mxfp8"]),
    (("engine", "speculative", "draft", "quantization"), ["unquant", "fp8"]),
    (("engine", "page_size"), [64]),
    # engine.args flags a judgement reads with another setting (the hierarchical cache against the radix cache,
    # mixed chunked prefill against the speculative algorithm)
    *((("engine", "args", flag), [True]) for flag in ARGS_FLAGS),
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


def _mutant(parent: Path, where: Path, changes: list[tuple[tuple[str, ...], Any]]) -> Mutant:
    body: dict[str, Any] = {"extends": Path(os.path.relpath(parent, where)).as_posix()}
    for path, value in changes:
        _merge(body, _nest(path, value))
    shown = ",".join(f"{'.'.join(path)}={str(v).lower() if isinstance(v, bool) else v}" for path, v in changes)
    return Mutant(f"{parent.stem}:{shown}", parent, yaml.safe_dump(body, sort_keys=False))


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _applies(resolved: dict[str, Any], path: tuple[str, ...], value: Any) -> bool:
    """The value is not the parent's own, and the section it sets exists (a draft's setting needs a draft)."""
    return _get(resolved, path) != value and not (len(path) > 3 and _get(resolved, path[:-1]) is None)


def read_together(sites_reads: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every pair of mutated keys that one of SGLang's judgements reads together (``sites_reads``: the settings
    each judgement site reads, by dest), in a stable order."""
    from spark_compile.stages.engine_options import TYPED

    catalog = json.loads((ROOT / "spec" / "catalogs" / "sglang-0.5.23.json").read_text(encoding="utf-8"))
    dests = {option: flag["dest"] for flag in catalog["flags"] for option in flag["options"]}
    mutated = {path for path, _ in MUTATIONS}
    key_of = {dests[t.flag]: tuple(map(str, t.field)) for t in TYPED if t.flag in dests and t.field in mutated}
    key_of["speculative_draft_model_quantization"] = ("engine", "speculative", "draft", "quantization")
    key_of.update({flag.replace("-", "_"): ("engine", "args", flag) for flag in ARGS_FLAGS})
    pairs = {pair for reads in sites_reads
             for pair in combinations(sorted({key_of[d] for d in reads if d in key_of}), 2)}
    return sorted(pairs)


def mutants(where: Path, pairs: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> list[Mutant]:
    """Every mutant, as YAML text meant to be written in the folder ``where`` (its `extends:` is relative to it):
    each base's one-key mutants, then one two-key mutant per pair of ``pairs``, on the architectures in turn (the
    first, from the pair's own turn on, where both keys change), its values taken in turn from each key's list."""
    out: list[Mutant] = []
    resolved = {parent: _resolved_of(parent) for parent in [*SHIPPED, *BASES, *RELEASES]}
    for parent, data in resolved.items():
        for path, choices in MUTATIONS:
            if parent in RELEASES and path[:2] not in RELEASE_SECTIONS:
                continue
            out += [_mutant(parent, where, [(path, v)]) for v in choices if _applies(data, path, v)]
    return out + [m for index, pair in enumerate(pairs) if (m := _pair_mutant(index, pair, resolved, where))]


def _pair_mutant(index: int, pair: tuple[tuple[str, ...], tuple[str, ...]], resolved: dict[Path, dict[str, Any]],
                 where: Path) -> Mutant | None:
    values, parents = dict(MUTATIONS), [*SHIPPED, *BASES]
    for turn in range(len(parents)):
        parent = parents[(index + turn) % len(parents)]
        first, second = ([v for v in values[key] if _applies(resolved[parent], key, v)] for key in pair)
        if first and second:
            pick = [(pair[0], first[index % len(first)]), (pair[1], second[(index // len(first)) % len(second)])]
            return _mutant(parent, where, pick)
    return None
