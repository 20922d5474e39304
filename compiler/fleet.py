"""Fleet operations artifacts (generated/<profile>/fleet/): launcher, verification, smoke tests, watchdog.

Every value the scripts need is derived here from the plan and the profile; the templates only format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spark_compile import __version__
from spark_compile.launch_plan import LaunchPlan, RankPlan
from spark_compile.render import SCRIPT_MODE, Artifact, environment, render_unit
from spark_compile.spec.model import Profile

FLEET_DIR = "fleet"
GID_AT_START = "found at start"
ENGRAM_MANIFEST = "engram-local.json"
CHECKPOINT_INDEX = "model.safetensors.index.json"
# The peer's watchdog trims its log from 20000 to 5000 lines; the same keeps a year of checks readable.
LOG_TRIM_AT, LOG_KEEP = 20000, 5000
# /health must answer fast even while the engine is busy; a slow /health is itself a failure.
HEALTH_PROBE_CAP = 10
# A unit that is not active this long after `systemctl start` returned has failed to launch.
UNIT_ACTIVE_TIMEOUT = 30
# Extra time a watchdog run may take beyond the relaunch's own health wait: postmortem, stop, preflight.
WATCHDOG_RUN_MARGIN = 1800
PROBE_PROMPT = "Reply with the word OK."


@dataclass(frozen=True)
class FleetRank:
    """What the fleet scripts need to know about one rank."""

    rank: int
    node: str
    ssh: str
    directory: str
    is_head: bool
    role: str
    gid_text: str
    overlay_flags: str  # comma-separated SPARK_* names this rank's container is given
    overlay_count: int
    rows_kind: str  # "local", "shards" or "" (no Engram)
    rows_path: str  # host path of the manifest (local) or the checkpoint index (shards)
    rows_expect: str  # L:lo:hi,... as the local manifest must describe it
    engram_lines: tuple[str, ...]  # boot-log lines proving this rank owns its rows
    unit_exec_lines: tuple[str, ...]  # the Exec*= lines of the rank's unit, as rendered
    docker_argv: tuple[str, ...]
    env_lines: tuple[str, ...]


def _gid_text(rank: RankPlan) -> str:
    if rank.roce_hca is None:
        return "-"
    return GID_AT_START if rank.gid_index is None else str(rank.gid_index)


def _role(rank: RankPlan) -> str:
    return "head" if rank.is_head else "worker"


def _rows_text(rows: tuple[tuple[int, int, int], ...]) -> str:
    return ",".join(f"{layer}:{lo}:{hi}" for layer, lo, hi in rows)


def _env_lines(profile: Profile, rank: RankPlan) -> tuple[str, ...]:
    def shown(name: str, value: str | None) -> str:
        if value is not None:
            return value
        return "<secret, read on the node at start>" if name in profile.secrets.env else f"<{GID_AT_START}>"

    return tuple(f"{name}={shown(name, value)}" for name, value in rank.env.items())


def _rows_path(profile: Profile, rank: RankPlan) -> str:
    model = profile.model
    if rank.engram is None or model.engram is None:
        return ""
    if rank.engram.source == "local":
        return f"{model.engram.local_dir}/{ENGRAM_MANIFEST}"
    repo = model.holder_repo or model.repo
    return f"{repo}/snapshots/{model.snapshot}/{CHECKPOINT_INDEX}"


def _engram_lines(profile: Profile, rank: RankPlan, world: int) -> tuple[str, ...]:
    if rank.engram is None or profile.model.engram is None:
        return ()
    tables = profile.model.engram.tables
    return tuple(f"engram layer {layer}: rank {rank.rank}/{world} owns rows [{lo}, {hi}) of {tables[layer]}"
                 for layer, lo, hi in rank.engram.rows)


def _unit_exec_lines(plan: LaunchPlan, profile: Profile, rank: RankPlan) -> tuple[str, ...]:
    """The rank unit's Exec*= lines, read off the rendered unit so the dry run cannot drift from it."""
    unit = render_unit(plan, profile, rank).decode()
    return tuple(line for line in unit.splitlines() if line.startswith("Exec"))


def fleet_rank(plan: LaunchPlan, profile: Profile, rank: RankPlan) -> FleetRank:
    """The fleet scripts' view of one rank."""
    world = len(plan.ranks)
    flags = sorted(name for name in rank.env if name.startswith("SPARK_"))
    return FleetRank(
        rank=rank.rank, node=rank.node, ssh=rank.ssh, directory=rank.directory, is_head=rank.is_head,
        role=_role(rank), gid_text=_gid_text(rank),
        overlay_flags=",".join(flags), overlay_count=len(flags),
        rows_kind=rank.engram.source if rank.engram else "",
        rows_path=_rows_path(profile, rank), rows_expect=_rows_text(rank.engram.rows) if rank.engram else "",
        engram_lines=_engram_lines(profile, rank, world),
        unit_exec_lines=_unit_exec_lines(plan, profile, rank),
        docker_argv=rank.docker_argv,
        env_lines=_env_lines(profile, rank),
    )


def home_path(home: str, path: str) -> str:
    """A profile path that is absolute, or relative to a node's home."""
    return path if path.startswith("/") else f"{home}/{path}"


def watchdog_unit_base(plan: LaunchPlan) -> str:
    """sglang-x.service -> sglang-x-watchdog (the service and the timer share it)."""
    return plan.unit_name.removesuffix(".service").rstrip("@") + "-watchdog"


def ssh_user(target: str) -> str:
    """The user an ssh target logs in as; root when it names none (the watchdog then runs as root)."""
    return target.split("@", 1)[0] if "@" in target else "root"


def probe_body(profile: Profile) -> str:
    """The watchdog's short real request: 3 tokens, thinking off, must come back with choices."""
    body = {"model": profile.model.served_name, "max_tokens": 3, "temperature": 0,
            "messages": [{"role": "user", "content": PROBE_PROMPT}],
            "chat_template_kwargs": {"thinking": False}}
    return json.dumps(body, separators=(",", ":"))


def smoke_config(plan: LaunchPlan, profile: Profile) -> dict[str, Any]:
    """smoke.py's defaults: where the API is and what the profile says the model can do."""
    smoke = profile.operations.smoke
    return {"host": plan.head_ip, "port": plan.port, "model": profile.model.served_name,
            # Unset in the profile, SGLang serves the model's own length; unknown, no needle is skipped for size.
            "context_length": (profile.engine.limits.context_length or profile.model.max_context_length
                               or max(smoke.needle_tokens, default=0)),
            "needle_tokens": list(smoke.needle_tokens),
            "image": smoke.image, "tools": smoke.tools, "timeout": smoke.request_timeout_seconds,
            "thinking_default": profile.engine.chat.thinking,
            "reasoning": profile.engine.chat.reasoning_parser is not None}


def fleet_context(plan: LaunchPlan, profile: Profile) -> dict[str, Any]:
    """Everything the fleet templates format."""
    ops, watchdog = profile.operations, profile.operations.watchdog
    world = len(plan.ranks)
    ranks = [fleet_rank(plan, profile, rank) for rank in plan.ranks]
    head = plan.ranks[0]
    log_dir = home_path(head.home, ops.log_dir)
    overlay_on = any(r.engram_lines for r in ranks)
    base = watchdog_unit_base(plan)
    gpu_wait = profile.deploy.gpu_wait_tries * profile.deploy.gpu_wait_seconds
    return {
        "plan": plan, "profile": profile, "ranks": ranks, "head": ranks[0], "world": world,
        "start_order": list(plan.start_order), "stop_order": list(reversed(plan.start_order)),
        "fleet_install_dir": f"{plan.install_dir}/{FLEET_DIR}", "unit_dir": "/etc/systemd/system",
        "log_dir": log_dir, "postmortem_dir": f"{log_dir}/postmortem",
        "watchdog_lock": f"{log_dir}/watchdog.lock", "watchdog_state": f"{log_dir}/watchdog.state",
        "watchdog_log": f"{log_dir}/watchdog.log", "watchdog_enabled": watchdog.enabled,
        "watchdog_service": f"{base}.service", "watchdog_timer": f"{base}.timer",
        "watchdog_user": ssh_user(head.ssh), "watchdog": watchdog,
        "watchdog_env_file": f"{plan.install_dir}/{FLEET_DIR}/watchdog.env",
        "watchdog_run_timeout": watchdog.ready_timeout_seconds + WATCHDOG_RUN_MARGIN + gpu_wait,
        "health_timeout": ops.health_timeout_seconds,
        "health_probe_timeout": min(HEALTH_PROBE_CAP, watchdog.probe_timeout_seconds),
        "unit_active_timeout": UNIT_ACTIVE_TIMEOUT, "log_trim_at": LOG_TRIM_AT, "log_keep": LOG_KEEP,
        "probe_body": probe_body(profile), "probe_prompt": PROBE_PROMPT,
        "expect_overlay": overlay_on, "expect_roce": overlay_on and world > 1,
        "expect_kv_line": profile.engine.backends.attention == "dsv4",
        "smoke_config": smoke_config(plan, profile), "gpu_wait": gpu_wait,
    }


def _render(template: str, context: dict[str, Any]) -> bytes:
    text = environment().get_template(f"{FLEET_DIR}/{template}").render(version=__version__, **context)
    return text.encode()


def fleet_artifacts(plan: LaunchPlan, profile: Profile) -> list[Artifact]:
    """generated/<profile>/fleet/: launch.sh, verify.sh, smoke.py, the head's watchdog and its units."""
    ctx = fleet_context(plan, profile)
    files = [
        Artifact(f"{FLEET_DIR}/fleet-lib.sh", _render("fleet-lib.sh.j2", ctx)),
        Artifact(f"{FLEET_DIR}/launch.sh", _render("launch.sh.j2", ctx), SCRIPT_MODE),
        Artifact(f"{FLEET_DIR}/verify.sh", _render("verify.sh.j2", ctx), SCRIPT_MODE),
        Artifact(f"{FLEET_DIR}/smoke.py", _render("smoke.py.j2", ctx), SCRIPT_MODE),
        Artifact(f"{FLEET_DIR}/watchdog.sh", _render("watchdog.sh.j2", ctx), SCRIPT_MODE),
    ]
    if profile.operations.watchdog.enabled:
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_service']}", _render("watchdog.service.j2", ctx)))
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_timer']}", _render("watchdog.timer.j2", ctx)))
    return files
