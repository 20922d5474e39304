"""Fleet operations artifacts: each profile's fleet/ data and units, and the one shared folder of scripts.

A profile's generated/<profile>/fleet/ holds what differs between profiles: fleet.env and fleet.json
(fleet/data.py), audit.json (fleet/audit_plan.py), its README and watchdog units. The scripts that read them
are the same bytes for every profile and are written once per output root, in generated/fleet_scripts/
(the underscore: no profile name can hold one, so no profile's folder is ever that folder), with their
installer and a MANIFEST.json of their sha256: a fix to a script changes that folder only.
`install.py PROFILE_DIR DEST` puts a profile's folder and the scripts of the same compiler version together
where the operator runs launch.sh.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spark_compile import __version__
from spark_compile.capacity.budget import Capacity
from spark_compile.common import engram_rows
from spark_compile.common.quoting import bash_words
from spark_compile.fleet import audit
from spark_compile.fleet.data import LOG_KEEP, UNIT_ACTIVE_TIMEOUT, fleet_env, fleet_json, ssh_user
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan
from spark_compile.stages.plan import FLEET_DIR
from spark_compile.stages.render import FILE_MODE, SCRIPT_MODE, TEMPLATES, Artifact, digests, environment

SCRIPTS_DIR = "fleet_scripts"
STATIC_SCRIPTS = ("fleet-lib.sh", "dry-run.sh", "window.sh", "launch.sh", "verify.sh", "watchdog.sh", "smoke.py",
                  "engram.py", "gate.py", "gate_scoring.py", "verdict.py", "fleet_io.py")
# The compiler's own modules the scripts import or run (standard library only), shipped as they are.
MODULES = {"audit.py": Path(audit.__file__), "engram_rows.py": Path(engram_rows.__file__)}
# Read or imported, never run.
SOURCED = ("fleet-lib.sh", "dry-run.sh", "window.sh", "gate_scoring.py", "engram_rows.py", "fleet_io.py")
INSTALLER = "install.py"
MANIFEST = "MANIFEST.json"
# Extra time a watchdog run may take beyond the relaunch's own health wait: postmortem, stop, preflight.
WATCHDOG_RUN_MARGIN = 1800
FLEET_TEMPLATES = TEMPLATES / FLEET_DIR  # the static scripts and the installer, beside the fleet's templates


def fleet_scripts() -> list[Artifact]:
    """The scripts every installed fleet folder holds, by name: templates/fleet/static/ and MODULES."""
    sources = {name: FLEET_TEMPLATES / "static" / name for name in STATIC_SCRIPTS} | MODULES
    return sorted((Artifact(name, path.read_bytes(), FILE_MODE if name in SOURCED else SCRIPT_MODE)
                   for name, path in sources.items()), key=lambda a: a.path)


def scripts_folder() -> list[Artifact]:
    """generated/fleet_scripts/: the scripts, install.py, a README, and MANIFEST.json: the compiler's version,
    every file's sha256 and mode, and which files install.py puts in a fleet folder."""
    scripts = fleet_scripts()
    files = [*scripts, Artifact(INSTALLER, (FLEET_TEMPLATES / INSTALLER).read_bytes(), SCRIPT_MODE),
             Artifact("README.md", _render("scripts-README.md.j2", {"scripts": scripts, "installer": INSTALLER,
                                                                       "scripts_dir": SCRIPTS_DIR}))]
    body = {"compiler": f"spark-compile {__version__}", "files": digests(files),
            "scripts": [a.path for a in scripts]}
    manifest = Artifact(MANIFEST, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
    return sorted([*files, manifest], key=lambda a: a.path)


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
        "postmortem_lines": LOG_KEEP * 4, "previous": ops.previous_stack, "scripts_dir": SCRIPTS_DIR,
        "installer": INSTALLER,
    }


def _render(template: str, context: dict[str, Any]) -> bytes:
    text = environment().get_template(f"{FLEET_DIR}/{template}").render(version=__version__, **context)
    return text.encode()


def fleet_artifacts(plan: LaunchPlan, profile: Profile, capacity: Capacity | None = None) -> list[Artifact]:
    """generated/<profile>/fleet/ without the shared scripts: fleet.env, fleet.json, README.md, the watchdog
    units (audit.json is the pipeline's: it digests the rank files)."""
    ctx = fleet_context(plan, profile)
    env_text = fleet_env(plan, profile, __version__, {r.rank: unit_exec_lines(r) for r in plan.ranks}, capacity)
    files = [
        Artifact(f"{FLEET_DIR}/fleet.env", env_text.encode()),
        Artifact(f"{FLEET_DIR}/fleet.json", fleet_json(plan, profile).encode()),
        Artifact(f"{FLEET_DIR}/README.md", _render("README.md.j2", ctx)),
    ]
    if profile.operations.watchdog.enabled:
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_service']}", _render("watchdog.service.j2", ctx)))
        files.append(Artifact(f"{FLEET_DIR}/{ctx['watchdog_timer']}", _render("watchdog.timer.j2", ctx)))
    return files
