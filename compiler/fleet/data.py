"""The fleet scripts' data: fleet.env (sourced by the static bash scripts) and fleet.json (read by smoke.py).

The scripts themselves are static files of the package (templates/fleet/static/, written once per output
root in fleet_scripts/); everything that differs between profiles is here, each value quoted for bash by
construction (quoting.bash_word), so launch.sh keeps one size whatever the fleet's size.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from spark_compile.capacity.budget import Capacity, RankCapacity
from spark_compile.common.engram_rows import format_rows, format_tables
from spark_compile.common.quoting import bash_word
from spark_compile.overlay.gates import enabled_hooks
from spark_compile.overlay.settings import parse_environment
from spark_compile.spec.model import Profile
from spark_compile.spec.secret_patterns import SECRET_NAME, SECRET_VALUE, names_secret
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan
from spark_compile.stages.model_paths import served_id

GID_AT_START = "found at start"
ENGRAM_MANIFEST = "engram-local.json"
CHECKPOINT_INDEX = "model.safetensors.index.json"
# The peer's watchdog trims its log from 20000 to 5000 lines; the same keeps a year of checks readable.
LOG_TRIM_AT, LOG_KEEP = 20000, 5000
# /health must answer fast even while the engine is busy; a slow /health is itself a failure.
HEALTH_PROBE_CAP = 10
# A unit that is not active this long after `systemctl start` returned has failed to launch.
UNIT_ACTIVE_TIMEOUT = 30
PROBE_PROMPT = "Reply with the word OK."
UNIT_DIR = "/etc/systemd/system"


def ssh_user(target: str) -> str:
    """The user an ssh target logs in as; root when it names none (the watchdog then runs as root)."""
    return target.split("@", 1)[0] if "@" in target else "root"


def probe_body(profile: Profile) -> str:
    """The watchdog's short real request: 3 tokens, thinking off, must come back with choices."""
    body = {"model": served_id(profile), "max_tokens": 3, "temperature": 0,
            "messages": [{"role": "user", "content": PROBE_PROMPT}],
            "chat_template_kwargs": {"thinking": False}}
    return json.dumps(body, separators=(",", ":"))


def rows_path(plan: LaunchPlan, profile: Profile, rank: RankPlan) -> str:
    """The manifest of a node-local copy, or the checkpoint's index on the node that holds it."""
    model = profile.model
    if rank.engram is None or model.engram is None:
        return ""
    if rank.engram.source == "local":
        return f"{model.engram.local_dir}/{ENGRAM_MANIFEST}"
    directory = node_model_dir(plan, rank)
    return f"{directory}/{CHECKPOINT_INDEX}" if directory else ""


def config_path(plan: LaunchPlan, rank: RankPlan) -> str:
    """The checkpoint's config.json as the rank's node sees it (the holder reads its own copy)."""
    directory = node_model_dir(plan, rank)
    return f"{directory}/config.json" if directory else ""


def node_model_dir(plan: LaunchPlan, rank: RankPlan) -> str:
    """The model directory on the rank's node (its snapshot's in an HF cache), as the checkpoint plan says;
    empty for a hub id."""
    return plan.checkpoint.nodes[rank.rank].directory or ""


def model_dirs(plan: LaunchPlan, rank: RankPlan) -> str:
    """The model directories the rank mounts (the target's, a separate draft's), ':'-joined (the path grammar
    has no ':'): each must hold a config.json on the node, or docker mounts an empty directory."""
    draft = plan.checkpoint.draft
    dirs = (node_model_dir(plan, rank), draft.directory if draft is not None else None)
    return ":".join(d for d in dirs if d)


def engram_lines(profile: Profile, rank: RankPlan, world: int) -> list[str]:
    """The boot-log lines proving the rank owns its rows."""
    if rank.engram is None or profile.model.engram is None:
        return []
    tables = profile.model.engram.tables
    return [f"engram layer {layer}: rank {rank.rank}/{world} owns rows [{lo}, {hi}) of {tables[layer]}"
            for layer, lo, hi in rank.engram.rows]


def armed_hooks(rank: RankPlan) -> list[str]:
    """The hooks the rank's SPARK_* values arm (none while the master switch is off), by the overlay's gates."""
    spark = {name: value for name, value in rank.env.items() if name.startswith("SPARK_") and value is not None}
    if not spark.get("SPARK_ENGRAM_DIR"):
        return []
    return enabled_hooks(parse_environment(spark).values)


@dataclass(frozen=True, slots=True)
class Derived:
    """What a derived fleet.env value is computed from: flags or variables (by name prefix) and profile keys."""

    inputs: tuple[str, ...]
    fields: tuple[str, ...] = ()


# fleet.env keys (by prefix) that no single profile key sets: a diff names the changed inputs behind them.
DERIVED_FROM: dict[str, Derived] = {
    "rank_hooks": Derived(("SPARK_",), ("operations.verify.hooks_armed",)),  # hooks_expected
    "predicted_": Derived(("--",), ("model.",)),  # _predicted: the capacity stage reads the engine's flags
}


def hooks_expected(profile: Profile, rank: RankPlan) -> int:
    """The `overlay: N hooks armed` count: pinned by the profile, else what this project's overlay arms."""
    armed = armed_hooks(rank)
    pinned = profile.operations.verify.hooks_armed
    return pinned if pinned is not None and armed else len(armed)


def env_lines(profile: Profile, rank: RankPlan) -> list[str]:
    """NAME=value of the container's environment; secrets and values found at start are named, not shown."""
    def shown(name: str, value: str | None) -> str:
        if value is not None:
            return value
        return "<secret, read on the node at start>" if name in profile.secrets.env else f"<{GID_AT_START}>"

    return [f"{name}={shown(name, value)}" for name, value in rank.env.items()]


def _quote(value: str | int) -> str:
    """A bash word; comma lists quoted too, so an array of them reads as one word per rank."""
    text = bash_word(str(value))
    return f"'{text}'" if "," in text and not text.startswith("'") else text


def gid_text(rank: RankPlan) -> str:
    """The RoCE v2 GID index as the dry run shows it: pinned, found at start, or - off RoCE."""
    if rank.roce_hca is None:
        return "-"
    return GID_AT_START if rank.gid_index is None else str(rank.gid_index)


def _var(name: str, value: str | int) -> str:
    return f"{name}={_quote(value)}"


def _array(name: str, values: Iterable[str | int]) -> str:
    return f"{name}=(" + " ".join(_quote(v) for v in values) + ")"


def _flags(rank: RankPlan) -> str:
    return ",".join(sorted(name for name in rank.env if name.startswith("SPARK_")))


def secret_names(profile: Profile) -> str:
    """The env names a node cuts to NAME=(redacted) before its audit capture leaves it (an ERE, any case):
    the names that mean a secret, and the profile's secrets."""
    return "|".join((SECRET_NAME, *profile.secrets.env))


def cut_on_node(name: str, profile: Profile) -> bool:
    """Whether a node's capture cuts the variable ``name`` (secret_names(), as grep -Ei reads it). Env names
    are ASCII letters, digits and '_', so the ERE's literal names are found in the upper-cased name, and the
    pattern is compiled only when a name holds a piece of a secret's word."""
    upper = name.upper()
    return any(secret.upper() in upper for secret in profile.secrets.env) or names_secret(name)


def secret_values() -> str:
    """Token shapes cut from a capture on the node, as an ERE (Python's (?: groups are plain groups there)."""
    return SECRET_VALUE.replace("(?:", "(")


def _audit(profile: Profile) -> list[str]:
    return ["# launch.sh audit: what a node redacts from its capture (EREs); the comparison reads audit.json.",
            _var("audit_secret_names", secret_names(profile)), _var("audit_secret_values", secret_values())]


def _previous_stack(profile: Profile) -> list[str]:
    previous = profile.operations.previous_stack
    return [
        "# The stack this release replaces: stopped at cutover, restored by launch.sh rollback.",
        _var("prev_unit", previous.unit or "" if previous else ""),
        _array("prev_stop", previous.stop if previous else []),
        _array("prev_relaunch", previous.relaunch if previous else []),
    ]


def _verify(profile: Profile, plan: LaunchPlan) -> list[str]:
    verify, world = profile.operations.verify, len(plan.ranks)
    # Each line is expected where the hook that prints it is armed (every rank arms the same hooks).
    armed = set(armed_hooks(plan.ranks[0]))
    aliases = ",".join(profile.model.aliases) if "served_aliases" in armed else ""
    lines = [f"{rank.rank}|{line}" for rank in plan.ranks for line in engram_lines(profile, rank, world)]
    layers = [f"{rank.rank}|{layer}" for rank in plan.ranks for layer, _, _ in (rank.engram.rows
                                                                                if rank.engram else ())]
    return [
        "# verify.sh: what each boot log must show, from the plan and operations.verify.",
        _array("rank_hooks", (hooks_expected(profile, rank) for rank in plan.ranks)),
        _array("expected_engram", lines),
        _array("expected_gather", layers),
        _var("gather_us_max", verify.engram_gather_us_max),
        _var("expect_roce", int("roce_collectives" in armed and world > 1)),
        _var("expect_mxfp8", int("mxfp8" in armed)),
        _var("expect_kv", int(profile.engine.backends.attention == "dsv4")),
        _var("kv_min", verify.kv_tokens[0]), _var("kv_max", verify.kv_tokens[1]),
        _var("expect_aliases", aliases),
        _var("min_free_gib", verify.min_free_gib),
    ]


def _identity(plan: LaunchPlan, version: str) -> list[str]:
    return [
        _var("fleet_version", version), _var("profile", plan.profile), _var("release", plan.release or ""),
        _var("unit", plan.unit_name), _var("container", plan.container_name), _var("image", plan.image),
        _var("install_dir", plan.install_dir), _var("fleet_install_dir", plan.fleet.install_dir),
        _var("unit_dir", UNIT_DIR), _var("world", len(plan.ranks)),
        _array("ranks", (r.rank for r in plan.ranks)), _array("rank_container", (r.container_name for r in plan.ranks)),
        _array("start_order", plan.start_order), _array("stop_order", reversed(plan.start_order)),
    ]


def _ranks(plan: LaunchPlan, profile: Profile) -> list[str]:
    engram = profile.model.engram
    return [
        _array("rank_nodes", (r.node for r in plan.ranks)), _array("rank_ssh", (r.ssh for r in plan.ranks)),
        _array("rank_dirs", (r.directory for r in plan.ranks)),
        _array("rank_roles", ("head" if r.is_head else "worker" for r in plan.ranks)),
        _array("rank_gid", (gid_text(r) for r in plan.ranks)),
        "# SPARK_* names each rank's container is given: the image's overlay must know every one.",
        _array("rank_flags", (_flags(r) for r in plan.ranks)),
        "# Engram rows: local reads the node-local copy's manifest, shards the checkpoint's index.",
        _array("rank_rows_kind", (r.engram.source if r.engram else "" for r in plan.ranks)),
        _array("rank_rows_path", (rows_path(plan, profile, r) for r in plan.ranks)),
        _array("rank_rows_expect", (format_rows({la: (lo, hi) for la, lo, hi in r.engram.rows})
                                    if r.engram else "" for r in plan.ranks)),
        "# Engram row counts the checkpoint's config.json must give (empty: no Engram).",
        _var("engram_tables", format_tables(engram.tables) if engram else ""),
        _array("rank_config", (config_path(plan, r) for r in plan.ranks)),
        "# Model directories each rank mounts (the target's, a draft's; ':'-joined): each holds a config.json.",
        _array("rank_models", (model_dirs(plan, r) for r in plan.ranks)),
        _var("image_check", profile.operations.image_check.mode),
    ]


def _api_and_timeouts(plan: LaunchPlan, profile: Profile) -> list[str]:
    api, deploy = plan.fleet.api, profile.deploy
    return [
        "# The API: checks call api_host; api_via_head=1 (a loopback host) runs them on the head.",
        _var("api_host_default", api.host), _var("api_port_default", plan.port),
        _var("api_via_head", int(api.via_head)), _var("api_bind", api.bind),
        _var("health_timeout", profile.operations.health_timeout_seconds),
        _var("unit_active_timeout", UNIT_ACTIVE_TIMEOUT),
        _var("gpu_wait_tries", deploy.gpu_wait_tries), _var("gpu_wait_seconds", deploy.gpu_wait_seconds),
    ]


def _watchdog(plan: LaunchPlan, profile: Profile) -> list[str]:
    watchdog, log_dir, base = profile.operations.watchdog, plan.fleet.log_dir, plan.fleet.watchdog_unit
    return [
        _var("log_dir", log_dir), _var("postmortem_dir", f"{log_dir}/postmortem"),
        _var("watchdog_enabled", int(watchdog.enabled)),
        _var("watchdog_lock", plan.fleet.watchdog_lock), _var("watchdog_state", plan.fleet.watchdog_state),
        _var("watchdog_log", f"{log_dir}/watchdog.log"),
        _var("watchdog_service", f"{base}.service"), _var("watchdog_timer", f"{base}.timer"),
        _var("watchdog_interval", watchdog.interval_seconds), _var("fail_threshold", watchdog.fail_threshold),
        _var("probe_timeout", watchdog.probe_timeout_seconds), _var("busy_grace", watchdog.busy_grace_seconds),
        _var("ready_timeout", watchdog.ready_timeout_seconds), _var("relaunch_limit", watchdog.relaunch_limit),
        _var("reset_after", watchdog.reset_after_seconds), _var("watchdog_audit", int(watchdog.audit)),
        _var("health_probe_timeout", min(HEALTH_PROBE_CAP, watchdog.probe_timeout_seconds)),
        _var("log_trim_at", LOG_TRIM_AT), _var("log_keep", LOG_KEEP),
        _var("probe_body", probe_body(profile)),
        _var("gpu_wait", plan.fleet.gpu_wait_seconds),
    ]


def _dry_run(plan: LaunchPlan, profile: Profile, unit_exec: dict[int, list[str]]) -> list[str]:
    lines = ["# The dry run's view of each rank: its unit's Exec lines, docker argv and environment."]
    for rank in plan.ranks:
        lines.append(_array(f"rank{rank.rank}_exec", unit_exec[rank.rank]))
        lines.append(_array(f"rank{rank.rank}_docker", rank.docker_argv))
        lines.append(_array(f"rank{rank.rank}_env", env_lines(profile, rank)))
    return lines


def _gib(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _predicted(capacity: Capacity | None, plan: LaunchPlan) -> list[str]:
    """Per rank, what the memory budget predicts for the boot lines verify.sh reads ('' where unknown)."""
    ranks = capacity.ranks if capacity is not None else ()
    by_rank = {budget.rank: budget for budget in ranks}

    def column(pick: Callable[[RankCapacity], str]) -> list[str]:
        return [pick(by_rank[r.rank]) if r.rank in by_rank else "" for r in plan.ranks]

    return [
        "# verify.sh prints each rank's measured memory next to these predictions (spark-compile plan --capacity).",
        _array("predicted_weights", column(lambda b: _gib(b.terms["weights"].gib))),
        _array("predicted_draft", column(lambda b: _gib(b.terms["draft"].gib))),
        _array("predicted_available", column(lambda b: _gib(b.terms["available"].gib))),
        _array("predicted_bpft", column(lambda b: "" if b.kv is None or b.kv.bytes_per_full_token is None
                                        else f"{b.kv.bytes_per_full_token:.2f}")),
        _array("predicted_full_token", column(lambda b: "" if b.kv is None or b.kv.full_token is None
                                              else str(b.kv.full_token))),
    ]


def fleet_env(plan: LaunchPlan, profile: Profile, version: str, unit_exec: dict[int, list[str]],
              capacity: Capacity | None = None) -> str:
    """fleet.env: every value the static scripts read, one assignment per line, quoted by construction."""
    lines = [
        # SC2034: the scripts that source this file read the values; SC2016: single quotes keep a profile's
        # $ and ` literal on purpose (every value is data, never expanded).
        "# shellcheck shell=bash disable=SC2034,SC2016",
        f"# fleet.env: the fleet of {plan.profile}; sourced by launch.sh, verify.sh and watchdog.sh.",
        f"# Generated by spark-compile {version}: do not edit, recompile the profile.",
        *_identity(plan, version), *_ranks(plan, profile), *_api_and_timeouts(plan, profile),
        *_watchdog(plan, profile), *_audit(profile), *_previous_stack(profile), *_verify(profile, plan),
        *_predicted(capacity, plan), *_dry_run(plan, profile, unit_exec),
    ]
    return "\n".join(lines) + "\n"


def fleet_json(plan: LaunchPlan, profile: Profile) -> str:
    """fleet.json: smoke.py's defaults, where the API is and what the profile says the model can do."""
    smoke, api = profile.operations.smoke, plan.fleet.api
    config: dict[str, Any] = {
        "host": api.host, "port": plan.port, "via_head": api.via_head, "head_ssh": plan.ranks[0].ssh,
        "fleet_install_dir": plan.fleet.install_dir, "model": served_id(profile),
        # Unset in the profile, SGLang serves the model's own length; unknown, no needle is skipped for size.
        "context_length": (profile.engine.limits.context_length or profile.model.max_context_length
                           or max(smoke.needle_tokens, default=0)),
        "needle_tokens": list(smoke.needle_tokens),
        "image": smoke.image, "tools": smoke.tools, "timeout": smoke.request_timeout_seconds,
        "thinking_default": profile.engine.chat.thinking,
        "reasoning": profile.engine.chat.reasoning_parser is not None,
        "window": profile.operations.window.model_dump(),
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
