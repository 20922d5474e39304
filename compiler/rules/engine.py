"""SC2xx: cross-field rules of the engine — parallelism, speculative decoding, limits, ports, env files."""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.common.findings import dotted
from spark_compile.overlay.registry import FLAGS_BY_NAME
from spark_compile.rules.registry import PLAN_ENGRAM_VARIABLES, Context, Hit, rule
from spark_compile.rules.sglang_model import divisors, ep_choices, moe_runner, tp_misses_fleet
from spark_compile.spec.envfile import env_value_problem
from spark_compile.spec.sglang_facts import SPECULATIVE_ALIASES, SPECULATIVE_BY_MODEL_TYPE, STEP_ALGORITHMS
from spark_compile.stages.engine_options import TYPED_FLAG_SYNONYMS, TYPED_FLAGS
from spark_compile.stages.launch_plan import field_name
from spark_compile.stages.model_paths import served_id

# SGLang's get_context_length limit is lifted by this variable (model_config.py); the rule then defers.
LONGER_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


@rule("SC201", "error", "EP divides TP",
      "Expert parallelism splits the TP group; ep-size must divide tp-size (SGLang does not check it).",
      "engine: {parallel: {tp: 4, ep: 3}}", "engine: {parallel: {tp: 4, ep: 4}}")
def ep_divides_tp(ctx: Context) -> Iterator[Hit]:
    par = ctx.profile.engine.parallel
    tp = par.tp or 1  # unset: SGLang's default
    if tp_misses_fleet(ctx):
        return  # tp itself is wrong (SC401): a divisor of it would be the wrong ep
    if tp % par.ep:
        choices = ep_choices(ctx)
        closest = min(choices, key=lambda d: (abs(d - par.ep), -d))
        why = f"the divisor of tp {tp} closest to {par.ep}" if choices == divisors(tp) else \
            f"the MoE runner {moe_runner(ctx)[0]} takes ep 1 or ep = tp"
        yield Hit(("engine", "parallel", "ep"), f"ep {par.ep} does not divide tp {tp}",
                  f"set engine.parallel.ep: {closest} ({why})")


@rule("SC202", "error", "speculative algorithm accepted by the model",
      "DeepSeek-V4 (DeepseekV4ForCausalLM) accepts only EAGLE or DSPARK, and a DeepSeek-V4.1 checkpoint "
      "(config.json model_type deepseek_v41) only DSPARK; SGLang refuses others at start.",
      "engine: {speculative: {algorithm: NGRAM}}", "engine: {speculative: {algorithm: DSPARK, dspark_block_size: 5}}")
def algorithm_for_model(ctx: Context) -> Iterator[Hit]:
    algo, accepted = ctx.profile.engine.speculative.algorithm, accepted_algorithms(ctx)
    if accepted is not None and algo != "none" and algo not in accepted[0]:
        yield Hit(("engine", "speculative", "algorithm"),
                  f"{accepted[1]} accepts speculative algorithms {', '.join(accepted[0])}, not {algo}",
                  "pick one of them, or none")


def accepted_algorithms(ctx: Context) -> tuple[tuple[str, ...], str] | None:
    """(the speculative algorithms the model accepts, whose rule it is); None when it takes any."""
    family = ctx.family
    model_type = ctx.checkpoint.model_type if ctx.checkpoint else None
    if model_type in SPECULATIVE_BY_MODEL_TYPE:
        return SPECULATIVE_BY_MODEL_TYPE[model_type], f"{ctx.profile.model.architecture} ({model_type})"
    if family and family.speculative is not None:
        return family.speculative, family.architecture
    return None


@rule("SC251", "warning", "a speculative algorithm's other name",
      "SGLang resolves --speculative-algorithm NEXTN to EAGLE (_resolve_speculative_algorithm_alias): the same "
      "drafting under its other name; the profile should say what runs.",
      "speculative: {algorithm: NEXTN}", "speculative: {algorithm: EAGLE}")
def algorithm_alias(ctx: Context) -> Iterator[Hit]:
    algo, accepted = ctx.profile.engine.speculative.algorithm, accepted_algorithms(ctx)
    new = SPECULATIVE_ALIASES.get(algo)
    # A model that refuses the alias refuses it before resolving it (SC202 says so).
    if new is not None and (accepted is None or algo in accepted[0]):
        yield Hit(("engine", "speculative", "algorithm"), f"speculative algorithm {algo} is another name of {new}; "
                  f"SGLang runs {new}", f"set engine.speculative.algorithm: {new}")


def dspark_block_size(ctx: Context) -> int | None:
    """DSPARK's block size: as the profile pins it, else the model's config.json's (dspark_block_size, or
    block_size under dspark_config/dflash_config), as SGLang reads it."""
    pinned = ctx.profile.engine.speculative.dspark_block_size
    if pinned is not None:
        return pinned
    config = ctx.text_model_config or {}
    nested = {**(config.get("dflash_config") or {}), **(config.get("dspark_config") or {})}
    value = config.get("dspark_block_size", nested.get("block_size"))
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@rule("SC203", "error", "DSPARK block size goes with DSPARK",
      "dspark_block_size is DSPARK's own setting: meaningless without it.",
      "engine: {speculative: {algorithm: EAGLE, dspark_block_size: 5}}",
      "engine: {speculative: {algorithm: DSPARK, dspark_block_size: 5}}")
def dspark_block(ctx: Context) -> Iterator[Hit]:
    spec = ctx.profile.engine.speculative
    if spec.algorithm != "DSPARK" and spec.dspark_block_size is not None:
        yield Hit(("engine", "speculative", "dspark_block_size"),
                  f"dspark_block_size is set but the algorithm is {spec.algorithm}", "remove it or use DSPARK")


@rule("SC204", "error", "DSPARK verifies block size + 1 tokens",
      "With DSPARK SGLang requires speculative-num-draft-tokens = block size + 1.",
      "speculative: {algorithm: DSPARK, dspark_block_size: 5, num_draft_tokens: 5}",
      "speculative: {algorithm: DSPARK, dspark_block_size: 5, num_draft_tokens: 6}")
def dspark_draft_tokens(ctx: Context) -> Iterator[Hit]:
    spec = ctx.profile.engine.speculative
    block = dspark_block_size(ctx)
    if spec.algorithm == "DSPARK" and block and spec.num_draft_tokens is not None \
            and spec.num_draft_tokens != block + 1:
        yield Hit(("engine", "speculative", "num_draft_tokens"),
                  f"num_draft_tokens {spec.num_draft_tokens} must be dspark_block_size + 1 = {block + 1}",
                  f"set engine.speculative.num_draft_tokens: {block + 1}, or remove it (SGLang derives it)")


@rule("SC227", "warning", "DSPARK's block size known",
      "Without --speculative-dspark-block-size SGLang reads the block size from the checkpoint's config.json "
      "(dspark_block_size); with none there it falls back to 7 with a warning, which may not be what the draft "
      "head was trained for. The plain rules read the committed copy model.config_json names.",
      "engine: {speculative: {algorithm: DSPARK}}   # no model.config_json",
      "model: {config_json: dsv41-flash.config.json}   # holds dspark_block_size")
def dspark_block_known(ctx: Context) -> Iterator[Hit]:
    spec = ctx.profile.engine.speculative
    if spec.algorithm != "DSPARK" or dspark_block_size(ctx) is not None:
        return
    where = "model.config_json has no dspark_block_size" if ctx.model_config else "no model.config_json is committed"
    yield Hit(("engine", "speculative", "algorithm"), f"DSPARK's block size is not known here ({where}): "
              "SGLang reads it from the checkpoint's config.json, or falls back to 7",
              "set engine.speculative.dspark_block_size, or commit the checkpoint's config.json as model.config_json")


@rule("SC205", "error", "EAGLE settings go with the EAGLE family",
      "num_steps and eagle_topk belong to EAGLE, EAGLE3, NEXTN and STANDALONE (SGLang's _handle_eagle_family "
      "reads them); DSPARK forces both to 1.",
      "speculative: {algorithm: DSPARK, dspark_block_size: 5, num_steps: 3}",
      "speculative: {algorithm: EAGLE, num_steps: 3, eagle_topk: 1, num_draft_tokens: 4}")
def eagle_flags(ctx: Context) -> Iterator[Hit]:
    spec = ctx.profile.engine.speculative
    for field in ("num_steps", "eagle_topk"):
        if getattr(spec, field) is not None and spec.algorithm not in STEP_ALGORITHMS:
            yield Hit(("engine", "speculative", field),
                      f"{field} is an EAGLE setting but the algorithm is {spec.algorithm}", "remove it")


@rule("SC206", "error", "decode graphs cover the request cap",
      "--cuda-graph-max-bs-decode below --max-running-requests sends the larger batches to eager mode. "
      "`max_bs_decode: max_running_requests` follows the cap, which must then be set.",
      "limits: {max_running_requests: 16}\ncuda_graph: {max_bs_decode: 8}",
      "limits: {max_running_requests: 16}\ncuda_graph: {max_bs_decode: max_running_requests}")
def graph_batch(ctx: Context) -> Iterator[Hit]:
    eng = ctx.profile.engine
    pinned, cap = eng.cuda_graph.max_bs_decode, eng.limits.max_running_requests
    at = ("engine", "cuda_graph", "max_bs_decode")
    if pinned == "max_running_requests" and cap is None:
        yield Hit(at, "max_bs_decode follows max_running_requests, which is not set",
                  "set engine.limits.max_running_requests (e.g. 16), or write max_bs_decode as a number")
    if isinstance(pinned, int) and cap is not None and pinned < cap:
        yield Hit(at, f"max_bs_decode {pinned} is below max_running_requests {cap}",
                  f"write max_bs_decode: max_running_requests, or raise it to at least {cap}")
    if pinned is not None and not eng.cuda_graph.enabled:
        yield Hit(at, "max_bs_decode is set but graphs are disabled", "remove max_bs_decode")


@rule("SC207", "error", "chunked prefill a multiple of the page size",
      "SGLang asserts that chunked_prefill_size is divisible by page_size (validation_hook): the page size the "
      "profile writes (engine.page_size), or the one the architecture forces (DeepSeek-V4: 256).",
      "limits: {chunked_prefill_size: 2000}", "limits: {chunked_prefill_size: 2048}")
def chunk_pages(ctx: Context) -> Iterator[Hit]:
    family, eng = ctx.family, ctx.profile.engine
    chunk = eng.limits.chunked_prefill_size
    page, whose = (family.page_size, f"{family.architecture}'s page size") if family and family.page_size \
        else (eng.page_size, "engine.page_size")
    if page and chunk is not None and chunk > 0 and chunk % page:
        yield Hit(("engine", "limits", "chunked_prefill_size"),
                  f"chunked_prefill_size {chunk} is not a multiple of {whose} {page}",
                  f"use {chunk // page * page or page}")


@rule("SC208", "error", "memory fraction in (0, 1)",
      "--mem-fraction-static is a fraction of GPU memory; SGLang does not check its range.",
      "limits: {mem_fraction_static: 80}", "limits: {mem_fraction_static: 0.80}")
def mem_fraction(ctx: Context) -> Iterator[Hit]:
    value = ctx.profile.engine.limits.mem_fraction_static
    if value is not None and not 0 < value < 1:
        yield Hit(("engine", "limits", "mem_fraction_static"), f"mem_fraction_static {value} is not in (0, 1)",
                  f"write {value / 100:g} (a fraction of the GPU's memory, not a percentage)" if 1 < value <= 100
                  else "write a fraction of the GPU's memory between 0 and 1, e.g. 0.80")


@rule("SC209", "error", "context length within the model's",
      "--context-length above the model's own maximum is refused by SGLang (unless "
      "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1) or produces garbage past the trained length. The maximum is "
      "model.max_context_length, or what SGLang derives from the committed config.json (its first context key, "
      "times the rope scaling factor), or from a separate draft model's, whichever is lowest.",
      "model: {max_context_length: 1048576}\nengine: {limits: {context_length: 2097152}}",
      "engine: {limits: {context_length: 524288}}")
def context_length(ctx: Context) -> Iterator[Hit]:
    value = ctx.profile.engine.limits.context_length
    if value is None:
        return
    limits = []
    if ctx.profile.model.max_context_length is not None:
        limits.append((ctx.profile.model.max_context_length, ""))
    if str(ctx.profile.engine.env.get(LONGER_CONTEXT_ENV, "0")).lower() not in ("1", "true"):
        if ctx.checkpoint is not None:
            cp = ctx.checkpoint
            limits.append((cp.context_length, f" ({cp.file}: {cp.context_source})"))
        if ctx.draft_checkpoint is not None:  # the draft worker's ModelConfig judges the same length at boot
            cp = ctx.draft_checkpoint
            limits.append((cp.context_length, f" (the draft model's {cp.file}: {cp.context_source})"))
    if limits:
        limit, source = min(limits, key=lambda item: item[0])
        if value > limit:
            yield Hit(("engine", "limits", "context_length"),
                      f"context_length {value} exceeds the model's maximum {limit}{source}", f"use at most {limit}")


@rule("SC210", "error", "API port differs from the rendezvous port",
      "The head binds both the API port and --dist-init-addr's port on the host network.",
      "engine: {port: 8210, dist_init_port: 8210}", "engine: {port: 8210, dist_init_port: 20100}")
def distinct_ports(ctx: Context) -> Iterator[Hit]:
    eng = ctx.profile.engine
    if eng.port != eng.dist_init_port:
        return
    # Point at the key the profile wrote (the other one is a default) and suggest a port that is free of both.
    if ctx.present(("engine", "dist_init_port")):
        free = 20100 if eng.port != 20100 else 20101
        yield Hit(("engine", "dist_init_port"), f"dist_init_port {eng.dist_init_port} is the API port",
                  f"use another port, e.g. {free}")
    else:
        free = 8210 if eng.dist_init_port != 8210 else 8211
        yield Hit(("engine", "port"), f"port {eng.port} is the rendezvous port (dist_init_port)",
                  f"use another API port, e.g. {free}")


@rule("SC211", "error", "served name usable by SGLang",
      "SGLang refuses ':' in --served-model-name; aliases must differ from it and from each other.",
      "model: {served_name: 'deepseek:v4'}", "model: {served_name: deepseek-v4.1-flash}")
def served_names(ctx: Context) -> Iterator[Hit]:
    model = ctx.profile.model
    if model.served_name is not None and ":" in model.served_name:
        yield Hit(("model", "served_name"), f"served_name {model.served_name!r} contains ':'",
                  "remove the ':'")
    seen = {served_id(ctx.profile)}
    for index, alias in enumerate(model.aliases):
        if alias in seen or "," in alias:
            yield Hit(("model", "aliases", index),
                      f"alias {alias!r} {'contains a comma' if ',' in alias else 'repeats a served id'}",
                      "aliases are distinct ids without commas")
        seen.add(alias)


@rule("SC212", "warning", "a restart policy on one rank of many",
      "Workers are torch.distributed peers: when the head dies they exit 0 (on-failure never fires), and a "
      "worker restarted alone re-joins a dying rendezvous and sits on the GPU. A multi-node fleet recovers "
      "whole, through the watchdog; per-rank restarts make the next launch fail with 'CUDA device busy'.",
      "container: {restart: always}", "container: {restart: 'no'}")
def per_rank_restart(ctx: Context) -> Iterator[Hit]:
    if len(ctx.profile.fleet.nodes) > 1 and ctx.profile.container.restart != "no":
        yield Hit(("container", "restart"),
                  f"restart {ctx.profile.container.restart} restarts ranks one by one in a "
                  f"{len(ctx.profile.fleet.nodes)}-node fleet", "use 'no': the watchdog relaunches the whole fleet")


@rule("SC213", "error", "a flag set both ways",
      "A value the profile types (port, tp, limits, backends, speculative settings, chat defaults, HOST_IP, the "
      "reasoning-effort variable) may not be set again through engine.args or engine.env: one of the two "
      "would silently win.", "engine:\n  port: 8210\n  args: {port: 8888}", "engine:\n  port: 8888")
def set_both_ways(ctx: Context) -> Iterator[Hit]:
    for name in ctx.profile.engine.args:
        flag = f"--{name.removeprefix('no-')}"
        owner = TYPED_FLAGS.get(TYPED_FLAG_SYNONYMS.get(flag, flag))
        if owner is not None:
            yield Hit(("engine", "args", name), f"--{name} is written by the plan from {dotted(owner)}",
                      f"set {dotted(owner)} instead", at_key=True)
    written = {var.name: var.source for var in ctx.plan.ranks[0].variables} if ctx.plan.ranks else {}
    for name in ctx.profile.engine.env:
        source = written.get(name)
        if source is not None and source[:2] != ("engine", "env"):
            where = field_name(source)
            yield Hit(("engine", "env", name), f"{name} is written by the plan from {where}",
                      f"set {where} instead", at_key=True)


@rule("SC214", "warning", "variable in the wrong section",
      "NCCL_*/GLOO_* belong in nccl.extra and SPARK_* in the overlay section, where they are typed and "
      "checked; engine.env is for the engine's own variables.",
      "engine: {env: {NCCL_IB_TIMEOUT: '22'}}", "nccl: {extra: {NCCL_IB_TIMEOUT: '22'}}")
def env_section(ctx: Context) -> Iterator[Hit]:
    for name in ctx.profile.engine.env:
        if name.startswith(("NCCL_", "GLOO_")):
            yield Hit(("engine", "env", name), f"{name} is an NCCL/gloo variable in engine.env",
                      "set nccl.debug instead" if name == "NCCL_DEBUG" else "move it to nccl.extra", at_key=True)
        elif name.startswith("SPARK_"):
            flag = FLAGS_BY_NAME.get(name)
            # A SPARK_* name the overlay does not know is SC311's finding, one the plan derives SC408's.
            if flag is not None and name not in PLAN_ENGRAM_VARIABLES:
                yield Hit(("engine", "env", name), f"{name} is an overlay flag in engine.env",
                          f"set overlay.{flag.key} instead", at_key=True)


@rule("SC215", "error", "env value readable the same by docker and systemd",
      "Each env file is read by docker --env-file (which keeps quotes, backslashes and spaces as written) and "
      "by systemd EnvironmentFile= (which unquotes, unescapes and strips). A value with a line break, quotes, "
      "a backslash, '$', a backtick, edge spaces or non-ASCII would mean two things, so it is refused.",
      "engine: {env: {SGLANG_X: '\"quoted\"'}}", "engine: {env: {SGLANG_X: quoted}}")
def env_values_portable(ctx: Context) -> Iterator[Hit]:
    # Most values are the same on every rank: check each distinct pair once, in rank order.
    pairs = dict.fromkeys((var.name, var.value) for rank in ctx.plan.ranks for var in rank.variables)
    reported: set[str] = set()
    for name, value in pairs:
        problem = env_value_problem(value)
        if problem and name not in reported:
            reported.add(name)
            yield Hit(_env_source(ctx, name), f"{name}={value!r} {problem}",
                              "change the value so it holds only printable ASCII without quotes, '\\', '$' or "
                              "backticks")


def _env_source(ctx: Context, name: str) -> tuple[str | int, ...]:
    """The profile path behind a variable, as the plan recorded it (rank 0 first, then any rank)."""
    for rank in ctx.plan.ranks:
        for var in rank.variables:
            if var.name == name:
                return var.source
    return ("engine", "env", name)


@rule("SC216", "warning", "chat defaults need a parser",
      "Thinking on by default without a reasoning parser leaves the thinking text in the answer; a default "
      "reasoning effort needs a model family that reads it.",
      "chat: {thinking: true}", "chat: {thinking: true, reasoning_parser: deepseek-v41}")
def chat_defaults(ctx: Context) -> Iterator[Hit]:
    chat = ctx.profile.engine.chat
    if chat.thinking and chat.reasoning_parser is None:
        yield Hit(("engine", "chat", "thinking"), "thinking is on by default but no reasoning_parser is set",
                  "set engine.chat.reasoning_parser (the model's own parser, e.g. deepseek-v41), or set "
                  "engine.chat.thinking: false")
    family = ctx.family
    if chat.reasoning_effort is not None and not (family and family.reasoning_effort_env):
        yield Hit(("engine", "chat", "reasoning_effort"),
                  f"{ctx.profile.model.architecture} has no default reasoning-effort setting; the value is ignored",
                  "remove it")
