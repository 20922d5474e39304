"""Small built-in catalogs: node hardware and model families (data the rules reason with)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hardware:
    """One kind of node: its memory, GPU architecture and GPU count."""

    name: str
    description: str
    memory_gb: int  # host memory; on unified-memory nodes this is also the GPU's pool
    unified_memory: bool
    sm: tuple[int, int]  # CUDA compute capability (major, minor)
    gpus_per_node: int
    gpu_memory_gb: int
    gpu_name: str = ""  # what torch.cuda.get_device_name() says on this hardware
    cpu_arch: str = "x86_64"  # platform.machine() of the host
    env_recommended: tuple[tuple[str, str], ...] = ()  # variables this hardware runs best with (SC412)
    env_reason: str = ""  # why, as SC412 says it
    # What CUDA reports as one GPU's total memory, in GiB, where a published boot says so; None: not known,
    # the capacity stage then estimates gpu_memory_gb (decimal GB) in GiB and says it is an estimate.
    cuda_total_gib: float | None = None
    # On an integrated GPU SGLang's free memory is the OS's MemAvailable (psutil): what a running node reports
    # before the model loads, in GiB, where a public measurement says so; None: CUDA's total is the free memory.
    mem_available_gib: float | None = None
    mem_available_source: str = ""


HARDWARE: dict[str, Hardware] = {
    hw.name: hw
    for hw in (
        Hardware(
            "dgx-spark-gb10", "NVIDIA DGX Spark (GB10 Grace Blackwell), 128 GB unified memory",
            memory_gb=128, unified_memory=True, sm=(12, 1), gpus_per_node=1, gpu_memory_gb=128,
            gpu_name="NVIDIA GB10", cpu_arch="aarch64",
            env_recommended=(("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"),),
            env_reason="expandable segments map pages the GB10 driver pins late; production runs with them off",
            # An operator's published TP4 notes (sparkrun's platform policy assumes 121 GiB).
            cuda_total_gib=121.7,
            mem_available_gib=113.0,
            mem_available_source="a running Spark's idle MemTotal - MemAvailable is 8.68 GiB of 121.69 GiB "
            "(driver 580.173.02, Syllo/nvtop#449)",
        ),
        Hardware(
            "dgx-h100", "NVIDIA DGX H100, 8x H100 80 GB SXM, 2 TB host memory",
            memory_gb=2048, unified_memory=False, sm=(9, 0), gpus_per_node=8, gpu_memory_gb=80,
            gpu_name="NVIDIA H100 80GB HBM3",
        ),
        Hardware(
            "dgx-b200", "NVIDIA DGX B200, 8x B200 180 GB, 4 TB host memory",
            memory_gb=4096, unified_memory=False, sm=(10, 0), gpus_per_node=8, gpu_memory_gb=180,
            gpu_name="NVIDIA B200",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class ModelFamily:
    """What SGLang enforces for one model architecture."""

    architecture: str
    page_size: int | None  # forced KV page size; chunked prefill must be a multiple
    speculative: tuple[str, ...] | None  # accepted speculative algorithms; None = any
    reasoning_effort_env: str | None  # the SGLANG_* variable that carries the default effort
    has_engram: bool = False
    attention_backend: str | None = None  # the backend SGLang sets whatever --attention-backend says
    kv_cache_dtypes: tuple[str, ...] = ()  # KV cache dtypes SGLang accepts (besides auto); () = any
    attention_backends: tuple[str, ...] = ()  # the backends SGLang accepts for the family; () = any
    gb10_attention_backend: str | None = None  # the one SGLang sets on GB10 when none is written


FAMILIES: dict[str, ModelFamily] = {
    fam.architecture: fam
    for fam in (
        ModelFamily("DeepseekV4ForCausalLM", page_size=256, speculative=("EAGLE", "DSPARK"),
                    reasoning_effort_env="SGLANG_DSV41_REASONING_EFFORT", has_engram=True,
                    attention_backend="dsv4", kv_cache_dtypes=("fp8_e4m3", "bfloat16")),
        ModelFamily("DeepseekV3ForCausalLM", page_size=None, speculative=None, reasoning_effort_env=None),
        ModelFamily("Qwen3MoeForCausalLM", page_size=None, speculative=None, reasoning_effort_env=None),
        ModelFamily("LlamaForCausalLM", page_size=None, speculative=None, reasoning_effort_env=None),
        # arg_groups/model_hook.py asserts the backend list (its CUDA ones; ascend, intel_amx, intel_xpu and
        # aiter are other platforms'); model_overrides/gpt_oss.py sets triton on an SM12x GPU.
        ModelFamily("GptOssForCausalLM", page_size=None, speculative=None, reasoning_effort_env=None,
                    attention_backends=("triton", "trtllm_mha", "fa3", "fa4"), gb10_attention_backend="triton"),
    )
}
