"""One profile from the launches of a deployment: the nodes and fabric, then the head's engine, container and
environment, then every other node checked against the head (a profile has one value for every node)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from pydantic_core import PydanticUndefined

from spark_compile.common.errors import UsageError
from spark_compile.importer import mapping
from spark_compile.importer.draft import Draft
from spark_compile.importer.mapping import Rank
from spark_compile.importer.source import Launch, Origin
from spark_compile.importer.tables import EMPTY_IS_UNSET, FABRIC_ENV, hub_architecture
from spark_compile.spec import fields as f
from spark_compile.spec.secret_patterns import secret_name
from spark_compile.stages import model_keys

HARDWARE = "dgx-spark-gb10"
_PER_NODE = ("--node-rank",)


@dataclass(frozen=True, slots=True)
class Request:
    """What the command line adds to the sources (node hosts, a profile name, the architecture, the fabric, the
    traced script's environment), and what a recipe says beyond its launches (container name, description)."""

    hosts: tuple[str, ...] = ()
    name: str | None = None
    architecture: str | None = None
    fabric: str | None = None
    interface: str | None = None
    rdma_devices: tuple[str, ...] = ()
    trace: bool = False
    env: dict[str, str] = field(default_factory=dict)  # the traced script's environment
    container_name: str | None = None  # when the source names none (sparkrun names its containers itself)
    description: str | None = None


# A DGX Spark's fabric as its first ConnectX-7 port names it (the reference fleet's): what sparkrun's detection
# finds on a Spark cabled port to port.
SPARK_FABRIC = Request(fabric="roce", interface="enp1s0f0np0", rdma_devices=("rocep1s0f0", "roceP2p1s0f0"))


def _address(host: str) -> str:
    return host.rsplit("@", 1)[-1]


def _home(ssh: str) -> str:
    user = ssh.rsplit("@", 1)[0] if "@" in ssh else "root"
    return "/root" if user == "root" else f"/home/{user}"


def safe_name(text: str) -> str | None:
    """``text`` as a name the profile accepts (lower-case letters, digits and '-'), or None."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return name if name and not mapping.fits(f.Name, name) else None


def _node_name(host: str, rank: int) -> str:
    """A node's name from its host name; by rank when the host is an address."""
    address = _address(host)
    named = None if mapping.fits(f.IPv4, address) is None else safe_name(address)
    return named or f"node{rank}"


def _dist_init(head: Rank) -> tuple[str, str, Origin] | None:
    option = next((o for o in head.engine.options if o.flag == "--dist-init-addr" and o.values), None)
    if option is None:
        return None
    host, _, port = option.values[0].rpartition(":")
    return host, port, option.origin


def _hosts(found: list[Rank], request: Request, nnodes: int) -> list[str]:
    if request.hosts:
        if len(request.hosts) != nnodes:
            raise UsageError(f"--hosts names {len(request.hosts)} host(s) but the deployment has {nnodes} node(s)")
        return list(request.hosts)
    traced = [r.launch.ssh for r in found]
    dist = _dist_init(found[0])
    if nnodes == 1 and not traced[0] and dist is None:
        raise UsageError("the source does not say which machine runs it: give --hosts HOST (its address, or "
                         "user@address)")
    if len(traced) == nnodes and all(traced[1:]):
        head = traced[0] or (dist[0] if dist else None)
        if head:
            return [head, *(t for t in traced[1:] if t)]
    raise UsageError(f"the source does not name the address of every one of its {nnodes} nodes: give --hosts "
                     "H1,H2,... (the head first, as user@address or address)")


def _fleet(draft: Draft, found: list[Rank], request: Request, fabric_env: dict[str, tuple[str, Origin]]) -> str:
    head = found[0]
    nnodes_opt = next((o for o in head.engine.options if o.flag == "--nnodes" and o.values), None)
    nnodes = int(nnodes_opt.values[0]) if nnodes_opt and nnodes_opt.values[0].isdigit() else len(found)
    if nnodes > len(found):
        draft.notes.append(f"{head.launch.origin}: --nnodes {nnodes} with {len(found)} docker run line(s): the "
                           "other nodes are taken to run the same line with their own --node-rank")
    hosts = _hosts(found, request, nnodes)
    where = "--hosts" if request.hosts else "the traced ssh targets"
    ips = []
    for rank, host in enumerate(hosts):
        at = ("fleet", "nodes", rank)
        ip = _address(host)
        if mapping.fits(f.IPv4, ip):
            raise UsageError(f"node {rank}'s host {host!r} is not an IPv4 address; give --hosts as addresses "
                             "(user@192.0.2.1)")
        ips.append(ip)
        draft.set((*at, "name"), _node_name(host, rank), "named after its host")
        draft.set((*at, "fabric_ip"), ip, f"from {where}")
        draft.set((*at, "ssh"), host, f"from {where}")
        draft.set((*at, "home"), _home(host), "assumed: the ssh user's home")
    dist = _dist_init(head)
    if dist is not None:
        host, port, origin = dist
        if host != ips[0]:
            draft.leave(origin, f"--dist-init-addr {host}:{port}", f"the rendezvous is always the head's fabric "
                        f"address ({ips[0]})")
        mapping.put(draft, ("engine", "dist_init_port"), f.Port, port, origin, f"--dist-init-addr {host}:{port}")
    if nnodes > 1:
        _fabric(draft, fabric_env, ips, request, head.launch.origin, not head.launch.own_container)
    return ips[0]


def _fabric(draft: Draft, env: dict[str, tuple[str, Origin]], ips: list[str], request: Request,
            origin: Origin, detected: bool) -> None:
    """fleet.fabric of a multi-node deployment: from the source's NCCL variables, or --fabric/--interface/
    --rdma-devices (which win); a recipe's (``detected``: sparkrun finds it at launch) a DGX Spark's own, else
    reported missing."""
    at = ("fleet", "fabric")
    given = "given with --{}"
    if detected and not env and not (request.interface or request.fabric or request.rdma_devices):
        request, given = SPARK_FABRIC, "assumed: a DGX Spark's own (sparkrun detects the fabric at launch)"
        draft.notes.append(f"{origin}: sparkrun detects the fabric at launch; assumed a DGX Spark's own: RoCE over "
                           f"{SPARK_FABRIC.interface} and {','.join(SPARK_FABRIC.rdma_devices)} (give --interface "
                           "and --rdma-devices when the nodes are cabled otherwise)")
    interface = (request.interface, given.format("interface")) if request.interface else \
        env.get("NCCL_SOCKET_IFNAME") or env.get("GLOO_SOCKET_IFNAME")
    if interface is None:
        draft.leave(origin, "fleet.fabric.interface", "a multi-node profile needs the fabric's interface and the "
                    "source names none; give --interface")
    else:
        mapping.put(draft, (*at, "interface"), f.IfName, interface[0], interface[1], "the fabric interface")
    net, disable = env.get("NCCL_NET"), env.get("NCCL_IB_DISABLE")
    hca = (",".join(request.rdma_devices), given.format("rdma-devices")) if request.rdma_devices else \
        env.get("NCCL_IB_HCA")
    kind: tuple[str, Origin | str] | None = (request.fabric, given.format("fabric")) if request.fabric else None
    if kind is None and ((net and net[0] == "Socket") or (disable and disable[0] == "1")):
        kind = ("tcp", (net or disable or ("", origin))[1])
    elif kind is None and hca:
        kind = ("roce", hca[1])
    if kind is None:
        draft.leave(origin, "fleet.fabric.kind", "the source does not say whether the nodes talk over RoCE, "
                    "InfiniBand or TCP; give --fabric")
        return
    draft.set((*at, "kind"), kind[0], kind[1])
    draft.set((*at, "subnet"), subnet_of(ips), "derived: the smallest subnet holding every node's address")
    if kind[0] == "tcp":
        return
    if hca is None:
        draft.leave(origin, "fleet.fabric.rdma_devices", "an RDMA fabric needs its devices (NCCL_IB_HCA) and the "
                    "source names none; give --rdma-devices")
    else:
        mapping.put(draft, (*at, "rdma_devices"), list, [d for d in hca[0].split(",") if d], hca[1], "NCCL_IB_HCA")
    gid = env.get("NCCL_IB_GID_INDEX")
    if gid and kind[0] == "roce":
        mapping.put(draft, (*at, "gid_index"), int, gid[0], gid[1], f"NCCL_IB_GID_INDEX={gid[0]}")


def _compare(draft: Draft, head: Rank, other: Rank) -> None:
    """What a worker runs differently from the head: its own container name and variables where the profile has
    per-node keys, else reported (the profile has one engine command and one set of docker options)."""
    ours = [(o.flag, o.values) for o in head.engine.options if o.flag not in _PER_NODE]
    for option in other.engine.options:
        if option.flag not in _PER_NODE and (option.flag, option.values) not in ours:
            draft.leave(option.origin, " ".join(w.text for w in option.words),
                        f"node {other.rank} runs this and the head does not; the profile has one engine command")
    _compare_env(draft, head, other)
    head_opts = {(k.text, v.text if v else None) for k, v in head.launch.options}
    for flag, given in other.launch.options:
        if (flag.text, given.text if given else None) in head_opts:
            continue
        at = ("fleet", "nodes", other.rank, "container_name")
        if flag.text == "--name" and given is not None and model_keys.exists(at):
            mapping.put(draft, at, str, given.text, flag.origin, f"--name {given.text}")
            continue
        what = flag.text + ("" if given is None else f" {given.text}")
        draft.leave(flag.origin, what, f"node {other.rank} runs its container with this and the head does not; "
                    "the profile's docker options are the same on every node")


def _compare_env(draft: Draft, head: Rank, other: Rank) -> None:
    head_env = {n: v for n, v, _ in head.launch.env}
    theirs = {n: v for n, v, _ in other.launch.env}
    per_node = model_keys.exists(("fleet", "nodes", 0, "env"))
    for name, value, origin in other.launch.env:
        if head_env.get(name) == value or name == "HOST_IP":
            continue
        shown = "(redacted)" if secret_name(name) else value
        if per_node and not secret_name(name):
            mapping.put(draft, ("fleet", "nodes", other.rank, "env", name), str, value, origin, f"-e {name}={shown}")
            continue
        draft.leave(origin, f"-e {name}={shown}", f"node {other.rank} sets this and the head does not; the "
                    "profile's environment is the same on every node")
    for name, _value, origin in head.launch.env:
        if name not in theirs and name != "HOST_IP":
            draft.leave(origin, f"-e {name}", f"the head sets this and node {other.rank} does not; the profile's "
                        "environment is the same on every node")
    _node_fabric(draft, other.rank, {n: (v, o) for n, v, o in other.launch.env if head_env.get(n) != v})


def _node_fabric(draft: Draft, rank: int, differs: dict[str, tuple[str, Origin]]) -> None:
    """A node cabled otherwise than the head (its own socket interface or HCAs): its fleet.nodes[] fabric keys,
    which its unit waits for and the rules judge its variables by."""
    at = ("fleet", "nodes", rank)
    interface = differs.get("NCCL_SOCKET_IFNAME") or differs.get("GLOO_SOCKET_IFNAME")
    if interface is not None and interface[0]:
        mapping.put(draft, (*at, "interface"), f.IfName, interface[0], interface[1], "this node's socket interface")
    hca = differs.get("NCCL_IB_HCA")
    if hca is not None and hca[0] and not hca[0].startswith("^"):
        mapping.put(draft, (*at, "rdma_devices"), list, [d.split(":")[0] for d in hca[0].split(",") if d], hca[1],
                    "this node's NCCL_IB_HCA")


def build(launches: list[Launch], request: Request) -> Draft:
    """The profile draft of a deployment's launches."""
    draft = Draft()
    found = mapping.ranks(launches)
    head = found[0]
    name = (safe_name(request.name) if request.name else None) or "imported"
    draft.set(("name",), name, "named after the -o file" if request.name else "assumed")
    fabric_env = {n: (v, o) for n, v, o in head.launch.env if n in FABRIC_ENV}
    head_ip = _fleet(draft, found, request, fabric_env)
    draft.set(("hardware",), HARDWARE, "assumed: every node is a DGX Spark (GB10)")
    known = _known_architecture(head)
    if request.architecture:
        draft.set(("model", "architecture"), request.architecture, "given with --architecture")
    elif known is not None:
        draft.set(("model", "architecture"), known[0], f"the published config.json of {known[1]} (--architecture "
                  "overrides it)")
    else:
        draft.leave(head.launch.origin, "model.architecture", "the source does not say the model's architecture "
                    "(config.json `architectures[0]`) and its model is no hub id import knows; give --architecture")
    mounts = mapping.volumes(head.launch)
    mapping.engine(draft, head.engine, mounts)
    served = ("model", "served_name")
    if served not in draft.values and model_keys.default(served) is PydanticUndefined:
        _served_name(draft, head)  # the model requires a served name
    if head.launch.image is not None:
        mapping.put(draft, ("engine", "image"), f.ImageRef, head.launch.image.text, head.launch.image.origin,
                    head.launch.image.text)
    mapping.docker(draft, head.launch, mounts)
    if ("engine", "container_name") not in draft.values and request.container_name:
        draft.set(("engine", "container_name"), request.container_name, "assumed: the source names no container")
    if request.description and not model_keys.problem(("description",), request.description):
        draft.set(("description",), request.description, "from the recipe's metadata.description")
    environment(draft, head.launch, head_ip)
    if head.launch.own_container:  # sparkrun's own containers get RDMA access by its detection, as the plan's do
        mapping.rdma_access(draft)
    container = draft.values.get(("engine", "container_name"))
    if not request.name and container is not None:
        draft.set(("name",), container[0], "named after the container (" + container[1] + ")")
    for other in found[1:]:
        _compare(draft, head, other)
    return draft


def _known_architecture(head: Rank) -> tuple[str, str] | None:
    """(architecture, hub id) when the model path is a well-known hub id."""
    model = next((o for o in head.engine.options if o.flag == "--model-path" and o.values), None)
    found = hub_architecture(model.values[0]) if model is not None else None
    return (found, model.values[0]) if found is not None and model is not None else None


def _served_name(draft: Draft, head: Rank) -> None:
    model = next((o for o in head.engine.options if o.flag == "--model-path" and o.values), None)
    if model is not None and not mapping.fits(f.Text, model.values[0]):
        draft.set(("model", "served_name"), model.values[0], "assumed: SGLang serves the model path when no "
                  "--served-model-name is given")
        draft.notes.append(f"{model.origin}: added --served-model-name {model.values[0]} (SGLang's default): "
                           "the profile always names the served model")


def subnet_of(addresses: list[str]) -> str:
    """The smallest IPv4 subnet holding every address."""
    ips = [int(ipaddress.IPv4Address(a)) for a in addresses]
    prefix = 32
    while prefix > 0 and len({ip >> (32 - prefix) for ip in ips}) > 1:
        prefix -= 1
    return str(ipaddress.IPv4Network((min(ips), prefix), strict=False))


def environment(draft: Draft, launch: Launch, fabric_ip: str) -> None:
    """The head's variables onto engine.env and nccl.extra, NCCL's and gloo's as written (nccl.preset none: the
    fabric only describes the network)."""
    draft.set(("nccl", "preset"), "none", "the source sets NCCL's variables itself")
    for name, value, origin in launch.env:
        if name in EMPTY_IS_UNSET and not value.strip():
            draft.notes.append(f"{origin}: -e {name} is set empty: not imported ({EMPTY_IS_UNSET[name]})")
        elif secret_name(name):
            draft.leave(origin, f"-e {name}=(redacted)", "a secret's value is never copied into a profile; set "
                        f"secrets.env.{name} to a file or variable on the node")
        elif name == "HOST_IP" and value == fabric_ip:
            continue  # the plan sets HOST_IP to each node's fabric address
        elif mapping.fits(f.EnvName, name):
            draft.leave(origin, f"-e {name}", "the profile's variable names are A-Z, 0-9 and '_'")
        elif name.startswith(("SPARK_", "B12X_")):
            draft.leave(origin, f"-e {name}={value}", "overlay variables are set through the overlay section")
        else:
            section = ("nccl", "extra") if name.startswith(("NCCL_", "GLOO_")) else ("engine", "env")
            if not mapping.fits(f.EnvText, value):
                draft.set((*section, name), value, origin)
            else:
                draft.leave(origin, f"-e {name}", "the value holds a line break or control character")
