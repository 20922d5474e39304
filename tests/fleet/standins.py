"""Stand-ins for a node's docker, systemctl, journalctl, nvidia-smi and dmesg in the fleet test.

Each node's sshd puts wrappers for these first on PATH (``exec python standins.py TOOL "$@"``); they run
inside the node's mount namespace, where ``$SPARK_FAKE_ROOT`` is that node's own folder. They record every
call (state/records.jsonl), obey state/../control.json (faults the test injects) and behave enough like
the real tools for the generated launcher: systemctl runs the installed unit's Exec lines, the docker
stand-in's ``run`` reads the env files and mounts it is given and prints the boot-log lines the overlay
would, and on rank 0 it becomes the fake OpenAI server.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.docker_engine import create_request, image_record, inspect_record

ROOT = Path(os.environ.get("SPARK_FAKE_ROOT", "/nonexistent"))
STATE = ROOT / "state"
UNIT_DIR = Path("/etc/systemd/system")
HERE = Path(__file__).resolve().parent
FULL_TOKEN = 5245184
WORKER_FULL_TOKEN = 5540352


def control() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((ROOT / "control.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


def record(tool: str, argv: list[str]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with (STATE / "records.jsonl").open("a") as log:
        log.write(json.dumps({"t": time.time(), "tool": tool, "argv": argv}) + "\n")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def kill_group(pid: int, wait: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except OSError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.05)
        if not alive(pid):
            return


# -- systemctl -------------------------------------------------------------------------------------------
def unit_state_file(unit: str) -> Path:
    return STATE / "units" / f"{unit}.json"


def unit_state(unit: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(unit_state_file(unit).read_text())
    except (OSError, ValueError):
        return {}
    return data


def save_unit_state(unit: str, data: dict[str, Any]) -> None:
    path = unit_state_file(unit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def active_state(unit: str) -> str:
    data = unit_state(unit)
    if not data:
        return "inactive"
    if data.get("failed"):
        return "failed"
    if "timer" in data:
        return "active" if data["timer"] else "inactive"
    pid = data.get("pid")
    if pid is None:
        return "inactive"
    return "active" if alive(int(pid)) else "failed"


def exec_lines(unit: str) -> dict[str, list[str]]:
    """The unit's Exec*= lines by key, in file order (every unit here keeps them in [Service])."""
    lines: dict[str, list[str]] = {}
    for line in (UNIT_DIR / unit).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.startswith("Exec"):
            lines.setdefault(key, []).append(value)
    return lines


def run_exec(value: str, journal: Path) -> int:
    ignore = value.startswith("-")
    argv = shlex.split(value.lstrip("-"))
    with journal.open("a") as out:
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              check=False).returncode
    return 0 if ignore else code


def systemctl(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        return 1
    verb, units = args[0], args[1:]
    if verb in ("enable", "disable") and "--now" in argv and units[0].endswith(".timer"):
        save_unit_state(units[0], {"timer": verb == "enable"})
        return 0
    if verb == "stop" and units[0].endswith(".timer"):
        save_unit_state(units[0], {"timer": False})
        return 0
    if verb in ("daemon-reload", "enable", "disable"):
        return 0
    if verb == "status":
        print(f"{units[-1]}: {active_state(units[-1])}")
        return 0
    if verb == "is-active":
        state = active_state(units[0])
        if "--quiet" not in argv:
            print(state)
        return 0 if state == "active" else 3
    if verb == "show":
        print(unit_state(units[-1]).get("invocation", ""))
        return 0
    if verb == "start":
        return start(units[0])
    if verb == "stop":
        return stop(units[0])
    print(f"systemctl stand-in: unknown verb {verb}", file=sys.stderr)
    return 1


def start(unit: str) -> int:
    if active_state(unit) == "active":
        return 0
    lines = exec_lines(unit)
    invocation = uuid.uuid4().hex
    journal = STATE / "journal" / unit / f"{time.time():.6f}-{invocation}.log"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.touch()
    save_unit_state(unit, {"invocation": invocation})
    for value in lines.get("ExecStartPre", []):
        if run_exec(value, journal) != 0:
            save_unit_state(unit, {"invocation": invocation, "failed": True})
            print(f"Job for {unit} failed because the control process exited with error code.",
                  file=sys.stderr)
            return 1
    with journal.open("a") as out:
        main = subprocess.Popen(shlex.split(lines["ExecStart"][0]), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    save_unit_state(unit, {"invocation": invocation, "pid": main.pid})
    return 0


def stop(unit: str) -> int:
    data = unit_state(unit)
    if not data:
        return 0
    lines = exec_lines(unit)
    journal = next(iter(sorted((STATE / "journal" / unit).glob(f"*-{data['invocation']}.log"))))
    if active_state(unit) == "active":
        for value in lines.get("ExecStop", []):
            run_exec(value, journal)
    if data.get("pid"):
        kill_group(int(data["pid"]))
    for value in lines.get("ExecStopPost", []):
        run_exec(value, journal)
    save_unit_state(unit, {"invocation": data["invocation"]})
    return 0


def journalctl(argv: list[str]) -> int:
    unit = argv[argv.index("-u") + 1]
    invocation = next((a.split("=", 1)[1] for a in argv if a.startswith("_SYSTEMD_INVOCATION_ID=")), None)
    files = sorted((STATE / "journal" / unit).glob("*.log"))
    if invocation:
        files = [f for f in files if f.name.endswith(f"-{invocation}.log")]
    lines = [line for f in files for line in f.read_text().splitlines()]
    if "-n" in argv:
        lines = lines[-int(argv[argv.index("-n") + 1]):]
    print("\n".join(lines))
    return 0


# -- docker ----------------------------------------------------------------------------------------------
def container_file(name: str) -> Path:
    return STATE / "containers" / f"{name}.json"


def docker(argv: list[str]) -> int:
    faults = control()
    if argv[:2] == ["image", "inspect"]:
        return image_inspect(argv[2], faults)
    if argv[:1] == ["inspect"]:
        return container_inspect(argv)
    if argv[:1] == ["run"] and "spark_overlay" in argv:
        return overlay_flags(faults)
    if argv[:1] == ["run"] and "-c" in argv:
        return image_python(argv[argv.index("-c") + 1], faults)
    if argv[:1] == ["run"]:
        return engine(argv[1:], faults)
    if argv[:1] in (["stop"], ["rm"]):
        name = argv[-1]
        try:
            pid = int(json.loads(container_file(name).read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return 0 if argv[0] == "rm" else 1
        kill_group(pid)
        container_file(name).unlink(missing_ok=True)
        return 0
    if argv[:1] == ["ps"]:
        print("CONTAINER ID   NAMES")
        return 0
    print(f"docker stand-in: unsupported {argv[:2]}", file=sys.stderr)
    return 1


def image_inspect(name: str, faults: dict[str, Any]) -> int:
    """`docker image inspect REF|ID`: the node's one serving image by its tag or id, or a running container's
    image by its id (a re-tag leaves the running container on the old one)."""
    images = [] if name.startswith("sha256:") else [image_record(name, str(faults.get("image_build", "")))]
    images += [json.loads(path.read_text())["image"] for path in (STATE / "containers").glob("*.json")
               if "image" in json.loads(path.read_text())]
    found = next((i for i in images if name == i["Id"] or name in i["RepoTags"]), None)
    if faults.get("image_missing") or found is None:
        print("[]")
        print(f"Error: No such image: {name}", file=sys.stderr)
        return 1
    print(json.dumps([found], indent=4))
    return 0


def container_inspect(argv: list[str]) -> int:
    """`docker inspect --type container [--format '{{.Image}}'] NAME`: the record made at `docker run`."""
    name = argv[-1]
    try:
        record = json.loads(container_file(name).read_text())["inspect"]
    except (OSError, ValueError, KeyError):
        print("[]")
        print(f"Error: No such container: {name}", file=sys.stderr)
        return 1
    if "--format" in argv:
        print(record["Image"] if argv[argv.index("--format") + 1] == "{{.Image}}" else "unsupported format")
        return 0
    print(json.dumps([record], indent=4))
    return 0


def known_names(faults: dict[str, Any]) -> list[str]:
    """The SPARK_* names an overlay image knows (the registry's), less the ones the test takes away."""
    from spark_compile.overlay.registry import FLAGS

    lacking = set(faults.get("overlay_lacks", []))
    return [flag.name for flag in FLAGS if flag.name not in lacking]


def image_root(kind: str, faults: dict[str, Any]) -> Path:
    """A stand-in image's overlay folder (what its PYTHONPATH holds), written fresh for this call.

    peer: the production image's kind, a sitecustomize that arms hooks listed in a module beside it (names
    split between the two files, as an overlay's source would); stock: no overlay at all."""
    root = STATE / "image" / kind
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir(parents=True)
    if kind == "peer":
        names = known_names(faults)
        master = [n for n in names if n == "SPARK_ENGRAM_DIR"]
        rest = [n for n in names if n != "SPARK_ENGRAM_DIR"]
        (root / "sitecustomize.py").write_text(
            "import os\n" + "".join(f"ENABLED = bool(os.environ.get({n!r}))\n" for n in master)
            + "from spark_hooks import table  # noqa\n")
        (root / "spark_hooks").mkdir()
        (root / "spark_hooks" / "__init__.py").write_text("")
        (root / "spark_hooks" / "table.py").write_text(
            "HOOKS = {\n" + "".join(f"    {n!r}: 'hook',\n" for n in rest) + "}\n")
    return root


def image_python(script: str, faults: dict[str, Any]) -> int:
    """`docker run --entrypoint python3 IMAGE -c SCRIPT`: the script, run against the stand-in image's files."""
    kind = str(faults.get("image_kind", "peer"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SPARK_ENGRAM_DIR": "",
           "PYTHONPATH": str(image_root(kind, faults))}
    return subprocess.run([sys.executable, "-c", script], env=env, check=False).returncode


def overlay_flags(faults: dict[str, Any]) -> int:
    if faults.get("overlay_cli_missing") or faults.get("image_kind", "peer") != "ours":
        print("/usr/bin/python3: No module named spark_overlay", file=sys.stderr)
        return 1
    # The real overlay CLI's answer (as the image would give it), less the names the test takes away.
    listing = subprocess.run([sys.executable, "-m", "spark_compile.overlay", "flags"], capture_output=True,
                             text=True, check=True).stdout
    lacking = set(faults.get("overlay_lacks", []))
    print("".join(line + "\n" for line in listing.splitlines() if line not in lacking), end="")
    return 0


def parse_run(argv: list[str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """docker run options -> (env, mounts target->source, argv after the image)."""
    env: dict[str, str] = {}
    mounts: dict[str, str] = {}
    takes_value = {"--name", "--restart", "--network", "--ipc", "--cap-add", "--gpus", "--shm-size",
                   "--memory", "--memory-swap", "--ulimit", "--device", "--oom-score-adj", "-v",
                   "--env-file", "-e", "--entrypoint"}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        option, value = argv[i], argv[i + 1] if argv[i] in takes_value else ""
        if option == "--env-file":
            for line in Path(value).read_text().splitlines():
                if line and not line.startswith("#") and "=" in line:
                    key, _, val = line.partition("=")
                    env[key] = val
        elif option == "-e":
            key, _, val = value.partition("=")
            env[key] = val
        elif option == "-v":
            source, target = value.split(":")[:2]
            mounts[target] = source
        i += 2 if option in takes_value else 1
    return env, mounts, argv[i + 1:]


def host_path(mounts: dict[str, str], path: str) -> Path:
    for target, source in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        if path == target or path.startswith(target + "/"):
            return Path(source + path[len(target):])
    return Path(path)


def engine(argv: list[str], faults: dict[str, Any]) -> int:
    """The serving container in the foreground: boot-log lines, then the API (head) or an idle worker."""
    env, mounts, cmd = parse_run(argv)
    name, body = create_request(argv)
    image = image_record(body["Image"], str(faults.get("image_build", "")))
    record = inspect_record(name, body, image, pid=os.getpid(), hostname=os.uname().nodename,
                            container_id=uuid.uuid4().hex + uuid.uuid4().hex)
    container_file(name).parent.mkdir(parents=True, exist_ok=True)
    container_file(name).write_text(json.dumps({"pid": os.getpid(), "inspect": record, "image": image}))
    opt = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("--")}
    rank = int(opt["--node-rank"])
    lines = boot_lines(env, mounts, opt, faults)
    drop = tuple(faults.get("drop", ()))
    print("\n".join(line for line in lines if not (drop and line.startswith(drop)) and
                    not (rank == 0 and faults.get("head_exit") and line.startswith("The server"))))
    sys.stdout.flush()
    if rank == 0 and faults.get("head_exit"):
        time.sleep(2)  # long enough for systemctl start to see it active: it dies while booting
        return 1
    if rank == 0:
        os.execv(sys.executable, [sys.executable, str(HERE / "fake_openai.py"), "--host", opt["--host"],
                                  "--port", opt["--port"], "--control", str(ROOT / "control.json"),
                                  "--log", str(STATE / "requests.jsonl")])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def hooks_armed(env: dict[str, str], faults: dict[str, Any]) -> str:
    """The image's overlay's start-up line: the peer's arms its 21 import hooks, ours the enabled ones."""
    if "hooks" in faults:
        return f"overlay: {faults['hooks']} import hooks armed"
    if faults.get("image_kind", "peer") == "ours":
        from spark_compile.overlay.gates import enabled_hooks
        from spark_compile.overlay.settings import parse_environment

        spark = {k: v for k, v in env.items() if k.startswith("SPARK_")}
        hooks = enabled_hooks(parse_environment(spark).values)
        return f"overlay: {len(hooks)} hooks armed: {', '.join(hooks)}"
    return "overlay: 21 import hooks armed"


def boot_lines(env: dict[str, str], mounts: dict[str, str], opt: dict[str, str],
               faults: dict[str, Any]) -> list[str]:
    """What the serving container prints while booting, in order (the lines verify.sh reads)."""
    rank, world = int(opt["--node-rank"]), int(opt["--nnodes"])
    lines: list[str] = []
    if env.get("SPARK_ENGRAM_DIR"):
        lines.append(hooks_armed(env, faults))
        config = json.loads((host_path(mounts, opt["--model-path"]) / "config.json").read_text())
        sizes = dict(zip(config["engram_layer_ids"], config["engram_num_embeddings"], strict=True))
        if env.get("SPARK_ENGRAM_ROWS"):
            rows = {int(p.split(":")[0]): (int(p.split(":")[1]), int(p.split(":")[2]))
                    for p in env["SPARK_ENGRAM_ROWS"].split(",")}
        else:
            copy = host_path(mounts, env["SPARK_ENGRAM_DIR"])
            manifest = json.loads((copy / "engram-local.json").read_text())
            rows = {int(k): (v[0], v[1]) for k, v in manifest["layers"].items()}
        for layer, (lo, hi) in sorted(rows.items()):
            lines.append(f"engram layer {layer}: rank {rank}/{world} owns rows [{lo}, {hi}) of {sizes[layer]}")
        if env.get("SPARK_MXFP8_BACKEND") not in (None, "", "cutlass"):
            lines.append(f"MXFP8 dense GEMMs routed to {env['SPARK_MXFP8_BACKEND']} (K=576 projections: CUTLASS)")
        if world > 1:
            lines.append(f"RoCE collectives on: world={world}")
        source = "local" if "SPARK_ENGRAM_ROWS" not in env else "shards"
        gather = faults.get("gather_us", 980.5)
        lines += [f"Engram {source} layer={layer} calls=120 gather_us_per_call={gather} rows=4096"
                  for layer in sorted(rows)]
    # SGLang 0.5.23's own wording of the memory lines (model_runner.py, pool_configurator.py,
    # cuda_graph_setup.py). The full_token figures are what SGLang's own configurator sizes from these
    # available_bytes with the reference's flags (`check --engine` on a profile pinning them).
    if "drop_memory" not in faults:
        # Before the load: what SGLang's arithmetic needs for the available_bytes below at F 0.80 with 79.51 GiB
        # loaded ((available + 79.51) / 0.80).
        lines.append(f"Load weight begin. avail mem={'110.94' if rank == 0 else '111.51'} GB")
        lines += ["Load weight end. elapsed=212.40 s, type=DeepseekV4ForCausalLM, quant=fp8, avail mem=42.60 GB, "
                  "mem usage=77.01 GB.",
                  "Load weight end. elapsed=9.12 s, type=DeepseekV4ForCausalLMDSpark, avail mem=40.10 GB, "
                  "mem usage=2.50 GB."]
    full = faults.get("full_token", FULL_TOKEN if rank == 0 else WORKER_FULL_TOKEN)
    available = "9.24" if rank == 0 else "9.70"
    lines.append("DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, "
                 f"bytes_per_full_token=1673.31, available_bytes={available} GB, c128_state_fixed=0.00 GB, "
                 "c2_state_fixed=0.00 GB, swa_fixed=1.06 GB, swa_ring_fixed=0.00 GB, c4_state_fixed=0.00 GB, "
                 f"full_token={full}")
    lines.append("Capture decode cuda graph end. bs=[1, 2, 4, 8, 16], elapsed=31.20 s, mem usage=0.84 GB, "
                 "avail mem=1.90 GB.")
    if rank == 0:
        if env.get("SPARK_SERVED_ALIASES"):
            lines.append(f"Served-model aliases: {env['SPARK_SERVED_ALIASES']}")
        lines.append("The server is fired up and ready to roll!")
    return lines


def nvidia_smi(argv: list[str]) -> int:
    holders = []
    if control().get("gpu_busy"):
        holders.append("4242, python3, 98304 MiB")
    for path in (STATE / "containers").glob("*.json"):
        pid = int(json.loads(path.read_text())["pid"])
        if alive(pid):
            holders.append(f"{pid}, python3, 98304 MiB")
    if any(a.startswith("--query-compute-apps") for a in argv):
        print("\n".join(holders), end="\n" if holders else "")
    else:
        print(f"NVIDIA-SMI stand-in: {len(holders)} compute processes")
    return 0


def free(argv: list[str]) -> int:
    """free -g as procps prints it; the available column from the control file."""
    available = int(control().get("free_gib", 20))
    print("               total        used        free      shared  buff/cache   available")
    print(f"Mem:             119         {119 - available}          {available}           0           1"
          f"         {available}")
    print("Swap:              0           0           0")
    return 0


def gpu_hog(argv: list[str]) -> int:
    """The previous stack's server (a vLLM stand-in): holds the GPU until stopped."""
    container_file(argv[0]).parent.mkdir(parents=True, exist_ok=True)
    container_file(argv[0]).write_text(json.dumps({"pid": os.getpid()}))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def dmesg(_: list[str]) -> int:
    print(f"[    0.000000] dmesg stand-in of {ROOT}")
    return 0


def main() -> int:
    tool, argv = sys.argv[1], sys.argv[2:]
    record(tool, argv)
    handlers = {"docker": docker, "systemctl": systemctl, "journalctl": journalctl, "nvidia-smi": nvidia_smi,
                "free": free, "gpu-hog": gpu_hog,
                "dmesg": dmesg}
    return int(handlers[tool](argv))


if __name__ == "__main__":
    sys.exit(main())
