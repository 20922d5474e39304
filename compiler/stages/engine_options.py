"""The engine's options: which profile field becomes which SGLang flag. Part of the plan stage."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_compile.spec.catalog import spelling
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import Option, ProfilePath
from spark_compile.stages.model_paths import container_path

SGLANG_DEFAULT_HOST = "127.0.0.1"  # --host when the profile leaves it unset


def api_bind(profile: Profile) -> str:
    """The address the API listens on: engine.host, else SGLang's default."""
    return profile.engine.host or SGLANG_DEFAULT_HOST


def cuda_graph_max_bs_decode(profile: Profile) -> int | None:
    """--cuda-graph-max-bs-decode: as pinned, or the request cap when the profile asks to follow it."""
    graph = profile.engine.cuda_graph
    if graph.max_bs_decode == "max_running_requests":
        return profile.engine.limits.max_running_requests
    return graph.max_bs_decode


def fraction_text(value: float | None) -> str | None:
    """A fraction as operators write it: two decimals (0.80) unless it needs more (0.875)."""
    if value is None:
        return None
    return f"{value:.2f}" if round(value, 2) == value else repr(value)


Value = Callable[[Profile, int], object]


@dataclass(frozen=True, slots=True)
class TypedFlag:
    """An engine flag the plan writes from a typed field: the field, and the rank's value of the flag (None:
    left out; True: a bare switch; a tuple: several values). ``source`` names the field a profile's value
    came from where that depends on the profile (a model path from a hub id, a snapshot or a repo)."""

    flag: str
    field: ProfilePath
    value: Value
    source: Callable[[Profile], ProfilePath] | None = None


def _multinode(value: Value) -> Value:
    """Only for a fleet of several nodes (one node is SGLang's default)."""
    return lambda p, rank: value(p, rank) if len(p.fleet.nodes) > 1 else None


def _graphs_on(spelled: str) -> Value:
    """The decode graphs' batch cap, under the name the selected build gives it."""
    def value(p: Profile, _: int) -> object:
        if not p.engine.cuda_graph.enabled:
            return None
        flag = spelling(p.engine.catalog, ["--cuda-graph-max-bs-decode"], ["--cuda-graph-max-bs"])[0]
        return cuda_graph_max_bs_decode(p) if flag == spelled else None

    return value


def _graphs_off(spelled: str, written: object) -> Value:
    """Graphs off, the way the selected build takes it (one switch up to 0.5.10, two backends after)."""
    def value(p: Profile, _: int) -> object:
        if p.engine.cuda_graph.enabled:
            return None
        old = spelling(p.engine.catalog, ["--cuda-graph-backend-decode", "--cuda-graph-backend-prefill"],
                       ["--disable-cuda-graph"]) == ["--disable-cuda-graph"]
        return written if (spelled == "--disable-cuda-graph") == old else None

    return value


def _speculative(value: Callable[[Any], object]) -> Value:
    return lambda p, _: None if p.engine.speculative.algorithm == "none" else value(p.engine.speculative)


def _graph_sizes(spelled: str) -> Value:
    """The decode graphs' batch sizes (a list), under the name the selected build gives it."""
    def value(p: Profile, _: int) -> object:
        sizes = p.engine.cuda_graph.batch_sizes
        if not p.engine.cuda_graph.enabled or not sizes:
            return None
        flag = spelling(p.engine.catalog, ["--cuda-graph-bs-decode"], ["--cuda-graph-bs"])[0]
        return tuple(sizes) if flag == spelled else None

    return value


def chat_template_kwargs(profile: Profile) -> str | None:
    """--default-chat-template-kwargs: thinking first, then the other keywords, as compact JSON."""
    chat = profile.engine.chat
    kwargs: dict[str, object] = {"thinking": chat.thinking} if chat.thinking is not None else {}
    kwargs.update(chat.template_kwargs)
    return json.dumps(kwargs, separators=(",", ":")) if kwargs else None


def _model_source(source: Any, *at: str) -> ProfilePath:
    """The field a model path comes from: its hub id, its snapshot, or its repo."""
    for name in ("hub_id", "snapshot", "repo"):
        if getattr(source, name) is not None:
            return (*at, name)
    return at


def _draft(value: Callable[[Any], object]) -> Value:
    """A value of the separate draft model, when the profile has one (and speculates)."""
    def of(p: Profile, _: int) -> object:
        draft = p.engine.speculative.draft
        return None if draft is None or p.engine.speculative.algorithm == "none" else value(draft)

    return of


# Every engine flag the plan writes from a typed field, in argv order: findings on a flag are placed at its
# field, SC213 refuses the flag in engine.args, and the diff names the field behind a changed flag.
TYPED: tuple[TypedFlag, ...] = (
    TypedFlag("--model-path", ("model", "repo"), lambda p, _: container_path(p.model),
              lambda p: _model_source(p.model, "model")),
    TypedFlag("--served-model-name", ("model", "served_name"), lambda p, _: p.model.served_name),
    TypedFlag("--quantization", ("model", "quantization"), lambda p, _: p.model.quantization),
    TypedFlag("--tokenizer-path", ("model", "tokenizer"), lambda p, _: p.model.tokenizer),
    TypedFlag("--revision", ("model", "revision"), lambda p, _: p.model.revision),
    TypedFlag("--trust-remote-code", ("engine", "trust_remote_code"), lambda p, _: p.engine.trust_remote_code or None),
    TypedFlag("--load-format", ("engine", "load_format"), lambda p, _: p.engine.load_format),
    TypedFlag("--kv-cache-dtype", ("engine", "kv_cache_dtype"), lambda p, _: p.engine.kv_cache_dtype),
    TypedFlag("--page-size", ("engine", "page_size"), lambda p, _: p.engine.page_size),
    TypedFlag("--tp-size", ("engine", "parallel", "tp"), lambda p, _: p.engine.parallel.tp),
    TypedFlag("--ep-size", ("engine", "parallel", "ep"),
              lambda p, _: p.engine.parallel.ep if p.engine.parallel.ep > 1 else None),
    TypedFlag("--pp-size", ("engine", "parallel", "pp"), lambda p, _: p.engine.parallel.pp),
    TypedFlag("--dp-size", ("engine", "parallel", "dp"), lambda p, _: p.engine.parallel.dp),
    TypedFlag("--enable-dp-attention", ("engine", "parallel", "dp_attention"),
              lambda p, _: p.engine.parallel.dp_attention or None),
    TypedFlag("--nnodes", ("fleet", "nodes"), _multinode(lambda p, _: len(p.fleet.nodes))),
    TypedFlag("--node-rank", ("fleet", "nodes"), _multinode(lambda _, rank: rank)),
    TypedFlag("--dist-init-addr", ("engine", "dist_init_port"),
              _multinode(lambda p, _: f"{p.fleet.nodes[0].fabric_ip}:{p.engine.dist_init_port}")),
    TypedFlag("--host", ("engine", "host"), lambda p, _: p.engine.host),
    TypedFlag("--port", ("engine", "port"), lambda p, _: p.engine.port),
    TypedFlag("--attention-backend", ("engine", "backends", "attention"), lambda p, _: p.engine.backends.attention),
    TypedFlag("--moe-runner-backend", ("engine", "backends", "moe_runner"),
              lambda p, _: p.engine.backends.moe_runner),
    TypedFlag("--fp8-gemm-backend", ("engine", "backends", "fp8_gemm"), lambda p, _: p.engine.backends.fp8_gemm),
    TypedFlag("--fp4-gemm-backend", ("engine", "backends", "fp4_gemm"), lambda p, _: p.engine.backends.fp4_gemm),
    TypedFlag("--mem-fraction-static", ("engine", "limits", "mem_fraction_static"),
              lambda p, _: fraction_text(p.engine.limits.mem_fraction_static)),
    TypedFlag("--chunked-prefill-size", ("engine", "limits", "chunked_prefill_size"),
              lambda p, _: p.engine.limits.chunked_prefill_size),
    TypedFlag("--context-length", ("engine", "limits", "context_length"),
              lambda p, _: p.engine.limits.context_length),
    TypedFlag("--max-running-requests", ("engine", "limits", "max_running_requests"),
              lambda p, _: p.engine.limits.max_running_requests),
    TypedFlag("--max-total-tokens", ("engine", "limits", "max_total_tokens"),
              lambda p, _: p.engine.limits.max_total_tokens),
    TypedFlag("--cuda-graph-max-bs-decode", ("engine", "cuda_graph", "max_bs_decode"),
              _graphs_on("--cuda-graph-max-bs-decode")),
    # Its spelling up to SGLang 0.5.10, and that build's way to turn graphs off.
    TypedFlag("--cuda-graph-max-bs", ("engine", "cuda_graph", "max_bs_decode"), _graphs_on("--cuda-graph-max-bs")),
    TypedFlag("--cuda-graph-bs-decode", ("engine", "cuda_graph", "batch_sizes"),
              _graph_sizes("--cuda-graph-bs-decode")),
    TypedFlag("--cuda-graph-bs", ("engine", "cuda_graph", "batch_sizes"), _graph_sizes("--cuda-graph-bs")),
    TypedFlag("--disable-cuda-graph", ("engine", "cuda_graph", "enabled"), _graphs_off("--disable-cuda-graph", True)),
    TypedFlag("--cuda-graph-backend-decode", ("engine", "cuda_graph", "enabled"),
              _graphs_off("--cuda-graph-backend-decode", "disabled")),
    TypedFlag("--cuda-graph-backend-prefill", ("engine", "cuda_graph", "enabled"),
              _graphs_off("--cuda-graph-backend-prefill", "disabled")),
    TypedFlag("--disable-prefill-cuda-graph", ("engine", "cuda_graph", "prefill"),
              lambda p, _: None if p.engine.cuda_graph.prefill else True),
    TypedFlag("--random-seed", ("engine", "limits", "random_seed"), lambda p, _: p.engine.limits.random_seed),
    TypedFlag("--mamba-ssm-dtype", ("engine", "mamba", "ssm_dtype"), lambda p, _: p.engine.mamba.ssm_dtype),
    TypedFlag("--mamba-full-memory-ratio", ("engine", "mamba", "full_memory_ratio"),
              lambda p, _: p.engine.mamba.full_memory_ratio),
    TypedFlag("--max-mamba-cache-size", ("engine", "mamba", "max_cache_size"),
              lambda p, _: p.engine.mamba.max_cache_size),
    TypedFlag("--linear-attn-backend", ("engine", "mamba", "backend"), lambda p, _: p.engine.mamba.backend),
    TypedFlag("--enable-metrics", ("engine", "metrics"), lambda p, _: p.engine.metrics or None),
    TypedFlag("--speculative-algorithm", ("engine", "speculative", "algorithm"), _speculative(lambda s: s.algorithm)),
    TypedFlag("--speculative-dspark-block-size", ("engine", "speculative", "dspark_block_size"),
              _speculative(lambda s: s.dspark_block_size)),
    TypedFlag("--speculative-num-steps", ("engine", "speculative", "num_steps"), _speculative(lambda s: s.num_steps)),
    TypedFlag("--speculative-eagle-topk", ("engine", "speculative", "eagle_topk"),
              _speculative(lambda s: s.eagle_topk)),
    TypedFlag("--speculative-num-draft-tokens", ("engine", "speculative", "num_draft_tokens"),
              _speculative(lambda s: s.num_draft_tokens)),
    TypedFlag("--speculative-draft-model-path", ("engine", "speculative", "draft"), _draft(container_path),
              lambda p: _model_source(p.engine.speculative.draft, "engine", "speculative", "draft")),
    TypedFlag("--speculative-draft-model-quantization", ("engine", "speculative", "draft", "quantization"),
              _draft(lambda d: d.quantization)),
    TypedFlag("--tool-call-parser", ("engine", "chat", "tool_call_parser"),
              lambda p, _: p.engine.chat.tool_call_parser),
    TypedFlag("--reasoning-parser", ("engine", "chat", "reasoning_parser"),
              lambda p, _: p.engine.chat.reasoning_parser),
    TypedFlag("--watchdog-timeout", ("engine", "limits", "watchdog_timeout"),
              lambda p, _: p.engine.limits.watchdog_timeout),
    TypedFlag("--default-chat-template-kwargs", ("engine", "chat", "thinking"), lambda p, _: chat_template_kwargs(p),
              lambda p: ("engine", "chat", "thinking" if p.engine.chat.thinking is not None else "template_kwargs")),
)
TYPED_FLAGS: dict[str, ProfilePath] = {typed.flag: typed.field for typed in TYPED}
AFTER_ARGS = "--default-chat-template-kwargs"  # written after engine.args, where the reference command has it
# Other spellings of typed flags (SGLang aliases, or another way to the same setting): refused in engine.args too.
TYPED_FLAG_SYNONYMS: dict[str, str] = {
    "--tensor-parallel-size": "--tp-size", "--expert-parallel-size": "--ep-size",
    "--data-parallel-size": "--dp-size", "--speculative-draft-model": "--speculative-draft-model-path",
    "--disable-cuda-graph": "--cuda-graph-backend-decode",
}


def _option(typed: TypedFlag, profile: Profile, rank: int) -> Option | None:
    value = typed.value(profile, rank)
    if value is None:
        return None
    values = () if value is True else tuple(str(v) for v in value) if isinstance(value, tuple) else (str(value),)
    return Option(typed.flag, values, typed.source(profile) if typed.source else typed.field)


def _arg(name: str, value: object) -> Option:
    source: ProfilePath = ("engine", "args", name)
    if value is True:
        return Option(f"--{name}", (), source)
    if value is False:
        return Option(f"--no-{name}", (), source)
    if isinstance(value, list):
        return Option(f"--{name}", tuple(str(v) for v in value), source)
    return Option(f"--{name}", (str(value),), source)


def engine_options(profile: Profile, rank: int) -> list[Option]:
    """The engine's own options for ``rank`` (what follows the launcher), each with its profile path."""
    typed = [option for flag in TYPED if (option := _option(flag, profile, rank)) is not None]
    return [*(o for o in typed if o.flag != AFTER_ARGS), *(_arg(n, v) for n, v in profile.engine.args.items()),
            *(o for o in typed if o.flag == AFTER_ARGS)]
