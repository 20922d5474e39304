"""Fleet operations artifacts (generated/<profile>/fleet/): static scripts, the data they read, watchdog units.

The scripts (launch.sh, fleet-lib.sh, verify.sh, watchdog.sh, smoke.py) ship in the package as they are;
fleet.env and fleet.json (fleet_data.py) carry every value of the profile, the watchdog's units and the
folder's README are rendered.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from . import __version__
from .fleet_data import (
    LOG_KEEP,
    UNIT_ACTIVE_TIMEOUT,
    api_place,
    fleet_env,
    fleet_json,
    home_path,
    ssh_user,
)
from .plan import LaunchPlan
from .render import SCRIPT_MODE, Artifact, environment, render_unit
from .spec.model import Profile

FLEET_DIR = "fleet"
STATIC_SCRIPTS = ("fleet-lib.sh", "launch.sh", "verify.sh", "watchdog.sh", "smoke.py")
# Extra time a watchdog run may take beyond the relaunch's own health wait: postmortem, stop, preflight.
WATCHDOG_RUN_MARGIN = 1800


def static_script(name: str) -> bytes:
    """One of the package's static fleet scripts, as shipped."""
    return resources.files("spark_compile.templates").joinpath("fleet", "static", name).read_bytes()


def unit_exec_lines(plan: LaunchPlan, profile: Profile) -> dict[int, list[str]]:
    """Each rank unit's Exec*= lines, read off the rendered unit so the dry run cannot drift from it."""
    lines = {}
    for rank in plan.ranks:
        unit = render_unit(plan, profile, rank).decode()
        lines[rank.rank] = [line for line in unit.splitlines() if line.startswith("Exec")]
    return lines


def watchdog_unit_base(plan: LaunchPlan) -> str:
    """sglang-x.service -> sglang-x-watchdog (the service and the timer share it)."""
    return plan.unit_name.removesuffix(".service").rstrip("@") + "-watchdog"


def fleet_context(plan: LaunchPlan, profile: Profile) -> dict[str, Any]:
    """What the watchdog units and the fleet README format."""
    ops, watchdog = profile.operations, profile.operations.watchdog
    head = plan.ranks[0]
    log_dir = home_path(head.home, ops.log_dir)
    base = watchdog_unit_base(plan)
    gpu_wait = profile.deploy.gpu_wait_tries * profile.deploy.gpu_wait_seconds
    fleet_install_dir = f"{plan.install_dir}/{FLEET_DIR}"
    api = api_place(plan, profile)
    return {
        "plan": plan, "profile": profile, "head": head, "world": len(plan.ranks), "ops": ops,
        "watchdog": watchdog, "fleet_install_dir": fleet_install_dir, "log_dir": log_dir,
        "watchdog_service": f"{base}.service", "watchdog_timer": f"{base}.timer",
        "watchdog_user": ssh_user(head.ssh), "watchdog_env_file": f"{fleet_install_dir}/watchdog.env",
        "watchdog_run_timeout": watchdog.ready_timeout_seconds + WATCHDOG_RUN_MARGIN + gpu_wait,
        "api": api, "api_url": f"http://{api.host}:{plan.port}", "unit_active_timeout": UNIT_ACTIVE_TIMEOUT,
        "postmortem_lines": LOG_KEEP * 4, "previous": ops.previous_stack,
    }


def _render(template: str, context: dict[str, Any]) -> bytes:
    text = environment().get_template(f"{FLEET_DIR}/{template}").render(version=__version__, **context)
    return text.encode()


def fleet_artifacts(plan: LaunchPlan, profile: Profile) -> list[Artifact]:
    """generated/<profile>/fleet/: the static scripts, fleet.env, fleet.json, README.md, the watchdog units."""
    ctx = fleet_context(plan, profile)
    files = [Artifact(f"{FLEET_DIR}/{name}", static_script(name),
                      SCRIPT_MODE if name != "fleet-lib.sh" else 0o644) for name in STATIC_SCRIPTS]
    env_text = fleet_env(plan, profile, __version__, unit_exec_lines(plan, profile))
    files += [
        Artifact(f"{FLEET_DIR}/fleet.env", env_text.encode()),
        Artifact(f"{FLEET_DIR}/fleet.json", fleet_json(plan, profile).encode()),
        Artifact(f"{FLEET_DIR}/README.md", _render("README.md.j2", ctx)),
    ]
    if profile.operations.watchdog.enabled:
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_service']}", _render("watchdog.service.j2", ctx)))
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_timer']}", _render("watchdog.timer.j2", ctx)))
    return files
