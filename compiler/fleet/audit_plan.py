"""fleet/audit.json: what `docker inspect`, systemctl and sha256sum must show on each node, from the plan.

Each value is written as a Docker Engine records the generated `docker run` (sizes in bytes, CAP_ names,
the daemon's defaults for what the plan leaves unset), with the profile key it came from; audit.py (the
comparison, shared by `launch.sh audit` and `spark-compile audit`) reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from spark_compile.common.findings import dotted
from spark_compile.fleet.data import UNIT_DIR, cut_on_node, secret_names, secret_values
from spark_compile.spec.checks import docker_size_bytes
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan, Option, RankPlan
from spark_compile.stages.render import Artifact

AUDIT_FILE = "fleet/audit.json"
# What the daemon writes for an unset size (moby adaptContainerSettings): 64 MiB of /dev/shm, and a swap
# limit of twice the memory limit.
DEFAULT_SHM = 64 * 1024 * 1024
# Settings the plan never makes: a hand-started container that has one differs from the plan. (Not Runtime:
# the daemon records its own default runtime there, runc or a node's nvidia.)
UNSET = ("Privileged", "PidMode", "UsernsMode", "UTSMode", "SecurityOpt", "CapDrop", "ReadonlyRootfs", "Mounts",
         "Tmpfs", "VolumesFrom", "Sysctls", "NanoCpus", "CpusetCpus", "CgroupParent")
# Set by the docker flags the plan writes: an item list (id kind) or one value.
ITEM_FIELDS = {"--cap-add": ("CapAdd", "self"), "--ulimit": ("Ulimits", "Name"),
               "--device": ("Devices", "PathInContainer"), "-v": ("Binds", "bind")}


def gpu_request(spec: str) -> list[dict[str, Any]]:
    """--gpus as the CLI sends it: a count (-1 for all) or device ids, asking for the gpu capability."""
    spec = spec.strip('"')  # the plan's CSV quoting of a device list
    count, ids = (-1, None) if spec == "all" else (0, spec.removeprefix("device=").split(",")) \
        if spec.startswith("device=") else (int(spec), None)
    return [{"Driver": "", "Count": count, "DeviceIDs": ids, "Capabilities": [["gpu"]], "Options": {}}]


def ulimit(text: str) -> dict[str, Any]:
    name, _, limits = text.partition("=")
    soft, _, hard = limits.partition(":")
    return {"Name": name, "Hard": int(hard or soft), "Soft": int(soft)}


def device(text: str) -> dict[str, Any]:
    parts = text.split(":")
    perms = parts.pop() if len(parts) == 3 or (len(parts) == 2 and not parts[1].startswith("/")) else "rwm"
    return {"PathOnHost": parts[0], "PathInContainer": parts[-1], "CgroupPermissions": perms}


def item_value(flag: str, value: str) -> tuple[str, Any]:
    """(id, recorded value) of one item of a list option."""
    if flag == "--cap-add":
        name = value.upper() if value.upper().startswith("CAP_") else f"CAP_{value.upper()}"
        return name, name
    if flag == "--ulimit":
        return value.partition("=")[0], ulimit(value)
    if flag == "--device":
        return device(value)["PathInContainer"], device(value)
    return value.split(":")[1], value


_SCALARS: dict[str, tuple[tuple[str, ...], Callable[[str], Any]]] = {
    "--name": (("Name",), lambda v: f"/{v}"),
    "--restart": (("HostConfig", "RestartPolicy"), lambda v: {"Name": v, "MaximumRetryCount": 0}),
    "--network": (("HostConfig", "NetworkMode"), str),
    "--ipc": (("HostConfig", "IpcMode"), str),
    "--gpus": (("HostConfig", "DeviceRequests"), gpu_request),
    "--shm-size": (("HostConfig", "ShmSize"), docker_size_bytes),
    "--memory": (("HostConfig", "Memory"), docker_size_bytes),
    "--memory-swap": (("HostConfig", "MemorySwap"), docker_size_bytes),
    "--oom-score-adj": (("HostConfig", "OomScoreAdj"), int),
    "--user": (("Config", "User"), str),
    "--cpuset-cpus": (("HostConfig", "CpusetCpus"), str),
}
# Switches the plan may write, and the field each sets true; -d is the client's and leaves no trace.
_SWITCHES = {"--rm": ("HostConfig", "AutoRemove"), "--privileged": ("HostConfig", "Privileged")}
CLIENT_ONLY = ("--env-file", "-d")


def docker_fields(options: tuple[Option, ...], image: str) -> list[dict[str, Any]]:
    """Every inspect field the plan's docker options decide, and the daemon's value for sizes they leave
    unset."""
    scalars: dict[tuple[str, ...], dict[str, Any]] = {}
    items: dict[str, dict[str, Any]] = {}
    for option in options:
        # docker's own restart policy stays "no" because systemd applies container.restart.
        source = dotted(option.source) if option.source else "container.restart" if option.flag == "--restart" else ""
        if option.flag in _SCALARS:
            path, convert = _SCALARS[option.flag]
            scalars[path] = {"path": list(path), "value": convert(option.values[0]), "source": source}
        elif option.flag in _SWITCHES:
            path = _SWITCHES[option.flag]
            scalars[path] = {"path": list(path), "value": True, "source": source}
        elif option.flag == "--security-opt":  # docker records each as given, in order
            field = items.setdefault("SecurityOpt", {"path": ["HostConfig", "SecurityOpt"], "id": "self", "items": []})
            field["items"].append({"id": option.values[0], "value": option.values[0], "source": source})
        elif option.flag in ITEM_FIELDS:
            name, kind = ITEM_FIELDS[option.flag]
            field = items.setdefault(name, {"path": ["HostConfig", name], "id": kind, "items": []})
            key, value = item_value(option.flag, option.values[0])
            field["items"].append({"id": key, "value": value, "source": source})
        elif option.flag not in CLIENT_ONLY:
            raise ValueError(f"the audit does not know how docker records {option.flag}")
    for name, kind in ITEM_FIELDS.values():
        items.setdefault(name, {"path": ["HostConfig", name], "id": kind, "items": []})
    scalars.setdefault(("HostConfig", "ShmSize"), {"path": ["HostConfig", "ShmSize"], "value": DEFAULT_SHM,
                                                   "source": ""})
    memory = scalars.get(("HostConfig", "Memory"), {"value": 0})["value"]
    scalars.setdefault(("HostConfig", "MemorySwap"), {"path": ["HostConfig", "MemorySwap"],
                                                      "value": 2 * memory, "source": ""})
    config = [{"path": ["Config", "Image"], "value": image, "source": "engine.image"}]
    return [*scalars.values(), *items.values(), *config]


def engine_argv(rank: RankPlan) -> dict[str, Any]:
    """The container's entrypoint and command: the launcher, then the engine's flags by flag."""
    options: dict[str, dict[str, Any]] = {}
    for option in rank.engine_options:
        entry = options.setdefault(option.flag, {"flag": option.flag, "occurrences": [],
                                                 "source": dotted(option.source)})
        entry["occurrences"].append(list(option.values))
    return {"entrypoint": [rank.launcher[0]], "prefix": list(rank.launcher[1:]), "source": "engine.launcher",
            "options": list(options.values())}


def env_entries(rank: RankPlan, profile: Profile) -> list[dict[str, Any]]:
    """The container's environment: each env file's variables, then what the node adds at start. A secret
    (a name the node redacts) is compared by its presence only."""
    secrets = set(profile.secrets.env)
    entries = [{"name": var.name, "value": var.value, "source": dotted(var.source),
                "secret": cut_on_node(var.name, profile)} for var in rank.variables]
    for name in rank.runtime_env:
        source = "secrets.env" if name in secrets else "fleet.fabric.gid_index"
        entries.append({"name": name, "value": None, "source": source, "secret": name in secrets})
    return entries


def rank_files(plan: LaunchPlan, rank: RankPlan, rendered: dict[str, Artifact]) -> list[dict[str, str]]:
    """The installed unit and env files, with the sha256 of what was generated."""
    installed = [(f"{UNIT_DIR}/{plan.unit_name}", plan.unit_name)]
    installed += [(f"{plan.install_dir}/{env.name}", env.name) for env in rank.env_files]
    return [{"path": path, "sha256": rendered[f"{rank.directory}/{name}"].sha256,
             "source": f"generated {rank.directory}/{name}"} for path, name in installed]


def audit_plan(plan: LaunchPlan, profile: Profile, files: Sequence[Artifact]) -> dict[str, Any]:
    """The audit's expectations of every rank."""
    rendered = {artifact.path: artifact for artifact in files}
    digest = plan.image.partition("@")[2] or None
    ranks: list[dict[str, Any]] = [{"rank": rank.rank, "node": rank.node, "files": rank_files(plan, rank, rendered),
              "fields": docker_fields(rank.docker_options, rank.image), "env": env_entries(rank, profile),
              "argv": engine_argv(rank)} for rank in plan.ranks]
    set_somewhere = {tuple(field["path"]) for rank in ranks for field in rank["fields"]}
    return {
        "format": 1, "profile": plan.profile, "release": plan.release, "container": plan.container_name,
        "unit": plan.unit_name, "image": {"ref": plan.image, "digest": digest, "source": "engine.image"},
        "watchdog": {"enabled": profile.operations.watchdog.enabled, "source": "operations.watchdog.enabled",
                     "timer": f"{plan.fleet.watchdog_unit}.timer", "lock": plan.fleet.watchdog_lock},
        "secret_name": secret_names(profile), "secret_value": secret_values(), "ranks": ranks,
        # Settings the plan does not make, on every rank (a profile may ask for some: privileged, cpuset...).
        "unset": [{"path": ["HostConfig", name], "value": None, "source": ""} for name in UNSET
                  if ("HostConfig", name) not in set_somewhere],
    }


def audit_artifact(plan: LaunchPlan, profile: Profile, files: Sequence[Artifact]) -> Artifact:
    """fleet/audit.json: one line per top-level key and per rank (json's C encoder runs only without indent)."""
    data = audit_plan(plan, profile, files)
    ranks = data.pop("ranks")
    lines = [f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}," for key, value in sorted(data.items())]
    body = ",\n".join(f"    {json.dumps(rank, sort_keys=True)}" for rank in ranks)
    text = "{\n" + "\n".join(lines) + '\n  "ranks": [\n' + body + "\n  ]\n}\n"
    return Artifact(AUDIT_FILE, text.encode())
