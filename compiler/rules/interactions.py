"""SC254-SC258, SC261-SC264: pairs of settings SGLang 0.5.23 judges together in _handle_eagle_family, _handle_dspark,
the data-parallel and KV cache hooks (speculative steps against top-k, draft tokens and the attention backend; a
standalone draft against attention DP and mixed chunked prefill; attention DP against the prefill chunk and against
dp 1; a DSPARK draft against the checkpoint; the hierarchical cache against disable-radix-cache), judged from the
profile without running SGLang.
"""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.rules.sglang_gpu import written
from spark_compile.rules.sglang_model import attention_backend
from spark_compile.spec.sglang_facts import (
    NO_MIXED_CHUNK_ALGORITHMS,
    PAGE_TREE_BACKENDS,
    STEP_ALGORITHMS,
    TOPK_ONE_BACKENDS,
)


@rule("SC254", "error", "num_steps with top-k or draft tokens",
      "SGLang asserts that speculative eagle_topk and num_draft_tokens are unset when num_steps is "
      "(_handle_eagle_family: it then chooses all three): setting one without num_steps stops it at start.",
      "speculative: {algorithm: EAGLE3, eagle_topk: 1}",
      "speculative: {algorithm: EAGLE3, num_steps: 3, eagle_topk: 1}")
def steps_with_topk(ctx: Context) -> Iterator[Hit]:
    spec = ctx.profile.engine.speculative
    if spec.algorithm not in STEP_ALGORITHMS or spec.num_steps is not None:
        return
    written = [name for name in ("eagle_topk", "num_draft_tokens") if getattr(spec, name) is not None]
    if written:
        steps = spec.num_draft_tokens - 1 if spec.num_draft_tokens and spec.num_draft_tokens > 1 else 3
        yield Hit(("engine", "speculative", written[0]),
                  f"{' and '.join(written)} set without num_steps: SGLang asserts they are unset when num_steps is",
                  f"set engine.speculative.num_steps: {steps}")


@rule("SC255", "error", "top-k the attention backend serves",
      "SGLang refuses speculative eagle_topk above 1 with the trtllm_mha attention backend, and with a KV page "
      "size above 1 on a backend other than flashinfer, fa3 or triton (_handle_eagle_family).",
      "engine: {backends: {attention: trtllm_mha}, speculative: {algorithm: EAGLE3, num_steps: 3, eagle_topk: 4}}",
      "engine: {backends: {attention: trtllm_mha}, speculative: {algorithm: EAGLE3, num_steps: 3, eagle_topk: 1}}")
def topk_backend(ctx: Context) -> Iterator[Hit]:
    eng = ctx.profile.engine
    spec, (backend, how) = eng.speculative, attention_backend(ctx)
    if spec.algorithm not in STEP_ALGORITHMS or spec.eagle_topk is None or spec.eagle_topk <= 1 or backend is None:
        return
    page = eng.page_size or (ctx.family.page_size if ctx.family else None) or 1
    if backend in TOPK_ONE_BACKENDS:
        why = f"attention backend {backend}{how} takes eagle_topk 1"
    elif page > 1 and backend not in PAGE_TREE_BACKENDS:
        why = (f"with page size {page} eagle_topk above 1 runs only on {', '.join(PAGE_TREE_BACKENDS)}, "
               f"not {backend}{how}")
    else:
        return
    # With top-k 1 SGLang verifies num_steps + 1 tokens (SC240): the hint writes that count with it.
    tokens = f" and engine.speculative.num_draft_tokens: {spec.num_steps + 1}" \
        if spec.num_steps is not None and spec.num_draft_tokens is not None else ""
    yield Hit(("engine", "speculative", "eagle_topk"), f"{why}: SGLang refuses eagle_topk {spec.eagle_topk}",
              f"set engine.speculative.eagle_topk: 1{tokens}")


@rule("SC256", "error", "a standalone draft without attention DP",
      "SGLang refuses STANDALONE speculative decoding with attention data parallelism (_handle_eagle_family).",
      "engine: {parallel: {dp: 2, dp_attention: true}, speculative: {algorithm: STANDALONE}}",
      "engine: {speculative: {algorithm: STANDALONE}}")
def standalone_dp_attention(ctx: Context) -> Iterator[Hit]:
    eng = ctx.profile.engine
    if eng.speculative.algorithm == "STANDALONE" and eng.parallel.dp_attention and (eng.parallel.dp or 1) > 1:
        yield Hit(("engine", "parallel", "dp_attention"),
                  "SGLang refuses a STANDALONE draft with attention data parallelism",
                  "remove engine.parallel.dp_attention and engine.parallel.dp (the standalone draft runs "
                  "without attention DP)")


@rule("SC257", "error", "attention DP that divides tp",
      "--enable-dp-attention with --dp-size N runs N attention-DP groups (SGLang's --attn-dp-size); SGLang asserts "
      "that tp is a multiple of N (_handle_data_parallelism).",
      "engine: {parallel: {tp: 4, dp: 3, dp_attention: true}}",
      "engine: {parallel: {tp: 4, dp: 2, dp_attention: true}}")
def dp_attention_divides_tp(ctx: Context) -> Iterator[Hit]:
    par = ctx.profile.engine.parallel
    tp, dp = par.tp or 1, par.dp or 1
    if par.dp_attention and dp > 1 and tp % dp:
        best = max(d for d in range(1, tp + 1) if tp % d == 0 and d <= dp)
        yield Hit(("engine", "parallel", "dp"), f"attention DP over dp {dp} does not divide tp {tp}: SGLang asserts it",
                  f"set engine.parallel.dp: {best}" if best > 1 else "set engine.parallel.dp: " + str(tp))


@rule("SC258", "warning", "the prefill chunk attention DP divides",
      "With --enable-dp-attention and --dp-size N SGLang divides --chunked-prefill-size by N, each attention-DP "
      "rank prefilling its share (_handle_data_parallelism, with a log line): the profile's chunk is the total.",
      "engine: {parallel: {dp: 2, dp_attention: true}, limits: {chunked_prefill_size: 4096}}",
      "engine: {parallel: {dp: 2, dp_attention: true}, limits: {chunked_prefill_size: 8192}}   # 4096 per rank")
def chunk_per_dp_rank(ctx: Context) -> Iterator[Hit]:
    par, chunk = ctx.profile.engine.parallel, ctx.profile.engine.limits.chunked_prefill_size
    dp = par.dp or 1
    if par.dp_attention and dp > 1 and chunk is not None and chunk > 0:
        yield Hit(("engine", "limits", "chunked_prefill_size"),
                  f"with attention DP over dp {dp} SGLang runs chunked_prefill_size {chunk} as {chunk // dp} per "
                  "attention-DP rank", f"the value is the total over the ranks: {chunk} tokens per rank is "
                  f"chunked_prefill_size {chunk * dp}")


@rule("SC261", "error", "the hierarchical cache keeps the radix cache",
      "SGLang refuses --enable-hierarchical-cache with --disable-radix-cache (kv_cache_hook: the two are mutually "
      "exclusive): the hierarchical cache is the radix cache extended into host memory.",
      "engine: {args: {enable-hierarchical-cache: true, disable-radix-cache: true}}",
      "engine: {args: {enable-hierarchical-cache: true}}")
def hicache_radix(ctx: Context) -> Iterator[Hit]:
    hicache, radix_off = written(ctx, "enable_hierarchical_cache"), written(ctx, "disable_radix_cache")
    if hicache and radix_off and hicache[0] is True and radix_off[0] is True:
        yield Hit(radix_off[1], "SGLang refuses disable-radix-cache with enable-hierarchical-cache: the two are "
                  "mutually exclusive", "remove engine.args.disable-radix-cache (the hierarchical cache needs the "
                  "radix cache)")


@rule("SC262", "warning", "mixed chunked prefill the draft keeps",
      "SGLang turns --enable-mixed-chunk off for STANDALONE and NGRAM speculative decoding (_handle_eagle_family, "
      "_handle_ngram: their workers have no resume path for a mixed step), with a log line.",
      "engine: {speculative: {algorithm: STANDALONE}, args: {enable-mixed-chunk: true}}",
      "engine: {speculative: {algorithm: STANDALONE}}")
def mixed_chunk_draft(ctx: Context) -> Iterator[Hit]:
    algorithm, mixed = ctx.profile.engine.speculative.algorithm, written(ctx, "enable_mixed_chunk")
    if algorithm in NO_MIXED_CHUNK_ALGORITHMS and mixed and mixed[0] is True:
        yield Hit(mixed[1], f"SGLang runs {algorithm} speculative decoding without mixed chunked prefill: it turns "
                  "enable-mixed-chunk off", "remove engine.args.enable-mixed-chunk (the draft keeps running)")


# The config.json keys by which SGLang knows a checkpoint bundles its DSpark draft head
# (dspark_config.checkpoint_bundles_dspark_draft).
DSPARK_BUNDLE_KEYS = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")


@rule("SC263", "error", "a DSPARK draft SGLang can find",
      "Without --speculative-draft-model-path SGLang's _handle_dspark takes the draft from the target checkpoint: "
      "its config.json's dspark_* keys (a bundled draft head) or a dspark/ subfolder with its own config.json; "
      "with neither it refuses to start.",
      "engine: {speculative: {algorithm: DSPARK}}   # a Qwen3 checkpoint, no draft",
      "engine: {speculative: {algorithm: DSPARK, draft: {repo: /srv/models/qwen3-dspark}}}")
def dspark_draft_found(ctx: Context) -> Iterator[Hit]:
    spec, config, build = ctx.profile.engine.speculative, ctx.text_model_config, ctx.engine_catalog
    if spec.algorithm != "DSPARK" or spec.draft is not None or config is None:
        return
    if build is None or build.by_dest("speculative_dspark_block_size") is None:
        return  # a build without DSpark (SC304 says so)
    if not any(config.get(key) is not None for key in DSPARK_BUNDLE_KEYS):
        yield Hit(("engine", "speculative", "algorithm"), "SGLang refuses DSPARK here: model.config_json carries no "
                  "bundled DSpark draft (no dspark_* key) and no engine.speculative.draft names one (\"DSpark dense "
                  "speculative decoding requires setting --speculative-draft-model-path\")",
                  "name the DSpark draft's host directory in engine.speculative.draft.repo (a draft shipped as "
                  "the checkpoint's dspark/ subfolder: that folder), or remove engine.speculative")


@rule("SC264", "warning", "attention DP wider than one rank",
      "In builds with --attn-dp-size SGLang turns --enable-dp-attention into --attn-dp-size of the dp size and "
      "--dp-size 1 (handle_deprecated_dp_attention): at dp 1 that is attention DP of width 1, which is none.",
      "engine: {parallel: {tp: 4, dp_attention: true}}", "engine: {parallel: {tp: 4, dp: 4, dp_attention: true}}")
def dp_attention_width(ctx: Context) -> Iterator[Hit]:
    par, build = ctx.profile.engine.parallel, ctx.engine_catalog
    if par.dp_attention and (par.dp or 1) == 1 and build is not None and build.by_dest("attn_dp_size"):
        tp = par.tp or 1
        wider = f"set engine.parallel.dp: {tp} (the attention-DP width: a divisor of tp {tp}), or " if tp > 1 else ""
        yield Hit(("engine", "parallel", "dp_attention"), f"{build.name} runs no attention DP at dp 1: it turns "
                  "enable-dp-attention into attn-dp-size 1", wider + "remove engine.parallel.dp_attention (it does "
                  "nothing at dp 1)")
