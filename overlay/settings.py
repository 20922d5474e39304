"""Read every SPARK_* variable of an environment through the registry, strictly.

The peer overlay reads each variable where it is used and falls back to the default on a value it
cannot read; a typo then silently runs stock code. Here every SPARK_* name must be a registry flag
and every value must parse, or start-up stops with one message per problem. Standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import OverlayConfigError
from .registry import FLAGS, FLAGS_BY_NAME, REGISTRY_VERSION, Flag
from .values import FlagValueError, parse_value

PREFIX = "SPARK_"
MASTER_SWITCH = "SPARK_ENGRAM_DIR"
# Kinds whose empty value means "none" (an env file line `SPARK_SERVED_ALIASES=`); for the others an
# empty value is a mistake, not a request for the default.
_EMPTY_MEANS_NONE = frozenset({"list", "path", "rows"})


@dataclass(frozen=True, slots=True)
class Settings:
    """Every registry flag's value: parsed from the environment, else from its default."""

    values: Mapping[str, object]
    explicit: Mapping[str, str]  # the raw text of the flags the environment sets

    def text(self, name: str) -> str:
        """The text a flag has in effect: as set, else its default ('' when it has none)."""
        if name in self.explicit:
            return self.explicit[name]
        default = FLAGS_BY_NAME[name].default
        return "" if default is None else default


def master_switch_on(environ: Mapping[str, str]) -> bool:
    """True when the overlay is to do anything at all."""
    return bool(environ.get(MASTER_SWITCH, ""))


def parse_flag(flag: Flag, text: str | None) -> object:
    """The value ``text`` means for ``flag`` (None = unset and no default); FlagValueError otherwise."""
    if text is None:
        return None
    if text == "":
        if flag.kind == "list":
            return []
        if flag.kind in _EMPTY_MEANS_NONE:
            return None
        raise FlagValueError(f"{flag.name} is set but empty; unset it to get the default {flag.default}")
    return parse_value(flag, text)


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, list(FLAGS_BY_NAME), n=1, cutoff=0.6)
    hint = (
        f"did you mean {close[0]}?" if close else "list the known ones with `python -m spark_overlay flags`"
    )
    return f"overlay: unknown flag {name}: registry {REGISTRY_VERSION} has no such SPARK_* variable; {hint}"


def _malformed(flag: Flag, text: str, error: FlagValueError) -> str:
    detail = str(error)
    # values.py often starts its message with NAME=value already; say it once.
    prefix = f"{flag.name}={text!r}: "
    detail = detail.removeprefix(prefix)
    return (
        f"overlay: {flag.name}={text!r} is malformed: {detail} ({flag.kind} flag, default {flag.default!r})"
    )


def parse_environment(environ: Mapping[str, str]) -> Settings:
    """Parse the SPARK_* part of ``environ``; OverlayConfigError lists every problem found."""
    problems = [
        _unknown(name) for name in sorted(environ) if name.startswith(PREFIX) and name not in FLAGS_BY_NAME
    ]
    values: dict[str, object] = {}
    explicit = {name: environ[name] for name in FLAGS_BY_NAME if name in environ}
    for flag in FLAGS:
        text = explicit.get(flag.name)
        try:
            values[flag.name] = parse_flag(flag, text)
        except FlagValueError as error:
            problems.append(_malformed(flag, text or "", error))
            continue
        if text is None:
            # A default that does not parse is a registry bug; it must not pass for a user's value.
            values[flag.name] = parse_flag(flag, flag.default)
    settings = Settings(values, explicit)
    problems += _unmet_requirements(settings)
    if problems:
        raise OverlayConfigError("\n".join(problems))
    return settings


def _unmet_requirements(settings: Settings) -> list[str]:
    """A switch turned on while a flag it needs is off would run half a feature: refuse it."""
    unmet = []
    for flag in FLAGS:
        if flag.kind != "switch" or settings.explicit.get(flag.name) != "1":
            continue
        for other, wanted in flag.requires:
            have = settings.text(other)
            if have != wanted:
                unmet.append(f"overlay: {flag.name}=1 needs {other}={wanted}, but {other} is {have!r}")
    return unmet
