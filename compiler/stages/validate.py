"""Stage: the schema. Resolved data becomes a typed Profile, or findings placed at their source lines."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from spark_compile.common.findings import Finding, dotted
from spark_compile.spec.model import Profile
from spark_compile.spec.suggest import did_you_mean
from spark_compile.stages.resolve import Resolved

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


# What a valid value of each checked kind looks like (the hint of an SC111 finding).
VALUE_HINTS = {
    "abs_path": "write an absolute path such as /srv/models: letters, digits and . _ + @ = - between slashes, "
                "no '..'",
    "word": "write one word such as flashinfer or host: letters, digits and _ . + : -",
    "gpus": "write all, a count such as 1, or device=0,1",
    "device": "write /dev/HOST[:/dev/CONTAINER][:rwm], e.g. /dev/infiniband:/dev/infiniband",
    "free_text": "remove control characters (tabs and line breaks are fine) and keep it under 4096 characters",
    "arg_text": "remove line breaks and control characters; keep it under 8192 characters",
    "list_arg": "give each flag its own key under engine.args; list items are values",
    "launcher_word": "move the flag to engine.args (e.g. engine.args: {log-level: info})",
    "launcher_program": "start the launcher with its program, e.g. [python3, -m, sglang.launch_server]",
    "ulimit": "write soft[:hard] with -1 (unlimited) or whole numbers, e.g. -1:-1 or 1048576",
    "aliases_without_overlay": "remove model.aliases, or add model.engram so the overlay serves them",
    "env_name": "write an upper-case variable name such as NCCL_DEBUG",
    "ifname": "write the interface name as `ip link` prints it, e.g. enp1s0f0np0 (at most 15 characters)",
    "image": "write [registry/]name[:tag][@sha256:<64 hex digits>] in lower case, e.g. lmsysorg/sglang:v0.5.23",
    "image_digest": "complete the digest: sha256: and all 64 lower-case hex digits (`docker buildx imagetools inspect "
                    "<image>` prints them), or drop the @ part to pin by tag only",
    "ipv4": "write a dotted IPv4 address such as 192.0.2.11",
    "ipv4_network": "write the network in CIDR form with its host bits zero, e.g. 192.0.2.0/24",
    "name": "use lower-case letters, digits and '-', e.g. spark-0",
    "rdma_name": "write the device as `ls /sys/class/infiniband` prints it, e.g. mlx5_0 or rocep1s0f0",
    "rdma_resource": "name the device plugin's resource (resource: rdma/rdma_shared_device_a), or use mode: hostpath",
    "size": "write a number with an optional unit b, k, m or g, e.g. 112g",
    "snapshot": "write the snapshot directory's name (the commit hash under snapshots/)",
    "ssh_target": "write host or user@host, e.g. spark@192.0.2.11",
    "text": "remove leading or trailing spaces and characters outside printable ASCII",
    "overlay_size": "write a byte size such as 1MB, 16MB or 1048576",
    "overlay_rows": "write layer:lo:hi triples joined by commas, e.g. 1:0:96001542,14:0:96004170",
    "window_expectation": "keep expect: for an exact answer (e.g. expect: \"391\") or pattern: for a regular "
                          "expression (e.g. pattern: \"\\\\b3\\\\b\"), not both",
    "window_pattern": "write a Python regular expression, brackets balanced, e.g. pattern: \"\\\\b3\\\\b\"",
    "window_names": "give each operations.window.checks entry its own name",
}


def _range_hint(kind: str, ctx: dict[str, Any]) -> str:
    return "use a value that " + _RANGE_TEXT[kind].format(**ctx).replace("must be", "is").replace(
        "needs", "has").replace("takes", "has")


def _type_word(kind: str) -> str:
    return _TYPE_WORDS.get(kind.split("_", maxsplit=1)[0], kind.replace("_", " "))


def _message(err: Any, where: str, model: type[BaseModel]) -> tuple[str, str, str, bool]:
    """(rule, message, hint, at_key) for one pydantic error."""
    kind, loc, value = err["type"], err["loc"], err.get("input")
    if kind == "extra_forbidden":
        key = str(loc[-1])
        hint = did_you_mean(key, _fields_at(model, loc[:-1]))
        parent = dotted(loc[:-1])
        return "SC101", f"unknown key {key!r} in {parent}", hint or f"see `spark-compile schema` for {parent}", True
    if kind == "missing":
        # Placed at the section that must receive the key (its own key line), not at a sibling.
        parent, key = dotted(loc[:-1]), str(loc[-1])
        what = _description_at(model, loc)
        return "SC103", f"{parent} is missing required key {key!r}", \
            f"under {parent}, add the key {key}" + (f" ({what})" if what else ""), True
    if kind in _RANGE:
        message = f"{where}: {_RANGE_TEXT[kind].format(**err['ctx'])}, got {_show(value)}"
        return "SC109", message, _range_hint(kind, err["ctx"]), False
    if kind == "unknown_choice":
        return "SC110", f"{where}: {err['msg']}", err["ctx"].get("hint") or f"use one of {err['ctx']['known']}", False
    if kind in _CHOICE:
        expected = err["ctx"]["expected"]
        choices = [c.strip(" '") for c in expected.replace(" or ", ",").split(",")]
        hint = did_you_mean(str(value), choices) or f"use one of {expected}"
        return "SC110", f"{where}: expected {expected}, got {_show(value)}", hint, False
    if kind.endswith(("_type", "_parsing")) or kind in ("model_attributes_type", "dict_type"):
        word = _type_word(kind)
        hint = f"write {word}" + (" without quotes" if word in ("a whole number", "a number", "true or false")
                                  else "")
        if word == "a list" and isinstance(value, str | int):  # one item written bare: the list of it
            hint = f"write it as a list: [{json.dumps(value)}]"
        return "SC102", f"{where}: expected {word}, got {_show(value)}", hint, False
    return "SC111", f"{where}: {err['msg']}", VALUE_HINTS.get(kind, ""), False


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


def _node_named(text: str, path: tuple[str | int, ...], data: Any) -> str:
    """``fleet.nodes[3]`` in a message followed by the node's name, as the rules name nodes."""
    if len(path) < 4 or path[:2] != ("fleet", "nodes") or not isinstance(path[2], int) or path[3] == "name":
        return text
    nodes = data.get("fleet", {}).get("nodes") if isinstance(data, dict) else None
    node = nodes[path[2]] if isinstance(nodes, list) and path[2] < len(nodes) else None
    name = node.get("name") if isinstance(node, dict) else None
    index = dotted(path[:3])
    return text.replace(index, f"{index} ({name})", 1) if isinstance(name, str) and name else text


def schema_findings(resolved: Resolved, exc: ValidationError, model: type[BaseModel]) -> list[Finding]:
    """Positioned findings for every schema error, one per location."""
    findings: dict[tuple[str | int, ...], Finding] = {}
    for err in exc.errors():
        path = _error_path(err["loc"], resolved.data)
        rule, message, hint, at_key = _message(err, dotted(path), model)
        if not hint and rule != "SC101":
            hint = _description_at(model, path)
        message, hint = (_node_named(text, path, resolved.data) for text in (message, hint))
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


def schema(resolved: Resolved) -> Profile | list[Finding]:
    """Stage: the resolved data as a typed Profile, or the positioned findings of every schema error."""
    try:
        return Profile.model_validate(resolved.data)
    except ValidationError as exc:
        return schema_findings(resolved, exc, Profile)
