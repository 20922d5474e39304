"""Launches (one per node) mapped onto profile keys: the head's command and container give the profile,
the other nodes are checked against it; whatever has no key is reported with its line and the reason."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from spark_compile.importer.argv import EngineCommand, EngineOption, parse_engine
from spark_compile.importer.draft import Draft, Scalar
from spark_compile.importer.shell import ShellWord
from spark_compile.importer.source import Launch, Origin, Word
from spark_compile.importer.tables import (
    DOCKER_FIELDS,
    DOCKER_LISTS,
    DOCKER_UNMAPPED,
    ENGINE_FIELDS,
    ENGINE_SWITCHES,
    FABRIC_ENV,
    SUPERVISION,
)
from spark_compile.spec import fields as f
from spark_compile.spec.secret_patterns import secret_name

DEFAULT_LAUNCHER = ["python3", "-m", "sglang.launch_server"]
_ARG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SNAPSHOT_PATH = re.compile(r"^(/.+)/snapshots/([^/]+)$")
# Keys whose model default the plan writes anyway: equal to it, they are left out of the profile.
_MODEL_DEFAULTS: dict[tuple[str | int, ...], Scalar] = {
    ("engine", "host"): "0.0.0.0", ("engine", "port"): 30000, ("engine", "parallel", "ep"): 1,
    ("container", "network"): "host", ("container", "ipc"): "host", ("container", "gpus"): "all",
    ("model", "container_repo"): "/models/repo", ("engine", "dist_init_port"): 20000,
}


@dataclass
class Rank:
    """One node's launch with its parsed engine command and rank."""

    launch: Launch
    engine: EngineCommand
    rank: int


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def fits(kind: Any, value: object) -> str | None:
    """None when ``value`` is valid for the profile type ``kind``, else the model's own message."""
    try:
        _adapter(kind).validate_python(value, strict=True)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]) for e in exc.errors())
    return None


def _convert(kind: Any, text: str) -> Scalar:
    if kind in (f.Positive, f.Port, f.Seconds, int):
        return int(text)
    if kind is float:
        return float(text)
    return text


def _expands(words: tuple[Word, ...] | list[Word]) -> Word | None:
    return next((w for w in words if isinstance(w, ShellWord) and w.expands), None)


def put(draft: Draft, path: tuple[str | int, ...], kind: Any, text: str, origin: Origin, what: str) -> bool:
    """Set a typed key from source text; report it left out when the profile's type refuses the value."""
    try:
        value = _convert(kind, text)
    except ValueError:
        draft.leave(origin, what, f"{text!r} is not a number, which {'.'.join(map(str, path))} needs")
        return False
    problem = fits(kind, value)
    if problem:
        draft.leave(origin, what, f"{'.'.join(map(str, path))} refuses it: {problem}")
        return False
    if _MODEL_DEFAULTS.get(path) != value:
        draft.set(path, value, origin)
    return True


def ranks(launches: list[Launch]) -> list[Rank]:
    """The launches in rank order (by --node-rank; a single unranked launch is rank 0)."""
    found = []
    for index, launch in enumerate(launches):
        engine = parse_engine(launch.command)
        rank = next((o.values[0] for o in engine.options if o.flag == "--node-rank" and o.values), None)
        found.append(Rank(launch, engine, int(rank) if rank and rank.isdigit() else index))
    found.sort(key=lambda r: r.rank)
    return found


# -- engine -----------------------------------------------------------------------------------------------


def _raw_arg(draft: Draft, option: EngineOption) -> None:
    name = option.flag.removeprefix("--")
    what = " ".join(w.text for w in option.words)
    if not option.flag.startswith("--") or not _ARG_NAME.match(name):
        draft.leave(option.origin, what, "not a long option engine.args can hold")
        return
    value: Scalar | list[Scalar]
    if not option.values:
        value = True
    elif len(option.values) == 1:
        value = option.values[0]
    else:
        value = [_number(v) for v in option.values]
    if not option.known:
        draft.notes.append(f"{option.origin}: {option.flag} is in no shipped SGLang catalog; kept in engine.args "
                           "(`check` reports it unless the image's SGLang knows it)")
    draft.set(("engine", "args", name), value, option.origin)


def _number(text: str) -> Scalar:
    """A list element as the profile writes it: a whole number when the text is one (the plan writes it back
    the same), else the text."""
    return int(text) if text.isdigit() and str(int(text)) == text else text


def _chat_kwargs(draft: Draft, option: EngineOption) -> bool:
    try:
        kwargs = json.loads(option.values[0]) if len(option.values) == 1 else None
    except ValueError:
        return False
    if isinstance(kwargs, dict) and list(kwargs) == ["thinking"] and isinstance(kwargs["thinking"], bool):
        draft.set(("engine", "chat", "thinking"), kwargs["thinking"], option.origin)
        return True
    return False


def engine(draft: Draft, cmd: EngineCommand, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    """The head's engine command onto engine.*, model.* and engine.args."""
    launcher = [w.text for w in cmd.launcher]
    if launcher != DEFAULT_LAUNCHER:
        draft.set(("engine", "launcher"), list(launcher), cmd.launcher[0].origin)
    for word in cmd.stray:
        draft.leave(word.origin, word.text, "a positional word SGLang's parser refuses")
    for option in cmd.options:
        _engine_option(draft, option, mounts)


def _engine_option(draft: Draft, option: EngineOption, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    what = " ".join(w.text for w in option.words)
    if (expanded := _expands(option.words)) is not None:
        draft.leave(option.origin, what, f"{expanded.text!r} is expanded by the shell; its value is not in the source "
                    "(import the script with --trace)")
        return
    flag, values = option.flag, option.values
    if flag in ("--nnodes", "--node-rank", "--dist-init-addr"):
        return  # the fleet's nodes: see fleet()
    if flag == "--model-path":
        model_path(draft, option, mounts)
    elif flag in ENGINE_SWITCHES and not values:
        draft.set(ENGINE_SWITCHES[flag], True, option.origin)
    elif flag == "--disable-cuda-graph" and not values:
        draft.set(("engine", "cuda_graph", "enabled"), False, option.origin)
    elif flag == "--default-chat-template-kwargs" and _chat_kwargs(draft, option):
        return
    elif flag in ENGINE_FIELDS and len(values) == 1:
        path, kind = ENGINE_FIELDS[flag]
        if not put(draft, path, kind, values[0], option.origin, what) and flag == "--speculative-draft-model-path":
            draft.left[-1] = draft.left[-1].__class__(option.origin, what, "a draft model that is not an absolute "
                                                      "path inside the container (a hub id) has no profile key yet")
    else:
        _raw_arg(draft, option)


def model_path(draft: Draft, option: EngineOption, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    """--model-path: an HF cache snapshot inside a mounted directory becomes model.repo/container_repo/snapshot."""
    what = " ".join(w.text for w in option.words)
    path = option.values[0] if option.values else ""
    match = _SNAPSHOT_PATH.match(path)
    mount = next(((t, m) for t, m in sorted(mounts.items(), key=lambda i: -len(i[0]))
                  if match and (match.group(1) == t or match.group(1).startswith(t.rstrip("/") + "/"))), None)
    if match is None or mount is None:
        form = "a hub id" if not path.startswith("/") else "a plain directory" if match is None else \
            "a snapshot in a directory no -v mounts"
        draft.leave(option.origin, what, f"the model path is {form}; the profile's model path is always "
                    "<container_repo>/snapshots/<snapshot> of a mounted repo directory")
        return
    target, (source, _, origin) = mount
    repo_dir = match.group(1)
    put(draft, ("model", "repo"), f.AbsPath, source + repo_dir[len(target):], origin, what)
    put(draft, ("model", "container_repo"), f.AbsPath, repo_dir, option.origin, what)
    put(draft, ("model", "snapshot"), f.Snapshot, match.group(2), option.origin, what)
    if target == repo_dir:
        del mounts[target]  # the plan mounts the repo itself, read-only
        if not mount[1][1]:
            draft.notes.append(f"{origin}: the model directory is mounted read-only (the source mounts it "
                               "read-write)")


# -- docker -----------------------------------------------------------------------------------------------


def volumes(launch: Launch) -> dict[str, tuple[str, bool, Origin]]:
    """The -v/--volume bind mounts: container path -> (host path, read-only, line)."""
    found = {}
    for flag, value in launch.options:
        if flag.text in ("-v", "--volume") and value is not None:
            parts = value.text.split(":")
            if len(parts) in (2, 3):
                found[parts[1]] = (parts[0], parts[2:] == ["ro"], value.origin)
    return found


def docker(draft: Draft, launch: Launch, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    """The head's docker options onto container.* (mounts: what the model did not take)."""
    lists: dict[tuple[str | int, ...], list[Scalar]] = {}
    for flag, value in launch.options:
        what = flag.text + ("" if value is None else f" {value.text}")
        if value is not None and isinstance(value, ShellWord) and value.expands:
            draft.leave(flag.origin, what, f"{value.text!r} is expanded by the shell (import with --trace)")
        elif flag.text in SUPERVISION:
            draft.notes.append(f"{flag.origin}: {flag.text} replaced: {SUPERVISION[flag.text]}")
        elif flag.text == "--restart":
            _restart(draft, flag, value)
        elif flag.text in DOCKER_FIELDS and value is not None:
            path, kind = DOCKER_FIELDS[flag.text]
            put(draft, path, kind, value.text, flag.origin, what)
        elif flag.text in DOCKER_LISTS and value is not None:
            lists.setdefault(DOCKER_LISTS[flag.text], []).append(value.text)
        elif flag.text == "--ulimit" and value is not None:
            name, _, limit = value.text.partition("=")
            put(draft, ("container", "ulimits", name), f.UlimitValue, limit, flag.origin, what)
        elif flag.text in ("-v", "--volume"):
            continue
        else:
            draft.leave(flag.origin, what, DOCKER_UNMAPPED.get(flag.text, "no profile key holds this docker option"))
    for path, items in lists.items():
        draft.set(path, items, launch.origin)
    _mounts(draft, mounts)


def _restart(draft: Draft, flag: Word, value: Word | None) -> None:
    policy = value.text if value else ""
    if policy == "no":
        return
    if put(draft, ("container", "restart"), str, policy, flag.origin, f"--restart {policy}"):
        draft.notes.append(f"{flag.origin}: --restart {policy} becomes the unit's restart policy (docker's stays no)")


def _mounts(draft: Draft, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    index = 0
    for target, (source, read_only, origin) in mounts.items():
        if target == "/root/.cache" and not read_only:
            put(draft, ("container", "cache_dir"), f.AbsPath, source, origin, f"-v {source}:{target}")
            continue
        at = ("container", "mounts", index)
        if fits(f.AbsPath, source) or fits(f.AbsPath, target):
            draft.leave(origin, f"-v {source}:{target}", "a mount must join two clean absolute paths "
                        "(a named volume has no profile key)")
            continue
        draft.set((*at, "source"), source, origin)
        draft.set((*at, "target"), target, origin)
        if not read_only:
            draft.set((*at, "read_only"), False, origin)
        index += 1


# -- environment ------------------------------------------------------------------------------------------


def environment(draft: Draft, launch: Launch, fabric_ip: str) -> dict[str, tuple[str, Origin]]:
    """The head's variables onto engine.env and nccl.extra; returns the fabric's own (for fleet())."""
    fabric: dict[str, tuple[str, Origin]] = {}
    for name, value, origin in launch.env:
        if secret_name(name):
            draft.leave(origin, f"-e {name}=(redacted)", "a secret's value is never copied into a profile; set "
                        f"secrets.env.{name} to a file or variable on the node")
        elif name in FABRIC_ENV:
            fabric[name] = (value, origin)
        elif name == "HOST_IP" and value == fabric_ip:
            continue  # the plan sets HOST_IP to each node's fabric address
        elif fits(f.EnvName, name):
            draft.leave(origin, f"-e {name}", "the profile's variable names are A-Z, 0-9 and '_'")
        elif name.startswith(("SPARK_", "B12X_")):
            draft.leave(origin, f"-e {name}={value}", "overlay variables are set through the overlay section")
        else:
            section = ("nccl", "extra") if name.startswith(("NCCL_", "GLOO_")) else ("engine", "env")
            if not fits(f.EnvText, value):
                draft.set((*section, name), value, origin)
            else:
                draft.leave(origin, f"-e {name}", "the value holds a line break or control character")
    return fabric


def subnet_of(addresses: list[str]) -> str:
    """The smallest IPv4 subnet holding every address."""
    ips = [int(ipaddress.IPv4Address(a)) for a in addresses]
    prefix = 32
    while prefix > 0 and len({ip >> (32 - prefix) for ip in ips}) > 1:
        prefix -= 1
    return str(ipaddress.IPv4Network((min(ips), prefix), strict=False))
