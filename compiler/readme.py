"""What the deployment README shows beyond the plan: overlay flags against their hook defaults."""

from __future__ import annotations

from typing import Any

from spark_compile.launch_plan import LaunchPlan
from spark_compile.overlay.registry import FLAGS_BY_NAME


def readme_context(plan: LaunchPlan) -> dict[str, Any]:
    """Rows for the README: each SPARK_* value of rank 0 with the hook's default beside it."""
    overlay = [f for f in plan.ranks[0].env_files if f.name == "overlay.env"] if plan.ranks else []
    head_env = dict(overlay[0].values) if overlay else {}
    rows = []
    for name, value in head_env.items():
        flag = FLAGS_BY_NAME.get(name)
        default = flag.default if flag is not None else None
        rows.append({"name": name, "value": value, "default": "-" if default is None else default or '""',
                     "differs": default is None or value != default})
    return {"overlay_rows": rows}
