"""The profile's typed model: every section, every field described; the source of the JSON Schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .fields import (
    AbsPath,
    DockerSize,
    EnvName,
    HomePath,
    IfName,
    ImageRef,
    IPv4,
    IPv4Net,
    Name,
    Port,
    Positive,
    Snapshot,
    SshTarget,
    Text,
)
from .overlay_model import OverlaySection

GidIndex = Literal["probe"] | Annotated[int, Field(ge=0, le=255)]
Scalar = str | int | float | bool
EnvValue = str | int


class Section(BaseModel):
    """Base of every profile section: unknown keys are errors, values are checked on assignment."""

    # strict: a quoted "8210" or a `yes` is not silently converted; the JSON Schema refuses them too.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True)


class Fabric(Section):
    """The RoCE fabric every rank talks over."""

    interface: IfName
    """Network interface of the fabric on every node (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)."""
    subnet: IPv4Net
    """The fabric's IPv4 subnet in CIDR form; every node's fabric_ip lies inside it."""
    rdma_devices: list[Text] = Field(min_length=1)
    """RDMA devices (HCAs) used by NCCL and the b12x runtime; the first one is probed for the GID index."""
    gid_index: GidIndex = "probe"
    """RoCE-v2 GID index: `probe` finds it on each node at start; an integer pins it fleet-wide."""


class Node(Section):
    """One node of the fleet; its position in `nodes` is its rank."""

    name: Name
    """Node name: used in generated paths and messages."""
    fabric_ip: IPv4
    """The node's address on the fabric (HOST_IP; rank 0's is the --dist-init-addr)."""
    ssh: SshTarget
    """How the launcher reaches the node: host or user@host."""
    home: AbsPath
    """Home directory of the service user on the node; relative cache paths live under it."""
    holds_checkpoint: bool = False
    """True on the one node that holds the checkpoint locally (reads Engram rows from its shards)."""
    gid_index: GidIndex | None = None
    """Overrides the fabric's gid_index for this node."""


class Fleet(Section):
    """The nodes and the fabric between them."""

    fabric: Fabric
    """The RoCE fabric."""
    nodes: list[Node] = Field(min_length=1)
    """Nodes in rank order: the first is rank 0, the head; workers start first, the head last."""


class Engram(Section):
    """Engram embedding tables partitioned over the ranks."""

    tables: dict[Annotated[int, Field(ge=0)], Positive] = Field(min_length=1)
    """Layer id -> row count N of that layer's Engram table."""
    local_dir: AbsPath
    """Node-local copy of each rank's rows (with engram-local.json), mounted read-only on non-holders."""
    container_dir: AbsPath = "/engram-local"
    """Where the local copy appears inside the container."""


class Model(Section):
    """The checkpoint and how it is served."""

    architecture: Text
    """Model architecture (config.json `architectures[0]`), e.g. DeepseekV4ForCausalLM."""
    repo: AbsPath
    """The HuggingFace repo directory as mounted on nodes that do not hold the checkpoint."""
    holder_repo: AbsPath | None = None
    """The repo directory on the node that holds the checkpoint; defaults to `repo`."""
    container_repo: AbsPath = "/models/repo"
    """Where the repo directory appears inside the container."""
    snapshot: Snapshot
    """Snapshot directory name under `snapshots/`."""
    served_name: Text
    """Model id served by the API (--served-model-name); no ':' allowed."""
    aliases: list[Text] = []
    """Other model ids answered by the same model (SPARK_SERVED_ALIASES)."""
    max_context_length: Positive | None = None
    """The model's own maximum context length in tokens, if known; engine context_length may not exceed it."""
    engram: Engram | None = None
    """Engram tables, for models that have them."""


class Parallel(Section):
    """Parallel layout."""

    tp: Positive
    """Tensor-parallel size (--tp-size): total GPUs across all nodes."""
    ep: Positive = 1
    """Expert-parallel size (--ep-size); divides tp."""


class Speculative(Section):
    """Speculative decoding."""

    algorithm: Literal["none", "EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE", "DSPARK"] = "none"
    """Speculative algorithm, or none."""
    dspark_block_size: Positive | None = None
    """DSPARK only: tokens drafted per block (--speculative-dspark-block-size)."""
    num_steps: Positive | None = None
    """EAGLE family: draft steps (--speculative-num-steps)."""
    eagle_topk: Positive | None = None
    """EAGLE family: top-k per draft step (--speculative-eagle-topk)."""
    num_draft_tokens: Positive | None = None
    """Draft tokens verified per step (--speculative-num-draft-tokens); DSPARK needs block size + 1."""
    draft_model: AbsPath | None = None
    """Draft model path inside the container (--speculative-draft-model-path)."""


class CudaGraph(Section):
    """CUDA graphs."""

    enabled: bool = True
    """False disables graph capture (--cuda-graph-backend-decode/prefill disabled)."""
    max_bs_decode: Positive | None = None
    """Pins --cuda-graph-max-bs-decode; derived from max_running_requests when unset."""


class Chat(Section):
    """Chat defaults."""

    thinking: bool | None = None
    """Default of the chat template's `thinking` switch (--default-chat-template-kwargs)."""
    reasoning_effort: Annotated[int, Field(ge=1, le=100)] | None = None
    """Default reasoning effort 1-100 (low 25, high 50, xhigh 75, max 100)."""
    tool_call_parser: Text | None = None
    """--tool-call-parser."""
    reasoning_parser: Text | None = None
    """--reasoning-parser."""


class Limits(Section):
    """Capacity limits."""

    context_length: Positive
    """--context-length in tokens."""
    max_running_requests: Positive
    """--max-running-requests."""
    chunked_prefill_size: Positive
    """--chunked-prefill-size in tokens."""
    mem_fraction_static: float
    """--mem-fraction-static, in (0, 1)."""
    max_total_tokens: Positive | None = None
    """--max-total-tokens; unset lets SGLang size the KV pool."""
    watchdog_timeout: Positive | None = None
    """--watchdog-timeout in seconds."""
    random_seed: Annotated[int, Field(ge=0)] | None = None
    """--random-seed."""


class Backends(Section):
    """Kernel backends."""

    attention: Text | None = None
    """--attention-backend."""
    moe_runner: Text | None = None
    """--moe-runner-backend."""
    fp8_gemm: Text | None = None
    """--fp8-gemm-backend."""


class Engine(Section):
    """The SGLang engine in its container."""

    image: ImageRef
    """Container image."""
    catalog: Text = "sglang-0.5.23"
    """Flag catalog (spec/catalogs) this image's SGLang is checked against."""
    container_name: Name
    """docker --name of the container on every node."""
    launcher: list[Text] = ["python3", "-m", "sglang.launch_server"]
    """Entrypoint program and its leading arguments; the engine flags follow."""
    host: IPv4 = "0.0.0.0"
    """--host the API listens on."""
    port: Port = 30000
    """--port of the OpenAI-compatible API on the head."""
    dist_init_port: Port = 20000
    """Port of --dist-init-addr on rank 0's fabric IP."""
    trust_remote_code: bool = False
    """--trust-remote-code."""
    load_format: Text | None = None
    """--load-format."""
    parallel: Parallel
    """Parallel layout."""
    backends: Backends = Backends()
    """Kernel backends."""
    speculative: Speculative = Speculative()
    """Speculative decoding."""
    cuda_graph: CudaGraph = CudaGraph()
    """CUDA graphs."""
    chat: Chat = Chat()
    """Chat defaults."""
    limits: Limits
    """Capacity limits."""
    args: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")], Scalar | list[Scalar]] = {}
    """Further engine flags, without the leading dashes: true = bare flag, false = its --no- form."""
    env: dict[EnvName, EnvValue] = {}
    """Further engine environment (SGLANG_*, PYTORCH_*, CUDA_*, ...)."""


Restart = Literal["no", "on-failure", "always", "unless-stopped"]
UlimitName = Annotated[str, Field(pattern=r"^[a-z]+$")]
UlimitValue = Annotated[str, Field(pattern=r"^-?[0-9]+(:-?[0-9]+)?$")] | int


class Container(Section):
    """docker run options of every rank's container."""

    memory: DockerSize | None = None
    """--memory limit."""
    memory_swap: DockerSize | None = None
    """--memory-swap limit (equal to memory: no swap)."""
    shm_size: DockerSize | None = None
    """--shm-size."""
    ulimits: dict[UlimitName, UlimitValue] = {}
    """--ulimit name=soft[:hard]."""
    oom_score_adj: Annotated[int, Field(ge=-1000, le=1000)] | None = None
    """--oom-score-adj."""
    cap_add: list[Annotated[str, Field(pattern=r"^[A-Z_]+$")]] = []
    """--cap-add capabilities."""
    devices: list[Text] = []
    """--device host[:container] paths."""
    gpus: Text = "all"
    """--gpus."""
    network: Text = "host"
    """--network."""
    ipc: Text | None = "host"
    """--ipc."""
    cache_dir: HomePath = ".cache"
    """Writable cache directory on the node, mounted at /root/.cache; relative to the node's home."""
    restart: Restart = "no"
    """The unit's restart policy (systemd supervises the container; docker's own --restart stays no).
    Multi-node fleets recover fleet-wide through the watchdog, so `no`."""
    stop_timeout: Positive = 60
    """Seconds the unit gives the container to stop before it is killed."""


class Nccl(Section):
    """NCCL and gloo environment."""

    preset: Literal["trim", "default"] = "trim"
    """trim: production's buffer/protocol/channel trim; default: 4 channels, Ring."""
    extra: dict[EnvName, EnvValue] = {}
    """Further NCCL_* variables, checked against the NCCL catalog."""


class Deploy(Section):
    """Where the artifacts live on the nodes."""

    install_dir: AbsPath = "/etc/spark-compile"
    """Each rank's artifacts are installed under <install_dir>/<profile>/."""
    runtime_dir: AbsPath = "/run/spark-compile"
    """Values found at start (runtime.env) are written under <runtime_dir>/<profile>/."""
    unit_name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9:_.@-]+\.service$")] | None = None
    """systemd unit name; defaults to sglang-<profile>.service."""
    docker: AbsPath = "/usr/bin/docker"
    """The docker client on the nodes (systemd needs an absolute path)."""
    gpu_wait_tries: Annotated[int, Field(ge=1, le=100)] = 6
    """Preflight: how many times to look for a free GPU before aborting."""
    gpu_wait_seconds: Annotated[int, Field(ge=1, le=600)] = 10
    """Preflight: seconds between two looks for a free GPU."""


class SecretRef(Section):
    """Where a secret's value lives on the node; the value itself never enters the profile."""

    file: AbsPath | None = None
    """A root-readable file on the node whose first line is the value."""
    env: EnvName | None = None
    """A variable of the unit's environment on the node (e.g. from a drop-in's EnvironmentFile=)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.file is None) == (self.env is None):
            raise PydanticCustomError("secret_ref", "a secret reference takes exactly one of file or env")
        return self


class Secrets(Section):
    """Secrets by reference: read on the node at start, never written into generated files."""

    env: dict[EnvName, SecretRef] = {}
    """Container variables whose values are secrets (HF_TOKEN, ...): written to the runtime env file at start."""
    api_key: SecretRef | None = None
    """The served API's key (--api-key): written at start to an engine config file, never into argv."""


class Watchdog(Section):
    """The head's watchdog: probes, busy grace, fleet-wide relaunch (defaults from the peer's watchdog.sh)."""

    enabled: bool = True
    """Generate and install the watchdog service and timer on the head."""
    interval_seconds: Annotated[int, Field(ge=5)] = 60
    """Seconds between two checks."""
    fail_threshold: Positive = 3
    """Consecutive failed checks that trigger a relaunch."""
    probe_timeout_seconds: Positive = 45
    """Timeout of the short chat request of a check."""
    busy_grace_seconds: Annotated[int, Field(ge=0)] = 600
    """A probe timing out while /health answers counts as busy; only a busy spell longer than this fails."""
    ready_timeout_seconds: Positive = 3600
    """How long a relaunch may take to become healthy."""
    relaunch_limit: Positive = 3
    """Relaunches before the watchdog gives up with GIVING UP."""


class Smoke(Section):
    """Answer-checking smoke tests run against the head after a boot."""

    needle_tokens: list[Positive] = [32768, 131072]
    """Prompt sizes of the needle test; sizes above the context length are skipped with a note."""
    image: bool = True
    """Ask an image question with a known answer (the model must take images)."""
    tools: bool = True
    """Ask for a tool call and check it comes back well formed."""
    request_timeout_seconds: Positive = 600
    """Timeout of one smoke request."""


class Operations(Section):
    """Fleet operations: launcher, post-boot verification, smoke tests, watchdog."""

    health_timeout_seconds: Positive = 2400
    """How long the launcher waits for /health after starting the head (boots take ~10 minutes)."""
    log_dir: HomePath = "sgl-logs"
    """Where the launcher and the watchdog keep logs and postmortems on the head (relative to home)."""
    watchdog: Watchdog = Watchdog()
    """The head's watchdog."""
    smoke: Smoke = Smoke()
    """Smoke tests."""


class Profile(Section):
    """A deployment profile: one model served by SGLang across a fleet."""

    model_config = ConfigDict(title="spark-compile profile")

    name: Name
    """Profile name: names the generated directory and the default unit."""
    release: Text | None = None
    """Release tag this profile describes, e.g. production-1.7.1."""
    description: str | None = None
    """Free text for humans."""
    extends: str | None = None
    """Relative path of a parent profile whose values this one overrides."""
    fleet: Fleet
    """Nodes and fabric."""
    hardware: Text
    """Hardware catalog entry of every node, e.g. dgx-spark-gb10."""
    model: Model
    """The checkpoint."""
    engine: Engine
    """The engine."""
    container: Container = Container()
    """Container options."""
    nccl: Nccl = Nccl()
    """NCCL environment."""
    overlay: OverlaySection = OverlaySection()
    """SPARK_* overlay flags; unset keys leave the hook's default in force."""
    deploy: Deploy = Deploy()
    """Install locations on the nodes."""
    operations: Operations = Operations()
    """Launcher, verification, smoke tests and watchdog."""
    secrets: Secrets = Secrets()
    """Secrets by reference (files or variables on the nodes)."""

    @field_validator("hardware")
    @classmethod
    def _known_hardware(cls, value: str) -> str:
        from .hardware import HARDWARE
        from .suggest import unknown_choice

        if value not in HARDWARE:
            raise unknown_choice("hardware", value, sorted(HARDWARE))
        return value
