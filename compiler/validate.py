"""Stage 3: validate a resolved profile: the schema, then every cross-field and catalog rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from .findings import Finding
from .resolve import Resolved

_RANGE_TEXT = {
    "greater_than": "must be greater than {gt}", "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}", "less_than_equal": "must be at most {le}",
    "too_short": "needs at least {min_length} item(s)", "too_long": "takes at most {max_length} item(s)",
}
_RANGE = set(_RANGE_TEXT)
_CHOICE = {"literal_error", "enum", "unknown_choice"}
_TYPE_WORDS = {
    "int": "a whole number", "float": "a number", "bool": "true or false", "string": "a string",
    "str": "a string", "list": "a list", "dict": "a mapping", "model": "a mapping", "tuple": "a list",
}


@dataclass
class Validated:
    """The outcome of validation: the profile (None when the schema failed) and all findings."""

    profile: Any
    findings: list[Finding]
    resolved: Resolved
    plan: Any = None  # the launch plan, when a rule already built it (compile reuses it)


def dotted(path: tuple[str | int, ...]) -> str:
    """``fleet.nodes[0].name`` for a YAML path."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _fields_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The field names of the model that owns ``loc`` (for did-you-mean)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = _model_in(field.annotation)
    return sorted(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _description_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """The schema description of the field at ``loc``: what the key means, as the fix's reminder."""
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return ""
    owner: Any = model
    for part in names[:-1]:
        field = getattr(owner, "model_fields", {}).get(part)
        owner = _model_in(field.annotation) if field is not None else None
    field = getattr(owner, "model_fields", {}).get(names[-1])
    return (field.description or "") if field is not None else ""


def _type_word(kind: str) -> str:
    return _TYPE_WORDS.get(kind.split("_", maxsplit=1)[0], kind.replace("_", " "))


def _message(err: Any, where: str, model: type[BaseModel]) -> tuple[str, str, str, bool]:
    """(rule, message, hint, at_key) for one pydantic error."""
    kind, loc, value = err["type"], err["loc"], err.get("input")
    from .spec.suggest import did_you_mean

    if kind == "extra_forbidden":
        key = str(loc[-1])
        hint = did_you_mean(key, _fields_at(model, loc[:-1]))
        parent = dotted(loc[:-1])
        return "SC101", f"unknown key {key!r} in {parent}", hint or f"see `spark-compile schema` for {parent}", True
    if kind == "missing":
        return "SC103", f"{dotted(loc[:-1])} is missing required key {str(loc[-1])!r}", "add the key", False
    if kind in _RANGE:
        return "SC109", f"{where}: {_RANGE_TEXT[kind].format(**err['ctx'])}, got {_show(value)}", "", False
    if kind == "unknown_choice":
        return "SC110", f"{where}: {err['msg']}", "", False
    if kind in _CHOICE:
        expected = err["ctx"]["expected"]
        choices = [c.strip(" '") for c in expected.replace(" or ", ",").split(",")]
        hint = did_you_mean(str(value), choices)
        return "SC110", f"{where}: expected {expected}, got {_show(value)}", hint, False
    if kind.endswith(("_type", "_parsing")) or kind in ("model_attributes_type", "dict_type"):
        return "SC102", f"{where}: expected {_type_word(kind)}, got {_show(value)}", "", False
    return "SC111", f"{where}: {err['msg']}", "", False


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


_UNION_TAGS = {"int", "float", "bool", "str", "none", "list", "dict", "tuple", "set", "is-instance"}


def _is_type_tag(part: Any) -> bool:
    """Pydantic puts union member and validator names (``int``, ``function-after[...]``) into a loc."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part or part in _UNION_TAGS
                                      or part.startswith(("function-", "literal", "constrained-")))


# For one location, a union reports every member's complaint; the most specific one is shown.
_SPECIFIC = {"SC101": 0, "SC103": 0, "SC111": 1, "SC109": 2, "SC110": 3, "SC102": 4}


def _error_path(loc: tuple[Any, ...], data: Any) -> tuple[str | int, ...]:
    """Strip pydantic's union/type tags from a loc, keeping only real keys and indexes of the data."""
    path: list[str | int] = []
    node = data
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if (isinstance(node, dict) and part in node) or in_list:
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part.isdigit() and int(part) in node:
            path.append(int(part))
            node = node[int(part)]
        elif part in ("[key]",):
            continue
        elif not _is_type_tag(part):
            path.append(part)
    return tuple(path)


def schema_findings(resolved: Resolved, exc: ValidationError, model: type[BaseModel]) -> list[Finding]:
    """Positioned findings for every schema error, one per location."""
    findings: dict[tuple[str | int, ...], Finding] = {}
    for err in exc.errors():
        path = _error_path(err["loc"], resolved.data)
        rule, message, hint, at_key = _message(err, dotted(path), model)
        if not hint and rule != "SC101":
            hint = _description_at(model, path)
        if path in findings and _SPECIFIC.get(findings[path].rule, 5) <= _SPECIFIC.get(rule, 5):
            continue
        findings[path] = locate(resolved, path, rule, "error", message, hint, at_key=at_key)
    return sorted(findings.values(), key=Finding.sort_key)


def locate(resolved: Resolved, path: tuple[str | int, ...], rule: str, severity: Any, message: str,
           hint: str = "", *, at_key: bool = False) -> Finding:
    """A finding at the YAML position of ``path`` (its key or its value)."""
    origin = resolved.origin(path)
    spot = origin.spot
    pos = spot.key if at_key and spot.key is not None else spot.value
    if not path or path not in resolved.origins:
        pos = spot.key or spot.value
    return Finding(rule, severity, pos, message, hint, resolved.source_line(pos), origin.via)


def _present(resolved: Resolved) -> Any:
    def present(path: tuple[str | int, ...]) -> bool:
        return path in resolved.origins

    return present


def _redacted(finding: Finding, secret: str) -> Finding:
    if not secret:
        return finding
    from dataclasses import replace

    return replace(finding, source_line=finding.source_line.replace(secret, "(redacted)"))


def validate(resolved: Resolved) -> Validated:
    """Schema first; only a profile that passes it meets the cross-field and catalog rules."""
    from .plan import build_plan
    from .spec.model import Profile
    from .spec.rules import CHECKS, RULES, Context, load_all

    try:
        profile = Profile.model_validate(resolved.data)
    except ValidationError as exc:
        return Validated(None, schema_findings(resolved, exc, Profile), resolved)
    load_all()
    context = Context(profile, lambda: build_plan(profile), _present(resolved))
    findings = [
        _redacted(locate(resolved, hit.path, hit.rule, RULES[hit.rule].severity, hit.message, hit.hint,
                         at_key=hit.at_key), hit.redact)
        for _, check in CHECKS
        for hit in check(context)
    ]
    return Validated(profile, sorted(findings, key=Finding.sort_key), resolved, context.built_plan)
