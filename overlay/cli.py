"""``python -m spark_overlay flags [--json]`` and ``python -m spark_overlay check [--json]``.

``flags`` answers the compiler's preflight question "which flags does your overlay know?": the
registry version, then every flag (with --json: kind, default, hook, since, targets) and every hook
with whether this overlay ships its implementation. ``check`` parses the current environment the way
start-up would and prints the hooks it would arm, or the refusals, without arming anything.
Works as ``spark_compile.overlay`` and as a top-level ``spark_overlay`` (relative imports only).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .bootstrap import EXIT_CONFIG, installed_hooks, plan
from .errors import OverlayConfigError
from .gates import armable_hooks
from .registry import FLAGS, HOOKS, REGISTRY_VERSION
from .settings import master_switch_on


def flags_document() -> dict[str, object]:
    """The registry as JSON-ready data, plus which hook implementations this overlay ships."""
    shipped = set(installed_hooks())
    return {
        "registry_version": REGISTRY_VERSION,
        "flags": [
            {
                "name": f.name,
                "kind": f.kind,
                "default": f.default,
                "hook": f.hook,
                "since": f.since,
                "targets": list(f.targets),
            }
            for f in FLAGS
        ],
        "hooks": [
            {
                "name": name,
                "targets": list(HOOKS[name].targets),
                "needs_gb10": HOOKS[name].needs_gb10,
                "installed": name in shipped,
            }
            for name in armable_hooks()
        ],
    }


def _flags(as_json: bool) -> int:
    if as_json:
        print(json.dumps(flags_document(), indent=2))
    else:
        print(f"registry {REGISTRY_VERSION}")
        for flag in FLAGS:
            print(flag.name)
    return 0


def _check(as_json: bool) -> int:
    active = master_switch_on(os.environ)
    hooks: list[str] = []
    errors: list[str] = []
    if active:
        try:
            _, hooks, _ = plan(os.environ)
        except OverlayConfigError as error:
            errors = str(error).splitlines()
    if as_json:
        print(json.dumps({"active": active, "hooks": hooks, "errors": errors}, indent=2))
    elif errors:
        print("\n".join(errors), file=sys.stderr)
    elif active:
        print(f"overlay: would arm {len(hooks)} hooks: {', '.join(hooks)}")
    else:
        print("overlay: inactive (SPARK_ENGRAM_DIR is unset or empty)")
    return EXIT_CONFIG if errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_overlay", description="The spark overlay's flags.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("flags", "list the registry's flags"), ("check", "parse this environment's flags")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.command == "flags":
        return _flags(args.json)
    return _check(args.json)
