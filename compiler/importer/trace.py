"""`import --trace`: RUN a launcher script in a sandbox and read the `docker run` lines it would have run.

The sandbox: private mount, network and PID namespaces; every mount read-only but the sandbox folder; a /dev
of its own; no network interface up; a throwaway HOME and TMPDIR; a copy of the script's folder to run in
(folder and HOME seen at their real paths); stand-ins (standins/standin.sh) for docker, ssh, nvidia-smi, ip,
ibv_devinfo and friends that record their argv; a time limit. A write outside the folder or a connection
attempt stops the run and is reported (fail closed: a mount that cannot be made read-only aborts the run).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from spark_compile.common.errors import InputError, SandboxError, UsageError
from spark_compile.importer.argv import launcher_split
from spark_compile.importer.docker_run import parse_launch
from spark_compile.importer.shell import ShellWord
from spark_compile.importer.source import Launch, Leftover, Origin

STANDINS = ("docker", "ssh", "scp", "rsync", "nvidia-smi", "ip", "ibv_devinfo", "ibdev2netdev", "ibstat",
            "hostname", "curl", "wget", "sleep", "sudo", "systemctl", "journalctl", "nc")
TIME_LIMIT = 60
MAX_COPY = 4 << 20  # bytes of one copied file
MAX_FILES = 500
# What the kernel says when the sandbox refuses: a write outside the folder, a connection attempt.
VIOLATIONS = {"Read-only file system": "tried to write outside its folder",
              "Network is unreachable": "tried to reach the network",
              "Temporary failure in name resolution": "tried to reach the network",
              "Could not resolve host": "tried to reach the network"}
_RUNNER = r"""
set -u
sandbox=$1; folder=$2; script=$3; shift 3
mount --make-rprivate / || exit 97
mount --bind "$sandbox" "$sandbox" || exit 97
# The script sees its own folder and $HOME where they are, each a writable copy inside the sandbox.
mount --bind "$sandbox/work" "$folder" || exit 97
[[ -d $HOME ]] && mount --bind "$sandbox/home" "$HOME" || exit 97
# A /dev of the sandbox's own: the harmless devices, and /dev/infiniband when --rdma-devices describes an RDMA
# machine (launchers look for it before they pass --device).
mount --rbind /dev "$sandbox/realdev" || exit 97
mount -t tmpfs -o mode=755,size=1m sandbox-dev /dev || exit 97
for dev in null zero full random urandom tty; do
    : > "/dev/$dev" && mount --bind "$sandbox/realdev/$dev" "/dev/$dev" || exit 97
done
ln -s /proc/self/fd /dev/fd && ln -s fd/0 /dev/stdin && ln -s fd/1 /dev/stdout && ln -s fd/2 /dev/stderr
mkdir /dev/shm /dev/pts && mount -t tmpfs -o size=64m sandbox-shm /dev/shm || exit 97
[[ -z ${SPARK_TRACE_HCAS:-} ]] || mkdir /dev/infiniband
umount -l "$sandbox/realdev" || exit 97
while read -r _ mnt _; do
    mnt=$(printf '%b' "$mnt")
    case "$mnt" in /proc|/proc/*|/dev|/dev/*|"$sandbox"|"$folder"|"$HOME") continue ;; esac
    mount -o remount,bind,ro "$mnt" 2>/dev/null || { echo "cannot make $mnt read-only" >&2; exit 97; }
done < /proc/self/mounts
cd "$folder" || exit 97
if [[ $(head -c 2 "./$script") == '#!' ]]; then
    chmod u+x "./$script" && timeout -k 2 "$SPARK_TRACE_LIMIT" "./$script" "$@"  # its own interpreter
else
    timeout -k 2 "$SPARK_TRACE_LIMIT" bash "./$script" "$@"
fi
status=$?
# The script's background jobs (an ssh to a worker) are ours now: wait until they are done.
while :; do
    others=0
    for proc in /proc/[0-9]*; do [[ ${proc#/proc/} == "$$" ]] || others=$((others + 1)); done
    [[ $others -eq 0 ]] && break
    /bin/sleep 0.05  # not the stand-in, which returns at once
done
exit $status
"""


@dataclass(slots=True)
class Traced:
    """What a traced run did: its exit status, what it printed, each recorded call, and what it was refused."""

    status: int
    output: str
    calls: list[tuple[str, list[str]]] = field(default_factory=list)  # (host, argv) in call order
    violations: list[str] = field(default_factory=list)


def _decode(data: bytes) -> list[str]:
    """A stand-in's record: the host, then the argv, each word as <byte length>:<bytes>."""
    words, i = [], 0
    try:
        while i < len(data):
            colon = data.index(b":", i)
            size = int(data[i:colon])
            words.append(data[colon + 1:colon + 1 + size].decode("utf-8", errors="replace"))
            i = colon + 1 + size
    except ValueError:
        words = []
    if len(words) < 2:
        raise InputError("--trace: a stand-in's record is incomplete (was the run killed while it wrote?)")
    return words


def _prepare(sandbox: Path, script: Path) -> None:
    for name in ("home", "tmp", "bin", "calls", "state", "work", "realdev"):
        (sandbox / name).mkdir()
    standin = files("spark_compile.importer").joinpath("standins/standin.sh").read_bytes()
    for tool in STANDINS:
        (sandbox / "bin" / tool).write_bytes(standin)
        (sandbox / "bin" / tool).chmod(0o755)
    entries = sorted(script.parent.iterdir())
    if len(entries) > MAX_FILES:
        raise UsageError(f"{script.parent} holds {len(entries)} entries; --trace copies the script's folder into "
                         f"its sandbox (at most {MAX_FILES}): put the launcher and its config in a folder of their own")
    for entry in entries:  # the script's folder, where it may write freely
        if entry.is_file() and not entry.is_symlink() and entry.stat().st_size <= MAX_COPY:
            shutil.copy2(entry, sandbox / "work" / entry.name)


def _environment(sandbox: Path, hosts: tuple[str, ...], extra: dict[str, str], interface: str | None,
                 devices: tuple[str, ...]) -> dict[str, str]:
    return {**extra, "HOME": "/root", "TMPDIR": str(sandbox / "tmp"), "USER": "root",
            "PATH": f"{sandbox / 'bin'}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SPARK_TRACE": str(sandbox),
            "SPARK_TRACE_HEAD": hosts[0] if hosts else "",
            "SPARK_TRACE_IFACE": interface or "", "SPARK_TRACE_HCAS": ",".join(devices)}


def _watch(process: subprocess.Popen[bytes], traced: Traced, deadline: float, limit: int) -> None:
    """Read the run's output as it comes; stop the run at its first refused write or connection."""
    assert process.stdout is not None
    chunks = []
    for raw in iter(process.stdout.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        chunks.append(line)
        found = next((why for text, why in VIOLATIONS.items() if text in line), None)
        if found:
            traced.violations.append(f"{found}: {line.strip()}")
            os.killpg(process.pid, signal.SIGKILL)
            break
        if time.monotonic() > deadline:
            traced.violations.append(f"ran longer than {limit} s")
            os.killpg(process.pid, signal.SIGKILL)
            break
    traced.output = "".join(chunks)


def run_traced(script: Path, hosts: tuple[str, ...], env: dict[str, str], interface: str | None = None,
               devices: tuple[str, ...] = (), limit: int = TIME_LIMIT) -> Traced:
    """Run ``script`` in the sandbox; the sandbox is removed afterwards."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        raise UsageError("--trace needs root and unshare(1) (util-linux): it runs the script in private mount and "
                         "network namespaces")
    sandbox = Path(tempfile.mkdtemp(prefix="spark-compile-trace-"))
    try:
        _prepare(sandbox, script)
        command = ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c",
                   _RUNNER, "runner", str(sandbox), str(script.resolve().parent), script.name]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT,
                                   env={**_environment(sandbox, hosts, env, interface, devices),
                                        "SPARK_TRACE_LIMIT": str(limit)},
                                   start_new_session=True)
        traced = Traced(0, "")
        _watch(process, traced, time.monotonic() + limit + 5, limit)
        traced.status = process.wait()
        if traced.status == 97:
            raise InputError(f"--trace could not seal its sandbox: {traced.output.strip()[-300:]}")
        if traced.status == 124:
            traced.violations.append(f"ran longer than {limit} s")
        if not traced.violations:
            for call in sorted((sandbox / "calls").iterdir(), key=lambda p: p.name):
                host, *argv = _decode(call.read_bytes())
                traced.calls.append((host, argv))
        return traced
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)


def traced_launches(script: Path, hosts: tuple[str, ...], env: dict[str, str], left: list[Leftover],
                    notes: list[str], interface: str | None = None, devices: tuple[str, ...] = ()) -> list[Launch]:
    """The `docker run` lines a launcher records in the sandbox, each as a launch on the host it ran on."""
    if not script.is_file():
        raise InputError(f"{script}: not a regular file")
    traced = run_traced(script, hosts, env, interface, devices)
    if traced.violations:
        raise SandboxError(f"{script}: stopped in the sandbox: " + "; ".join(traced.violations) +
                         " (nothing was written outside the sandbox; nothing was imported)")
    notes.append(f"{script}: the traced run exited {traced.status} and made {len(traced.calls)} recorded call(s)")
    launches = []
    for number, (host, argv) in enumerate(traced.calls, 1):
        origin = Origin(f"{script} [traced{' on ' + host if host else ''}] call", number)
        words = [ShellWord(w, origin) for w in argv]
        launch = parse_launch(words, script.parent, left)
        if launch is not None and launcher_split(launch.command) is not None:
            launch.ssh = host or None
            launches.append(launch)
    return launches
