"""The profile's typed model: every section, every field described; the source of the JSON Schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from spark_compile.spec.checks import (
    MAX_FLEET_NODES,
    MAX_SECONDS,
    check_aliases_overlay,
    check_hardware,
    check_model_source,
    check_secret_ref,
)
from spark_compile.spec.container_model import Container, Kubernetes
from spark_compile.spec.engine_model import Engine
from spark_compile.spec.fields import (
    AbsPath,
    ArgText,
    ContainerName,
    EnvName,
    FreeText,
    GgufType,
    HomePath,
    HubId,
    IfName,
    IPv4,
    IPv4Net,
    Name,
    Positive,
    RdmaName,
    Seconds,
    Snapshot,
    SshTarget,
    Text,
    Word,
)
from spark_compile.spec.nccl_presets import NCCL_DEBUG_DEFAULT
from spark_compile.spec.operations_model import ImageCheck, PreviousStack, Verify, Window
from spark_compile.spec.overlay_section import OverlaySection
from spark_compile.spec.section import EnvValue, GiB, Section

GidIndex = Literal["probe"] | Annotated[int, Field(ge=0, le=255)]
# A hardware catalog entry (spec/hardware.py) that exists.
Hardware = Annotated[Text, AfterValidator(check_hardware)]
FabricKind = Literal["roce", "infiniband", "tcp"]


class Fabric(Section):
    """The network every rank talks over: RoCE, InfiniBand, or plain TCP sockets."""

    kind: FabricKind = Field(
        "roce",
        description="roce: RDMA over Converged Ethernet v2 (NCCL IB transport, GID index per node); infiniband: "
        "native IB (NCCL IB transport, no GID); tcp: NCCL's socket transport, no RDMA devices.",
    )
    interface: IfName = Field(
        description="Network interface of the fabric on every node: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME "
        "unless bootstrap_interface names another.",
    )
    bootstrap_interface: IfName | None = Field(
        None,
        description="Interface of NCCL's and gloo's bootstrap sockets (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) when "
        "it is not the fabric's own, e.g. the management NIC while data moves over rdma_devices; unset: interface.",
    )
    subnet: IPv4Net = Field(description="The fabric's IPv4 subnet in CIDR form; every node's fabric_ip lies inside it.")
    rdma_devices: list[RdmaName] = Field(
        [],
        description="RDMA devices (HCAs, as /sys/class/infiniband names them) used by NCCL and the b12x runtime; "
        "required for roce and infiniband, none for tcp. With roce the first one is probed for the GID index.",
    )
    gid_index: GidIndex = Field(
        "probe",
        description="roce only: RoCE-v2 GID index; `probe` finds it on each node at start, an integer pins it "
        "fleet-wide.",
    )


class Node(Section):
    """One node of the fleet; its position in `nodes` is its rank."""

    name: Name = Field(description="Node name: used in generated paths and messages.")
    fabric_ip: IPv4 = Field(description="The node's address on the fabric (HOST_IP; rank 0's is the --dist-init-addr).")
    ssh: SshTarget = Field(description="How the launcher reaches the node: host or user@host.")
    home: AbsPath = Field(
        description="Home directory of the service user on the node; relative cache paths live under it.",
    )
    holds_checkpoint: bool = Field(
        False,
        description="With model.engram only: true on the one node that reads Engram rows from the checkpoint's "
        "shards (and mounts holder_repo). Without Engram every node reads its own copy at model.repo.",
    )
    gid_index: GidIndex | None = Field(None, description="Overrides the fabric's gid_index for this node.")
    interface: IfName | None = Field(
        None,
        description="This node's fabric interface when its cabling differs from the fleet's (two Sparks cabled "
        "port 1 to port 0: enp1s0f1np1 on one, enp1s0f0np0 on the other); unset: fleet.fabric.interface.",
    )
    rdma_devices: list[RdmaName] | None = Field(
        None,
        description="This node's RDMA devices when they differ from the fleet's; unset: fleet.fabric.rdma_devices.",
    )
    container_name: ContainerName | None = Field(
        None, description="docker --name on this node; unset: engine.container_name.",
    )
    env: dict[EnvName, EnvValue] = Field(
        {},
        description="Container variables of this node only (e.g. NODE_IP, SGLANG_HOST_IP), over engine.env and "
        "nccl.extra; written to the rank's env file of the variable's concern.",
    )


class Fleet(Section):
    """The nodes and the fabric between them."""

    fabric: Fabric | None = Field(
        None, description="The fabric between the nodes; required with more than one node, optional on one.",
    )
    nodes: list[Node] = Field(
        min_length=1,
        max_length=MAX_FLEET_NODES,
        description="Nodes in rank order: the first is rank 0, the head; workers start first, the head last. A "
        "child profile patches them by name (`- !delete spark-3`, `- !replace {name: spark-3, ...}`).",
    )


class Engram(Section):
    """Engram embedding tables partitioned over the ranks."""

    tables: dict[Annotated[int, Field(ge=0)], Positive] = Field(
        min_length=1,
        description="Layer id -> row count N of that layer's Engram table.",
    )
    local_dir: AbsPath = Field(
        description="Node-local copy of each rank's rows (with engram-local.json), mounted read-only on non-holders.",
    )
    container_dir: AbsPath = Field("/engram-local", description="Where the local copy appears inside the container.")


class Model(Section):
    """The checkpoint and how it is served."""

    architecture: Text = Field(
        description="Model architecture (config.json `architectures[0]`), e.g. DeepseekV4ForCausalLM.",
    )
    repo: AbsPath | None = Field(
        None,
        description="Host directory of the checkpoint, mounted read-only at container_repo: an HF cache repo "
        "(with snapshot) or a plain model directory (config.json inside it; no snapshot). Exactly one of repo or "
        "hub_id.",
    )
    hub_id: HubId | None = Field(
        None,
        description="A Hugging Face hub id (owner/name) passed as --model-path: SGLang resolves it in the "
        "container's HF cache (/root/.cache/huggingface, under container.cache_dir or a mount there). Exactly one "
        "of repo or hub_id.",
    )
    gguf: GgufType | None = Field(
        None,
        description="With hub_id: the model is the repo's one GGUF file of this quantization type (e.g. Q6_K, the "
        "file ending -Q6_K.gguf); --model-path <hub_id>:<gguf>, which SGLang downloads and loads as GGUF.",
    )
    holder_repo: AbsPath | None = Field(
        None,
        description="With model.engram: the repo directory on the node that holds the checkpoint; defaults to "
        "`repo`.",
    )
    container_repo: AbsPath = Field(
        "/models/repo",
        description="Where repo appears inside the container.",
    )
    snapshot: Snapshot | None = Field(
        None,
        description="HF cache form: the snapshot directory under <repo>/snapshots/ (--model-path "
        "<container_repo>/snapshots/<snapshot>); unset with repo: repo is a plain model directory (--model-path "
        "<container_repo>).",
    )
    served_name: Text | None = Field(
        None,
        description="Model id served by the API (--served-model-name); no ':' allowed. Unset: the flag is not "
        "written and SGLang serves the model path as the id.",
    )
    quantization: Word | None = Field(
        None, description="--quantization (e.g. modelopt_fp4, fp8); unset: SGLang reads the checkpoint's config.",
    )
    tokenizer: Text | None = Field(
        None, description="--tokenizer-path: a hub id or container path of the tokenizer (a GGUF model needs its "
        "base repo's); unset: the model's own.",
    )
    revision: Word | None = Field(
        None, description="--revision: the hub revision (branch, tag or commit) a hub_id model is pinned to.",
    )
    aliases: list[Text] = Field([], description="Other model ids answered by the same model (SPARK_SERVED_ALIASES).")
    max_context_length: Positive | None = Field(
        None,
        description="The model's own maximum context length in tokens, if known; engine context_length may not exceed"
        " it.",
    )
    engram: Engram | None = Field(None, description="Engram tables, for models that have them.")
    config_json: Text | None = Field(
        None,
        description="The checkpoint's config.json for `check --engine`, relative to the profile file that names it "
        "(a committed copy); unset: config.json in the model directory on the checking machine.",
    )

    weights_per_rank: list[GiB] | None = Field(
        None,
        description="Pinned: GiB of target weights each rank holds, in rank order (a boot's `Load weight end` "
        "mem usage, as `verify.sh --calibrate` writes it); unset: from the snapshot's safetensors headers when it is "
        "on this machine, else estimated from config.json.",
    )
    draft_weights_per_rank: list[GiB] | None = Field(
        None, description="Pinned: GiB of draft-model weights each rank holds, in rank order (from a boot).",
    )
    available_per_rank: list[GiB] | None = Field(
        None,
        description="Pinned: GiB SGLang had for the KV pools on each rank at boot (`DSV4 memory calculation` "
        "available_bytes), in rank order; the KV prediction then starts from it instead of the memory budget.",
    )
    pre_load_available_per_rank: list[GiB] | None = Field(
        None,
        description="Pinned: GiB SGLang measured free on each rank before the model loaded (the boot log's `Load "
        "weight begin. avail mem=`, as `verify.sh --calibrate` writes it), in rank order; unset: the hardware's "
        "default MemAvailable less what the plan holds in host memory first. A change of mem_fraction_static then "
        "moves the KV prediction as SGLang would.",
    )
    cuda_graph_per_rank: list[GiB] | None = Field(
        None, description="Pinned: GiB CUDA graph capture took on each rank at boot, in rank order.",
    )

    _aliases_need_the_overlay = model_validator(mode="after")(check_aliases_overlay)
    _one_source = model_validator(mode="after")(check_model_source)


class Nccl(Section):
    """NCCL and gloo environment."""

    preset: Literal["trim", "default", "none"] = Field(
        "trim",
        description="trim: production's buffer/protocol/channel trim; default: 4 channels, Ring; none: no NCCL_* or "
        "GLOO_* variable but nccl.extra's (NCCL and gloo find interfaces, HCAs and the GID index themselves).",
    )
    extra: dict[EnvName, EnvValue] = Field(
        {},
        description="Further NCCL_* variables, checked against the NCCL catalog.",
    )
    debug: Literal["WARN", "INFO", "TRACE", "VERSION", "off"] = Field(
        NCCL_DEBUG_DEFAULT,
        description="NCCL_DEBUG: WARN (production's: NCCL's warnings in the journal for a postmortem), INFO, "
        "TRACE or VERSION; off writes no NCCL_DEBUG (NCCL's own default, silent).",
    )


class Deploy(Section):
    """Where the artifacts live on the nodes."""

    install_dir: AbsPath = Field(
        "/etc/spark-compile",
        description="Each rank's artifacts are installed under <install_dir>/<profile>/.",
    )
    runtime_dir: AbsPath = Field(
        "/run/spark-compile",
        description="Values found at start (runtime.env) are written under <runtime_dir>/<profile>/.",
    )
    unit_name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_][a-zA-Z0-9:_.@-]{0,246}\.service$")] | None = Field(
        None,
        description="systemd unit name; defaults to sglang-<profile>.service.",
    )
    docker: AbsPath = Field(
        "/usr/bin/docker",
        description="The docker client on the nodes (systemd needs an absolute path).",
    )
    gpu_wait_tries: Annotated[int, Field(ge=1, le=100)] = Field(
        6,
        description="Preflight: how many times to look for a free GPU before aborting.",
    )
    gpu_wait_seconds: Annotated[int, Field(ge=1, le=600)] = Field(
        10,
        description="Preflight: seconds between two looks for a free GPU.",
    )


class SecretRef(Section):
    """Where a secret's value lives on the node; the value itself never enters the profile."""

    file: AbsPath | None = Field(None, description="A root-readable file on the node whose first line is the value.")
    env: EnvName | None = Field(
        None,
        description="A variable of the unit's environment on the node (e.g. from a drop-in's EnvironmentFile=).",
    )

    _exactly_one = model_validator(mode="after")(check_secret_ref)


class Secrets(Section):
    """Secrets by reference: read on the node at start, never written into generated files."""

    env: dict[EnvName, SecretRef] = Field(
        {},
        description="Container variables whose values are secrets (HF_TOKEN, ...): written to the runtime env file at"
        " start.",
    )
    api_key: SecretRef | None = Field(
        None,
        description="The served API's key (--api-key): written at start to an engine config file, never into argv.",
    )


class Watchdog(Section):
    """The head's watchdog: probes, busy grace, fleet-wide relaunch (defaults from the peer's watchdog.sh)."""

    enabled: bool = Field(True, description="Generate and install the watchdog service and timer on the head.")
    interval_seconds: Annotated[int, Field(ge=5, le=MAX_SECONDS)] = Field(60, description="Seconds between two checks.")
    fail_threshold: Positive = Field(3, description="Consecutive failed checks that trigger a relaunch.")
    probe_timeout_seconds: Seconds = Field(45, description="Timeout of the short chat request of a check.")
    busy_grace_seconds: Annotated[int, Field(ge=0, le=MAX_SECONDS)] = Field(
        600,
        description="A probe timing out while /health answers counts as busy; only a busy spell longer than this "
        "fails.",
    )
    ready_timeout_seconds: Seconds = Field(3600, description="How long a relaunch may take to become healthy.")
    relaunch_limit: Positive = Field(3, description="Relaunches before the watchdog gives up with GIVING UP.")
    reset_after_seconds: Positive = Field(
        86400,
        description="After this long healthy since its last relaunch the watchdog forgets its relaunches, so a "
        "fleet that crashes once a month never reaches relaunch_limit.",
    )
    audit: bool = Field(
        False,
        description="After a relaunch that came back healthy, run `launch.sh audit` and log every difference "
        "between the relaunched fleet and the plan (a finding in the watchdog log; the fleet is left running).",
    )


class Smoke(Section):
    """Answer-checking smoke tests run against the head after a boot."""

    needle_tokens: list[Positive] = Field(
        [32768, 131072],
        description="Prompt sizes of the needle test; sizes above the context length are skipped with a note.",
    )
    image: bool = Field(True, description="Ask an image question with a known answer (the model must take images).")
    tools: bool = Field(True, description="Ask for a tool call and check it comes back well formed.")
    request_timeout_seconds: Seconds = Field(600, description="Timeout of one smoke request.")


class Operations(Section):
    """Fleet operations: launcher, post-boot verification, smoke tests, watchdog."""

    health_timeout_seconds: Seconds = Field(
        2400,
        description="How long the launcher waits for /health after starting the head (boots take ~10 minutes).",
    )
    log_dir: HomePath = Field(
        "sgl-logs",
        description="Where the launcher and the watchdog keep logs and postmortems on the head (relative to home).",
    )
    watchdog: Watchdog = Field(default_factory=Watchdog, description="The head's watchdog.")
    smoke: Smoke = Field(default_factory=Smoke, description="Smoke tests.")
    image_check: ImageCheck = Field(default_factory=ImageCheck, description="Preflight's overlay check.")
    previous_stack: PreviousStack | None = Field(
        None, description="The stack this release replaces: stopped at cutover, restored by `launch.sh rollback`.",
    )
    verify: Verify = Field(default_factory=Verify, description="What verify.sh expects of a boot.")
    window: Window = Field(default_factory=Window, description="The release window: test port, deadline, gate.")


class ReleaseNotes(Section):
    """What a release is, for `history` and the review page: read from the profile that writes it, never inherited."""

    date: Annotated[str, Field(pattern=r"^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")] = Field(
        description="The day the release went out, YYYY-MM-DD.",
    )
    reason: Text = Field(description="Why this release exists, in one line.")
    link: Annotated[str, Field(pattern=r"^https://[!-~]{1,500}$")] | None = Field(
        None, description="An https:// page about the release (a ticket, a changelog, a pull request).",
    )


class Profile(Section):
    """A deployment profile: one model served by SGLang across a fleet."""

    model_config = ConfigDict(title="spark-compile profile")

    name: Name = Field(description="Profile name: names the generated directory and the default unit.")
    release: Text | None = Field(None, description="Release tag this profile describes, e.g. production-1.7.1.")
    description: FreeText | None = Field(None, description="Free text for humans.")
    release_notes: ReleaseNotes | None = Field(
        None, description="Date, reason and link of this release (each release file writes its own).",
    )
    extends: ArgText | None = Field(
        None, description="Relative path of a parent profile whose values this one overrides.",
    )
    fleet: Fleet = Field(description="Nodes and fabric.")
    hardware: Hardware = Field(description="Hardware catalog entry of every node, e.g. dgx-spark-gb10.")
    model: Model = Field(description="The checkpoint.")
    engine: Engine = Field(description="The engine.")
    container: Container = Field(default_factory=Container, description="Container options.")
    nccl: Nccl = Field(default_factory=Nccl, description="NCCL environment.")
    overlay: OverlaySection = Field(
        default_factory=OverlaySection,
        description="SPARK_* overlay flags; unset keys leave the hook's default in force.",
    )
    deploy: Deploy = Field(default_factory=Deploy, description="Install locations on the nodes.")
    operations: Operations = Field(
        default_factory=Operations,
        description="Launcher, verification, smoke tests and watchdog.",
    )
    secrets: Secrets = Field(
        default_factory=Secrets,
        description="Secrets by reference (files or variables on the nodes).",
    )
    kubernetes: Kubernetes | None = Field(
        None,
        description="The Kubernetes target (a LeaderWorkerSet under k8s/); present = enabled. "
        "`spark-compile --target kubernetes` enables it with defaults.",
    )
