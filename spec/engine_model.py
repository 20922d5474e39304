"""engine.*: the SGLang server's settings (parallelism, speculative decoding, CUDA graphs, chat, limits, backends)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from spark_compile.spec.checks import (
    check_model_source,
    launcher_program,
)
from spark_compile.spec.fields import (
    AbsPath,
    ArgText,
    ArgValue,
    ContainerName,
    EnvName,
    GgufType,
    HubId,
    ImageRef,
    IPv4,
    KwargName,
    LauncherWord,
    ParallelSize,
    Port,
    Positive,
    Seconds,
    Snapshot,
    Text,
    Word,
)
from spark_compile.spec.section import EnvValue, ListScalar, Scalar, Section


class Parallel(Section):
    """Parallel layout."""

    tp: ParallelSize | None = Field(
        None,
        description="Tensor-parallel size (--tp-size): total GPUs across all nodes; unset: not written, SGLang's "
        "default 1 (one GPU).",
    )
    ep: ParallelSize = Field(1, description="Expert-parallel size (--ep-size); divides tp.")
    pp: ParallelSize | None = Field(
        None,
        description="Pipeline-parallel size (--pp-size): stages of layers, tp GPUs each, so tp x pp GPUs in all; "
        "unset: not written, SGLang's default 1.",
    )
    dp: ParallelSize | None = Field(None, description="Data-parallel size (--dp-size); unset: SGLang's default 1.")
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
    prefill: bool = Field(True, description="False: no CUDA graphs for prefill (--disable-prefill-cuda-graph).")


class Mamba(Section):
    """The state of mamba / linear-attention layers (hybrid models such as Qwen3-Next and Qwen3.5)."""

    ssm_dtype: Word | None = Field(None, description="--mamba-ssm-dtype of the SSM state; unset: the model's.")
    full_memory_ratio: Annotated[float, Field(gt=0)] | None = Field(
        None, description="--mamba-full-memory-ratio: the state pool's share against the full-attention KV pool.",
    )
    max_cache_size: Positive | None = Field(None, description="--max-mamba-cache-size in state slots.")
    backend: Word | None = Field(None, description="--linear-attn-backend of the linear-attention kernels.")


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
    values: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")], list[Word]] = Field(
        {},
        description="Values of a flag (without the leading dashes) this image's own build accepts beyond the "
        "catalog's choices, e.g. {moe-runner-backend: [b12x]}: allowed with a warning naming the image (SC330).",
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
    image_build: Word | None = Field(
        None,
        description="The SGLang build engine.image holds (an engine catalog's name), as checked on the image: for "
        "a digest spec/catalogs/image-builds.json does not list; another build than engine.catalog is SC318.",
    )
    container_name: ContainerName = Field(
        description="docker --name of the container on every node (a node's container_name overrides it).",
    )
    launcher: Annotated[list[LauncherWord], AfterValidator(launcher_program)] = Field(
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
    metrics: bool = Field(False, description="--enable-metrics: the Prometheus /metrics endpoint on the API port.")
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
    mamba: Mamba = Field(default_factory=Mamba, description="Mamba / linear-attention state (hybrid models).")
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
