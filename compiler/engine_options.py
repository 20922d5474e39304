"""The engine's options: which profile field becomes which SGLang flag. Part of the plan stage."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from spark_compile.launch_plan import Option, ProfilePath

if TYPE_CHECKING:
    from spark_compile.spec.model import Profile


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


# Every engine flag the plan writes from a typed field, with that field: findings on a flag are placed there,
# SC213 refuses the same flag in engine.args, and the diff names the field behind a changed flag.
TYPED_FLAGS: dict[str, ProfilePath] = {
    "--model-path": ("model", "snapshot"), "--served-model-name": ("model", "served_name"),
    "--trust-remote-code": ("engine", "trust_remote_code"), "--load-format": ("engine", "load_format"),
    "--tp-size": ("engine", "parallel", "tp"), "--ep-size": ("engine", "parallel", "ep"),
    "--nnodes": ("fleet", "nodes"), "--node-rank": ("fleet", "nodes"), "--dist-init-addr": ("engine", "dist_init_port"),
    "--host": ("engine", "host"), "--port": ("engine", "port"),
    "--attention-backend": ("engine", "backends", "attention"),
    "--moe-runner-backend": ("engine", "backends", "moe_runner"),
    "--fp8-gemm-backend": ("engine", "backends", "fp8_gemm"),
    "--mem-fraction-static": ("engine", "limits", "mem_fraction_static"),
    "--chunked-prefill-size": ("engine", "limits", "chunked_prefill_size"),
    "--context-length": ("engine", "limits", "context_length"),
    "--max-running-requests": ("engine", "limits", "max_running_requests"),
    "--max-total-tokens": ("engine", "limits", "max_total_tokens"),
    "--cuda-graph-max-bs-decode": ("engine", "cuda_graph", "max_bs_decode"),
    "--cuda-graph-max-bs": ("engine", "cuda_graph", "max_bs_decode"),  # its spelling up to SGLang 0.5.10
    "--disable-cuda-graph": ("engine", "cuda_graph", "enabled"),  # ditto
    "--cuda-graph-backend-decode": ("engine", "cuda_graph", "enabled"),
    "--cuda-graph-backend-prefill": ("engine", "cuda_graph", "enabled"),
    "--random-seed": ("engine", "limits", "random_seed"),
    "--speculative-algorithm": ("engine", "speculative", "algorithm"),
    "--speculative-dspark-block-size": ("engine", "speculative", "dspark_block_size"),
    "--speculative-num-steps": ("engine", "speculative", "num_steps"),
    "--speculative-eagle-topk": ("engine", "speculative", "eagle_topk"),
    "--speculative-num-draft-tokens": ("engine", "speculative", "num_draft_tokens"),
    "--speculative-draft-model-path": ("engine", "speculative", "draft_model"),
    "--tool-call-parser": ("engine", "chat", "tool_call_parser"),
    "--reasoning-parser": ("engine", "chat", "reasoning_parser"),
    "--watchdog-timeout": ("engine", "limits", "watchdog_timeout"),
    "--default-chat-template-kwargs": ("engine", "chat", "thinking"),
}
# Other spellings of typed flags (SGLang aliases, or another way to the same setting): refused in engine.args too.
TYPED_FLAG_SYNONYMS: dict[str, str] = {
    "--tensor-parallel-size": "--tp-size", "--expert-parallel-size": "--ep-size",
    "--disable-cuda-graph": "--cuda-graph-backend-decode",
}


def _typed(flag: str, *values: object) -> list[Option]:
    """The option ``flag`` written from its typed field; nothing when the value is unset (None)."""
    if values and values[0] is None:
        return []
    return [Option(flag, tuple(str(v) for v in values), TYPED_FLAGS[flag])]


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
    eng, model, limits = profile.engine, profile.model, profile.engine.limits
    nodes = profile.fleet.nodes
    options = [*_typed("--model-path", f"{model.container_repo}/snapshots/{model.snapshot}"),
               *_typed("--served-model-name", model.served_name)]
    options += _typed("--trust-remote-code") if eng.trust_remote_code else []
    options += _typed("--load-format", eng.load_format)
    options += _typed("--tp-size", eng.parallel.tp)
    options += _typed("--ep-size", eng.parallel.ep if eng.parallel.ep > 1 else None)
    if len(nodes) > 1:  # one node is SGLang's default
        options += [*_typed("--nnodes", len(nodes)), *_typed("--node-rank", rank)]
        options += _typed("--dist-init-addr", f"{nodes[0].fabric_ip}:{eng.dist_init_port}")
    options += [*_typed("--host", eng.host), *_typed("--port", eng.port)]
    options += _typed("--attention-backend", eng.backends.attention)
    options += _typed("--moe-runner-backend", eng.backends.moe_runner)
    options += _typed("--fp8-gemm-backend", eng.backends.fp8_gemm)
    options += [*_typed("--mem-fraction-static", fraction_text(limits.mem_fraction_static)),
                *_typed("--chunked-prefill-size", limits.chunked_prefill_size),
                *_typed("--context-length", limits.context_length),
                *_typed("--max-running-requests", limits.max_running_requests)]
    options += _typed("--max-total-tokens", limits.max_total_tokens)
    options += _cuda_graph_options(profile)
    options += _typed("--random-seed", limits.random_seed)
    options += _speculative_options(profile)
    options += _typed("--tool-call-parser", eng.chat.tool_call_parser)
    options += _typed("--reasoning-parser", eng.chat.reasoning_parser)
    options += _typed("--watchdog-timeout", limits.watchdog_timeout)
    options += [_arg(name, value) for name, value in eng.args.items()]
    if eng.chat.thinking is not None:
        kwargs = json.dumps({"thinking": eng.chat.thinking}, separators=(",", ":"))
        options += _typed("--default-chat-template-kwargs", kwargs)
    return options


def engine_argv(profile: Profile, rank: int) -> list[str]:
    """The engine's own arguments for ``rank`` as argv words."""
    return [word for option in engine_options(profile, rank) for word in option.words]


def _cuda_graph_options(profile: Profile) -> list[Option]:
    """The CUDA-graph options, spelled the way the SGLang build engine.catalog selects takes them."""
    from spark_compile.spec.catalog import spelling

    build = profile.engine.catalog
    if profile.engine.cuda_graph.enabled:
        flag = spelling(build, ["--cuda-graph-max-bs-decode"], ["--cuda-graph-max-bs"])[0]
        return _typed(flag, cuda_graph_max_bs_decode(profile))
    if spelling(build, ["--cuda-graph-backend-decode", "--cuda-graph-backend-prefill"], ["--disable-cuda-graph"]) \
            == ["--disable-cuda-graph"]:
        return _typed("--disable-cuda-graph")
    return [*_typed("--cuda-graph-backend-decode", "disabled"), *_typed("--cuda-graph-backend-prefill", "disabled")]


def _speculative_options(profile: Profile) -> list[Option]:
    spec = profile.engine.speculative
    if spec.algorithm == "none":
        return []
    return [*_typed("--speculative-algorithm", spec.algorithm),
            *_typed("--speculative-dspark-block-size", spec.dspark_block_size),
            *_typed("--speculative-num-steps", spec.num_steps),
            *_typed("--speculative-eagle-topk", spec.eagle_topk),
            *_typed("--speculative-num-draft-tokens", spec.num_draft_tokens),
            *_typed("--speculative-draft-model-path", spec.draft_model)]
