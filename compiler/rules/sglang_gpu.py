"""SC259-SC260: settings SGLang ties to a GPU generation or a quantization, from the catalog's hardware facts
(read from SGLang's source by spec/generators/sglang_hardware.py), judged against the profile's hardware.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.rules.sglang_model import run_quantization
from spark_compile.spec.catalog import GpuGate
from spark_compile.stages.launch_plan import ProfilePath

Written = tuple[Any, ProfilePath]


def written(ctx: Context, dest: str) -> Written | None:
    """The value the head rank's command line gives SGLang's setting ``dest``, and the profile path that wrote
    it; None when the profile leaves it to SGLang's default."""
    build = ctx.engine_catalog
    flag = build.by_dest(dest) if build is not None else None
    if flag is None or not ctx.plan.ranks:
        return None
    for option in ctx.plan.ranks[0].engine_options:
        if option.flag in flag.options:
            value: Any = option.values[0] if option.values else flag.action != "store_false"
            return value, option.source
        if flag.action == "boolean_optional" and option.flag in (f"--no-{o[2:]}" for o in flag.options):
            return False, option.source
    return None


def holds(ctx: Context, gate: GpuGate) -> ProfilePath | None:
    """Where the profile writes a setting ``gate`` judges, when every setting it reads has the value it names
    (written, or SGLang's default); None otherwise."""
    if gate.architectures and ctx.profile.model.architecture not in gate.architectures:
        return None
    build, at = ctx.engine_catalog, None
    for dest, value in gate.when:
        found = written(ctx, dest)
        if found is None:
            flag = build.by_dest(dest) if build is not None else None
            if flag is None or flag.default != value:
                return None
        elif found[0] is value if isinstance(value, bool) else str(found[0]) == str(value):
            at = at or found[1]
        else:
            return None
    return at


@rule("SC259", "error", "a setting the GPU generation serves",
      "SGLang refuses some settings outside the GPU generations their kernels exist for (e.g. --quantization "
      "nvfp4_online and the FlashInfer MegaMOE all-to-all only on SM100, GB10 being SM121): the catalog records "
      "each with SGLang's message, read from its source.",
      "model: {quantization: nvfp4_online}", "model: {quantization: modelopt_fp4}   # or leave it unset")
def gpu_generation(ctx: Context) -> Iterator[Hit]:
    build, major = ctx.engine_catalog, ctx.hardware.sm[0]
    for gate in build.gpu.requirements if build is not None else ():
        at = holds(ctx, gate)
        if at is None or major in gate.majors:
            continue
        settings = " with ".join(f"{d} {v}" for d, v in gate.when)
        yield Hit(at, f"{ctx.profile.hardware} is SM{major}{ctx.hardware.sm[1]}: SGLang refuses {settings} "
                  f"outside SM{'/SM'.join(f'{m}x' for m in gate.majors)}: {gate.message}",
                  "remove it (SGLang picks what this GPU runs)")


@rule("SC260", "warning", "a MoE runner the quantization allows",
      "With MXFP8 weights SGLang runs only some MoE runners and replaces any other by flashinfer_trtllm, with a "
      "warning (_moe_runner_backend_quant_constraints): the profile should say what runs.",
      "model: {quantization: mxfp8}\nengine: {backends: {moe_runner: triton}}",
      "engine: {backends: {moe_runner: flashinfer_trtllm}}   # or leave it unset")
def runner_for_quantization(ctx: Context) -> Iterator[Hit]:
    build, runner = ctx.engine_catalog, ctx.profile.engine.backends.moe_runner
    quant = run_quantization(ctx)
    if build is None or runner in (None, "auto") or quant is None or quant not in build.gpu.runners:
        return
    allowed, forced = build.gpu.runners[quant]
    if runner not in allowed:
        yield Hit(("engine", "backends", "moe_runner"),
                  f"with {quant} weights SGLang runs the MoE runner {forced}, not {runner} ({quant} runs "
                  f"{', '.join(allowed)})", f"set engine.backends.moe_runner: {forced}, or leave it unset")
