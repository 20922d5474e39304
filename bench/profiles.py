"""Profiles the benchmark writes: synthetic fleets of N nodes and a repository of small variants.

Every profile starts from the reference profile's data, read with the compiler's own loader (so `no`,
`0.80` and integer keys mean what they mean to spark-compile), changed in a few keys, and written back
as YAML by a tiny emitter: block mappings, flow lists, JSON-quoted strings (JSON strings are valid YAML).
The addresses are documentation of a fabric that does not exist: nothing is ever sent to them.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from pathlib import Path
from typing import Any

SYNTH_SUBNET = "10.0.0.0/16"  # room for 65,534 nodes; profiles only, no traffic
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}


def reference_data(path: Path) -> dict[str, Any]:
    """The reference profile's resolved data (its `extends:` chain, if any, merged)."""
    from spark_compile.stages.resolve import resolve

    data = resolve(path).data
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


def _key(key: object) -> str:
    if isinstance(key, bool) or not isinstance(key, int | str):
        raise TypeError(f"unsupported mapping key {key!r}")
    if isinstance(key, int):
        return str(key)
    plain = _PLAIN_KEY.match(key) and key.lower() not in _RESERVED
    return key if plain else json.dumps(key)


def _flow(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    raise TypeError(f"unsupported value {value!r}")


def _block(data: dict[Any, Any], indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    for key, value in data.items():
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{_key(key)}:")
            _block(value, indent + 1, lines)
        elif isinstance(value, list) and value and any(isinstance(v, dict) for v in value):
            lines.append(f"{pad}{_key(key)}:")
            lines.extend(f"{pad}  - {_flow(item)}" for item in value)
        else:
            lines.append(f"{pad}{_key(key)}: {_flow(value)}")


def to_yaml(data: dict[str, Any], comment: str = "") -> str:
    """YAML text of profile data."""
    lines = [f"# {comment}"] if comment else []
    _block(data, 0, lines)
    return "\n".join(lines) + "\n"


def check_round_trip(data: dict[str, Any], where: Path) -> None:
    """Fail loudly when the emitter changes what the compiler's loader reads back."""
    from spark_compile.stages.load import parse_text

    back = parse_text(to_yaml(data), str(where)).data
    if back != data:
        raise ValueError(f"the benchmark's YAML emitter does not round-trip {where}")


def fleet(reference: dict[str, Any], nodes: int) -> dict[str, Any]:
    """The reference profile on ``nodes`` nodes (unique names and addresses), tp = ep = nodes."""
    net = ipaddress.IPv4Network(SYNTH_SUBNET)
    if nodes < 1 or nodes > net.num_addresses - 2:
        raise ValueError(f"{nodes} nodes do not fit in {SYNTH_SUBNET}")
    data = copy.deepcopy(reference)
    ref_nodes: list[dict[str, Any]] = data["fleet"]["nodes"]
    holders = [i for i, node in enumerate(ref_nodes) if node.get("holds_checkpoint")]
    holder = min(holders[0], nodes - 1) if holders else None
    template = {k: v for k, v in ref_nodes[0].items() if k != "holds_checkpoint"}
    ssh = str(template.get("ssh", ""))
    user = ssh.split("@", 1)[0] + "@" if "@" in ssh else ""
    generated = []
    for index, address in zip(range(nodes), net.hosts(), strict=False):
        node = {**template, "name": f"node-{index}", "fabric_ip": str(address), "ssh": f"{user}{address}"}
        if index == holder:
            node["holds_checkpoint"] = True
        generated.append(node)
    data["name"] = f"synth-{nodes}"
    data["fleet"]["fabric"]["subnet"] = SYNTH_SUBNET
    data["fleet"]["nodes"] = generated
    data["engine"]["parallel"]["tp"] = nodes
    data["engine"]["parallel"]["ep"] = nodes
    return data


def variant(reference: dict[str, Any], index: int) -> dict[str, Any]:
    """A small change of the reference: its own name, API port and request cap."""
    data = copy.deepcopy(reference)
    data["name"] = f"variant-{index:02d}"
    data["engine"]["port"] = int(data["engine"].get("port", 30000)) + 1 + index
    caps = (4, 8, 12, 16, 24, 32)
    data["engine"]["limits"]["max_running_requests"] = caps[index % len(caps)]
    return data


def write(directory: Path, data: dict[str, Any], comment: str) -> Path:
    """Write one profile as ``<name>.yaml`` in ``directory``."""
    path = directory / f"{data['name']}.yaml"
    path.write_text(to_yaml(data, comment))
    return path
