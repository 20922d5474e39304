"""SC259-SC260: settings SGLang ties to a GPU generation or a quantization, from the catalog's hardware facts
(read from SGLang's source by spec/generators/sglang_hardware.py), judged against the profile's hardware.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.rules.sglang_model import run_quantization
from spark_compile.spec.catalog import GpuGate
from spark_compile.stages.engine_options import TYPED_FLAGS
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


def _value(ctx: Context, dest: str) -> tuple[Any, str, ProfilePath | None] | None:
    """What SGLang reads for ``dest`` ("a|b": a, else b), which setting that is, and where the profile wrote it
    (None: SGLang's default); None when the catalog has no such flag."""
    build, defaults = ctx.engine_catalog, []
    for name in dest.split("|"):
        found = written(ctx, name)
        if found is not None and found[0] not in (None, ""):
            return found[0], name, found[1]
        flag = build.by_dest(name) if build is not None else None
        if flag is None:
            return None
        defaults.append(flag.default)
    return next((d for d in defaults if d), defaults[-1]), dest.split("|", maxsplit=1)[0], None


def holds(ctx: Context, gate: GpuGate) -> tuple[ProfilePath, str] | None:
    """Where the profile writes a setting ``gate`` judges and what it judges, when every setting it reads has
    (or, where it says so, has not) the value it names, written or SGLang's default; None otherwise."""
    if gate.architectures and ctx.profile.model.architecture not in gate.architectures:
        return None
    at, shown = None, []
    for dest, value, equal in gate.when:
        got = _value(ctx, dest)
        if got is None:
            return None
        bare = isinstance(value, bool) or value is None or got[0] is None
        if (got[0] is value if bare else str(got[0]) == str(value)) != equal:
            return None
        at = at or got[2]
        shown.append(f"{got[1]} {'' if equal else 'other than '}{value}")
    return (at, " with ".join(shown)) if at is not None else None


@rule("SC259", "error", "a setting the GPU generation serves",
      "SGLang refuses some settings outside the GPU generations their kernels exist for (e.g. --quantization "
      "nvfp4_online and the FlashInfer MegaMOE all-to-all only on SM100, GB10 being SM121), and some on them (the "
      "FlashInfer linear-attention decode on SM100+ without a bfloat16 SSM state): the catalog records each with "
      "SGLang's message, read from its source.",
      "model: {quantization: nvfp4_online}", "model: {quantization: modelopt_fp4}   # or leave it unset")
def gpu_generation(ctx: Context) -> Iterator[Hit]:
    build, major = ctx.engine_catalog, ctx.hardware.sm[0]
    gates = [(g, False) for g in build.gpu.requirements] + [(g, True) for g in build.gpu.refusals] if build else []
    for gate, refused_on in gates:
        found = holds(ctx, gate)
        if found is None or (major in gate.majors) != refused_on:
            continue
        majors = "/".join(f"SM{m}x" for m in gate.majors)
        yield Hit(found[0], f"{ctx.profile.hardware} is SM{major}{ctx.hardware.sm[1]}: SGLang refuses {found[1]} "
                  f"{'on' if refused_on else 'outside'} {majors}: {gate.message}", _hint(ctx, gate))


def _hint(ctx: Context, gate: GpuGate) -> str:
    """The setting a refusal asks for ("... requires --x v") where it names one, else the written one removed."""
    build = ctx.engine_catalog
    for dest, value, equal in gate.when:
        flag = build.by_dest(dest) if build is not None and not equal else None
        field = TYPED_FLAGS.get(flag.option) if flag is not None else None
        if flag is not None:
            where = ".".join(map(str, field)) if field else f"engine.args.{flag.option.removeprefix('--')}"
            return f"set {where}: {value}"
    return "remove it (SGLang picks what this GPU runs)"


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
