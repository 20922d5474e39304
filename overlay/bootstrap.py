"""Start-up of the overlay: flags → enabled hooks → their implementations → one armed finder.

``start()`` is what the activation file (site/sitecustomize.py) calls at interpreter start: on any
refusal it prints the reason and ends the process. ``activate()`` is the same without the exit, for
callers that want the exception. Standard library only.

Hook implementations are the modules ``<this package>.hooks.<hook name>``; each defines
``apply(module, flags)``, called once per target module with the parsed SPARK_* values. A hook the
flags enable but for which no such module exists (the GB10-only ones, in this overlay) is refused:
the process stops rather than serve with stock code where the profile asked for the hook.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol, cast

from . import finder as finder_module
from .errors import OverlayConfigError, OverlayHookError
from .gates import GATES, armable_hooks, enabled_hooks, patch_order
from .registry import HOOKS
from .settings import MASTER_SWITCH, Settings, master_switch_on, parse_environment

# sysexits.h: EX_CONFIG for flags the overlay refuses, EX_SOFTWARE for a hook that failed.
EXIT_CONFIG = 78
EXIT_HOOK = 70
HOOKS_PACKAGE = f"{__package__}.hooks"


class HookModule(Protocol):
    """What a hook implementation module provides."""

    def apply(self, module: ModuleType, flags: Mapping[str, object]) -> None: ...


@dataclass(frozen=True, slots=True)
class Activation:
    """What start-up decided: the hooks armed (empty when the master switch is off)."""

    active: bool
    hooks: tuple[str, ...] = ()
    summary: str = ""


def implementation_name(hook: str) -> str:
    return f"{HOOKS_PACKAGE}.{hook}"


def installed_hooks() -> list[str]:
    """The hooks whose implementation module ships in this overlay (found without importing them)."""
    return [
        hook for hook in armable_hooks() if importlib.util.find_spec(implementation_name(hook)) is not None
    ]


def load_hook(hook: str) -> HookModule | None:
    """The hook's implementation module, or None when this overlay does not ship one."""
    name = implementation_name(hook)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name == name:
            return None
        raise OverlayConfigError(
            f"overlay: the implementation of hook {hook} does not import: {error}"
        ) from error
    if not callable(getattr(module, "apply", None)):
        raise OverlayConfigError(f"overlay: {name} has no apply(module, flags) function")
    return cast(HookModule, module)


def _why(hook: str, settings: Settings) -> str:
    flags = GATES[hook].flags
    if not flags:
        return "always on with the overlay"
    return ", ".join(f"{name}={settings.text(name)}" for name in flags)


def _refusal(hook: str, settings: Settings) -> str:
    kind = "GB10-only hook" if HOOKS[hook].needs_gb10 else "hook"
    return (
        f"overlay: refusing {kind} {hook}, enabled by {_why(hook, settings)}: its implementation is not "
        f"installed in this overlay (no module {implementation_name(hook)}; it patches "
        f"{', '.join(HOOKS[hook].targets)}); turn the flag off or use an image whose overlay ships it"
    )


def plan(environ: Mapping[str, str]) -> tuple[Settings, list[str], dict[str, HookModule]]:
    """Parse the flags and load the enabled hooks' implementations, without arming anything."""
    settings = parse_environment(environ)
    enabled = enabled_hooks(settings.values)
    implementations: dict[str, HookModule] = {}
    refusals = []
    for hook in enabled:
        module = load_hook(hook)
        if module is None:
            refusals.append(_refusal(hook, settings))
        else:
            implementations[hook] = module
    if refusals:
        raise OverlayConfigError("\n".join(refusals))
    return settings, enabled, implementations


def activate(environ: Mapping[str, str] | None = None) -> Activation:
    """Arm the overlay for this process (idempotent); OverlayConfigError / OverlayHookError on refusal."""
    environ = os.environ if environ is None else environ
    if not master_switch_on(environ):
        return Activation(active=False)
    existing = finder_module.installed_finder()
    if existing is not None:
        return Activation(True, tuple(dict.fromkeys(p.hook for p in existing.patches)), existing.summary)
    settings, enabled, implementations = plan(environ)
    patches = [
        finder_module.Patch(
            hook, target, functools.partial(implementations[hook].apply, flags=settings.values)
        )
        for hook, target in patch_order(enabled)
    ]
    summary = f"overlay: {len(enabled)} hooks armed: {', '.join(enabled)}"
    finder, _ = finder_module.install(patches, summary)
    finder.patch_imported()
    sys.stderr.write(summary + "\n")
    return Activation(True, tuple(enabled), summary)


def _die(message: str, code: int) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # os._exit, not SystemExit: at interpreter start SystemExit becomes "Fatal Python error:
    # init_import_site" with a traceback, and an ordinary exception would only be printed by site.py
    # ("Error in sitecustomize") while the process goes on without the overlay.
    os._exit(code)


def start() -> None:
    """Entry point of the activation file: arm the overlay or end the process with the reason."""
    if not master_switch_on(os.environ):
        return
    try:
        activate()
    except OverlayConfigError as error:
        _die(f"{error}\noverlay: refusing to start ({MASTER_SWITCH} is set)", EXIT_CONFIG)
    except OverlayHookError as error:
        _die(str(error), EXIT_HOOK)
    except Exception:
        # A bug in the overlay itself: stock code must not run as if the hooks were armed.
        _die("overlay: start-up failed\n" + traceback.format_exc(), EXIT_HOOK)
