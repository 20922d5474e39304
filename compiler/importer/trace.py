"""`import --trace SCRIPT [ARG...]`: RUN a launcher in a sandbox and read the `docker run` lines it would have run.

Usage: ``spark-compile import --trace run.sh 0 --hosts A,B`` runs ``run.sh 0`` (the words after the script are its
arguments) in a copy of its whole folder, seen at its real path, with ``--env NAME=VALUE`` (HOME too) in its
environment: by its #! line, else python3 for a ``.py`` file, else bash. Stand-ins (standins/standin.sh) for
docker, ssh (``--`` and per-host commands), curl (a healthy answer, so a readiness loop ends) and friends record
each call, made from a shell or from Python's subprocess and os.system alike, by name or by path (each is bound
over the host's tool of that name); ibdev2netdev, ip and /dev/infiniband show the fabric given, else a DGX
Spark's own. A `docker exec` of a server into a container an earlier `docker run` started idle (named by its
--name or by the id the stand-in printed) is that container's server. On failure or no recorded call the exit
status and the last lines it printed are reported; at the time limit what was recorded so far is kept.

Threat model: the launcher is hostile code. It must not write, read or signal anything of the host's, reach a
socket or the network, outlive the import or exhaust the machine. Built by standins/sandbox.sh:
- identity: a user namespace whose root is mapped to an unprivileged host user (nobody when spark-compile runs
  as root, else the caller); the launcher runs with every capability dropped (bounding, inheritable, ambient),
  securebits noroot locked and no_new_privs, so no exec (setuid or not) gives one back;
- filesystem: a fresh tmpfs root holding only /usr and /etc (read-only binds), the folder copy and HOME; the host
  tree is pivoted away and detached, so no host socket (docker.sock), /run, /var or /proc is reachable and
  unmounting anything reveals only the empty tmpfs; a /proc of its own pid namespace; a /dev of null, zero,
  full and (u)random; writes go to size-limited tmpfs only;
- network: a network namespace with no interface up (abstract sockets are per namespace too);
- resources: a process count and per-process memory and file-size limits; one deadline for the whole tree,
  kept by the namespace's init (its end kills every process in the namespace) and by spark-compile, which
  kills the init on the deadline, on Ctrl-C or on any error;
- reads: the run's output and its records are read through bounded pipes (a FIFO or /dev/zero in the folder or
  among the records cannot hang the import or exhaust memory); the folder copy takes regular files only;
- environment: the init runs with a fixed environment; --env reaches only the launcher, so BASH_ENV and the like
  run code only inside the sealed sandbox.
Not covered: the kernel itself (a kernel exploit escapes any namespace); a kernel that refuses user namespaces
makes --trace refuse to run (never a weaker sandbox).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import select
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from spark_compile.common.errors import InputError, SandboxError, UsageError
from spark_compile.importer.argv import launcher_split
from spark_compile.importer.docker_run import container_name, parse_exec, parse_launch
from spark_compile.importer.profile import SPARK_FABRIC
from spark_compile.importer.shell import ShellWord
from spark_compile.importer.source import Launch, Leftover, Origin

STANDINS = ("docker", "ssh", "scp", "rsync", "nvidia-smi", "ip", "ibv_devinfo", "ibdev2netdev", "ibstat",
            "hostname", "curl", "wget", "sleep", "sudo", "systemctl", "journalctl", "nc")
TIME_LIMIT = 60
GRACE = 10  # seconds the init gets past the deadline to end the tree and hand over the records
MAX_PROCESSES = 256
MAX_COPY = 4 << 20  # bytes of one copied file
MAX_FILES = 500
MAX_MEMORY_KIB = 4 << 20  # address space of one process
MAX_CALLS = 1000
MAX_RECORD = 256 << 10  # bytes of one recorded call
MAX_OUTPUT = 64 << 10  # bytes of the run's output kept (its tail)
MAX_LINE = 4096
TAIL_LINES = 12
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What the kernel says when the sandbox refuses: a write outside the folder, a connection attempt.
VIOLATIONS = {"Read-only file system": "tried to write outside its folder",
              "Network is unreachable": "tried to reach the network",
              "Temporary failure in name resolution": "tried to reach the network",
              "Could not resolve host": "tried to reach the network"}
REFUSED = ("--trace: this kernel refuses the sandbox's user namespace ({why}); --trace runs a launcher only in an "
           "unprivileged user namespace: allow them (sysctl user.max_user_namespaces, "
           "kernel.apparmor_restrict_unprivileged_userns=0) or import the docker run line without --trace")


@dataclass(slots=True)
class Traced:
    """What a traced run did: its exit status (None at the time limit), its output's tail, each recorded call,
    and what it was refused."""

    status: int | None
    output: str
    calls: list[tuple[str, list[str]]] = field(default_factory=list)  # (host, argv) in call order
    violations: list[str] = field(default_factory=list)


def _decode(data: bytes) -> list[str]:
    """A stand-in's record: the host, then the argv, each word as <byte length>:<bytes>."""
    words, i = [], 0
    try:
        while i < len(data):
            colon = data.index(b":", i, i + 12)
            size = int(data[i:colon])
            words.append(data[colon + 1:colon + 1 + size].decode("utf-8", errors="replace"))
            i = colon + 1 + size
    except ValueError:
        words = []
    if len(words) < 2:
        raise InputError("--trace: a stand-in's record is incomplete or not one (did the launcher write it?)")
    return words


def _records(data: bytes) -> tuple[str, list[bytes]]:
    """The init's report: ``status N|timeout``, then each call as ``call SIZE`` and SIZE bytes."""
    head, _, rest = data.partition(b"\n")
    if not head.startswith(b"status "):
        raise InputError("--trace: the sandbox ended before it reported (was it killed?)")
    calls = []
    while rest:
        line, _, rest = rest.partition(b"\n")
        if line == b"oversized":
            raise InputError(f"--trace: a recorded call is larger than {MAX_RECORD} bytes")
        size = int(line.removeprefix(b"call "))
        calls.append(rest[:size])
        rest = rest[size:]
    return head.removeprefix(b"status ").decode(), calls


def _copy_folder(source: Path, target: Path) -> None:
    """The launcher's folder, subfolders too: regular files and folders only, each opened without following a
    link or blocking on a FIFO, bounded in count and size."""
    for count, entry in enumerate(sorted(source.rglob("*")), 1):
        if count > MAX_FILES:
            raise UsageError(f"{source} holds more than {MAX_FILES} entries; --trace copies the script's folder into "
                             "its sandbox: put the launcher and its config in a folder of their own")
        relative = entry.relative_to(source)
        if entry.is_dir() and not entry.is_symlink():
            (target / relative).mkdir(exist_ok=True)
        elif not entry.is_symlink() and entry.is_file() and (target / relative).parent.is_dir():
            _copy_file(entry, target / relative)


def _copy_file(source: Path, target: Path) -> None:
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return  # unreadable or replaced meanwhile: the launcher runs without it, as it would on a locked file
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_COPY:
            return
        target.write_bytes(handle.read(MAX_COPY))
        target.chmod(info.st_mode & 0o755)


def _stage(stage: Path, script: Path, env: dict[str, str]) -> None:
    for name in ("bin", "work"):
        (stage / name).mkdir()
    standins = files("spark_compile.importer").joinpath("standins")
    (stage / "sandbox").write_bytes(standins.joinpath("sandbox.sh").read_bytes())
    standin = standins.joinpath("standin.sh").read_bytes()
    for tool in STANDINS:
        (stage / "bin" / tool).write_bytes(standin)
        (stage / "bin" / tool).chmod(0o755)
    _copy_folder(script.parent, stage / "work")
    (stage / "env").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))


def _environment(hosts: tuple[str, ...], extra: dict[str, str], interface: str | None,
                 devices: tuple[str, ...]) -> dict[str, str]:
    """The launcher's environment: ours, then --env, with the stand-ins always first on PATH."""
    bad = next((name for name in extra if not NAME.fullmatch(name)), None)
    if bad is not None:
        raise UsageError(f"--env {bad!r}: a variable name is letters, digits and _ (not starting with a digit)")
    env = {"HOME": "/root", "TMPDIR": "/tmp", "USER": "root", "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin",
           **extra, "SPARK_TRACE": "/spark-trace/rw", "SPARK_TRACE_HEAD": hosts[0] if hosts else "",
           "SPARK_TRACE_IFACE": interface or "", "SPARK_TRACE_HCAS": ",".join(devices)}
    env["PATH"] = "/spark-trace/bin:" + env["PATH"]
    if not env["HOME"].startswith("/") or "\0" in env["HOME"]:
        raise UsageError(f"--env HOME={env['HOME']}: HOME is an absolute path")
    return env


def _command(stage: Path, folder: Path, home: str, devices: tuple[str, ...], limit: int, result: int,
             script: str, args: tuple[str, ...]) -> list[str]:
    tools = {name: shutil.which(name, path=SYSTEM_PATH) for name in ("unshare", "setpriv", "bash")}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        raise UsageError(f"--trace needs {', '.join(missing)} (util-linux, bash): it runs the script in a sandbox")
    drop = []
    if os.geteuid() == 0:  # the namespace's root is mapped to nobody, never to the host's root
        nobody = pwd.getpwnam("nobody")
        drop = [str(tools["setpriv"]), f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                "--"]
        for path in (stage, *stage.rglob("*")):
            os.lchown(path, nobody.pw_uid, nobody.pw_gid)
    return [*drop, str(tools["unshare"]), "--user", "--map-root-user", "--mount", "--pid", "--net", "--ipc",
            "--uts", "--cgroup", "--fork", "--kill-child", str(tools["bash"]), "--noprofile", "--norc",
            str(stage / "sandbox"), "seal", str(stage), str(folder), home, ",".join(devices),
            str(folder), str(limit), str(MAX_PROCESSES), str(MAX_MEMORY_KIB), str(result), script, *args]


class _Reader:
    """The run's output (its tail, each line checked for a refusal) and the init's report, both bounded."""

    def __init__(self) -> None:
        self.tail = b""
        self.report = b""
        self.violations: list[str] = []

    def output(self, chunk: bytes) -> None:
        self.tail = (self.tail + chunk)[-MAX_OUTPUT:]
        for raw in chunk.split(b"\n")[:-1] if b"\n" in chunk else ():
            line = raw[:MAX_LINE].decode("utf-8", errors="replace")
            found = next((why for text, why in VIOLATIONS.items() if text in line), None)
            if found and not self.violations:
                self.violations.append(f"{found}: {line.strip()}")

    def result(self, chunk: bytes) -> None:
        if len(self.report) + len(chunk) > MAX_CALLS * (MAX_RECORD + 32) + 64:
            raise InputError(f"--trace: the run recorded more than {MAX_CALLS} calls' worth of records")
        self.report += chunk


def _watch(process: subprocess.Popen[bytes], result: int, deadline: float) -> _Reader:
    """Read until the init ends; kill it (and with it the whole tree) at the deadline or a refusal."""
    assert process.stdout is not None
    reader, streams = _Reader(), {process.stdout.fileno(): "output", result: "result"}
    while streams and not reader.violations:
        left = deadline - time.monotonic()
        if left <= 0:
            reader.violations.append("the sandbox did not end at its deadline")
            break
        ready, _, _ = select.select(list(streams), [], [], left)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                del streams[fd]
            else:
                getattr(reader, streams[fd])(chunk)
    return reader


def _tail(output: bytes) -> str:
    lines = output.decode("utf-8", errors="replace").splitlines()[-TAIL_LINES:]
    return "\n".join(line[:300] for line in lines)


def run_traced(script: Path, hosts: tuple[str, ...], env: dict[str, str], interface: str | None = None,
               devices: tuple[str, ...] = (), limit: int = TIME_LIMIT, args: tuple[str, ...] = ()) -> Traced:
    """Run ``script ARGS`` in the sandbox; the whole process tree and the staging folder are gone afterwards."""
    environment = _environment(hosts, env, interface, devices)
    stage = Path(tempfile.mkdtemp(prefix="spark-compile-trace-"))
    process = None
    read_end, write_end = os.pipe()
    try:
        _stage(stage, script, environment)
        command = _command(stage, script.resolve().parent, environment["HOME"], devices, limit, write_end,
                           script.name, args)
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, pass_fds=(write_end,), start_new_session=True,
                                   env={"PATH": SYSTEM_PATH, "LC_ALL": "C", "SPARK_TRACE_MAX_CALLS": str(MAX_CALLS),
                                        "SPARK_TRACE_MAX_RECORD": str(MAX_RECORD)})
        os.close(write_end)
        write_end = -1
        reader = _watch(process, read_end, time.monotonic() + limit + GRACE)
        return _finish(process, reader)
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, 9)  # the init dies, and the kernel kills every process in its namespace
            process.wait()
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
        shutil.rmtree(stage, ignore_errors=True)


def _finish(process: subprocess.Popen[bytes], reader: _Reader) -> Traced:
    if reader.violations:
        return Traced(None, _tail(reader.tail), violations=reader.violations)
    code = process.wait()
    if code == 97 or (code != 0 and not reader.report):
        text = _tail(reader.tail)
        if "unshare failed" in text or "write failed /proc/self/uid_map" in text:
            raise UsageError(REFUSED.format(why=text.splitlines()[-1]))
        raise InputError(f"--trace could not seal its sandbox (exit {code}): {text[-600:]}")
    status, calls = _records(reader.report)
    traced = Traced(None if status == "timeout" else int(status), _tail(reader.tail))
    for call in calls:
        host, *argv = _decode(call)
        traced.calls.append((host, argv))
    return traced


def sandbox_fabric(script: Path, interface: str | None, devices: tuple[str, ...], fabric: str | None,
                   notes: list[str]) -> tuple[str, tuple[str, ...]]:
    """What the stand-ins (ibdev2netdev, ip, /dev/infiniband) show the launcher: the fabric given, else a DGX
    Spark's own (its RDMA devices unless --fabric tcp), noted."""
    if interface or devices:
        return interface or "", devices
    spark = SPARK_FABRIC.interface or ""
    shown = () if fabric == "tcp" else SPARK_FABRIC.rdma_devices
    notes.append(f"{script}: the sandbox showed the launcher a DGX Spark's own fabric: {spark}" +
                 (f" and {','.join(shown)} (ibdev2netdev, ip, /dev/infiniband)" if shown else " (ip)") +
                 "; give --interface and --rdma-devices when the nodes are cabled otherwise")
    return spark, shown


def traced_launches(script: Path, hosts: tuple[str, ...], env: dict[str, str], left: list[Leftover],
                    notes: list[str], interface: str | None = None, devices: tuple[str, ...] = (),
                    args: tuple[str, ...] = (), fabric: str | None = None) -> list[Launch]:
    """The `docker run` lines (and `docker exec`s of a server) a launcher records in the sandbox, each as a launch
    on the host it ran on; the sandbox shows the fabric given, else a DGX Spark's (sandbox_fabric)."""
    if not script.is_file():
        raise InputError(f"{script}: not a regular file")
    interface, devices = sandbox_fabric(script, interface, devices, fabric, notes)
    traced = run_traced(script, hosts, env, interface, devices, args=args)
    if traced.violations:
        raise SandboxError(f"{script}: stopped in the sandbox: " + "; ".join(traced.violations) +
                           " (nothing was written outside the sandbox; nothing was imported)")
    ran = "ran past its time limit" if traced.status is None else f"exited {traced.status}"
    notes.append(f"{script}: the traced run {ran} and made {len(traced.calls)} recorded call(s)")
    launches = _launches(script, traced.calls, left, notes)
    if not launches or traced.status not in (0, None):
        notes.append(f"{script}: the traced run {ran}; its last lines:\n{traced.output}")
    return launches


def _launches(script: Path, calls: list[tuple[str, list[str]]], left: list[Leftover],
              notes: list[str]) -> list[Launch]:
    """The server launches among the recorded calls: a `docker run` of a server, or a `docker exec` of one in a
    container an earlier `docker run` on the same host started idle."""
    launches: list[Launch] = []
    started: dict[tuple[str, str], Launch] = {}  # containers started without a server, by host and name
    for number, (host, argv) in enumerate(calls, 1):
        origin = Origin(f"{script} [traced{' on ' + host if host else ''}] call", number)
        words = [ShellWord(w, origin) for w in argv]
        launch = parse_launch(words, script.parent, left, notes)
        if launch is None:
            containers = {name: run for (on, name), run in started.items() if on == host}
            launch = parse_exec(words, script.parent, left, containers, notes)
        elif launcher_split(launch.command) is None:
            for known in (container_name(launch) or "", *_container_ids(host, argv)):
                started[(host, known)] = launch
            continue
        if launch is not None and launcher_split(launch.command) is not None:  # not a shell left for typing
            launch.ssh = host or None
            launches.append(launch)
    return launches


def _container_ids(host: str, argv: list[str]) -> tuple[str, str]:
    """The id the stand-in docker printed for a `docker run` (the sha256 of its record) and its short form."""
    record = b"".join(b"%d:%s" % (len(word.encode()), word.encode()) for word in (host, *argv))
    full = hashlib.sha256(record).hexdigest()
    return full, full[:12]
