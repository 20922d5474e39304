"""`spark-compile flags`: the SPARK_* registry as a table or JSON."""

from __future__ import annotations

import json

from spark_compile.overlay.registry import FLAGS, REGISTRY_VERSION


def flags_text(*, as_json: bool) -> str:
    """Every overlay flag with its kind, default, hook and release."""
    if as_json:
        rows = [{"name": f.name, "key": f.key, "kind": f.kind, "default": f.default, "hook": f.hook,
                 "targets": list(f.targets), "since": f.since, "source": f.source, "doc": f.doc} for f in FLAGS]
        return json.dumps({"version": REGISTRY_VERSION, "flags": rows}, indent=2) + "\n"
    lines = [f"overlay registry {REGISTRY_VERSION}: {len(FLAGS)} flags"]
    for f in FLAGS:
        default = "-" if f.default is None else f.default or '""'
        lines.append(f"{f.name:<30} {f.kind:<6} default {default:<10} {f.hook:<18} {f.since}  {f.doc}")
    return "\n".join(lines) + "\n"
