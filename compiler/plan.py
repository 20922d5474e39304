"""Stage 4: the launch plan, the single source of every artifact. Every derived value is computed here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .envsets import engine_env, nccl_env, overlay_env
from .spec.model import Profile
from .spec.overlay_model import derived_engram_max_ids

EngramSource = Literal["shards", "local"]
ENV_FILES = ("engine.env", "nccl.env", "overlay.env")
RUNTIME_ENV = "runtime.env"
SECRETS_MOUNT = "/run/spark-secrets"  # where the engine config with the API key appears in the container
ENGINE_SECRETS = "engine-secrets.yaml"


@dataclass(frozen=True)
class Mount:
    """A bind mount: host path, container path, read-only or not."""

    source: str
    target: str
    read_only: bool

    def volume(self) -> str:
        """The ``-v`` argument."""
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class EnvFile:
    """One env file of a rank: its file name and its variables in order."""

    name: str
    values: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class EngramPlan:
    """Where a rank reads its Engram rows and which rows they are."""

    source: EngramSource
    directory: str
    rows: tuple[tuple[int, int, int], ...]  # (layer, lo, hi)


@dataclass(frozen=True)
class RankPlan:
    """Everything one rank needs to start."""

    rank: int
    node: str
    fabric_ip: str
    ssh: str
    home: str
    gid_index: int | None  # None: probed on the node at start
    env_files: tuple[EnvFile, ...]
    runtime_env: tuple[str, ...]
    mounts: tuple[Mount, ...]
    engine_argv: tuple[str, ...]
    docker_argv: tuple[str, ...]
    engram: EngramPlan | None

    @property
    def is_head(self) -> bool:
        """Rank 0 is the head: it owns the rendezvous and serves the API."""
        return self.rank == 0

    @property
    def directory(self) -> str:
        """The rank's folder under generated/<profile>/."""
        return f"{self.rank}-{self.node}"

    @property
    def env(self) -> dict[str, str | None]:
        """The container's environment with every env file merged; runtime values are None."""
        merged: dict[str, str | None] = {}
        for env_file in self.env_files:
            merged.update(env_file.values)
        merged.update(dict.fromkeys(self.runtime_env))
        return merged


@dataclass(frozen=True)
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
            "ranks": [_rank_json(rank) for rank in self.ranks],
        }


def _rank_json(rank: RankPlan) -> dict[str, Any]:
    engram = rank.engram
    return {
        "rank": rank.rank, "node": rank.node, "fabric_ip": rank.fabric_ip, "ssh": rank.ssh,
        "directory": rank.directory, "gid_index": rank.gid_index,
        "docker_argv": list(rank.docker_argv), "engine_argv": list(rank.engine_argv),
        "env": rank.env, "env_files": {f.name: dict(f.values) for f in rank.env_files},
        "runtime_env": list(rank.runtime_env),
        "mounts": [{"source": m.source, "target": m.target, "read_only": m.read_only} for m in rank.mounts],
        "engram": None if engram is None else {
            "source": engram.source, "dir": engram.directory,
            "rows": {str(layer): [lo, hi] for layer, lo, hi in engram.rows},
        },
    }


def engram_rows(tables: dict[int, int], rank: int, ranks: int) -> tuple[tuple[int, int, int], ...]:
    """Rank ``rank``'s rows of every table: lo = N*r // R, hi = N*(r+1) // R."""
    return tuple((layer, n * rank // ranks, n * (rank + 1) // ranks) for layer, n in sorted(tables.items()))


def engram_max_ids(profile: Profile) -> int:
    """SPARK_ENGRAM_MAX_IDS: max(chunked prefill, 8 x max running requests) x 32, unless pinned."""
    pinned = profile.overlay.engram_max_ids  # type: ignore[attr-defined]
    if pinned is not None:
        return int(pinned)
    limits = profile.engine.limits
    return derived_engram_max_ids(limits.chunked_prefill_size, limits.max_running_requests)


def cuda_graph_max_bs_decode(profile: Profile) -> int:
    """--cuda-graph-max-bs-decode: the request cap, unless pinned."""
    graph = profile.engine.cuda_graph
    return graph.max_bs_decode or profile.engine.limits.max_running_requests


def fraction_text(value: float) -> str:
    """A fraction as operators write it: two decimals (0.80) unless it needs more (0.875)."""
    return f"{value:.2f}" if round(value, 2) == value else repr(value)


def _flag(name: str, value: object) -> list[str]:
    return [] if value is None else [name, str(value)]


def _arg(name: str, value: object) -> list[str]:
    if value is True:
        return [f"--{name}"]
    if value is False:
        return [f"--no-{name}"]
    if isinstance(value, list):
        return [f"--{name}", *(str(v) for v in value)]
    return [f"--{name}", str(value)]


def engine_argv(profile: Profile, rank: int) -> list[str]:
    """The engine's own arguments for ``rank`` (what follows the launcher)."""
    eng, model, limits = profile.engine, profile.model, profile.engine.limits
    nodes = profile.fleet.nodes
    argv = ["--model-path", f"{model.container_repo}/snapshots/{model.snapshot}",
            "--served-model-name", model.served_name]
    argv += ["--trust-remote-code"] if eng.trust_remote_code else []
    argv += _flag("--load-format", eng.load_format)
    argv += ["--tp-size", str(eng.parallel.tp), *_flag("--ep-size", eng.parallel.ep if eng.parallel.ep > 1 else None)]
    argv += ["--nnodes", str(len(nodes)), "--node-rank", str(rank)]
    if len(nodes) > 1:
        argv += ["--dist-init-addr", f"{nodes[0].fabric_ip}:{eng.dist_init_port}"]
    argv += ["--host", eng.host, "--port", str(eng.port)]
    argv += _flag("--attention-backend", eng.backends.attention)
    argv += _flag("--moe-runner-backend", eng.backends.moe_runner)
    argv += _flag("--fp8-gemm-backend", eng.backends.fp8_gemm)
    argv += ["--mem-fraction-static", fraction_text(limits.mem_fraction_static),
             "--chunked-prefill-size", str(limits.chunked_prefill_size),
             "--context-length", str(limits.context_length),
             "--max-running-requests", str(limits.max_running_requests)]
    argv += _flag("--max-total-tokens", limits.max_total_tokens)
    argv += _cuda_graph_argv(profile)
    argv += _flag("--random-seed", limits.random_seed)
    argv += _speculative_argv(profile)
    argv += _flag("--tool-call-parser", eng.chat.tool_call_parser)
    argv += _flag("--reasoning-parser", eng.chat.reasoning_parser)
    argv += _flag("--watchdog-timeout", limits.watchdog_timeout)
    for name, value in eng.args.items():
        argv += _arg(name, value)
    if eng.chat.thinking is not None:
        argv += ["--default-chat-template-kwargs", json.dumps({"thinking": eng.chat.thinking}, separators=(",", ":"))]
    return argv


def _cuda_graph_argv(profile: Profile) -> list[str]:
    """CUDA graph flags, spelled the way the selected SGLang build takes them."""
    from .spec.catalog import spelling

    if profile.engine.cuda_graph.enabled:
        cap = str(cuda_graph_max_bs_decode(profile))
        return spelling(profile.engine.catalog, ["--cuda-graph-max-bs-decode", cap], ["--cuda-graph-max-bs", cap])
    return spelling(profile.engine.catalog,
                    ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"],
                    ["--disable-cuda-graph"])


def _speculative_argv(profile: Profile) -> list[str]:
    spec = profile.engine.speculative
    if spec.algorithm == "none":
        return []
    return ["--speculative-algorithm", spec.algorithm,
            *_flag("--speculative-dspark-block-size", spec.dspark_block_size),
            *_flag("--speculative-num-steps", spec.num_steps),
            *_flag("--speculative-eagle-topk", spec.eagle_topk),
            *_flag("--speculative-num-draft-tokens", spec.num_draft_tokens),
            *_flag("--speculative-draft-model-path", spec.draft_model)]


def _engram(profile: Profile, rank: int) -> EngramPlan | None:
    model = profile.model
    if model.engram is None:
        return None
    rows = engram_rows(model.engram.tables, rank, len(profile.fleet.nodes))
    if profile.fleet.nodes[rank].holds_checkpoint:
        return EngramPlan("shards", f"{model.container_repo}/snapshots/{model.snapshot}", rows)
    return EngramPlan("local", model.engram.container_dir, rows)


def _mounts(profile: Profile, rank: int) -> tuple[Mount, ...]:
    node, model, container = profile.fleet.nodes[rank], profile.model, profile.container
    repo = (model.holder_repo or model.repo) if node.holds_checkpoint else model.repo
    cache = container.cache_dir if container.cache_dir.startswith("/") else f"{node.home}/{container.cache_dir}"
    mounts = [Mount(repo, model.container_repo, True), Mount(cache, "/root/.cache", False)]
    if model.engram is not None and not node.holds_checkpoint:
        mounts.append(Mount(model.engram.local_dir, model.engram.container_dir, True))
    return tuple(mounts)


def _docker_options(profile: Profile) -> list[str]:
    eng, box = profile.engine, profile.container
    # Foreground under systemd (no -d); systemd applies the restart policy, so docker's stays "no".
    argv = ["--name", eng.container_name, "--restart", "no", "--network", box.network]
    argv += _flag("--ipc", box.ipc)
    for cap in box.cap_add:
        argv += ["--cap-add", cap]
    argv += ["--gpus", box.gpus, *_flag("--shm-size", box.shm_size), *_flag("--memory", box.memory)]
    argv += _flag("--memory-swap", box.memory_swap)
    for name, limit in box.ulimits.items():
        argv += ["--ulimit", f"{name}={limit}"]
    for device in box.devices:
        argv += ["--device", device]
    return argv + _flag("--oom-score-adj", box.oom_score_adj)


def secrets_dir(profile: Profile) -> str:
    """The node folder (under the runtime dir) where the engine's secret config is written at start."""
    return f"{profile.deploy.runtime_dir}/{profile.name}/secrets"


def unit_name(profile: Profile) -> str:
    """The systemd unit of every rank."""
    return profile.deploy.unit_name or f"sglang-{profile.name}.service"


def _rank(profile: Profile, rank: int, install: str, runtime_path: str) -> RankPlan:
    node = profile.fleet.nodes[rank]
    gid = node.gid_index if node.gid_index is not None else profile.fleet.fabric.gid_index
    gid_index = None if gid == "probe" else int(gid)
    engram = _engram(profile, rank)
    files = (EnvFile("engine.env", engine_env(profile, node.fabric_ip)),
             EnvFile("nccl.env", nccl_env(profile, gid_index)),
             EnvFile("overlay.env", overlay_env(profile, engram, engram_max_ids(profile), gid_index)))
    names = {name for f in files for name, _ in f.values}
    runtime = tuple(name for name in ("NCCL_IB_GID_INDEX", "B12X_ROCE_GID_INDEX")
                    if gid_index is None and (name == "NCCL_IB_GID_INDEX" or "B12X_ROCE_HCA" in names))
    runtime += tuple(profile.secrets.env)
    mounts = _mounts(profile, rank)
    engine = engine_argv(profile, rank)
    if profile.secrets.api_key is not None:
        mounts += (Mount(secrets_dir(profile), SECRETS_MOUNT, True),)
        engine += ["--config", f"{SECRETS_MOUNT}/{ENGINE_SECRETS}"]
    launcher = profile.engine.launcher
    argv = ["docker", "run", *_docker_options(profile)]
    for mount in mounts:
        argv += ["-v", mount.volume()]
    for env_file in files:
        argv += ["--env-file", f"{install}/{env_file.name}"]
    argv += ["--env-file", runtime_path] if runtime else []
    argv += ["--entrypoint", launcher[0], profile.engine.image, *launcher[1:], *engine]
    return RankPlan(rank, node.name, node.fabric_ip, node.ssh, node.home, gid_index, files, runtime, mounts,
                    tuple(engine), tuple(argv), engram)


def build_plan(profile: Profile) -> LaunchPlan:
    """The launch plan of a validated profile (pure)."""
    install = f"{profile.deploy.install_dir}/{profile.name}"
    runtime_path = f"{profile.deploy.runtime_dir}/{profile.name}/{RUNTIME_ENV}"
    ranks = tuple(_rank(profile, rank, install, runtime_path) for rank in range(len(profile.fleet.nodes)))
    return LaunchPlan(profile.name, profile.release, profile.engine.image, profile.engine.container_name,
                      unit_name(profile), install, runtime_path, profile.fleet.nodes[0].fabric_ip,
                      profile.engine.port, ranks)
