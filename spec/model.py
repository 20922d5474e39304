"""The profile's typed model: every section, every field described; the source of the JSON Schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from spark_compile.spec.checks import (
    MAX_SECONDS,
    check_aliases_overlay,
    check_hardware,
    check_model_source,
    check_rdma_resource,
    check_secret_ref,
)
from spark_compile.spec.fields import (
    AbsPath,
    ArgText,
    ArgValue,
    ContainerName,
    CpuSet,
    DeviceSpec,
    DockerSize,
    DockerUser,
    EnvName,
    EnvText,
    FreeText,
    GgufType,
    GpuSpec,
    HomePath,
    HubId,
    IfName,
    ImageRef,
    IPv4,
    IPv4Net,
    KwargName,
    LauncherWord,
    ListArg,
    Name,
    Port,
    Positive,
    RdmaName,
    Seconds,
    SecurityOpt,
    Snapshot,
    SshTarget,
    Text,
    UlimitName,
    UlimitValue,
    Word,
)
from spark_compile.spec.nccl_presets import NCCL_DEBUG_DEFAULT
from spark_compile.spec.operations_model import ImageCheck, PreviousStack, Verify, Window
from spark_compile.spec.overlay_section import OverlaySection

GidIndex = Literal["probe"] | Annotated[int, Field(ge=0, le=255)]
Scalar = ArgText | int | float | bool
ListScalar = ListArg | int | float | bool
EnvValue = EnvText | int
# A memory figure in GiB (pins from a boot); ints are accepted as whole GiB.
GiB = Annotated[float, Field(ge=0, le=1 << 20)]
# A hardware catalog entry (spec/hardware.py) that exists.
Hardware = Annotated[Text, AfterValidator(check_hardware)]


class Section(BaseModel):
    """Base of every profile section: unknown keys are errors, values are checked on assignment."""

    # strict: a quoted "8210" or a `yes` is not silently converted; the JSON Schema refuses them too.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


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
    cuda_graph_per_rank: list[GiB] | None = Field(
        None, description="Pinned: GiB CUDA graph capture took on each rank at boot, in rank order.",
    )

    # Plain functions (spec/checks.py), so that the generated core validator refers to the same checks.
    _aliases_need_the_overlay = model_validator(mode="after")(check_aliases_overlay)
    _one_source = model_validator(mode="after")(check_model_source)


class Parallel(Section):
    """Parallel layout."""

    tp: Positive | None = Field(
        None,
        description="Tensor-parallel size (--tp-size): total GPUs across all nodes; unset: not written, SGLang's "
        "default 1 (one GPU).",
    )
    ep: Positive = Field(1, description="Expert-parallel size (--ep-size); divides tp.")
    pp: Positive | None = Field(
        None,
        description="Pipeline-parallel size (--pp-size): stages of layers, tp GPUs each, so tp x pp GPUs in all; "
        "unset: not written, SGLang's default 1.",
    )
    dp: Positive | None = Field(None, description="Data-parallel size (--dp-size); unset: SGLang's default 1.")
    dp_attention: bool = Field(False, description="--enable-dp-attention: attention data-parallel across dp.")


class Draft(Section):
    """A separate draft model for speculative decoding, mounted read-only beside the target."""

    repo: AbsPath | None = Field(
        None,
        description="Host directory of the draft model: an HF cache repo (with snapshot) or a plain directory. "
        "Exactly one of repo or hub_id.",
    )
    hub_id: HubId | None = Field(
        None, description="A hub id (owner/name) of the draft model, resolved in the container's HF cache.",
    )
    gguf: GgufType | None = Field(
        None, description="With hub_id: the draft is the repo's GGUF file of this quantization type (<hub_id>:<gguf>).",
    )
    snapshot: Snapshot | None = Field(
        None, description="HF cache form: the draft's snapshot under <repo>/snapshots/; unset: a plain directory.",
    )
    container_repo: AbsPath = Field("/models/draft", description="Where the draft's repo appears in the container.")
    config_json: Text | None = Field(
        None,
        description="The draft's config.json for `check --engine`, relative to the profile file (a committed "
        "copy); unset: config.json in the draft's directory on the checking machine.",
    )
    quantization: Word | None = Field(
        None,
        description="--speculative-draft-model-quantization: the draft's own (e.g. unquant for a BF16 head under "
        "an NVFP4 target, which would otherwise inherit the target's quantization).",
    )

    _one_source = model_validator(mode="after")(check_model_source)


class Speculative(Section):
    """Speculative decoding."""

    algorithm: Literal["none", "EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE", "DSPARK", "DFLASH"] = Field(
        "none",
        description="Speculative algorithm, or none.",
    )
    dspark_block_size: Positive | None = Field(
        None,
        description="DSPARK only: tokens drafted per block (--speculative-dspark-block-size); unset: the model's "
        "config.json value (dspark_block_size) when it has one.",
    )
    num_steps: Positive | None = Field(None, description="EAGLE family: draft steps (--speculative-num-steps).")
    eagle_topk: Positive | None = Field(
        None,
        description="EAGLE family: top-k per draft step (--speculative-eagle-topk).",
    )
    num_draft_tokens: Positive | None = Field(
        None,
        description="Draft tokens verified per step (--speculative-num-draft-tokens); DSPARK needs block size + 1.",
    )
    draft: Draft | None = Field(
        None,
        description="A separate draft model (--speculative-draft-model-path), mounted read-only and checked; unset: "
        "the target's own draft layers (DSPARK, NEXTN) or none needed (NGRAM).",
    )


class CudaGraph(Section):
    """CUDA graphs."""

    enabled: bool = Field(
        True,
        description="False disables graph capture (--cuda-graph-backend-decode/prefill disabled).",
    )
    max_bs_decode: Positive | Literal["max_running_requests"] | None = Field(
        None,
        description="--cuda-graph-max-bs-decode: a batch size, or `max_running_requests` to follow the request cap "
        "(needs engine.limits.max_running_requests); unset: SGLang's default.",
    )
    batch_sizes: list[Positive] | None = Field(
        None,
        description="Batch sizes captured for decode (--cuda-graph-bs-decode, --cuda-graph-bs up to 0.5.10), e.g. "
        "[1, 2, 4, 8]: pinned small, GB10's default list can exhaust memory; unset: SGLang's list.",
    )


class Chat(Section):
    """Chat defaults."""

    thinking: bool | None = Field(
        None,
        description="Default of the chat template's `thinking` switch (--default-chat-template-kwargs).",
    )
    template_kwargs: dict[KwargName, ArgText | int | float | bool] = Field(
        {},
        description="Further defaults of chat-template keywords (e.g. enable_thinking, reasoning_effort), written "
        "with thinking into --default-chat-template-kwargs as JSON.",
    )
    reasoning_effort: Annotated[int, Field(ge=1, le=100)] | None = Field(
        None,
        description="Default reasoning effort 1-100 (low 25, high 50, xhigh 75, max 100).",
    )
    tool_call_parser: Word | None = Field(None, description="--tool-call-parser.")
    reasoning_parser: Word | None = Field(None, description="--reasoning-parser.")


class Limits(Section):
    """Capacity limits. Each is optional: unset, the flag is not written and SGLang's default applies."""

    context_length: Positive | None = Field(None, description="--context-length in tokens; unset: the model's.")
    max_running_requests: Positive | None = Field(None, description="--max-running-requests; unset: SGLang sizes it.")
    chunked_prefill_size: Positive | None = Field(
        None, description="--chunked-prefill-size in tokens; unset: SGLang picks one for the GPU.",
    )
    mem_fraction_static: float | None = Field(
        None, description="--mem-fraction-static, in (0, 1); unset: SGLang picks one for the GPU.",
    )
    max_total_tokens: Positive | None = Field(
        None,
        description="--max-total-tokens; unset lets SGLang size the KV pool.",
    )
    watchdog_timeout: Seconds | None = Field(None, description="--watchdog-timeout in seconds.")
    random_seed: Annotated[int, Field(ge=0)] | None = Field(None, description="--random-seed.")


class Backends(Section):
    """Kernel backends."""

    attention: Word | None = Field(None, description="--attention-backend.")
    moe_runner: Word | None = Field(None, description="--moe-runner-backend.")
    fp8_gemm: Word | None = Field(None, description="--fp8-gemm-backend.")
    fp4_gemm: Word | None = Field(None, description="--fp4-gemm-backend.")


class CatalogExtra(Section):
    """Names this image's own SGLang build knows that engine.catalog does not list."""

    flags: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]] = Field(
        [],
        description="Engine flags without the leading dashes (e.g. b12x-moe) accepted in engine.args although the "
        "catalog lacks them; check them with `catalog sglang --source` where the image's source is available.",
    )
    env: list[EnvName] = Field(
        [],
        description="Variables (e.g. B12X_SPIN) accepted in engine.env although the catalog lacks them.",
    )


class Engine(Section):
    """The SGLang engine in its container."""

    image: ImageRef = Field(
        description="Container image, best pinned by digest: name[:tag]@sha256:<64 hex digits> (a tag alone can be "
        "moved to another build).",
    )
    catalog: Word = Field(
        "sglang-0.5.23",
        description="Flag catalog (spec/catalogs) this image's SGLang is checked against.",
    )
    container_name: ContainerName = Field(
        description="docker --name of the container on every node (a node's container_name overrides it).",
    )
    launcher: list[LauncherWord] = Field(
        ["python3", "-m", "sglang.launch_server"],
        min_length=1,
        description="Entrypoint program and its leading arguments; the engine flags follow.",
    )
    host: IPv4 | None = Field(
        None, description="--host the API listens on; unset: not written, SGLang's default 127.0.0.1.",
    )
    port: Port = Field(30000, description="--port of the OpenAI-compatible API on the head.")
    dist_init_port: Port = Field(20000, description="Port of --dist-init-addr on rank 0's fabric IP.")
    trust_remote_code: bool = Field(False, description="--trust-remote-code.")
    load_format: Word | None = Field(None, description="--load-format.")
    kv_cache_dtype: Word | None = Field(None, description="--kv-cache-dtype (e.g. fp8_e4m3); unset: auto.")
    page_size: Positive | None = Field(None, description="--page-size in tokens; unset: SGLang's default.")
    catalog_extra: CatalogExtra = Field(
        default_factory=CatalogExtra,
        description="Flags and variables the image's own build knows beyond engine.catalog (allowed, not checked).",
    )
    parallel: Parallel = Field(default_factory=Parallel, description="Parallel layout (unset: one GPU).")
    backends: Backends = Field(default_factory=Backends, description="Kernel backends.")
    speculative: Speculative = Field(default_factory=Speculative, description="Speculative decoding.")
    cuda_graph: CudaGraph = Field(default_factory=CudaGraph, description="CUDA graphs.")
    chat: Chat = Field(default_factory=Chat, description="Chat defaults.")
    limits: Limits = Field(default_factory=Limits, description="Capacity limits (each optional).")
    args: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")], Scalar | list[ListScalar]] = Field(
        {},
        description="Further engine flags, without the leading dashes: true = bare flag, false = its --no- form.",
    )
    env: dict[EnvName, EnvValue] = Field(
        {},
        description="Further engine environment (SGLANG_*, PYTORCH_*, CUDA_*, ...).",
    )
    accept_rewrites: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")], ArgValue] = Field(
        {},
        description="Values SGLang's resolution sets a written flag to that this profile accepts (flag name without "
        "dashes -> resolved value); `check --engine` reports any other rewrite as an error.",
    )


Restart = Literal["no", "on-failure", "always", "unless-stopped"]


class ContainerMount(Section):
    """A host directory or file bind-mounted into every rank's container."""

    source: AbsPath = Field(description="Absolute path on the node.")
    target: AbsPath = Field(description="Absolute path inside the container.")
    read_only: bool = Field(True, description="Mount read-only (the default); false to let the engine write.")


class Container(Section):
    """docker run options of every rank's container."""

    memory: DockerSize | None = Field(None, description="--memory limit.")
    memory_swap: DockerSize | None = Field(None, description="--memory-swap limit (equal to memory: no swap).")
    shm_size: DockerSize | None = Field(None, description="--shm-size.")
    ulimits: dict[UlimitName, UlimitValue] = Field({}, description="--ulimit name=soft[:hard].")
    oom_score_adj: Annotated[int, Field(ge=-1000, le=1000)] | None = Field(None, description="--oom-score-adj.")
    cap_add: list[Annotated[str, Field(pattern=r"^[A-Z_]{1,64}$")]] = Field([], description="--cap-add capabilities.")
    devices: list[DeviceSpec] = Field([], description="--device host[:container] paths.")
    gpus: GpuSpec = Field("all", description="--gpus.")
    rdma_access: bool | None = Field(
        None,
        description="Give the container the RDMA devices: --device /dev/infiniband, --cap-add IPC_LOCK, --ulimit "
        "memlock=-1. Unset: yes on roce and infiniband fabrics, no on tcp and on one node without a fabric; "
        "entries of devices, cap_add and ulimits add to it or override its memlock.",
    )
    privileged: bool = Field(False, description="--privileged (every device and capability; prefer rdma_access).")
    user: DockerUser | None = Field(None, description="--user name|uid[:group|gid] of the engine's process.")
    security_opt: list[SecurityOpt] = Field([], description="--security-opt values, e.g. seccomp=unconfined.")
    cpuset_cpus: CpuSet | None = Field(None, description="--cpuset-cpus, e.g. 0-19.")
    remove: bool = Field(False, description="--rm: docker removes the container when it exits (the unit also does).")
    detach: bool = Field(
        False,
        description="-d: the container runs detached and docker-run.sh waits for it (docker wait), so the unit "
        "still supervises it; its log stays with docker's log driver (`docker logs`), not the journal.",
    )
    network: Word = Field("host", description="--network.")
    ipc: Word | None = Field("host", description="--ipc.")
    cache_dir: HomePath = Field(
        ".cache",
        description="Writable cache directory on the node, mounted at /root/.cache (HF_HOME's default parent, so "
        "a hub id's downloads land in <cache_dir>/huggingface); relative to the node's home. A mount at "
        "/root/.cache/huggingface (an existing HF cache) nests inside it.",
    )
    restart: Restart = Field(
        "no",
        description="The unit's restart policy (systemd supervises the container; docker's own --restart stays no). "
        "Multi-node fleets recover fleet-wide through the watchdog, so `no`.",
    )
    stop_timeout: Seconds = Field(60, description="Seconds the unit gives the container to stop before it is killed.")
    mounts: list[ContainerMount] = Field(
        [],
        description="Further bind mounts (a model cache, a config directory, a patched source tree); read-only "
        "unless read_only: false. A child profile patches them by target (`- !delete /target`, `- !replace {...}`).",
    )


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

    # A plain function (spec/checks.py), so that the generated core validator refers to the same check.
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


K8sName = Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")]
K8sLabel = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}"
                                        r"[A-Za-z0-9])?$")]
K8sLabelValue = Annotated[str, Field(pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")]


class KubernetesRdma(Section):
    """How pods reach /dev/infiniband."""

    mode: Literal["hostpath", "device-plugin"] = Field(
        "hostpath",
        description="hostpath: mount /dev/infiniband from the node (needs a privileged container); device-plugin: "
        "request one unit of `resource` from an RDMA shared-device plugin.",
    )
    resource: K8sLabel | None = Field(
        None,
        description="device-plugin only: the extended resource name, e.g. rdma/rdma_shared_device_a.",
    )

    # A plain function (spec/checks.py), so that the generated core validator refers to the same check.
    _resource_for_plugin = model_validator(mode="after")(check_rdma_resource)


class Kubernetes(Section):
    """The Kubernetes target: a LeaderWorkerSet (one group, one pod per node) under generated/<profile>/k8s/."""

    name: K8sName | None = Field(
        None,
        description="Name of the LeaderWorkerSet, its Service and ConfigMap (DNS-1035, at most 40 characters: pod "
        "and StatefulSet names are built from it); defaults to the profile name.",
    )
    namespace: Name = Field("default", description="Namespace of every object.")
    image: ImageRef | None = Field(
        None,
        description="Image of the pods, pinned by digest (name@sha256:...); defaults to engine.image.",
    )
    rdma: KubernetesRdma = Field(default_factory=KubernetesRdma, description="RDMA device access.")
    memory: DockerSize | None = Field(
        None,
        description="Memory limit (and request) of each pod; defaults to container.memory.",
    )
    shm_size: DockerSize | None = Field(
        None,
        description="Size limit of /dev/shm (an emptyDir in memory); defaults to container.shm_size.",
    )
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP",
        description="Type of the Service in front of the leader's API.",
    )
    restart_policy: Literal["RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"] = Field(
        "RecreateGroupOnPodRestart",
        description="LWS group restart policy: a rank restarted alone re-joins a dying rendezvous, so the group is "
        "recreated.",
    )
    startup_policy: Literal["LeaderCreated", "LeaderReady"] = Field(
        "LeaderCreated",
        description="LWS startup policy; LeaderReady deadlocks (the leader's /health needs the workers).",
    )
    node_selector: dict[K8sLabel, K8sLabelValue] = Field(
        {},
        description="Labels every node of the fleet carries (the same on all nodes: nothing per node).",
    )


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
