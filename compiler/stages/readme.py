"""What the deployment README shows beyond the plan: overlay flags against their hook defaults."""

from __future__ import annotations

from typing import Any

from spark_compile.overlay.registry import FLAGS_BY_NAME
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan


def api_where(plan: LaunchPlan, profile: Profile) -> tuple[str, str]:
    """The API's URL and from where it is reachable, as the README says it: a loopback bind is the head's alone."""
    place = plan.fleet.api
    head = plan.ranks[0].node if plan.ranks else "the head"
    if place.via_head:
        where = f"on {head} only (bound to loopback: call it there, or over ssh to {head})"
    elif profile.engine.host == "0.0.0.0":
        where = f"on the head, {head}, which listens on every address"
    else:
        where = f"on the head, {head}, bound to that address only"
    return f"http://{place.host}:{plan.port}/v1", where


def readme_context(plan: LaunchPlan, profile: Profile) -> dict[str, Any]:
    """The API's place, and rows for the README: each SPARK_* value of rank 0 with the hook's default beside it."""
    overlay = [f for f in plan.ranks[0].env_files if f.name == "overlay.env"] if plan.ranks else []
    head_env = dict(overlay[0].values) if overlay else {}
    rows = []
    for name, value in head_env.items():
        flag = FLAGS_BY_NAME.get(name)
        default = flag.default if flag is not None else None
        rows.append({"name": name, "value": value, "default": "-" if default is None else default or '""',
                     "differs": default is None or value != default})
    api_url, where = api_where(plan, profile)
    return {"overlay_rows": rows, "api_url": api_url, "api_where": where}
