"""A four-node fleet on this machine: network namespaces, real sshd per node, stand-in node tools.

Layout under the test's temporary folder T (names unique per run, everything removed on close):

* namespace ``<id>sw`` holds a bridge at 10.213.0.2, the operator's box where launch.sh runs; one
  namespace per node, each with a veth on the bridge at 10.213.0.1<rank> and its own OpenSSH server
  (host key, authorized key and known_hosts made for this run).
* each node's sshd runs in a private mount namespace where T/fs is bind-mounted from T/nodes/r<rank>/fs
  and /etc/systemd/system from T/nodes/r<rank>/systemd, so the profile's install, runtime, home, model
  and Engram paths (all under T/fs) are node-local, as on real nodes; its SetEnv puts T/fs/bin (the
  stand-ins) first on PATH and points preflight.sh's GID probe at a fake sysfs under T/fs.

Traffic stays inside these namespaces: no address outside 10.213.0.0/24 is ever configured or dialled.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from support.fleet_install import install

HERE = Path(__file__).resolve().parent
SUBNET = "10.213.0"
NODES = 4
SNAPSHOT = "0f3c9a1d5e7b2468ace13579bdf02468ace13579"
TABLES = {1: 384006168, 14: 384016682}
HCA = "rocep1s0f0"
GID_INDEX = 3
TOOLS = ("docker", "systemctl", "journalctl", "nvidia-smi", "dmesg", "free", "gpu-hog")
PREVIOUS_UNIT = "vllm-prev.service"
COMMAND_TIMEOUT = 150


def node_ip(rank: int) -> str:
    return f"{SUBNET}.{11 + rank}"


def gid_of(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def run(argv: list[str], *, check: bool = True, timeout: float = 30,
        **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


class FleetBed:
    """Build with ``FleetBed(tmp).up(profile_overrides)``; always ``close()``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.id = "spk" + secrets.token_hex(3)
        self.switch = f"{self.id}sw"
        self.namespaces = [f"{self.id}n{rank}" for rank in range(NODES)]
        self.fs = tmp / "fs"
        self.keys = tmp / "keys"
        self.sshd: list[subprocess.Popen[bytes]] = []
        self.made: list[str] = []
        # The compile's output, and the folder the operator installs it into and runs launch.sh from.
        self.generated = tmp / "generated" / "fleet-test"
        self.deploy = tmp / "deploy"
        self.out = self.deploy / "fleet-test"
        self.plan: dict[str, Any] = {}
        self.base_control: dict[str, Any] = {}
        # ssh's connection sharing: one connection per node for the whole bed. A new connection costs a key
        # exchange each (about a tenth of a second here) and a test module makes over a thousand; the path is
        # short because a socket's path is limited to about 100 bytes.
        self.mux = Path(tempfile.mkdtemp(prefix="spk-mux-"))

    # -- paths -------------------------------------------------------------------------------------------
    def node_fs(self, rank: int) -> Path:
        return self.tmp / "nodes" / f"r{rank}" / "fs"

    def records(self, rank: int) -> list[dict[str, Any]]:
        path = self.node_fs(rank) / "state" / "records.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def sshd_connections(self) -> int:
        return sum((self.tmp / "nodes" / f"r{r}" / "sshd.log").read_text().count("Connection from")
                   for r in range(NODES))

    def set_control(self, rank: int, **faults: Any) -> None:
        """The node's injected faults, on top of the bed's own (e.g. which kind of image it has)."""
        (self.node_fs(rank) / "control.json").write_text(json.dumps({**self.base_control, **faults}))

    def unit_state(self, rank: int, unit: str) -> str:
        """systemctl is-active of a unit on a node, asked over ssh as the launcher would."""
        return self.ssh(rank, f"systemctl is-active {shlex.quote(unit)} || true").stdout.strip()

    def ssh(self, rank: int, command: str) -> subprocess.CompletedProcess[str]:
        """A command on a node over ssh, from the operator's box."""
        return self.operator("ssh", *self.env()["SPARK_SSH_OPTS"].split(), f"root@{node_ip(rank)}", command,
                             timeout=60)

    def unit_pid(self, rank: int) -> int:
        state = self.node_fs(rank) / "state" / "units" / f"{self.plan['unit']}.json"
        return int(json.loads(state.read_text())["pid"])

    # -- building ----------------------------------------------------------------------------------------
    def up(self, operations: str, extra: str = "", control: dict[str, Any] | None = None) -> FleetBed:
        """Build the fleet; ``extra`` is more profile YAML, ``control`` every node's standing faults."""
        self.base_control = control or {}
        self.fs.mkdir()
        self._keys()
        self._network()
        for rank in range(NODES):
            self._node_files(rank)
        self._compile(operations, extra)
        for rank in range(NODES):
            self._sshd(rank)
        # The fake API reads smoke.py's bitmap font; smoke.py reads fleet.json and imports fleet_io.py beside it.
        for name in ("smoke.py", "fleet_io.py", "fleet.json"):
            shutil.copy(self.out / "fleet" / name, self.node_fs(0) / name)
        return self

    def _keys(self) -> None:
        self.keys.mkdir()
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.keys / "client")])
        shutil.copy(self.keys / "client.pub", self.keys / "authorized_keys")
        known = []
        for rank in range(NODES):
            key = self.keys / f"host{rank}"
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
            known.append(f"{node_ip(rank)} {key.with_suffix('.pub').read_text().split()[0]} "
                         f"{key.with_suffix('.pub').read_text().split()[1]}")
        (self.keys / "known_hosts").write_text("\n".join(known) + "\n")

    def _ip(self, *args: str) -> None:
        run(["ip", *args])

    def _network(self) -> None:
        self._ip("netns", "add", self.switch)
        self.made.append(self.switch)
        self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", self.switch, "addr", "add", f"{SUBNET}.2/24", "dev", "br0")
        self._ip("-n", self.switch, "link", "set", "br0", "up")
        self._ip("-n", self.switch, "link", "set", "lo", "up")
        for rank, ns in enumerate(self.namespaces):
            self._ip("netns", "add", ns)
            self.made.append(ns)
            outer, inner = f"{self.id}{rank}a", f"{self.id}{rank}b"
            self._ip("link", "add", inner, "type", "veth", "peer", "name", outer)
            self._ip("link", "set", inner, "netns", ns)
            self._ip("link", "set", outer, "netns", self.switch)
            self._ip("-n", ns, "link", "set", inner, "name", "eth0")
            self._ip("-n", ns, "addr", "add", f"{node_ip(rank)}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
            self._ip("-n", self.switch, "link", "set", outer, "master", "br0", "up")

    def _node_files(self, rank: int) -> None:
        fs = self.node_fs(rank)
        for sub in ("bin", "etc", "run", "home", "state", "engram", "logs"):
            (fs / sub).mkdir(parents=True)
        (self.tmp / "nodes" / f"r{rank}" / "systemd").mkdir()
        for tool in TOOLS:
            wrapper = fs / "bin" / tool
            command = shlex.join([sys.executable, str(HERE / "standins.py"), tool])
            root = shlex.quote(str(self.fs))
            wrapper.write_text(f"#!/bin/sh\nSPARK_FAKE_ROOT={root} exec {command} \"$@\"\n")
            wrapper.chmod(0o755)
        (fs / "control.json").write_text(json.dumps(self.base_control))
        # The stack this release replaces, as a unit holding the GPU (a vLLM server's stand-in).
        (self.tmp / "nodes" / f"r{rank}" / "systemd" / PREVIOUS_UNIT).write_text(
            f"[Service]\nExecStart={self.fs / 'bin' / 'gpu-hog'} vllm\n")
        ports = fs / "sys" / "class" / "infiniband" / HCA / "ports" / "1"
        (ports / "gids").mkdir(parents=True)
        (ports / "gid_attrs" / "types").mkdir(parents=True)
        for index in range(GID_INDEX + 1):
            mapped = index == GID_INDEX
            gid = gid_of(node_ip(rank)) if mapped else f"fe80:0000:0000:0000:0000:0000:0000:000{index}"
            (ports / "gids" / str(index)).write_text(gid + "\n")
            (ports / "gid_attrs" / "types" / str(index)).write_text("RoCE v2\n" if mapped else "IB/RoCE v1\n")
        snapshot = fs / "models" / "snapshots" / SNAPSHOT
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text(json.dumps(
            {"engram_layer_ids": list(TABLES), "engram_num_embeddings": list(TABLES.values())}))
        if rank == 1:
            (snapshot / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
        else:
            layers = {str(layer): [n * rank // NODES, n * (rank + 1) // NODES] for layer, n in TABLES.items()}
            (fs / "engram" / "engram-local.json").write_text(json.dumps({"layers": layers, "quant": "fp8"}))

    def _compile(self, operations: str, extra: str) -> None:
        reference = Path(__file__).resolve().parents[2] / "spec" / "profiles" / "dsv41-4spark.yaml"
        nodes = "\n".join(f"    - {{name: spark-{r}, fabric_ip: {node_ip(r)}, ssh: root@{node_ip(r)}, "
                          f"home: {self.fs}/home}}" for r in range(NODES))
        profile = self.tmp / "fleet-test.yaml"
        profile.write_text(f"""extends: {os.path.relpath(reference, self.tmp)}
name: fleet-test
fleet:
  fabric: {{interface: eth0, subnet: {SUBNET}.0/24}}
  nodes:
{nodes}
model:
  repo: {self.fs}/models
  holder_repo: {self.fs}/models
  engram: {{local_dir: {self.fs}/engram}}
deploy:
  install_dir: {self.fs}/etc
  runtime_dir: {self.fs}/run
  docker: {self.fs}/bin/docker
  gpu_wait_tries: 2
  gpu_wait_seconds: 1
operations:
  log_dir: {self.fs}/logs
{operations}{extra}""")
        proc = run([sys.executable, "-m", "spark_compile.cli", str(profile), "--out",
                    str(self.tmp / "generated")], check=False, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"spark-compile failed:\n{proc.stdout}{proc.stderr}")
        install(self.generated, self.out)
        self.plan = json.loads((self.out / "plan.json").read_text())

    def _sshd(self, rank: int) -> None:
        node = self.tmp / "nodes" / f"r{rank}"
        config = node / "sshd_config"
        config.write_text(f"""ListenAddress {node_ip(rank)}:22
HostKey {self.keys / f'host{rank}'}
PidFile {node / 'sshd.pid'}
AuthorizedKeysFile {self.keys / 'authorized_keys'}
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
UseDNS no
LogLevel VERBOSE
SetEnv PATH={self.fs}/bin:/usr/local/bin:/usr/bin:/bin HOME={self.fs}/home SPARK_SYSFS_ROOT={self.fs}
""")
        log = node / "sshd.log"
        log.touch()
        script = (f"mount --bind {shlex.quote(str(node / 'fs'))} {shlex.quote(str(self.fs))} && "
                  f"mount --bind {shlex.quote(str(node / 'systemd'))} /etc/systemd/system && "
                  f"exec /usr/sbin/sshd -D -f {shlex.quote(str(config))} -E {shlex.quote(str(log))}")
        self.sshd.append(subprocess.Popen(
            ["ip", "netns", "exec", self.namespaces[rank], "unshare", "--mount", "--propagation", "private",
             "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        deadline = time.monotonic() + 15
        while "Server listening" not in log.read_text():
            if self.sshd[-1].poll() is not None or time.monotonic() > deadline:
                err = self.sshd[-1].stderr.read().decode() if self.sshd[-1].stderr else ""
                raise RuntimeError(f"sshd of node {rank} did not start: {log.read_text()}{err}")
            time.sleep(0.05)

    # -- running -----------------------------------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        opts = (f"-F /dev/null -i {self.keys / 'client'} -o UserKnownHostsFile={self.keys / 'known_hosts'} "
                "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o LogLevel=ERROR "
                f"-o ControlMaster=auto -o ControlPath={self.mux}/%C -o ControlPersist=600")
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.tmp), "LANG": "C.UTF-8",
                "SPARK_SSH_OPTS": opts, "SPARK_HEALTH_POLL": "1", **extra}

    def kill_sshd(self, rank: int) -> None:
        """Node ``rank``'s ssh dies: its sshd, and the shared connection to it (which would outlive it)."""
        self.sshd[rank].kill()
        self.sshd[rank].wait(timeout=10)
        self.operator("ssh", *self.env()["SPARK_SSH_OPTS"].split(), "-O", "exit", f"root@{node_ip(rank)}")

    def operator(self, *argv: str, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run a command on the operator's box (the switch namespace), e.g. launch.sh start."""
        return run(["ip", "netns", "exec", self.switch, *argv], check=False, timeout=timeout, env=self.env())

    def launch(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return self.operator("bash", str(self.out / "fleet" / "launch.sh"), *args, timeout=timeout)

    def on_head(self, argv: list[str], **kw: Any) -> subprocess.Popen[str]:
        """Start a process on the head, in its network and mount namespaces (where the watchdog runs)."""
        return subprocess.Popen(["nsenter", "-t", str(self.sshd[0].pid), "-m", "-n", *argv], env=self.env(),
                                text=True, **kw)

    # -- teardown ----------------------------------------------------------------------------------------
    def close(self) -> None:
        for ns in self.made:
            pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        for proc in self.sshd:
            proc.kill()
            proc.wait(timeout=10)
        for ns in reversed(self.made):
            run(["ip", "netns", "del", ns], check=False)
        # A veth pair made but not yet moved into its namespaces would outlive them.
        for rank in range(NODES):
            if Path(f"/sys/class/net/{self.id}{rank}b").exists():
                run(["ip", "link", "del", f"{self.id}{rank}b"], check=False)
        shutil.rmtree(self.mux, ignore_errors=True)  # the shared connections died with the switch's processes
