"""SC240-SC253: what SGLang 0.5.23 refuses or silently rewrites, judged from the profile and the checkpoint's
committed config.json (heads, context limit, quantization), without running SGLang.

Each rule has a negative profile whose `# engine:` lines record SGLang's own verdict on the same command line,
and whose fix SGLang's resolution accepts (tests/engine/test_negative_engine.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.spec.checkpoint import Checkpoint
from spark_compile.spec.engine_values import (
    draft_model,
    draft_quantization,
    kv_cache_dtype,
    own_mtp_draft,
    quantization,
)
from spark_compile.spec.sglang_facts import (
    COMPATIBLE_QUANTIZATION,
    CUTLASS_EP_ONE_QUANTIZATIONS,
    DEPRECATED_TOOL_CALL_PARSERS,
    EAGLE_FAMILY,
    EP_ONE_OR_TP_RUNNERS,
    FLASHINFER_CUTLASS_QUANTIZATIONS,
    GB10_DEFAULT_MHA_BACKEND,
    KV4_MHA_BACKENDS,
    KV4_MLA_BACKENDS,
    KV_BACKEND_REFUSALS,
    KV_BACKEND_REWRITES,
    NEEDS_DRAFT_MODEL,
    NO_PP_MODEL_TYPES,
    PP_SPEC_ENV,
    REQUANTIZATION_METHODS,
    STEP_ALGORITHMS,
)


def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def tp_misses_fleet(ctx: Context) -> bool:
    """tp x pp is not the fleet's GPU count (SC401 says so): what follows from tp is then the wrong question."""
    par = ctx.profile.engine.parallel
    return (par.tp or 1) * (par.pp or 1) != len(ctx.profile.fleet.nodes) * ctx.hardware.gpus_per_node


def run_quantization(ctx: Context) -> str | None:
    """The quantization SGLang runs the model with: the written one when the checkpoint keeps it, else the
    checkpoint's."""
    written = quantization(ctx.profile)
    ckpt = ctx.checkpoint.quantization if ctx.checkpoint else None
    if written is None:
        return ckpt
    return written.value if ckpt is None or _keeps(ctx.checkpoint, written.value) else ckpt


def _keeps(cp: Checkpoint | None, written: str) -> bool:
    """ModelConfig._verify_quantization keeps a written quantization on this checkpoint."""
    if cp is None or cp.quant_method is None:
        return True
    return written in (cp.quant_method, cp.quantization) or cp.quant_method in COMPATIBLE_QUANTIZATION.get(
        written, ()) or written in REQUANTIZATION_METHODS


def moe_runner(ctx: Context) -> tuple[str, str]:
    """(the MoE runner SGLang uses, why): the written one, or the one the catalog's hardware facts say SGLang
    picks on this GPU for the quantization (an NVFP4 checkpoint on GB10: flashinfer_cutlass)."""
    written = ctx.profile.engine.backends.moe_runner or "auto"
    values = {"moe_runner_backend": written, "quantization": run_quantization(ctx)}
    build = ctx.engine_catalog
    for gate in build.gpu.rewrites if build is not None else ():
        if gate.sets and gate.sets[0] == "moe_runner_backend" and ctx.hardware.sm[0] in gate.majors \
                and all(dest in values and (values[dest] == value) == equal for dest, value, equal in gate.when):
            return str(gate.sets[1]), f"SGLang's choice for {values['quantization']} on {ctx.profile.hardware}"
    return written, "engine.backends.moe_runner"


def ep_choices(ctx: Context) -> tuple[int, ...]:
    """The ep sizes SGLang accepts with this tp and MoE runner."""
    tp = ctx.profile.engine.parallel.tp or 1  # unset: SGLang's default
    if moe_runner(ctx)[0] in EP_ONE_OR_TP_RUNNERS:
        return (1, tp) if tp > 1 else (1,)
    return divisors(tp)


@rule("SC240", "error", "EAGLE top-k 1 verifies num_steps + 1 tokens",
      "With --speculative-eagle-topk 1 SGLang sets --speculative-num-draft-tokens to num_steps + 1 whatever was "
      "written (_handle_eagle_family), with only a log line.",
      "speculative: {algorithm: EAGLE3, num_steps: 3, eagle_topk: 1, num_draft_tokens: 6}",
      "speculative: {algorithm: EAGLE3, num_steps: 3, eagle_topk: 1, num_draft_tokens: 4}")
def eagle_chain_tokens(ctx: Context) -> Iterator[Hit]:
    spec = ctx.profile.engine.speculative
    if spec.algorithm in STEP_ALGORITHMS and spec.eagle_topk == 1 and spec.num_steps is not None \
            and spec.num_draft_tokens is not None and spec.num_draft_tokens != spec.num_steps + 1:
        yield Hit(("engine", "speculative", "num_draft_tokens"),
                  f"with eagle_topk 1 SGLang verifies num_steps + 1 = {spec.num_steps + 1} draft tokens and "
                  f"replaces num_draft_tokens {spec.num_draft_tokens}",
                  f"write num_draft_tokens: {spec.num_steps + 1}, or leave it unset")


@rule("SC241", "error", "a draft model for speculative decoding",
      "EAGLE3 and STANDALONE draft with a separate model, and so do EAGLE and NEXTN for an architecture with no "
      "MTP draft layers of its own; without --speculative-draft-model-path SGLang loads the whole target as the "
      "draft at boot (ModelConfig.from_server_args), silently. For an architecture SGLang drafts with its own MTP "
      "layers (_handle_eagle_family, ModelConfig._config_draft_model) EAGLE and NEXTN need no draft model, nor "
      "does any drafting algorithm where SGLang makes the target its own draft and loads only its MTP layers "
      "(GLM-4.5).",
      "speculative: {algorithm: EAGLE3}", "speculative: {algorithm: EAGLE3, draft: {repo: /srv/models/draft}}")
def needs_draft(ctx: Context) -> Iterator[Hit]:
    algorithm = ctx.profile.engine.speculative.algorithm
    if algorithm in (*EAGLE_FAMILY, *NEEDS_DRAFT_MODEL) and not own_mtp_draft(ctx.profile.model.architecture,
                                                                              algorithm) \
            and draft_model(ctx.profile) is None:
        yield Hit(("engine", "speculative", "algorithm"),
                  f"{algorithm} has no draft model: SGLang would load the target model as its own draft",
                  "set engine.speculative.draft: {repo: <the draft's directory on the host>} (or hub_id)")


@rule("SC242", "error", "TP divides the attention heads",
      "Each attention layer splits its heads over the TP ranks: SGLang asserts at model load that tp divides "
      "num_attention_heads, and that tp divides num_key_value_heads (or, with fewer KV heads than ranks, that "
      "they divide tp). Read from the committed config.json.",
      "model: {config_json: qwen3-next-80b-a3b.config.json}   # 16 heads\nengine: {parallel: {tp: 3}}",
      "engine: {parallel: {tp: 2}}")
def heads_split(ctx: Context) -> Iterator[Hit]:
    cp, tp = ctx.checkpoint, ctx.profile.engine.parallel.tp or 1
    if cp is None or cp.attention_heads is None or tp_misses_fleet(ctx):  # SC401 names the tp
        return
    at = ("engine", "parallel", "tp")
    if cp.attention_heads % tp:
        named = ", ".join(map(str, divisors(cp.attention_heads)))
        yield Hit(at, f"tp {tp} does not divide the {cp.attention_heads} attention heads of {cp.file}",
                  f"use a tp that divides {cp.attention_heads} ({named}), with as many GPUs")
    elif not cp.mla and cp.kv_heads and (cp.kv_heads % tp if cp.kv_heads >= tp else tp % cp.kv_heads):
        yield Hit(at, f"tp {tp} and the {cp.kv_heads} KV heads of {cp.file} do not divide one another",
                  f"use a tp that divides {cp.kv_heads} or a multiple of it that divides {cp.attention_heads}")


@rule("SC252", "error", "data-parallel replicas on one node",
      "SGLang's check_server_args refuses --dp-size above 1 on more than one node: data-parallel replicas do not "
      "span nodes (attention data parallelism does, --attn-dp-size).",
      "fleet: {nodes: [spark-a, spark-b]}\nengine: {parallel: {tp: 2, dp: 2}}", "engine: {parallel: {tp: 2}}")
def dp_one_node(ctx: Context) -> Iterator[Hit]:
    par, nodes = ctx.profile.engine.parallel, len(ctx.profile.fleet.nodes)
    if (par.dp or 1) > 1 and nodes > 1 and not par.dp_attention:  # with dp_attention SGLang makes it attention DP
        yield Hit(("engine", "parallel", "dp"), f"dp {par.dp} asks for data-parallel replicas, which SGLang refuses "
                  f"across {nodes} nodes", "remove dp (one replica per fleet)")


@rule("SC253", "error", "pipeline parallelism SGLang serves",
      "SGLang refuses --pp-size above 1 for a DeepSeek-V4.1 checkpoint (validate_deepseek_v41_features), and with "
      "speculative decoding outside a disaggregated prefill node unless SGLANG_ENABLE_PP_SPEC=1 runs EAGLE "
      "(check_pipeline_parallel_compat).",
      "engine: {parallel: {tp: 2, pp: 2}, speculative: {algorithm: EAGLE3}}", "engine: {parallel: {tp: 4}}")
def pp_served(ctx: Context) -> Iterator[Hit]:
    eng = ctx.profile.engine
    pp, algorithm = eng.parallel.pp or 1, eng.speculative.algorithm
    if pp == 1:
        return
    at, model_type = ("engine", "parallel", "pp"), ctx.checkpoint.model_type if ctx.checkpoint else None
    relayed = str(eng.env.get(PP_SPEC_ENV, "0")).lower() in ("1", "true") and algorithm in ("EAGLE", "NEXTN")
    instead = f"remove pp and set engine.parallel.tp: {(eng.parallel.tp or 1) * pp}"
    if model_type in NO_PP_MODEL_TYPES:
        yield Hit(at, f"{ctx.profile.model.architecture} ({model_type}) refuses pipeline parallelism: SGLang stops "
                  f"at start with pp {pp}", instead)
    elif algorithm != "none" and not relayed:
        yield Hit(at, f"pipeline parallelism with {algorithm} speculative decoding runs only on a disaggregated "
                  f"prefill node (or EAGLE with {PP_SPEC_ENV}=1): SGLang stops at start with pp {pp}", instead)


@rule("SC243", "error", "EP the MoE runner can serve",
      "The flashinfer_cutlass and flashinfer_cutedsl MoE runners take ep 1 or ep = tp (SGLang asserts it in "
      "handle_moe_kernel_config). SGLang picks flashinfer_cutlass itself for an NVFP4 (modelopt_fp4) checkpoint "
      "on GB10, so ep 2 with tp 4 stops there.",
      "model: {config_json: nvfp4-moe.config.json}\nengine: {parallel: {tp: 4, ep: 2}}",
      "engine: {parallel: {tp: 4, ep: 4}}")
def ep_for_runner(ctx: Context) -> Iterator[Hit]:
    par = ctx.profile.engine.parallel
    tp = par.tp or 1  # unset: SGLang's default
    runner, why = moe_runner(ctx)
    if tp % par.ep == 0 and par.ep not in ep_choices(ctx):
        yield Hit(("engine", "parallel", "ep"),
                  f"the MoE runner {runner} ({why}) takes ep 1 or ep = tp {tp}, not {par.ep}",
                  f"use ep: {tp} (or 1)")


@rule("SC248", "error", "a MoE runner that serves the quantization",
      "SGLang asserts in handle_moe_kernel_config that flashinfer_cutlass runs only modelopt_fp4, modelopt_fp8, "
      "modelopt_mixed or unquantized weights, and that cutlass with FP8/MXFP8 weights runs with ep 1; the "
      "quantization is the one the checkpoint gives the model at boot.",
      "model: {config_json: dsv41-flash.config.json}   # fp8\nengine: {parallel: {tp: 4, ep: 4}, "
      "backends: {moe_runner: cutlass}}",
      "engine: {backends: {moe_runner: flashinfer_mxfp4}}")
def runner_serves_quantization(ctx: Context) -> Iterator[Hit]:
    runner, why = moe_runner(ctx)
    quant, ep = run_quantization(ctx), ctx.profile.engine.parallel.ep
    if runner == "flashinfer_cutlass" and quant not in FLASHINFER_CUTLASS_QUANTIZATIONS:
        yield Hit(("engine", "backends", "moe_runner"),
                  f"the MoE runner flashinfer_cutlass ({why}) serves modelopt_fp4, modelopt_fp8, modelopt_mixed or "
                  f"unquantized weights, not {quant}", "use another moe_runner, or leave it unset (auto)")
    elif runner == "cutlass" and quant in CUTLASS_EP_ONE_QUANTIZATIONS and ep != 1:
        yield Hit(("engine", "parallel", "ep"), f"the MoE runner cutlass ({why}) takes ep 1 with {quant} weights, "
                  f"not ep {ep}", "use ep: 1, or another moe_runner")


@rule("SC244", "error", "quantization the checkpoint agrees with",
      "SGLang reads the checkpoint's quantization_config at load (ModelConfig._verify_quantization): a "
      "--quantization it is not compatible with is replaced by the checkpoint's (ModelOpt) or refused; the draft "
      "model's --speculative-draft-model-quantization is replaced by its own checkpoint's.",
      "model: {config_json: nvfp4-moe.config.json, quantization: fp8}",
      "model: {config_json: nvfp4-moe.config.json}   # SGLang reads modelopt_fp4 from the checkpoint")
def quantization_agrees(ctx: Context) -> Iterator[Hit]:
    for written, cp, flag, whose in ((quantization(ctx.profile), ctx.checkpoint, "--quantization", "the "),
                                     (draft_quantization(ctx.profile), ctx.draft_checkpoint,
                                      "--speculative-draft-model-quantization", "the draft's ")):
        if written is None or cp is None or cp.quant_method is None or _keeps(cp, written.value):
            continue
        yield Hit(written.path,
                  f"{flag} {written.value} contradicts the quantization_config of {cp.file} ({cp.quant_method}, "
                  f"which SGLang runs as {cp.quantization})",
                  f"remove it (SGLang reads {whose}checkpoint's), or write {cp.quantization}")


def attention_backend(ctx: Context) -> tuple[str | None, str]:
    """(the attention backend SGLang runs, how it came to it)."""
    family = ctx.family
    if family and family.attention_backend:
        return family.attention_backend, f" ({family.architecture}'s own)"
    if ctx.profile.engine.backends.attention:
        return ctx.profile.engine.backends.attention, ""
    if ctx.hardware.sm == (12, 1) and family and family.gb10_attention_backend:
        return family.gb10_attention_backend, f" (SGLang's choice for {family.architecture} on GB10)"
    if ctx.checkpoint is not None and not ctx.checkpoint.mla and ctx.hardware.sm == (12, 1):
        return GB10_DEFAULT_MHA_BACKEND, " (SGLang's choice on GB10)"
    return None, ""


@rule("SC249", "error", "an attention backend the model family runs",
      "SGLang asserts at start that a GPT-OSS model (GptOssForCausalLM) runs triton, trtllm_mha, fa3 or fa4 "
      "attention on CUDA (handle_model_specific_adjustments); unset, it picks triton on GB10 (_gpt_oss_overrides).",
      "model: {architecture: GptOssForCausalLM}\nengine: {backends: {attention: flashinfer}}",
      "engine: {backends: {attention: triton}}   # or leave it unset")
def family_attention_backends(ctx: Context) -> Iterator[Hit]:
    family, written = ctx.family, ctx.profile.engine.backends.attention
    if family is None or not family.attention_backends or written is None or written in family.attention_backends:
        return
    choice = family.gb10_attention_backend or family.attention_backends[0]
    yield Hit(("engine", "backends", "attention"),
              f"{family.architecture} runs attention backend {', '.join(family.attention_backends[:-1])} or "
              f"{family.attention_backends[-1]}, not {written}: SGLang refuses it at start",
              f"set engine.backends.attention: {choice}, or leave it unset")


@rule("SC250", "error", "max_bs_decode agrees with the captured batch sizes",
      "With --cuda-graph-bs-decode written SGLang sets the decode graphs' largest batch to the list's largest "
      "(_handle_gpu_memory_settings), replacing --cuda-graph-max-bs-decode without a word.",
      "cuda_graph: {batch_sizes: [1, 2, 4, 8], max_bs_decode: 4}",
      "cuda_graph: {batch_sizes: [1, 2, 4, 8]}   # SGLang's largest decode batch: 8")
def graph_max_follows_list(ctx: Context) -> Iterator[Hit]:
    graphs, cap = ctx.profile.engine.cuda_graph, ctx.profile.engine.limits.max_running_requests
    pinned = cap if graphs.max_bs_decode == "max_running_requests" else graphs.max_bs_decode
    if not graphs.batch_sizes or not isinstance(pinned, int) or pinned == max(graphs.batch_sizes):
        return
    largest = max(graphs.batch_sizes)
    yield Hit(("engine", "cuda_graph", "max_bs_decode"),
              f"with batch_sizes written SGLang captures decode batches up to their largest, {largest}, and "
              f"replaces max_bs_decode {pinned}",
              f"remove max_bs_decode (batch_sizes decides it), or make {pinned} the largest of batch_sizes")


@rule("SC245", "error", "a KV cache dtype the attention backend serves",
      "On GB10 (SM12x) SGLang refuses some KV cache dtypes with some attention backends (kv_cache_hook, "
      "attention_hook) and silently swaps the backend for others: fp8_e4m3 with trtllm_mha, nvfp4 with triton and "
      "an FP4 cache with a backend outside the KV4 lists are refused; fp8_e5m2 with fa3 runs triton instead.",
      "engine: {backends: {attention: trtllm_mha}, kv_cache_dtype: fp8_e4m3}",
      "engine: {backends: {attention: flashinfer}, kv_cache_dtype: fp8_e4m3}")
def kv_backend(ctx: Context) -> Iterator[Hit]:
    dtype, (backend, how) = kv_cache_dtype(ctx.profile), attention_backend(ctx)
    if dtype is None or backend is None or ctx.hardware.sm[0] != 12:
        return
    pair = (dtype.value, backend)
    if pair in KV_BACKEND_REFUSALS:
        yield Hit(dtype.path, f"SGLang refuses kv-cache-dtype {dtype.value} with attention backend "
                  f"{backend}: {KV_BACKEND_REFUSALS[pair]}",
                  "use another attention backend (unset: SGLang picks one that serves it)")
    elif pair in KV_BACKEND_REWRITES:
        yield Hit(dtype.path, f"with kv-cache-dtype {dtype.value} SGLang replaces attention backend "
                  f"{backend} by {KV_BACKEND_REWRITES[pair]}",
                  f"set engine.kv_cache_dtype: fp8_e4m3 ({backend} serves it), or set engine.backends.attention: "
                  f"{KV_BACKEND_REWRITES[pair]}")
    elif dtype.value == "fp4_mx_block16" and ctx.checkpoint is not None:
        allowed = KV4_MLA_BACKENDS if ctx.checkpoint.mla else KV4_MHA_BACKENDS
        if backend not in allowed:
            yield Hit(dtype.path, f"an FP4 KV cache takes attention backend {', '.join(allowed)} "
                      f"here, not {backend}{how}", f"set engine.backends.attention: {allowed[0]}")


@rule("SC246", "warning", "a deprecated tool-call parser name",
      "SGLang replaces a deprecated --tool-call-parser name by its successor at start (handle_deprecated_args), "
      "with a warning; the profile should say what runs.",
      "chat: {tool_call_parser: glm45}", "chat: {tool_call_parser: glm}")
def deprecated_parser(ctx: Context) -> Iterator[Hit]:
    parser = ctx.profile.engine.chat.tool_call_parser
    if parser in DEPRECATED_TOOL_CALL_PARSERS:
        new = DEPRECATED_TOOL_CALL_PARSERS[parser]
        yield Hit(("engine", "chat", "tool_call_parser"),
                  f"tool_call_parser {parser} is deprecated in {ctx.profile.engine.catalog}; SGLang runs {new}",
                  f"write {new}")


@rule("SC247", "warning", "the committed config.json is readable",
      "model.config_json names the checkpoint's config.json that the config.json rules (SC209, SC242-SC245) and "
      "`check --engine` read; one that cannot be read leaves them unchecked.",
      "model: {config_json: missing.json}", "model: {config_json: dsv41-flash.config.json}")
def config_readable(ctx: Context) -> Iterator[Hit]:
    if ctx.checkpoint_problem:
        yield Hit(("model", "config_json"), f"{ctx.checkpoint_problem}: the config.json rules did not run",
                  "commit the checkpoint's config.json beside the profile and name it here")
