"""SC3xx: engine flags and environment variables against catalogs taken from the real packages."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from spark_compile.overlay.registry import FLAGS_BY_NAME
from spark_compile.rules.registry import GID_VARIABLES, Context, Hit, env_settings, gid_hint, rule
from spark_compile.spec.catalog import (
    EngineFlag,
    EnvCatalog,
    available_engine_catalogs,
    nccl_catalog,
)
from spark_compile.spec.suggest import did_you_mean

B12X_NAMES = ("B12X_ROCE_HCA", "B12X_ROCE_GID_INDEX", "B12X_ROCE_SPIN_LIMIT", "B12X_ROCE_CACHE_DIR")


SUGGESTION_BUDGET = 64  # unknown names per rule and profile that get a "did you mean" (difflib: ~10 ms a name)


def _budgeted(suggest: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """``suggest`` for the first SUGGESTION_BUDGET names, then no suggestion: thousands of unknown names
    (a pasted environment) must not cost minutes; the finding on each stays."""
    left = [SUGGESTION_BUDGET]

    def run(name: str) -> list[str]:
        left[0] -= 1
        return suggest(name) if left[0] >= 0 else []

    return run


def _suggestion(candidates: list[str]) -> str:
    return f"did you mean {candidates[0]!r}?" if candidates else ""


@rule("SC301", "error", "unknown engine catalog",
      "engine.catalog names the flag catalog (spec/catalogs/<name>.json) the image's SGLang is checked "
      "against; regenerate one with `spark-compile catalog sglang`.",
      "engine: {catalog: sglang-0.5.99}", "engine: {catalog: sglang-0.5.23}")
def known_catalog(ctx: Context) -> Iterator[Hit]:
    if ctx.engine_catalog is None:
        known = available_engine_catalogs()
        yield Hit(("engine", "catalog"), f"no engine catalog {ctx.profile.engine.catalog!r}; known: "
                  f"{', '.join(known)}", did_you_mean(ctx.profile.engine.catalog, known))


@rule("SC302", "error", "unknown engine flag",
      "A flag the catalog's SGLang does not have stops the engine at start (argparse exits). A flag the image's "
      "own build adds (a patched SGLang) is allowed by naming it in engine.catalog_extra.flags.",
      "engine: {args: {enable-decoder-swa-bounded-replays: true}}",
      "engine: {args: {enable-decoder-swa-bounded-replay: true}}")
def unknown_flag(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None:
        return
    suggest = _budgeted(catalog.suggest)
    extra = set(ctx.profile.engine.catalog_extra.flags)
    for name, value in ctx.profile.engine.args.items():
        option = f"--{name}"
        if name in extra or catalog.lookup(option) or catalog.abbreviation_of(option):
            continue
        if value is False and catalog.lookup(f"--{name.removeprefix('no-')}"):
            continue
        yield Hit(("engine", "args", name), f"{catalog.name} has no flag {option}",
                  _suggestion([s.removeprefix("--") for s in suggest(option)]), at_key=True)


@rule("SC303", "error", "abbreviated engine flag",
      "argparse expands a unique prefix (`--tp` for `--tp-size`), but a newer SGLang adding any flag with the "
      "same prefix makes it ambiguous and the boot fails. Write the full name.",
      "engine: {args: {enable-decoder-swa: true}}", "engine: {args: {enable-decoder-swa-bounded-replay: true}}")
def abbreviated_flag(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None:
        return
    for name in ctx.profile.engine.args:
        full = None if name in ctx.profile.engine.catalog_extra.flags else catalog.abbreviation_of(f"--{name}")
        if full is not None:
            long_name = next(o for o in full.options if o.startswith(f"--{name}"))
            yield Hit(("engine", "args", name), f"--{name} abbreviates {long_name}",
                      f"write {long_name.removeprefix('--')}", at_key=True)


def _values_problem(flag: EngineFlag, option: str, values: list[str]) -> str | None:
    if not flag.takes_value:
        return f"{option} is an on/off switch and takes no value" if values else None
    if not values:
        return f"{option} needs a value"
    if len(values) > 1 and flag.nargs in (None, "?"):
        return f"{option} takes one value, got {len(values)}"
    return next((p for p in (flag.check_value(v) for v in values) if p), None)


@rule("SC313", "error", "a flag the selected build does not have",
      "The plan writes each typed setting in the spelling of the SGLang build engine.catalog selects (CUDA graphs "
      "off is --disable-cuda-graph in 0.5.10, --cuda-graph-backend-decode/prefill disabled in 0.5.23); a setting "
      "that build has no flag for at all would stop the engine at start.",
      "engine: {catalog: sglang-0.5.10.post1, speculative: {algorithm: DSPARK, dspark_block_size: 5}}",
      "engine: {catalog: sglang-0.5.23, speculative: {algorithm: DSPARK, dspark_block_size: 5}}")
def typed_flag_known(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None or not ctx.plan.ranks:
        return
    for option in ctx.plan.ranks[0].engine_options:
        if option.source[:2] == ("engine", "args") or option.flag == "--config" or catalog.lookup(option.flag):
            continue  # engine.args flags are SC302's; --config carries the secrets file
        yield Hit(option.source, f"{catalog.name} has no flag {option.flag}",
                  f"pick a build that has it in engine.catalog (known: {', '.join(available_engine_catalogs())}), "
                  "or drop the setting")


@rule("SC304", "error", "engine flag value not accepted",
      "The value is not of the flag's type or not among its choices in the catalog's SGLang.",
      "engine: {backends: {attention: dsv5}}", "engine: {backends: {attention: dsv4}}")
def flag_values(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None or not ctx.plan.ranks:
        return
    for option in ctx.plan.ranks[0].engine_options:
        flag = catalog.lookup(option.flag) or catalog.abbreviation_of(option.flag)
        if flag is None:
            continue
        extra = ctx.profile.engine.catalog_extra.values.get(option.flag.removeprefix("--"), [])
        values = [v for v in option.values if v not in extra] if option.values else []
        if option.values and not values:
            continue  # every value is one the image's own build takes (SC330 says so)
        problem = _values_problem(flag, option.flag, values)
        if problem:
            hint = did_you_mean(values[0], [str(c) for c in flag.choices]) if flag.choices and values else ""
            hint = hint or f"write a value {catalog.name} takes, or select a build that takes it in engine.catalog"
            yield Hit(option.source, problem.rstrip("."), hint)


@rule("SC330", "warning", "a value only the image's own build takes",
      "engine.catalog_extra.values allows a value the selected catalog's SGLang refuses (a MoE runner or an "
      "attention backend a patched build adds): the engine boots only if the image's own build takes it.",
      "engine: {backends: {moe_runner: b12x}}",
      "engine: {backends: {moe_runner: b12x}, catalog_extra: {values: {moe-runner-backend: [b12x]}}}")
def image_values(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None or not ctx.plan.ranks:
        return
    written = {o.flag.removeprefix("--"): o.values for o in ctx.plan.ranks[0].engine_options}
    for name, values in ctx.profile.engine.catalog_extra.values.items():
        flag = catalog.lookup(f"--{name}")
        for value in values:
            if name not in written or value not in written[name]:
                yield Hit(("engine", "catalog_extra", "values", name), f"--{name} {value} is allowed here but the "
                          "profile does not write it", f"remove {value} from engine.catalog_extra.values.{name}",
                          at_key=True)
            elif flag is None or flag.check_value(value) is not None:
                yield Hit(("engine", "catalog_extra", "values", name), f"--{name} {value} is not a value "
                          f"{catalog.name} takes; allowed for {ctx.profile.engine.image}'s own build",
                          f"check that {ctx.profile.engine.image} takes it (`spark-compile catalog sglang --source` "
                          "of its SGLang source builds its catalog)", at_key=True)


@rule("SC305", "warning", "deprecated engine flag",
      "The catalog's SGLang marks a flag engine.args writes deprecated; use its replacement before it is removed. "
      "A flag the plan writes from a typed field is the compiler's spelling, not the profile's: not reported.",
      "engine: {args: {disable-cuda-graph: true}}", "engine: {cuda_graph: {enabled: false}}")
def deprecated_flag(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None or not ctx.plan.ranks:
        return
    for option in ctx.plan.ranks[0].engine_options:
        flag = catalog.lookup(option.flag)
        if flag is not None and flag.deprecated and option.source[:2] == ("engine", "args"):
            yield Hit(option.source, f"{option.flag} is deprecated in {catalog.name}",
                      f"use {flag.replacement}" if flag.replacement else "see SGLang's release notes", at_key=True)


@rule("SC306", "error", "false on a switch without a --no- form",
      "engine.args writes `false` as --no-<flag>, which only BooleanOptionalAction flags have.",
      "engine: {args: {trust-remote-code: false}}", "(leave the key out)")
def false_switch(ctx: Context) -> Iterator[Hit]:
    catalog = ctx.engine_catalog
    if catalog is None:
        return
    for name, value in ctx.profile.engine.args.items():
        flag = catalog.lookup(f"--{name}")
        if value is False and flag is not None and catalog.lookup(f"--no-{name}") is None:
            yield Hit(("engine", "args", name), f"--{name} has no --no-{name} form",
                      "remove the key to leave the flag off")


@rule("SC307", "error", "unknown SGLANG_* variable",
      "SGLang ignores a variable it does not read, so a typo silently keeps the default. Variables of a newer "
      "or patched image may be missing from the catalog: check the name against the image and name it in "
      "engine.catalog_extra.env.",
      "engine: {env: {SGLANG_FLASHINFER_MOE_FUSED_FINALISE: '0'}}",
      "engine: {env: {SGLANG_FLASHINFER_MOE_FUSED_FINALIZE: '0'}}")
def unknown_sglang_env(ctx: Context) -> Iterator[Hit]:
    settings = list(_sglang_env(ctx))
    catalog = ctx.env_catalog if settings else None  # read only for a profile that sets such a variable
    if catalog is None:
        return
    suggest = _budgeted(catalog.suggest)
    for path, name, _ in settings:
        if catalog.lookup(name) is None:
            fix = _suggestion(suggest(name)) or f"remove {name}: this SGLang build ignores it"
            yield Hit(path, f"{catalog_name(ctx)} does not read {name}",
                      f"{fix}, or add {name} to engine.catalog_extra.env if the image's own build reads it",
                      at_key=True)


def _sglang_env(ctx: Context) -> Iterator[tuple[tuple[str | int, ...], str, object]]:
    """The SGLANG_* variables the profile sets (engine.env, a node's env), but those the image's own build
    knows beyond the catalog (engine.catalog_extra.env)."""
    extra = ctx.profile.engine.catalog_extra.env
    yield from (item for item in env_settings(ctx) if item[1].startswith("SGLANG_") and item[1] not in extra)


@rule("SC308", "error", "SGLANG_* value of the wrong type",
      "SGLang warns and falls back to the default on a value it cannot parse; the compiler refuses it.",
      "engine: {env: {SGLANG_WATCHDOG_TIMEOUT: ten}}", "engine: {env: {SGLANG_WATCHDOG_TIMEOUT: '10'}}")
def sglang_env_values(ctx: Context) -> Iterator[Hit]:
    settings = list(_sglang_env(ctx))
    catalog = ctx.env_catalog if settings else None
    if catalog is None:
        return
    for path, name, value in settings:
        problem = catalog.check_value(name, str(value)) if catalog.lookup(name) else None
        if problem:
            yield Hit(path, problem.rstrip("."), _env_hint(catalog, name))


_KIND_EXAMPLES = {"bool": "'1' or '0'", "int": "a whole number such as '10'", "float": "a number such as '0.5'"}


def _env_hint(catalog: EnvCatalog, name: str) -> str:
    var = catalog.lookup(name)
    example = _KIND_EXAMPLES.get(var.kind if var else "", "a value of the type it reads")
    return f"write {example}" + (f" (its default is {var.default!r})" if var and var.default is not None else "")


def catalog_name(ctx: Context) -> str:
    """The engine catalog's name, for messages."""
    return ctx.profile.engine.catalog


@rule("SC309", "warning", "unknown NCCL variable",
      "NCCL reads fixed names and ignores any other without a word: a misspelt NCCL_* does nothing (a warning: "
      "NCCL starts all the same).",
      "nccl: {extra: {NCCL_IB_GID_INDX: '3'}}", "nccl: {extra: {NCCL_DEBUG: WARN}}")
def nccl_names(ctx: Context) -> Iterator[Hit]:
    settings = list(_nccl_settings(ctx))
    if not settings:
        return  # the catalog is not even read: most profiles set NCCL only through nccl.preset
    catalog = nccl_catalog()
    suggest = _budgeted(catalog.suggest)
    for path, name, value in settings:
        if catalog.lookup(name) is None:
            close = suggest(name)
            # A near miss of a variable the fleet owns: renamed, it would be SC417's hand-set GID index.
            hint = (f"{gid_hint(ctx, path, value)}; {name} reads like {close[0]}" if close and close[0] in GID_VARIABLES
                    else _suggestion(close) or f"remove {name}: NCCL ignores names it does not know")
            yield Hit(path, f"NCCL does not read {name}", hint, at_key=True)


@rule("SC310", "error", "NCCL value NCCL would misread",
      "NCCL parses integers with strtoll (so '4M' is 4 and 'true' is 0) and ignores unknown tokens; the value "
      "must have the variable's exact form.", "nccl: {extra: {NCCL_BUFFSIZE: 4M}}",
      "nccl: {extra: {NCCL_BUFFSIZE: '4194304'}}")
def nccl_values(ctx: Context) -> Iterator[Hit]:
    settings = list(_nccl_settings(ctx))
    if not settings:
        return
    catalog = nccl_catalog()
    for path, name, value in settings:
        var = catalog.lookup(name)
        problem = catalog.check_value(name, value) if var is not None else None
        if problem:
            hint = "write the value in the form the message names"
            if var is not None and var.default is not None:
                hint = f"write {var.default} (NCCL's default), or another value in the form the message names"
            yield Hit(path, problem.rstrip("."), hint)


def _nccl_settings(ctx: Context) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """The NCCL and gloo variables the profile sets (nccl.extra, engine.env, a node's env), with their paths
    (gloo's other names are not NCCL's; engine.catalog_extra.env names what the image's build knows)."""
    settings: list[tuple[tuple[str | int, ...], str, object]] = [
        (("nccl", "extra", n), n, v) for n, v in ctx.profile.nccl.extra.items()]
    settings += [item for item in env_settings(ctx) if item[1].startswith(("NCCL_", "GLOO_"))]
    for path, name, value in settings:
        known = name in ctx.profile.engine.catalog_extra.env
        if not known and (not name.startswith("GLOO_") or name == "GLOO_SOCKET_IFNAME"):
            yield path, name, str(value)


@rule("SC311", "error", "unknown overlay variable",
      "The overlay refuses SPARK_* names it does not know at start (a typo would otherwise leave a hook off).",
      "engine: {env: {SPARK_ROCE_ARR: '1'}}", "overlay: {roce_ar: true}")
def overlay_names(ctx: Context) -> Iterator[Hit]:
    for path, name, _ in env_settings(ctx):
        if name.startswith("SPARK_") and name not in FLAGS_BY_NAME:
            yield Hit(path, f"the overlay has no flag {name}", did_you_mean(name, sorted(FLAGS_BY_NAME)),
                      at_key=True)
        elif name.startswith("B12X_") and name not in B12X_NAMES and name not in ctx.profile.engine.catalog_extra.env:
            yield Hit(path, f"the b12x runtime reads no {name}",
                      did_you_mean(name, list(B12X_NAMES)), at_key=True)
