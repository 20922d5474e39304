"""What Docker 28 records for a `docker run`: the create request its CLI sends and the `docker inspect` JSON
its daemon answers. The fleet test's stand-in docker returns these, so the audit is tested against Docker's
own record of the generated command.

Two halves, as in Docker:

* :func:`create_request` is the CLI's half: the options the generated `docker run` uses (and a few an
  operator adds by hand) applied to ``fixtures/docker/bare-create.json``, the body docker CLI 28.2 sends
  for a bare ``docker run image`` (captured from it). tests/test_audit_docker.py holds the result equal to
  the real CLI's request for the reference rank, through the fake daemon.
* :func:`inspect_record` is the daemon's half (moby 28): it fills what the request leaves unset
  (daemon_unix.go adaptContainerSettings: /dev/shm 64 MiB, swap twice the memory limit, private IPC and
  cgroup namespaces; at start, its default runtime's name), appends the image's Env entries whose names
  the container does not set (daemon/create.go merge), turns binds into Mounts, and adds the running State.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

BARE_CREATE = Path(__file__).resolve().parents[1] / "fixtures" / "docker" / "bare-create.json"
DEFAULT_SHM = 64 * 1024 * 1024
UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
# The serving image's own config (a CUDA base image's), merged into every container's Env.
IMAGE_ENV = ("PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility", "LANG=C.UTF-8")
VALUE_OPTIONS = {"--name", "--restart", "--network", "--ipc", "--cap-add", "--cap-drop", "--gpus", "--shm-size",
                 "--memory", "--memory-swap", "--ulimit", "--device", "--oom-score-adj", "-v", "--env-file", "-e",
                 "--entrypoint", "--pid", "--security-opt", "--user", "--cpuset-cpus"}
BOOL_OPTIONS = {"--privileged": "Privileged", "--read-only": "ReadonlyRootfs", "--rm": "AutoRemove",
                "--detach": None, "-d": None}


def size(text: str) -> int:
    """go-units RAMInBytes, as the CLI reads sizes: a unit letter, then optional i and b (32g, 32gb, 32GiB)."""
    digits = text.rstrip("bBiI") or text
    unit = digits[-1].lower()
    return int(digits[:-1]) * UNITS[unit] if unit in UNITS else int(digits)


def env_file_lines(path: str) -> list[str]:
    """docker's --env-file reading (cli/opts/file.go): KEY=VALUE lines verbatim, '#' lines and blanks skipped."""
    lines = []
    for line in Path(path).read_text().splitlines():
        stripped = line.lstrip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            lines.append(stripped)
    return lines


def _ulimit(text: str) -> dict[str, Any]:
    name, _, limits = text.partition("=")
    soft, _, hard = limits.partition(":")
    return {"Name": name, "Hard": int(hard or soft), "Soft": int(soft)}


def _device(text: str) -> dict[str, str]:
    parts = text.split(":")
    perms = parts.pop() if len(parts) == 3 or (len(parts) == 2 and not parts[1].startswith("/")) else "rwm"
    return {"PathOnHost": parts[0], "PathInContainer": parts[-1], "CgroupPermissions": perms}


def _gpus(text: str) -> list[dict[str, Any]]:
    """docker's GpuOpts: one CSV record of fields `all`, a count, count=N or device=IDS."""
    count, ids = 0, None
    for field in next(csv.reader([text])):
        key, _, value = field.partition("=")
        if key == "device":
            ids = value.split(",")
        else:
            given = value if key == "count" else field
            count = -1 if given == "all" else int(given)
    return [{"Driver": "", "Count": count, "DeviceIDs": ids, "Capabilities": [["gpu"]], "Options": {}}]


def _cap(text: str) -> str:
    return text.upper() if text.upper().startswith("CAP_") else f"CAP_{text.upper()}"


def _apply(body: dict[str, Any], option: str, value: str, env_file: Callable[[str], list[str]],
           extra_env: dict[str, str]) -> None:
    host = body["HostConfig"]
    scalar: dict[str, tuple[str, Callable[[str], Any]]] = {
        "--restart": ("RestartPolicy", lambda v: {"Name": v, "MaximumRetryCount": 0}),
        "--network": ("NetworkMode", str), "--ipc": ("IpcMode", str), "--pid": ("PidMode", str),
        "--gpus": ("DeviceRequests", _gpus), "--shm-size": ("ShmSize", size), "--memory": ("Memory", size),
        "--memory-swap": ("MemorySwap", size), "--oom-score-adj": ("OomScoreAdj", int),
        "--cpuset-cpus": ("CpusetCpus", str)}
    listed: dict[str, tuple[str, Callable[[str], Any]]] = {
        "--cap-add": ("CapAdd", _cap), "--cap-drop": ("CapDrop", _cap), "--ulimit": ("Ulimits", _ulimit),
        "--device": ("Devices", _device), "-v": ("Binds", str), "--security-opt": ("SecurityOpt", str)}
    if option == "--network":
        # The CLI sends no endpoint for the host network (seen with CLI 28.2); other networks are not modelled.
        if value != "host":
            raise ValueError(f"docker stand-in: network {value} is not modelled")
        body["NetworkingConfig"]["EndpointsConfig"] = {}
    if option in scalar:
        key, convert = scalar[option]
        host[key] = convert(value)
    elif option in listed:
        key, convert = listed[option]
        host[key] = [*(host.get(key) or []), convert(value)]
    elif option == "--env-file":
        body["Env"] = [*(body["Env"] or []), *env_file(value)]
    elif option == "-e":
        name, _, text = value.partition("=")
        extra_env[name] = text
    elif option == "--entrypoint":
        body["Entrypoint"] = [value]
    elif option == "--user":
        body["User"] = value
    elif option != "--name":
        raise ValueError(f"docker stand-in: unsupported option {option}")


def create_request(argv: list[str],
                   env_file: Callable[[str], list[str]] = env_file_lines) -> tuple[str, dict[str, Any]]:
    """`docker run OPTIONS IMAGE ARGS...` (argv after `run`) -> (the ?name= of the request, its JSON body)."""
    body = json.loads(BARE_CREATE.read_text())
    extra_env: dict[str, str] = {}
    name, i = "", 0
    while i < len(argv) and argv[i].startswith("-"):
        option = argv[i]
        if option in BOOL_OPTIONS:
            key = BOOL_OPTIONS[option]
            if key:
                body["HostConfig"][key] = True
            i += 1
            continue
        if option not in VALUE_OPTIONS:
            raise ValueError(f"docker stand-in: unsupported option {option}")
        value = argv[i + 1]
        name = value if option == "--name" else name
        _apply(body, option, value, env_file, extra_env)
        i += 2
    body["Image"], args = argv[i], argv[i + 1:]
    body["Cmd"] = args or None
    # -e values after the env files, one per name (the CLI keeps them in a map).
    body["Env"] = [*(body["Env"] or []), *(f"{k}={v}" for k, v in extra_env.items())] or None
    if body["HostConfig"].get("Binds"):
        body["HostConfig"]["Binds"] = sorted(body["HostConfig"]["Binds"])
    return name, body


def image_id(ref: str, build: str = "") -> str:
    """A stand-in image's id: sha256 of its reference and build label."""
    return "sha256:" + hashlib.sha256(f"{ref}|{build}".encode()).hexdigest()


def image_record(ref: str, build: str = "") -> dict[str, Any]:
    """`docker image inspect REF` of the stand-in serving image (a build label makes another image)."""
    tagged = ref.partition("@")[0]
    repo = tagged.rpartition(":")[0] if ":" in tagged.rpartition("/")[2] else tagged
    digest = "sha256:" + hashlib.sha256(f"manifest|{ref}|{build}".encode()).hexdigest()
    return {"Id": image_id(ref, build), "RepoTags": [tagged], "RepoDigests": [f"{repo}@{digest}"],
            "Created": "2026-01-01T00:00:00Z", "Architecture": "arm64", "Os": "linux",
            "Config": {"Env": list(IMAGE_ENV), "Entrypoint": None, "Cmd": ["/bin/bash"], "WorkingDir": "/sgl-workspace",
                       "User": "", "Labels": None}}


def _merged_env(container: list[str] | None, image: list[str]) -> list[str]:
    env = list(container or [])
    names = {entry.partition("=")[0] for entry in env}
    return env + [entry for entry in image if entry.partition("=")[0] not in names]


def _mounts(binds: list[str] | None) -> list[dict[str, Any]]:
    mounts = []
    for bind in binds or []:
        source, target, *mode = bind.split(":")
        mounts.append({"Type": "bind", "Source": source, "Destination": target, "Mode": mode[0] if mode else "",
                       "RW": "ro" not in mode, "Propagation": "rprivate"})
    return sorted(mounts, key=lambda m: m["Destination"])


def inspect_record(name: str, body: dict[str, Any], image: dict[str, Any], *, pid: int, hostname: str,
                   container_id: str) -> dict[str, Any]:
    """`docker inspect NAME` of the running container the daemon made from ``body``."""
    host = copy.deepcopy(body["HostConfig"])
    if not host.get("ShmSize"):
        host["ShmSize"] = DEFAULT_SHM
    if host.get("Memory") and not host.get("MemorySwap"):
        host["MemorySwap"] = 2 * host["Memory"]
    host["IpcMode"] = host.get("IpcMode") or "private"
    host["CgroupnsMode"] = host.get("CgroupnsMode") or "private"
    host["Runtime"] = host.get("Runtime") or "runc"
    host["NetworkMode"] = "bridge" if host.get("NetworkMode") in (None, "", "default") else host["NetworkMode"]
    config = {key: copy.deepcopy(value) for key, value in body.items() if key not in ("HostConfig", "NetworkingConfig")}
    config["Env"] = _merged_env(body.get("Env"), image["Config"]["Env"])
    config["Hostname"] = hostname if host["NetworkMode"] == "host" else container_id[:12]
    config["WorkingDir"] = config.get("WorkingDir") or image["Config"]["WorkingDir"]
    if not config.get("Entrypoint") and not config.get("Cmd"):
        config["Cmd"] = image["Config"]["Cmd"]
    command = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    return {
        "Id": container_id, "Created": "2026-01-01T00:00:00.000000000Z", "Path": command[0], "Args": command[1:],
        "State": {"Status": "running", "Running": True, "Paused": False, "Restarting": False, "OOMKilled": False,
                  "Dead": False, "Pid": pid, "ExitCode": 0, "Error": "",
                  "StartedAt": "2026-01-01T00:00:01.000000000Z", "FinishedAt": "0001-01-01T00:00:00Z"},
        "Image": image["Id"], "Name": f"/{name}", "RestartCount": 0, "Driver": "overlay2", "Platform": "linux",
        "HostConfig": host, "Mounts": _mounts(host.get("Binds")), "Config": config,
        "NetworkSettings": {"Networks": {host["NetworkMode"]: {"NetworkID": "0" * 64}}},
    }
