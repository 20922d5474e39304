"""Launches (one per node) mapped onto profile keys: the head's command and container give the profile,
the other nodes are checked against it; whatever has no key is reported with its line and the reason."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from spark_compile.common.errors import InputError
from spark_compile.common.findings import dotted
from spark_compile.common.quoting import terminal_text
from spark_compile.importer.argv import (
    EngineCommand,
    EngineOption,
    build_of,
    parse_engine,
    resolve_flag,
)
from spark_compile.importer.draft import Draft, Scalar
from spark_compile.importer.engine_flags import chat_kwargs, older_flags
from spark_compile.importer.shell import ShellWord
from spark_compile.importer.source import Launch, Origin, Word
from spark_compile.importer.tables import (
    DOCKER_FIELDS,
    DOCKER_LISTS,
    DOCKER_SWITCHES,
    DOCKER_UNMAPPED,
    ENGINE_FIELDS,
    ENGINE_LISTS,
    ENGINE_OFF,
    ENGINE_SWITCHES,
    SUPERVISION,
)
from spark_compile.spec import fields as f
from spark_compile.stages import model_keys

DEFAULT_LAUNCHER = ["python3", "-m", "sglang.launch_server"]
_ARG_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_SNAPSHOT_PATH = re.compile(r"(/.+)/snapshots/([^/]+)")


@dataclass(slots=True)
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
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(text)
        return number
    return text


def _expands(words: tuple[Word, ...] | list[Word]) -> Word | None:
    return next((w for w in words if isinstance(w, ShellWord) and w.expands), None)


def put(draft: Draft, path: tuple[str | int, ...], kind: Any, text: str | list[str], origin: Origin | str,
        what: str) -> bool:
    """Set a typed key from source text; report it left out when the profile's type refuses the value."""
    where = origin if isinstance(origin, Origin) else Origin("(command line)", 0)
    try:
        value: Scalar | list[Scalar] = list(text) if isinstance(text, list) else _convert(kind, text)
    except ValueError:
        draft.leave(where, what, f"{text!r} is not a number, which {dotted(path)} needs")
        return False
    problem = model_keys.problem(path, value)
    if problem:
        draft.leave(where, what, f"{dotted(path)} refuses it: {problem}")
        return False
    if not model_keys.is_default(path, value):
        draft.set(path, value, origin)
    return True


# str.isdigit() takes '²' and '٣', which int() refuses or reads as another number: ASCII only, bounded.
_RANK = re.compile(r"[0-9]{1,6}")


def ranks(launches: list[Launch]) -> list[Rank]:
    """The launches in rank order (by --node-rank; a single unranked launch is rank 0)."""
    found = []
    for index, launch in enumerate(launches):
        engine = parse_engine(launch.command)
        rank = next((o.values[0] for o in engine.options if o.flag == "--node-rank" and o.values), None)
        if rank is not None and not _RANK.fullmatch(rank):
            raise InputError(f"{launch.origin}: --node-rank {terminal_text(rank, one_line=True)!r}: expected a node "
                             "rank of ASCII digits (0, 1, ...); fix the source's --node-rank")
        found.append(Rank(launch, engine, int(rank) if rank is not None else index))
    found.sort(key=lambda r: r.rank)
    for before, after in itertools.pairwise(found):
        if before.rank == after.rank:
            raise InputError(f"{after.launch.origin}: this docker run and the one at {before.launch.origin} are both "
                             f"node rank {after.rank}; import one deployment at a time")
    return found


# -- engine -----------------------------------------------------------------------------------------------


def _raw_arg(draft: Draft, option: EngineOption) -> None:
    name = option.flag.removeprefix("--")
    what = " ".join(w.text for w in option.words)
    if not option.flag.startswith("--") or not _ARG_NAME.fullmatch(name):
        draft.leave(option.origin, what, "not a long option engine.args can hold")
        return
    value: Scalar | list[Scalar]
    if not option.values:
        value = True
    elif len(option.values) == 1:
        value = option.values[0]
    else:
        value = [_number(v) for v in option.values]
    problem = model_keys.problem(("engine", "args", name), value)
    if problem:
        draft.leave(option.origin, what, f"engine.args refuses it: {problem}")
        return
    if not option.known:
        draft.notes.append(f"{option.origin}: {option.flag} is in no shipped SGLang catalog; kept in engine.args "
                           "(`check` reports it unless the image's SGLang knows it)")
    draft.set(("engine", "args", name), value, option.origin)


def _number(text: str) -> Scalar:
    """A list element as the profile writes it: a whole number when the text is one (the plan writes it back
    the same), else the text."""
    return int(text) if text.isdigit() and str(int(text)) == text else text


def _note_default(draft: Draft, option: EngineOption) -> None:
    """Say so when a flag only repeats SGLang's default: kept (the argv stays the source's), but removable."""
    entry, _ = resolve_flag(option.flag)
    if entry is None or not entry.takes_value or len(option.values) != 1 or entry.default is None:
        return
    if option.values[0] == str(entry.default):
        draft.notes.append(f"{option.origin}: {option.written} {option.values[0]} is SGLang's default; kept so the "
                           "command stays the source's (it may go)")


def engine(draft: Draft, cmd: EngineCommand, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    """The head's engine command onto engine.*, model.* and engine.args."""
    launcher = [w.text for w in cmd.launcher]
    if launcher != DEFAULT_LAUNCHER:
        draft.set(("engine", "launcher"), list(launcher), cmd.launcher[0].origin)
    for word in cmd.stray:
        draft.leave(word.origin, word.text, "a positional word SGLang's parser refuses")
    older = build_of(cmd.options)
    if older is not None:  # the plan spells renamed flags as engine.catalog's build takes them
        draft.set(("engine", "catalog"), older[0], f"{older[1].written} is a flag {older[0]} knows and the newest "
                  f"catalog does not (from {older[1].origin})")
    draft.notes += [f"{note} (the compiled command spells it so)" for note in cmd.normalised]
    for option in cmd.options:
        _engine_option(draft, option, mounts)
    if older is None:
        older_flags(draft, cmd.options)


def _engine_option(draft: Draft, option: EngineOption, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    what = " ".join(w.text for w in option.words)
    if (expanded := _expands(option.words)) is not None:
        draft.leave(option.origin, what, f"{expanded.text!r} is expanded by the shell; its value is not in the source "
                    "(import the script with --trace)")
        return
    flag, values = option.flag, option.values
    if flag in ("--nnodes", "--node-rank", "--dist-init-addr"):
        return  # the fleet's nodes: see fleet()
    _note_default(draft, option)
    if flag == "--model-path":
        model_path(draft, option, mounts)
    elif flag == "--speculative-draft-model-path" and model_keys.exists(("engine", "speculative", "draft")):
        draft_path(draft, option, mounts)
    elif flag in ENGINE_SWITCHES and not values and model_keys.exists(ENGINE_SWITCHES[flag]):
        draft.set(ENGINE_SWITCHES[flag], True, option.origin)
    elif flag in ENGINE_OFF and not values and model_keys.exists(ENGINE_OFF[flag]):
        draft.set(ENGINE_OFF[flag], False, option.origin)
    elif flag == "--default-chat-template-kwargs" and chat_kwargs(draft, option):
        return
    elif flag in ENGINE_LISTS and values and all(v.isdigit() for v in values) and model_keys.exists(ENGINE_LISTS[flag]):
        draft.set(ENGINE_LISTS[flag], [int(v) for v in values], option.origin)
    elif flag in ENGINE_FIELDS and len(values) == 1 and model_keys.exists(ENGINE_FIELDS[flag][0]):
        path, kind = ENGINE_FIELDS[flag]
        put(draft, path, kind, values[0], option.origin, what)
    else:
        _raw_arg(draft, option)


def _source(draft: Draft, at: tuple[str, ...], option: EngineOption, mounts: dict[str, tuple[str, bool, Origin]],
            default_target: str) -> bool:
    """A model path (target or draft) onto ``at``: an HF cache snapshot or a plain directory inside a mounted
    directory (repo, container_repo, snapshot), or a hub id (hub:TYPE: its GGUF file); False when the profile
    cannot say it."""
    path = option.values[0] if option.values else ""
    if not path.startswith("/"):
        if not model_keys.exists((*at, "hub_id")):
            return False
        hub, gguf = path.rsplit(":", 1) if ":" in path and model_keys.exists((*at, "gguf")) else (path, None)
        put(draft, (*at, "hub_id"), str, hub, option.origin, f"{option.flag} {path}")  # reports a refused id
        if gguf is not None:
            put(draft, (*at, "gguf"), str, gguf, option.origin, f"{option.flag} {path}")
        return True
    match = _SNAPSHOT_PATH.fullmatch(path)
    if match is None and not model_keys.exists((*at, "hub_id")):
        return False  # a plain directory: only the HF cache form exists in this model
    repo_dir, snapshot = (match.group(1), match.group(2)) if match else (path.rstrip("/"), None)
    mount = next(((t, m) for t, m in sorted(mounts.items(), key=lambda i: -len(i[0]))
                  if repo_dir == t or repo_dir.startswith(t.rstrip("/") + "/")), None)
    if mount is None:
        return False
    target, (source, read_only, origin) = mount
    what = f"{option.flag} {path}"
    put(draft, (*at, "repo"), f.AbsPath, source + repo_dir[len(target):], origin, what)
    if repo_dir != default_target:
        draft.set((*at, "container_repo"), repo_dir, option.origin)
    if snapshot is not None:
        put(draft, (*at, "snapshot"), f.Snapshot, snapshot, option.origin, what)
    if target == repo_dir:
        del mounts[target]  # the plan mounts the directory itself, read-only
        if not read_only:
            draft.notes.append(f"{origin}: the model directory is mounted read-only (the source mounts it "
                               "read-write)")
    return True


def model_path(draft: Draft, option: EngineOption, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    """--model-path: model.repo/container_repo/snapshot, or model.hub_id."""
    if not _source(draft, ("model",), option, mounts, str(model_keys.default(("model", "container_repo")))):
        draft.leave(option.origin, " ".join(w.text for w in option.words), _path_why(option, ("model",)))


def draft_path(draft: Draft, option: EngineOption, mounts: dict[str, tuple[str, bool, Origin]]) -> None:
    """--speculative-draft-model-path: engine.speculative.draft, like the model."""
    at = ("engine", "speculative", "draft")
    if not _source(draft, at, option, mounts, str(model_keys.default((*at, "container_repo")))):
        draft.leave(option.origin, " ".join(w.text for w in option.words), _path_why(option, at))


def _path_why(option: EngineOption, at: tuple[str, ...]) -> str:
    path = option.values[0] if option.values else ""
    key = dotted(at)
    if not path.startswith("/"):
        return f"the path is a hub id, which {key} cannot hold"
    if model_keys.exists((*at, "hub_id")) or _SNAPSHOT_PATH.fullmatch(path):
        return f"{path} lies in no directory the container mounts (-v), so {key}.repo cannot be its host side"
    return f"the path is a plain directory; {key} holds <container_repo>/snapshots/<snapshot> of a mounted repo"


# -- docker -----------------------------------------------------------------------------------------------


def volumes(launch: Launch) -> dict[str, tuple[str, bool, Origin]]:
    """The -v/--volume bind mounts: container path -> (host path, read-only, line)."""
    found = {}
    for flag, value in launch.options:
        if flag.text in ("-v", "--volume") and value is not None and _expands([value]) is None:
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
        elif flag.text in DOCKER_SWITCHES and value is None and model_keys.exists(DOCKER_SWITCHES[flag.text]):
            draft.set(DOCKER_SWITCHES[flag.text], True, flag.origin)
        elif flag.text in SUPERVISION:
            draft.notes.append(f"{flag.origin}: {flag.text} replaced: {SUPERVISION[flag.text]}")
        elif flag.text == "--restart":
            _restart(draft, flag, value)
        elif flag.text == "--gpus" and value is not None and _gpus_unquoted(value.text):
            draft.leave(flag.origin, what, "docker reads an unquoted device list as separate fields (device 0 and a "
                        "count of 1, which its daemon refuses); quote it: --gpus '\"device=0,1\"'")
        elif flag.text in DOCKER_FIELDS and value is not None and model_keys.exists(DOCKER_FIELDS[flag.text][0]):
            path, kind = DOCKER_FIELDS[flag.text]
            put(draft, path, kind, value.text.strip('"') if flag.text == "--gpus" else value.text, flag.origin, what)
        elif flag.text in DOCKER_LISTS and value is not None and model_keys.exists(DOCKER_LISTS[flag.text]):
            lists.setdefault(DOCKER_LISTS[flag.text], []).append(value.text)
        elif flag.text == "--ulimit" and value is not None:
            name, _, limit = value.text.partition("=")
            put(draft, ("container", "ulimits", name), f.UlimitValue, limit, flag.origin, what)
        elif _set_aside(draft, flag, value, what):
            continue
        else:
            draft.leave(flag.origin, what, DOCKER_UNMAPPED.get(flag.text, "no profile key holds this docker option"))
    for path, items in lists.items():
        draft.set(path, items, launch.origin)
    _mounts(draft, mounts)


def _set_aside(draft: Draft, flag: Word, value: Word | None, what: str) -> bool:
    """-v (the mounts are mapped apart) and `-p N:N` (a port published as itself, which the host network gives
    the server anyway: noted)."""
    if flag.text in ("-v", "--volume"):
        return True
    host, _, inside = value.text.removesuffix("/tcp").partition(":") if value is not None else ("", "", "")
    if flag.text in ("-p", "--publish") and host.isdigit() and host == inside:
        draft.notes.append(f"{flag.origin}: {what}: the container uses the host network (container.network), "
                           "where the server's port is the host's own")
        return True
    return False


def _gpus_unquoted(text: str) -> bool:
    return "," in text and not (text.startswith('"') and text.endswith('"'))


RDMA_ACCESS = ((("container", "devices"), "/dev/infiniband"), (("container", "cap_add"), "IPC_LOCK"))


def rdma_access(draft: Draft) -> None:
    """On an RDMA fabric the plan gives the container its devices, IPC_LOCK and unlimited memlock itself (when
    the model has container.rdma_access): the source's own three are then left to it, or access is turned off
    when the source lacks one."""
    kind = draft.values.get(("fleet", "fabric", "kind"), ("tcp", ""))[0]
    if not model_keys.exists(("container", "rdma_access")) or kind not in ("roce", "infiniband"):
        return
    memlock = draft.values.get(("container", "ulimits", "memlock"), ("", ""))[0]
    present = [item in draft.values.get(path, ([], ""))[0] for path, item in RDMA_ACCESS]  # type: ignore[operator]
    if not (all(present) and memlock == "-1"):
        draft.set(("container", "rdma_access"), False, "the source's containers lack part of the RDMA access "
                  "(--device /dev/infiniband, --cap-add IPC_LOCK, --ulimit memlock=-1)")
        return
    for path, item in RDMA_ACCESS:
        items, origin = draft.values[path]
        rest = [i for i in items if i != item]  # type: ignore[union-attr]
        if rest:
            draft.values[path] = (rest, origin)
        else:
            del draft.values[path]
    del draft.values[("container", "ulimits", "memlock")]


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
