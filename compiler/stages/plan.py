"""Stage: the launch plan of a validated profile, what every target renders and every rule reads.

Derived values (Engram rows and id batch, the rendezvous address, the unit's timeouts) are computed here,
and each option, variable and mount records the profile path it came from.
"""

from __future__ import annotations

import ipaddress

from spark_compile.common.engram_rows import rank_rows
from spark_compile.spec.catalog import CatalogNotFound, engine_catalog
from spark_compile.spec.model import Profile
from spark_compile.spec.overlay_types import derived_engram_max_ids
from spark_compile.stages.checkpoint import CheckpointPlan, NodeCheckpoint, checkpoint_plan
from spark_compile.stages.engine_options import TYPED_FLAGS, api_bind, engine_options
from spark_compile.stages.envsets import Variables, engine_env, nccl_env, node_fabric, overlay_env, overlay_flags
from spark_compile.stages.launch_plan import (
    ApiPlace,
    EngineDefault,
    EngramPlan,
    EnvFile,
    FleetPlan,
    LaunchPlan,
    Mount,
    Option,
    RankPlan,
    UnitPlan,
)
from spark_compile.stages.model_paths import container_path

RUNTIME_ENV = "runtime.env"
FLEET_DIR = "fleet"
SECRETS_MOUNT = "/run/spark-secrets"  # where the engine config with the API key appears in the container
ENGINE_SECRETS = "engine-secrets.yaml"
# Seconds beyond the GPU wait that the unit's start may take: the docker client starting the container.
START_MARGIN_SECONDS = 120
# Seconds beyond `docker stop --time` before systemd kills the stop itself.
STOP_MARGIN_SECONDS = 30
RDMA_KINDS = ("roce", "infiniband")
# What NCCL's IB transport needs of the container: the verbs devices, and pinning memory without limit.
RDMA_DEVICE = "/dev/infiniband"
RDMA_CAPABILITY = "IPC_LOCK"
RDMA_MEMLOCK = "-1"


def engram_max_ids(profile: Profile) -> int | None:
    """SPARK_ENGRAM_MAX_IDS: max(chunked prefill, 8 x max running requests) x 32, unless pinned; None (the
    hook's default) when the limits it derives from are left to SGLang."""
    pinned = profile.overlay.engram_max_ids
    if pinned is not None:
        return int(pinned)
    limits = profile.engine.limits
    if limits.chunked_prefill_size is None or limits.max_running_requests is None:
        return None
    return derived_engram_max_ids(limits.chunked_prefill_size, limits.max_running_requests)


def _engram(profile: Profile, rank: int) -> EngramPlan | None:
    model = profile.model
    if model.engram is None:
        return None
    shares = rank_rows(model.engram.tables, rank, len(profile.fleet.nodes))
    rows = tuple((layer, lo, hi) for layer, (lo, hi) in shares.items())
    if profile.fleet.nodes[rank].holds_checkpoint:
        return EngramPlan("shards", container_path(model), rows)
    return EngramPlan("local", model.engram.container_dir, rows)


def _mounts(profile: Profile, rank: int, node_checkpoint: NodeCheckpoint) -> tuple[Mount, ...]:
    node, model, container = profile.fleet.nodes[rank], profile.model, profile.container
    repo = node_checkpoint.repo
    cache = home_path(node.home, container.cache_dir)
    mounts = [Mount(repo, model.container_repo, True, ("model", node_checkpoint.field))] if repo is not None else []
    mounts.append(Mount(cache, "/root/.cache", False, ("container", "cache_dir")))
    draft = profile.engine.speculative.draft
    if draft is not None and draft.repo is not None:
        mounts.append(Mount(draft.repo, draft.container_repo, True, ("engine", "speculative", "draft", "repo")))
    if model.engram is not None and not node.holds_checkpoint:
        mounts.append(Mount(model.engram.local_dir, model.engram.container_dir, True, ("model", "engram", "local_dir")))
    mounts += [Mount(extra.source, extra.target, extra.read_only, ("container", "mounts", index))
               for index, extra in enumerate(container.mounts)]
    return tuple(mounts)


def _docker(flag: str, value: object, *source: str | int) -> list[Option]:
    return [] if value is None else [Option(flag, (str(value),), source)]


def docker_gpus(spec: str) -> str:
    """--gpus as docker's CLI reads it, one CSV record: a device list is quoted, else `device=0,1` is device 0
    and a count of 1, which the daemon refuses."""
    return f'"{spec}"' if "," in spec else spec


def _switch(flag: str, on: bool, *source: str | int) -> list[Option]:
    return [Option(flag, (), source)] if on else []


def rdma_access(profile: Profile) -> bool:
    """Whether the container gets the RDMA devices: as container.rdma_access says, else by the fabric."""
    fabric, chosen = profile.fleet.fabric, profile.container.rdma_access
    return chosen if chosen is not None else fabric is not None and fabric.kind in RDMA_KINDS


def _access_source(profile: Profile) -> tuple[str, ...]:
    return ("container", "rdma_access") if profile.container.rdma_access is not None else ("fleet", "fabric", "kind")


def _capabilities(profile: Profile) -> list[Option]:
    """--cap-add: IPC_LOCK for RDMA access (first), then the profile's own (a listed IPC_LOCK keeps its place)."""
    box = profile.container
    derived = rdma_access(profile) and RDMA_CAPABILITY not in box.cap_add
    options = [Option("--cap-add", (RDMA_CAPABILITY,), _access_source(profile))] if derived else []
    return options + [Option("--cap-add", (cap,), ("container", "cap_add", i)) for i, cap in enumerate(box.cap_add)]


def _ulimits(profile: Profile) -> list[Option]:
    """--ulimit: unlimited memlock for RDMA access unless the profile sets memlock, then the profile's own."""
    box = profile.container
    derived = rdma_access(profile) and "memlock" not in box.ulimits
    options = [Option("--ulimit", (f"memlock={RDMA_MEMLOCK}",), _access_source(profile))] if derived else []
    return options + [Option("--ulimit", (f"{name}={limit}",), ("container", "ulimits", name))
                      for name, limit in box.ulimits.items()]


def _devices(profile: Profile) -> list[Option]:
    """--device: /dev/infiniband for RDMA access unless the profile maps it itself, then the profile's own."""
    box = profile.container
    derived = rdma_access(profile) and not any(d.split(":")[0] == RDMA_DEVICE for d in box.devices)
    options = [Option("--device", (RDMA_DEVICE,), _access_source(profile))] if derived else []
    return options + [Option("--device", (dev,), ("container", "devices", i)) for i, dev in enumerate(box.devices)]


def _docker_options(profile: Profile, name: str, name_source: tuple[str | int, ...]) -> list[Option]:
    box = profile.container
    # systemd applies the restart policy, so docker's stays "no"; detached, docker-run.sh waits for the container.
    options = [*_switch("-d", box.detach, "container", "detach"), *_switch("--rm", box.remove, "container", "remove"),
               Option("--name", (name,), name_source), Option("--restart", ("no",), ()),
               *_docker("--network", box.network, "container", "network")]
    options += _docker("--ipc", box.ipc, "container", "ipc")
    options += [*_switch("--privileged", box.privileged, "container", "privileged"),
                *_docker("--user", box.user, "container", "user")]
    options += [Option("--security-opt", (opt,), ("container", "security_opt", i))
                for i, opt in enumerate(box.security_opt)]
    options += _capabilities(profile)
    options += [*_docker("--gpus", docker_gpus(box.gpus), "container", "gpus"),
                *_docker("--shm-size", box.shm_size, "container", "shm_size"),
                *_docker("--memory", box.memory, "container", "memory")]
    options += _docker("--memory-swap", box.memory_swap, "container", "memory_swap")
    options += _docker("--cpuset-cpus", box.cpuset_cpus, "container", "cpuset_cpus")
    options += _ulimits(profile) + _devices(profile)
    return options + _docker("--oom-score-adj", box.oom_score_adj, "container", "oom_score_adj")


def secrets_dir(profile: Profile) -> str:
    """The node folder (under the runtime dir) where the engine's secret config is written at start."""
    return f"{profile.deploy.runtime_dir}/{profile.name}/secrets"


def unit_name(profile: Profile) -> str:
    """The systemd unit of every rank."""
    return profile.deploy.unit_name or f"sglang-{profile.name}.service"


def device_unit(interface: str) -> str:
    """The systemd .device unit of a network interface (systemd escapes '-' in unit names as \\x2d)."""
    escaped = interface.replace("-", "\\x2d")
    return f"sys-subsystem-net-devices-{escaped}.device"


def container_name(profile: Profile, rank: int) -> tuple[str, tuple[str | int, ...]]:
    """docker --name on ``rank``'s node, and the profile path that set it."""
    own = profile.fleet.nodes[rank].container_name
    if own is not None:
        return own, ("fleet", "nodes", rank, "container_name")
    return profile.engine.container_name, ("engine", "container_name")


def home_path(home: str, path: str) -> str:
    """A profile path that is absolute, or relative to a node's home."""
    return path if path.startswith("/") else f"{home}/{path}"


def gpu_wait_seconds(profile: Profile) -> int:
    """The longest the preflight waits for the GPU to be free."""
    return profile.deploy.gpu_wait_tries * profile.deploy.gpu_wait_seconds


def api_place(profile: Profile) -> ApiPlace:
    """0.0.0.0 -> the head's fabric IP; loopback -> 127.0.0.1 on the head; any other address as bound."""
    bound = api_bind(profile)
    address = ipaddress.IPv4Address(bound)
    if address.is_unspecified:
        return ApiPlace(profile.fleet.nodes[0].fabric_ip, False, bound)
    return ApiPlace(bound, address.is_loopback, bound)


def fleet_plan(profile: Profile, install: str) -> FleetPlan:
    """The fleet's derived values (FleetPlan)."""
    log_dir = home_path(profile.fleet.nodes[0].home, profile.operations.log_dir)
    watchdog = unit_name(profile).removesuffix(".service").rstrip("@") + "-watchdog"
    return FleetPlan(
        install_dir=f"{install}/{FLEET_DIR}", log_dir=log_dir, watchdog_unit=watchdog,
        watchdog_lock=f"{log_dir}/{watchdog}.lock", watchdog_state=f"{log_dir}/{watchdog}.state",
        gpu_wait_seconds=gpu_wait_seconds(profile), api=api_place(profile))


def unit_plan(profile: Profile, install: str, name: str, rank: int) -> UnitPlan:
    """The rank unit: preflight, the foreground container, how long start and stop may take, restart."""
    docker = profile.deploy.docker
    preflight = f"{install}/preflight.sh"
    restart = profile.container.restart
    return UnitPlan(
        exec_start_pre=((False, (preflight, "gpu-free")), (False, (preflight, "runtime")),
                        (True, (docker, "rm", "-f", name))),
        exec_start=(f"{install}/docker-run.sh",),
        exec_stop=(docker, "stop", "--time", str(profile.container.stop_timeout), name),
        exec_stop_post=((True, (docker, "rm", "-f", name)),),
        timeout_start_seconds=gpu_wait_seconds(profile) + START_MARGIN_SECONDS,
        timeout_stop_seconds=profile.container.stop_timeout + STOP_MARGIN_SECONDS,
        # docker's unless-stopped has no systemd twin: the unit restarts always, and `stop` is the operator's.
        restart=restart if restart in ("no", "on-failure") else "always",
        after_device=device_unit(node_fabric(profile, profile.fleet.fabric, rank)[0][0]) if profile.fleet.fabric
        else None,
    )


def _runtime_env(profile: Profile, files: tuple[EnvFile, ...], gid_index: int | None, roce: bool) -> tuple[str, ...]:
    """Variables only the node knows: a probed RoCE GID index, and the secrets read at start."""
    names = {name for f in files for name, _ in f.values}
    probed = roce and gid_index is None
    nccl = profile.nccl.preset != "none"  # with none NCCL finds its GID itself
    wanted = {"NCCL_IB_GID_INDEX": nccl, "B12X_ROCE_GID_INDEX": "B12X_ROCE_HCA" in names}
    runtime = tuple(name for name, needed in wanted.items() if probed and needed)
    return runtime + tuple(profile.secrets.env)


def _rank(profile: Profile, rank: int, install: str, runtime_path: str, flags: Variables,
          checkpoint: CheckpointPlan) -> RankPlan:
    node, fabric = profile.fleet.nodes[rank], profile.fleet.fabric
    devices = node_fabric(profile, fabric, rank)[1][0] if fabric is not None else []
    roce = fabric is not None and fabric.kind == "roce" and bool(devices)
    gid = node.gid_index if node.gid_index is not None else fabric.gid_index if fabric else "probe"
    gid_index = None if gid == "probe" or not roce else int(gid)
    engram = _engram(profile, rank)
    files: tuple[EnvFile, ...] = (EnvFile("engine.env", engine_env(profile, rank)),
             EnvFile("nccl.env", nccl_env(profile, gid_index, rank)),
             EnvFile("overlay.env", overlay_env(profile, engram, flags, gid_index, rank)))
    files = tuple(env_file for env_file in files if env_file.variables)  # no empty file is written or mounted
    runtime = _runtime_env(profile, files, gid_index, roce)
    mounts = _mounts(profile, rank, checkpoint.nodes[rank])
    engine = engine_options(profile, rank)
    if profile.secrets.api_key is not None:
        mounts += (Mount(secrets_dir(profile), SECRETS_MOUNT, True, ("secrets", "api_key")),)
        engine.append(Option("--config", (f"{SECRETS_MOUNT}/{ENGINE_SECRETS}",), ("secrets", "api_key")))
    name, name_source = container_name(profile, rank)
    docker = _docker_options(profile, name, name_source)
    docker += [Option("-v", (mount.volume(),), mount.origin) for mount in mounts]
    docker += [Option("--env-file", (f"{install}/{env_file.name}",), ()) for env_file in files]
    docker += [Option("--env-file", (runtime_path,), ())] if runtime else []
    hca = devices[0] if roce else None
    return RankPlan(rank, node.name, node.fabric_ip, node.ssh, node.home, gid_index, hca, files, runtime, mounts,
                    tuple(docker), tuple(profile.engine.launcher), tuple(engine), engram,
                    unit_plan(profile, install, name, rank), profile.engine.image, name)


def engine_defaults(profile: Profile, written: tuple[Option, ...]) -> tuple[EngineDefault, ...]:
    """Every typed engine flag the plan leaves out, with the default of the profile's SGLang build."""
    try:
        catalog = engine_catalog(profile.engine.catalog)
    except CatalogNotFound:
        return ()  # SC301 reports the unknown catalog
    flags = {option.flag for option in written}
    defaults = []
    for flag, field in TYPED_FLAGS.items():
        entry = catalog.lookup(flag)
        if flag not in flags and entry is not None and entry.takes_value:
            defaults.append(EngineDefault(flag, entry.default, field))
    return tuple(defaults)


def build_plan(profile: Profile) -> LaunchPlan:
    """The launch plan of a validated profile (pure)."""
    install = f"{profile.deploy.install_dir}/{profile.name}"
    runtime_path = f"{profile.deploy.runtime_dir}/{profile.name}/{RUNTIME_ENV}"
    flags = overlay_flags(profile, engram_max_ids(profile))  # SPARK_* flags: the same on every rank
    checkpoint = checkpoint_plan(profile)  # decided once: the mounts, the budget, the rules and check read it
    ranks = tuple(_rank(profile, rank, install, runtime_path, flags, checkpoint)
                  for rank in range(len(profile.fleet.nodes)))
    return LaunchPlan(profile.name, profile.release, profile.engine.image, profile.engine.container_name,
                      unit_name(profile), install, runtime_path, profile.fleet.nodes[0].fabric_ip,
                      profile.engine.port, ranks, fleet_plan(profile, install), checkpoint, profile.engine.catalog,
                      engine_defaults(profile, ranks[0].engine_options))
