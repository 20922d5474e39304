"""Fleet operations artifacts (generated/<profile>/fleet/): static scripts, the data they read, watchdog units.

The scripts (launch.sh, fleet-lib.sh, verify.sh, watchdog.sh, smoke.py) ship in the package as they are;
fleet.env and fleet.json (fleet_data.py) carry every value of the profile, the watchdog's units and the
folder's README are rendered.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spark_compile import __version__, templates
from spark_compile.capacity.budget import Capacity
from spark_compile.common.quoting import bash_words
from spark_compile.fleet.data import LOG_KEEP, UNIT_ACTIVE_TIMEOUT, fleet_env, fleet_json, ssh_user
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan
from spark_compile.stages.plan import FLEET_DIR
from spark_compile.stages.render import SCRIPT_MODE, Artifact, environment

STATIC_SCRIPTS = ("fleet-lib.sh", "dry-run.sh", "window.sh", "launch.sh", "verify.sh", "watchdog.sh", "smoke.py",
                  "engram.py", "gate.py", "gate_scoring.py", "verdict.py")
SOURCED = ("fleet-lib.sh", "dry-run.sh", "window.sh", "gate_scoring.py")  # read by the scripts, never run
# Extra time a watchdog run may take beyond the relaunch's own health wait: postmortem, stop, preflight.
WATCHDOG_RUN_MARGIN = 1800


def static_script(name: str) -> bytes:
    """One of the package's static fleet scripts, as shipped."""
    # Package data beside the templates package, as render.py finds it (importlib.resources would import
    # zipfile and its readers on every compile for nothing); os.path and an unbuffered read, not pathlib:
    # eleven files on every compile.
    path = os.path.join(os.path.dirname(templates.__file__), FLEET_DIR, "static", name)
    with open(path, "rb", buffering=0) as script:
        return script.readall()


def audit_script() -> bytes:
    """fleet/audit.py: the compiler's own comparison module (standard library only), shipped as it is."""
    return Path(__file__).with_name("audit.py").read_bytes()


def unit_exec_lines(rank: RankPlan) -> list[str]:
    """The rank unit's Exec*= lines from its UnitPlan, each argv quoted for reading ("-": failure ignored)."""
    unit = rank.unit

    def line(key: str, ignore: bool, argv: tuple[str, ...]) -> str:
        return f"{key}={'-' if ignore else ''}{bash_words(argv)}"

    return [*(line("ExecStartPre", ignore, argv) for ignore, argv in unit.exec_start_pre),
            line("ExecStart", False, unit.exec_start), line("ExecStop", False, unit.exec_stop),
            *(line("ExecStopPost", ignore, argv) for ignore, argv in unit.exec_stop_post)]


def fleet_context(plan: LaunchPlan, profile: Profile) -> dict[str, Any]:
    """What the watchdog units and the fleet README format."""
    ops, watchdog, fleet = profile.operations, profile.operations.watchdog, plan.fleet
    head, api, base = plan.ranks[0], fleet.api, fleet.watchdog_unit
    return {
        "plan": plan, "profile": profile, "head": head, "world": len(plan.ranks), "ops": ops,
        "watchdog": watchdog, "fleet_install_dir": fleet.install_dir, "log_dir": fleet.log_dir,
        "watchdog_service": f"{base}.service", "watchdog_timer": f"{base}.timer",
        "watchdog_user": ssh_user(head.ssh), "watchdog_env_file": f"{fleet.install_dir}/watchdog.env",
        "watchdog_run_timeout": watchdog.ready_timeout_seconds + WATCHDOG_RUN_MARGIN + fleet.gpu_wait_seconds,
        "api": api, "api_url": f"http://{api.host}:{plan.port}", "unit_active_timeout": UNIT_ACTIVE_TIMEOUT,
        "postmortem_lines": LOG_KEEP * 4, "previous": ops.previous_stack,
    }


def _render(template: str, context: dict[str, Any]) -> bytes:
    text = environment().get_template(f"{FLEET_DIR}/{template}").render(version=__version__, **context)
    return text.encode()


def fleet_artifacts(plan: LaunchPlan, profile: Profile, capacity: Capacity | None = None) -> list[Artifact]:
    """generated/<profile>/fleet/: the static scripts, fleet.env, fleet.json, README.md, the watchdog units."""
    ctx = fleet_context(plan, profile)
    files = [Artifact(f"{FLEET_DIR}/{name}", static_script(name),
                      0o644 if name in SOURCED else SCRIPT_MODE) for name in STATIC_SCRIPTS]
    env_text = fleet_env(plan, profile, __version__, {r.rank: unit_exec_lines(r) for r in plan.ranks}, capacity)
    files += [
        Artifact(f"{FLEET_DIR}/fleet.env", env_text.encode()),
        Artifact(f"{FLEET_DIR}/fleet.json", fleet_json(plan, profile).encode()),
        Artifact(f"{FLEET_DIR}/README.md", _render("README.md.j2", ctx)),
        Artifact(f"{FLEET_DIR}/audit.py", audit_script(), SCRIPT_MODE),
    ]
    if profile.operations.watchdog.enabled:
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_service']}", _render("watchdog.service.j2", ctx)))
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_timer']}", _render("watchdog.timer.j2", ctx)))
    return files
