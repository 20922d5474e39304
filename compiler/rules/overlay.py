"""SC22x: the overlay's flags against each other and against the engine they patch."""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.overlay.registry import FLAGS, FLAGS_BY_NAME, Flag
from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.spec.envfile import env_text
from spark_compile.spec.nccl_presets import NCCL_FABRIC_TAIL, NCCL_PRESETS
from spark_compile.spec.overlay_types import derived_engram_max_ids, flag_value


def _effective(ctx: Context, flag: Flag) -> str | None:
    """The flag's value in force: as the plan writes it (rank 0), else the hook's default."""
    if flag.source == "plan":
        return ctx.plan.ranks[0].env.get(flag.name, flag.default) if ctx.plan.ranks else flag.default
    value = flag_value(ctx.profile.overlay, flag.key)
    return flag.default if value is None else env_text(value)


def _is_set(ctx: Context, flag: Flag) -> bool:
    """Whether the profile sets the flag (flags the plan writes are never set in the profile)."""
    return flag.source != "plan" and flag_value(ctx.profile.overlay, flag.key) is not None


@rule("SC220", "error", "overlay flag needs another flag",
      "Some flags only act with another in force: SPARK_LATE_TAIL_SKIP_ALL needs SPARK_LATE_TAIL_SKIP, "
      "SPARK_LOOKUP_FUSED_C2 needs SPARK_LOOKUP_NARROW_SLOTS, and every wide-mode flag needs lookup drafting "
      "on in wide mode. Set without it, the flag silently does nothing.",
      "overlay: {late_tail_skip_all: true}", "overlay: {late_tail_skip: true, late_tail_skip_all: true}")
def flag_requirements(ctx: Context) -> Iterator[Hit]:
    for flag in FLAGS:
        active = _is_set(ctx, flag) and (flag.kind != "switch" or _effective(ctx, flag) == "1")
        if not active:
            continue
        for needed, value in flag.requires:
            other = FLAGS_BY_NAME[needed]
            if _effective(ctx, other) != value:
                yield Hit(("overlay", flag.key),
                          f"{flag.name} needs {needed}={value} (it is {_effective(ctx, other)})",
                          f"set overlay.{other.key}: {'true' if value == '1' else value}", at_key=True)


@rule("SC221", "error", "the MXFP8 route needs the block-scaled FP8 path",
      "SPARK_MXFP8_BACKEND=b12x wraps the block-scaled GEMM path that --fp8-gemm-backend flashinfer_cutlass "
      "selects; with any other backend the hook has nothing to wrap.",
      "overlay: {mxfp8_backend: b12x}\nengine: {backends: {fp8_gemm: triton}}",
      "overlay: {mxfp8_backend: b12x}\nengine: {backends: {fp8_gemm: flashinfer_cutlass}}")
def mxfp8_needs_cutlass(ctx: Context) -> Iterator[Hit]:
    backend = ctx.profile.engine.backends.fp8_gemm
    if ctx.profile.overlay.mxfp8_backend == "b12x" and backend != "flashinfer_cutlass":
        yield Hit(("engine", "backends", "fp8_gemm") if backend else ("overlay", "mxfp8_backend"),
                  f"SPARK_MXFP8_BACKEND=b12x needs --fp8-gemm-backend flashinfer_cutlass, got {backend or 'none'}",
                  "set engine.backends.fp8_gemm: flashinfer_cutlass")


@rule("SC222", "error", "lookup drafting rides on DSPARK",
      "Prompt-lookup drafting extends DSpark's draft block; without DSPARK the hook has no block to extend.",
      "overlay: {lookup_draft: true}\nengine: {speculative: {algorithm: EAGLE}}",
      "overlay: {lookup_draft: true}\nengine: {speculative: {algorithm: DSPARK, dspark_block_size: 15}}")
def lookup_needs_dspark(ctx: Context) -> Iterator[Hit]:
    algo = ctx.profile.engine.speculative.algorithm
    if ctx.profile.overlay.lookup_draft and algo != "DSPARK":
        yield Hit(("overlay", "lookup_draft"), f"lookup drafting needs DSPARK, the algorithm is {algo}",
                  "set engine.speculative.algorithm: DSPARK or turn lookup_draft off")


# Lookup-wide mode as 1.7 ran it (peer launcher facts, section 5; the deployment document on 1.7): DSpark
# drafts its 5 tokens, a row continuing an earlier match verifies up to 10 lookup tokens more, so the verify
# block is 15 wide, and only those rows verify it: SGLang's compact ragged verify.
WIDE_BLOCK_SIZE = 15
WIDE_VERIFY_MODE = "compact"


@rule("SC226", "error", "lookup-wide mode needs compact ragged verify and its block size",
      "Wide mode verifies a lookup continuation past DSpark's block: the block must hold DSpark's 5 tokens plus "
      f"the lookup's 10 (dspark_block_size {WIDE_BLOCK_SIZE}) and only the rows that carry one may verify it "
      f"(SGLANG_RAGGED_VERIFY_MODE={WIDE_VERIFY_MODE}), as 1.7 ran it. Turning wide mode on is these four "
      "settings together.",
      "overlay: {lookup_draft: true, lookup_mode: wide}",
      "overlay: {lookup_draft: true, lookup_mode: wide}\nengine: {speculative: {dspark_block_size: 15}, "
      "env: {SGLANG_RAGGED_VERIFY_MODE: compact}}")
def wide_mode_settings(ctx: Context) -> Iterator[Hit]:
    overlay, engine = ctx.profile.overlay, ctx.profile.engine
    if not (overlay.lookup_draft and overlay.lookup_mode == "wide"):
        return
    mode = engine.env.get("SGLANG_RAGGED_VERIFY_MODE")
    if mode != WIDE_VERIFY_MODE:
        yield Hit(("overlay", "lookup_mode"),
                  f"lookup-wide mode needs SGLANG_RAGGED_VERIFY_MODE={WIDE_VERIFY_MODE} (it is {mode or 'unset'})",
                  f"add engine.env.SGLANG_RAGGED_VERIFY_MODE: {WIDE_VERIFY_MODE} (only rows with a lookup "
                  "continuation verify the wide block)", at_key=True)
    block = engine.speculative.dspark_block_size
    if block != WIDE_BLOCK_SIZE:
        yield Hit(("overlay", "lookup_mode"),
                  f"lookup-wide mode verifies DSpark's block plus the lookup's continuation, so dspark_block_size "
                  f"must be {WIDE_BLOCK_SIZE} (it is {block})",
                  f"set engine.speculative.dspark_block_size: {WIDE_BLOCK_SIZE} (DSpark's 5 tokens plus up to 10 "
                  "of the lookup's, as 1.7 ran it)", at_key=True)


@rule("SC223", "error", "overlay flags need the overlay's master switch",
      "The overlay arms its hooks only when SPARK_ENGRAM_DIR is set, which the plan does for models with "
      "Engram tables. Flags on a profile without model.engram would be ignored: stock SGLang would run.",
      "model: {engram: null}\noverlay: {roce_ar: true}", "model: {engram: {tables: {...}, local_dir: ...}}")
def master_switch(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.model.engram is not None:
        return
    for flag in FLAGS:
        if _is_set(ctx, flag):
            yield Hit(("overlay", flag.key), f"{flag.name} is set but the overlay is off (model.engram unset)",
                      "remove overlay (every flag goes with it), or add model.engram", at_key=True)
            return


@rule("SC224", "warning", "Engram id batch pinned below the derived size",
      "SPARK_ENGRAM_MAX_IDS is derived as max(chunked prefill, 8 x max running requests) x 32; a smaller pin "
      "splits every large gather.", "overlay: {engram_max_ids: 1024}", "(leave engram_max_ids unset)")
def max_ids_pin(ctx: Context) -> Iterator[Hit]:
    pinned = ctx.profile.overlay.engram_max_ids
    limits = ctx.profile.engine.limits
    if limits.chunked_prefill_size is None or limits.max_running_requests is None:
        return
    derived = derived_engram_max_ids(limits.chunked_prefill_size, limits.max_running_requests)
    if pinned is not None and pinned < derived:
        yield Hit(("overlay", "engram_max_ids"), f"engram_max_ids {pinned} is below the derived {derived}",
                  "remove the pin")


@rule("SC225", "warning", "NCCL extra overrides the preset",
      "nccl.extra replaces a value the preset or the fabric sets; say so with a different preset, or accept the "
      "warning knowingly.", "nccl: {preset: trim, extra: {NCCL_MAX_NCHANNELS: '4'}}",
      "nccl: {preset: default}")
def extra_overrides_preset(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.nccl.preset == "none":
        return  # nothing to override: NCCL's own defaults
    preset = dict((*NCCL_FABRIC_TAIL, *NCCL_PRESETS[ctx.profile.nccl.preset]))
    preset["NCCL_DEBUG"] = ctx.profile.nccl.debug
    for name, value in ctx.profile.nccl.extra.items():
        if name == "NCCL_DEBUG" and str(value) != preset[name]:
            yield Hit(("nccl", "extra", name), f"NCCL_DEBUG={value} overrides nccl.debug's {preset[name]}",
                      f"set nccl.debug: {value} instead" if value in ("WARN", "INFO", "TRACE", "VERSION")
                      else "set nccl.debug (WARN, INFO, TRACE, VERSION or off) instead")
        elif name in preset and str(value) != preset[name]:
            yield Hit(("nccl", "extra", name),
                      f"{name}={value} overrides {ctx.profile.nccl.preset}'s {preset[name]}",
                      "remove it to keep the preset's value, or choose the nccl.preset that carries yours")
