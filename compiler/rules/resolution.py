"""SC217-SC219: what SGLang's resolution silently rewrites or refuses on the supported hardware, as plain rules;
SC6xx: the findings of `check --engine`, which runs that resolution itself (compiler/engine/check.py).

Each plain rule here has a test that runs the same profile through `check --engine` and shows the engine
and the rule agree (tests/engine/test_engine_rules_agree.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.rules.registry import Context, Hit, define, rule


def _known_choice(ctx: Context, option: str, value: str) -> bool:
    """The selected build takes the value (one it does not is SC304's finding, not a rewrite)."""
    flag = ctx.engine_catalog.lookup(option) if ctx.engine_catalog else None
    return flag is not None and flag.check_value(value) is None


def _accepted(ctx: Context, flag: str, value: object) -> bool:
    """The profile accepts SGLang resolving --flag to value (engine.accept_rewrites)."""
    accepted = ctx.profile.engine.accept_rewrites.get(flag)
    return accepted is not None and str(accepted) == str(value)


@rule("SC217", "error", "the model family's attention backend",
      "SGLang 0.5.23 sets the attention backend of a DeepSeek-V4 model (DeepseekV4ForCausalLM) to dsv4 whatever "
      "--attention-backend says (_deepseek_v4_overrides), without a warning: any other value is silently replaced.",
      "engine: {backends: {attention: flashinfer}}", "engine: {backends: {attention: dsv4}}")
def family_attention_backend(ctx: Context) -> Iterator[Hit]:
    family = ctx.family
    written = ctx.profile.engine.backends.attention
    if family and family.attention_backend and written not in (None, family.attention_backend) \
            and _known_choice(ctx, "--attention-backend", written) \
            and not _accepted(ctx, "attention-backend", family.attention_backend):
        yield Hit(("engine", "backends", "attention"),
                  f"{family.architecture} always runs attention backend {family.attention_backend}; SGLang would "
                  f"replace {written} with it", f"write {family.attention_backend}, or leave it unset")


@rule("SC218", "error", "the model family's KV page size",
      "SGLang 0.5.23 sets page_size 256 for a DeepSeek-V4 model on CUDA (_deepseek_v4_overrides), replacing any "
      "--page-size without a warning.", "engine: {page_size: 64}", "(leave page_size out)")
def family_page_size(ctx: Context) -> Iterator[Hit]:
    family = ctx.family
    written = ctx.profile.engine.page_size
    if family and family.page_size and written is not None and written != family.page_size \
            and not _accepted(ctx, "page-size", family.page_size):
        yield Hit(("engine", "page_size"),
                  f"{family.architecture} runs page size {family.page_size}; SGLang would replace {written} with it",
                  "remove page_size (or write the family's own)")


@rule("SC219", "error", "the model family's KV cache dtypes",
      "SGLang 0.5.23 accepts only fp8_e4m3 and bfloat16 (or auto, which it resolves to fp8_e4m3) as the KV cache "
      "dtype of a DeepSeek-V4 model, and stops at boot on any other.",
      "engine: {kv_cache_dtype: fp8_e5m2}", "engine: {kv_cache_dtype: fp8_e4m3}")
def family_kv_dtype(ctx: Context) -> Iterator[Hit]:
    family = ctx.family
    written = ctx.profile.engine.kv_cache_dtype
    if family and family.kv_cache_dtypes and written is not None and written not in ("auto", *family.kv_cache_dtypes):
        yield Hit(("engine", "kv_cache_dtype"),
                  f"{family.architecture} takes KV cache dtype {' or '.join(family.kv_cache_dtypes)}, not {written}",
                  f"write {family.kv_cache_dtypes[0]}")


define("SC601", "error", "SGLang rewrites a value the plan wrote",
       "`check --engine` ran SGLang's own resolution (ServerArgs.resolve_once, check_server_args) on every rank's "
       "argv with the profile's hardware simulated, and SGLang resolved a flag the plan wrote to another value: "
       "the profile, its diff and a test window's verdict would describe something that does not run. Write the "
       "resolved value, or accept this rewrite explicitly with engine.accept_rewrites.",
       "engine: {page_size: 64}",
       "engine: {page_size: 64, accept_rewrites: {page-size: 256}}   # or leave page_size out")
define("SC602", "error", "SGLang refuses the arguments at boot",
       "SGLang's resolution or its check_server_args raised on a rank's argv: the engine would stop at start with "
       "this message.", "engine: {speculative: {algorithm: DSPARK, dspark_block_size: 5, num_draft_tokens: 5}}",
       "engine: {speculative: {algorithm: DSPARK, dspark_block_size: 5}}")
define("SC603", "warning", "an engine check could not run here",
       "A part of `check --engine` could not run on this machine (no engine venv, another SGLang build than "
       "engine.catalog selects, no config.json for the model, or a step that needs a real GPU or a CUDA-only "
       "package); the finding says which and why. Nothing is skipped silently.",
       "model: {}   # no config_json and no checkpoint on this machine",
       "model: {config_json: dsv41-flash.config.json}")
define("SC604", "warning", "an accepted rewrite that does not happen",
       "engine.accept_rewrites names a value SGLang no longer resolves the flag to: the acceptance is stale.",
       "engine: {accept_rewrites: {page-size: 128}}", "engine: {accept_rewrites: {page-size: 256}}")
