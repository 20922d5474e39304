"""The launch plan's types: what every target renders and every rule reads. Built by `spark_compile.stages.plan`.

Each option, variable and mount records the profile path it came from (``source``): findings are placed at
that path, SC213 knows which flags the plan owns, and the diff names the profile key behind a change.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

from spark_compile.common.findings import dotted
from spark_compile.stages.checkpoint import CheckpointPlan

ProfilePath = tuple[str | int, ...]
EngramSource = Literal["shards", "local"]
RestartPolicy = Literal["no", "on-failure", "always"]


@dataclass(frozen=True, slots=True)
class Option:
    """One command-line option with its values, and the profile path that set it."""

    flag: str
    values: tuple[str, ...]
    source: ProfilePath

    @property
    def words(self) -> tuple[str, ...]:
        """The option as argv words."""
        return (self.flag, *self.values)


@dataclass(frozen=True, slots=True)
class EngineDefault:
    """A typed engine setting the profile leaves unset: the flag is not written and SGLang's default applies."""

    flag: str
    default: Any  # as the catalog's SGLang build declares it (None: SGLang decides at start)
    field: ProfilePath  # where the profile would set it


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One variable of an env file, and the profile path that set it."""

    name: str
    value: str
    source: ProfilePath


@dataclass(frozen=True, slots=True)
class Mount:
    """A bind mount: host path, container path, read-only or not, and the profile path behind it."""

    source: str
    target: str
    read_only: bool
    origin: ProfilePath = ()

    def volume(self) -> str:
        """The ``-v`` argument."""
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True, slots=True)
class EnvFile:
    """One env file of a rank: its file name and its variables in order."""

    name: str
    variables: tuple[EnvVar, ...]

    @property
    def values(self) -> tuple[tuple[str, str], ...]:
        """(name, value) pairs in file order."""
        return tuple((var.name, var.value) for var in self.variables)


@dataclass(frozen=True, slots=True)
class EngramPlan:
    """Where a rank reads its Engram rows and which rows they are."""

    source: EngramSource
    directory: str
    rows: tuple[tuple[int, int, int], ...]  # (layer, lo, hi)


@dataclass(frozen=True, slots=True)
class UnitPlan:
    """A rank's systemd unit: every Exec line as argv, the timeouts and the restart policy.

    ``-`` before an Exec line (systemd: a failure is ignored) is ``ignore_failure``; the unit template and the
    fleet's dry run format these, they decide nothing."""

    exec_start_pre: tuple[tuple[bool, tuple[str, ...]], ...]  # (ignore_failure, argv)
    exec_start: tuple[str, ...]
    exec_stop: tuple[str, ...]
    exec_stop_post: tuple[tuple[bool, tuple[str, ...]], ...]
    timeout_start_seconds: int
    timeout_stop_seconds: int
    restart: RestartPolicy
    after_device: str | None  # the fabric interface's .device unit as systemd names it; None without a fabric


@dataclass(frozen=True)  # no slots: cached_property keeps its value in the instance's __dict__
class RankPlan:
    """Everything one rank needs to start."""

    rank: int
    node: str
    fabric_ip: str
    ssh: str
    home: str
    gid_index: int | None  # RoCE: pinned, or None when probed on the node at start; None on other fabrics
    roce_hca: str | None  # RoCE: the HCA whose GID table preflight reads; None on other fabrics
    env_files: tuple[EnvFile, ...]
    runtime_env: tuple[str, ...]
    mounts: tuple[Mount, ...]
    docker_options: tuple[Option, ...]
    launcher: tuple[str, ...]
    engine_options: tuple[Option, ...]
    engram: EngramPlan | None
    unit: UnitPlan
    image: str
    container_name: str = ""  # docker --name on this node

    @property
    def is_head(self) -> bool:
        """Rank 0 is the head: it owns the rendezvous and serves the API."""
        return self.rank == 0

    @property
    def directory(self) -> str:
        """The rank's folder under generated/<profile>/."""
        return f"{self.rank}-{self.node}"

    @property
    def engine_argv(self) -> tuple[str, ...]:
        """The engine's own arguments (what follows the launcher)."""
        return tuple(word for option in self.engine_options for word in option.words)

    @property
    def docker_argv(self) -> tuple[str, ...]:
        """The whole `docker run` command line."""
        options = tuple(word for option in self.docker_options for word in option.words)
        return ("docker", "run", *options, "--entrypoint", self.launcher[0], self.image,
                *self.launcher[1:], *self.engine_argv)

    @property
    def docker_lines(self) -> tuple[tuple[str, ...], ...]:
        """docker_argv after `docker` as a script writes it: one option (with all its values) per line."""
        launcher: list[list[str]] = []
        for word in self.launcher[1:]:  # the launcher's own words: a flag with the word after it
            if not launcher or word.startswith("-") or len(launcher[-1]) > 1:
                launcher.append([word])
            else:
                launcher[-1].append(word)
        return (("run",), *(o.words for o in self.docker_options), ("--entrypoint", self.launcher[0]), (self.image,),
                *(tuple(line) for line in launcher), *(o.words for o in self.engine_options))

    @property
    def variables(self) -> tuple[EnvVar, ...]:
        """Every variable of every env file, in file order."""
        return tuple(var for env_file in self.env_files for var in env_file.variables)

    @functools.cached_property
    def env(self) -> dict[str, str | None]:
        """The container's environment with every env file merged; runtime values are None."""
        merged: dict[str, str | None] = {var.name: var.value for var in self.variables}
        merged.update(dict.fromkeys(self.runtime_env))
        return merged


@dataclass(frozen=True, slots=True)
class ApiPlace:
    """Where the API listens and from where the checks must reach it."""

    host: str  # the address checks call
    via_head: bool  # loopback: every check runs on the head (over ssh from elsewhere)
    bind: str  # the address the engine listens on (--host, or SGLang's default)


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """What the fleet's operation derives from the profile, once: the fleet scripts' data, their units, the
    README and the rules read it here."""

    install_dir: str  # where `launch.sh install` puts fleet/ on the head
    log_dir: str  # the head's log folder (watchdog log, state, postmortems)
    watchdog_unit: str  # sglang-x-watchdog: the watchdog's .service and .timer share the name
    # The watchdog's lock and state, named after its unit: a release window's candidate shares the head and
    # the log folder, and its watchdog must never see production's lock as its own.
    watchdog_lock: str
    watchdog_state: str
    gpu_wait_seconds: int  # the longest preflight waits for the GPU to be free
    api: ApiPlace


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """The whole fleet: ranks in rank order, and what is shared."""

    profile: str
    release: str | None
    image: str
    container_name: str
    unit_name: str
    install_dir: str
    runtime_env_path: str
    head_ip: str
    port: int
    ranks: tuple[RankPlan, ...]
    fleet: FleetPlan
    checkpoint: CheckpointPlan  # which directory holds each checkpoint, on every node and on this machine
    engine_catalog: str = ""
    engine_defaults: tuple[EngineDefault, ...] = ()

    @property
    def start_order(self) -> tuple[int, ...]:
        """Workers first, highest rank first; the head last."""
        return tuple(sorted((r.rank for r in self.ranks), reverse=True))

    def to_json(self) -> dict[str, Any]:
        """The plan as `spark-compile plan --json` prints it."""
        return {
            "profile": self.profile, "release": self.release, "image": self.image,
            "container_name": self.container_name, "unit": self.unit_name, "install_dir": self.install_dir,
            "head": self.head_ip, "port": self.port, "start_order": list(self.start_order),
            "engine_defaults": {"catalog": self.engine_catalog, "flags": {
                d.flag: {"default": d.default, "set_with": dotted(d.field)} for d in self.engine_defaults}},
            "ranks": [_rank_json(rank) for rank in self.ranks],
        }


def field_name(path: ProfilePath) -> str:
    """The profile field behind a path, whichever list item: ``fleet.nodes[].fabric_ip``."""
    text = ""
    for part in path:
        text += "[]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _rank_json(rank: RankPlan) -> dict[str, Any]:
    engram = rank.engram
    return {
        "rank": rank.rank, "node": rank.node, "container_name": rank.container_name, "fabric_ip": rank.fabric_ip,
        "ssh": rank.ssh,
        "directory": rank.directory, "gid_index": rank.gid_index, "roce_hca": rank.roce_hca,
        "docker_argv": list(rank.docker_argv), "engine_argv": list(rank.engine_argv),
        "env": rank.env, "env_files": {f.name: dict(f.values) for f in rank.env_files},
        "runtime_env": list(rank.runtime_env),
        "mounts": [{"source": m.source, "target": m.target, "read_only": m.read_only} for m in rank.mounts],
        "engram": None if engram is None else {
            "source": engram.source, "dir": engram.directory,
            "rows": {str(layer): [lo, hi] for layer, lo, hi in engram.rows},
        },
        "sources": {
            "engine": {o.flag: dotted(o.source) for o in rank.engine_options},
            "docker": [[o.flag, dotted(o.source)] for o in rank.docker_options if o.source],
            "env": {v.name: dotted(v.source) for v in rank.variables},
        },
    }
