"""The mapping tables of `import`: which engine flag, docker option and variable becomes which profile key.

One place to update as the profile model grows: a flag not listed here goes to the raw `engine.args`; a
docker option not listed is reported as left out, with the reason given here.
"""

from __future__ import annotations

from typing import Any

from spark_compile.spec import fields as f

Path = tuple[str | int, ...]

# Engine flag (as the plan spells it) -> (profile key, its value type). Flags the mapper derives or checks
# itself (--model-path, --nnodes, --node-rank, --dist-init-addr, chat kwargs) are
# handled in mapping.py.
ENGINE_FIELDS: dict[str, tuple[Path, Any]] = {
    "--served-model-name": (("model", "served_name"), f.Text),
    "--load-format": (("engine", "load_format"), f.Word),
    "--tp-size": (("engine", "parallel", "tp"), f.Positive),
    "--ep-size": (("engine", "parallel", "ep"), f.Positive),
    "--pp-size": (("engine", "parallel", "pp"), f.Positive),
    "--host": (("engine", "host"), f.IPv4),
    "--port": (("engine", "port"), f.Port),
    "--attention-backend": (("engine", "backends", "attention"), f.Word),
    "--moe-runner-backend": (("engine", "backends", "moe_runner"), f.Word),
    "--fp8-gemm-backend": (("engine", "backends", "fp8_gemm"), f.Word),
    "--mem-fraction-static": (("engine", "limits", "mem_fraction_static"), float),
    "--chunked-prefill-size": (("engine", "limits", "chunked_prefill_size"), f.Positive),
    "--context-length": (("engine", "limits", "context_length"), f.Positive),
    "--max-running-requests": (("engine", "limits", "max_running_requests"), f.Positive),
    "--max-total-tokens": (("engine", "limits", "max_total_tokens"), f.Positive),
    "--watchdog-timeout": (("engine", "limits", "watchdog_timeout"), f.Seconds),
    "--random-seed": (("engine", "limits", "random_seed"), int),
    "--cuda-graph-max-bs-decode": (("engine", "cuda_graph", "max_bs_decode"), f.Positive),
    "--cuda-graph-max-bs": (("engine", "cuda_graph", "max_bs_decode"), f.Positive),
    "--speculative-algorithm": (("engine", "speculative", "algorithm"), str),
    "--speculative-dspark-block-size": (("engine", "speculative", "dspark_block_size"), f.Positive),
    "--speculative-num-steps": (("engine", "speculative", "num_steps"), f.Positive),
    "--speculative-eagle-topk": (("engine", "speculative", "eagle_topk"), f.Positive),
    "--speculative-num-draft-tokens": (("engine", "speculative", "num_draft_tokens"), f.Positive),
    "--tool-call-parser": (("engine", "chat", "tool_call_parser"), f.Word),
    "--reasoning-parser": (("engine", "chat", "reasoning_parser"), f.Word),
    "--quantization": (("model", "quantization"), f.Word),
    "--kv-cache-dtype": (("engine", "kv_cache_dtype"), f.Word),
    "--page-size": (("engine", "page_size"), f.Positive),
    "--dp-size": (("engine", "parallel", "dp"), f.Positive),
    "--fp4-gemm-backend": (("engine", "backends", "fp4_gemm"), f.Word),
    "--speculative-draft-model-quantization": (("engine", "speculative", "draft", "quantization"), f.Word),
    "--tokenizer-path": (("model", "tokenizer"), f.Text),
    "--revision": (("model", "revision"), f.Word),
    "--mamba-ssm-dtype": (("engine", "mamba", "ssm_dtype"), f.Word),
    "--mamba-full-memory-ratio": (("engine", "mamba", "full_memory_ratio"), float),
    "--max-mamba-cache-size": (("engine", "mamba", "max_cache_size"), f.Positive),
    "--linear-attn-backend": (("engine", "mamba", "backend"), f.Word),
}
ENGINE_SWITCHES: dict[str, Path] = {
    "--trust-remote-code": ("engine", "trust_remote_code"),
    "--enable-dp-attention": ("engine", "parallel", "dp_attention"),
    "--enable-metrics": ("engine", "metrics"),
}
# Switches that turn a profile key off (the key's default is true).
ENGINE_OFF: dict[str, Path] = {
    "--disable-cuda-graph": ("engine", "cuda_graph", "enabled"),
    "--disable-prefill-cuda-graph": ("engine", "cuda_graph", "prefill"),
}
# Engine flags whose values are a list of whole numbers.
ENGINE_LISTS: dict[str, Path] = {
    "--cuda-graph-bs-decode": ("engine", "cuda_graph", "batch_sizes"),
    "--cuda-graph-bs": ("engine", "cuda_graph", "batch_sizes"),
}

# docker run option -> (profile key, value type); `list` keys collect every occurrence.
DOCKER_FIELDS: dict[str, tuple[Path, Any]] = {
    "--name": (("engine", "container_name"), f.Name),
    "--network": (("container", "network"), f.Word), "--net": (("container", "network"), f.Word),
    "--ipc": (("container", "ipc"), f.Word),
    "--gpus": (("container", "gpus"), f.GpuSpec),
    "--shm-size": (("container", "shm_size"), f.DockerSize),
    "--memory": (("container", "memory"), f.DockerSize), "-m": (("container", "memory"), f.DockerSize),
    "--memory-swap": (("container", "memory_swap"), f.DockerSize),
    "--oom-score-adj": (("container", "oom_score_adj"), int),
    "--user": (("container", "user"), str), "-u": (("container", "user"), str),
    "--cpuset-cpus": (("container", "cpuset_cpus"), str),
}
DOCKER_LISTS: dict[str, Path] = {"--cap-add": ("container", "cap_add"), "--device": ("container", "devices"),
                                 "--security-opt": ("container", "security_opt")}
DOCKER_SWITCHES: dict[str, Path] = {"--privileged": ("container", "privileged"), "--rm": ("container", "remove"),
                                    "-d": ("container", "detach"), "--detach": ("container", "detach")}
# Options the generated systemd unit replaces: it runs the container without a terminal (-d and --rm are
# container.detach and container.remove).
SUPERVISION: dict[str, str] = {
    "-i": "no terminal: the unit runs the container", "--interactive": "no terminal: the unit runs the container",
    "-t": "no terminal: the unit runs the container", "--tty": "no terminal: the unit runs the container",
}
# Options with no profile key yet, and what to do instead.
DOCKER_UNMAPPED: dict[str, str] = {
    "-p": "ports are not published: the container uses the host network (container.network)",
    "--publish": "ports are not published: the container uses the host network (container.network)",
    "--privileged": "the profile has no privileged switch; grant what the engine needs with container.cap_add and "
                    "container.devices",
    "--user": "the profile has no container user; the engine runs as the image's user",
    "-u": "the profile has no container user; the engine runs as the image's user",
    "--security-opt": "the profile has no security options",
    "--cpuset-cpus": "the profile has no CPU pinning",
    "--entrypoint": "an empty --entrypoint (the image's own reset) has no profile key: the container's program is "
                    "engine.launcher's first word",
    "-w": "the profile has no working directory", "--workdir": "the profile has no working directory",
    "--init": "the profile has no init switch",
}
# Secrets whose consumer reads an empty value as no value: a launcher's `-e HF_TOKEN=${HF_TOKEN:-}` carries none.
_NO_TOKEN = "huggingface_hub reads an empty token as none, as if it were unset"
EMPTY_IS_UNSET: dict[str, str] = {"HF_TOKEN": _NO_TOKEN, "HUGGING_FACE_HUB_TOKEN": _NO_TOKEN}
# Variables that describe the fabric: read to derive fleet.fabric (and kept as written: nccl.preset none).
FABRIC_ENV = ("NCCL_NET", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
              "NCCL_IB_GID_INDEX")
# The architecture (config.json `architectures[0]`) of well-known hub repositories served on Sparks: facts of
# their published config.json files (a repo's quantized or GGUF variants keep the base's architecture). Looked up
# without the owner's variant suffix (-FP8, -NVFP4, -GGUF) when the id itself is not listed.
HUB_ARCHITECTURES: dict[str, str] = {
    "Qwen/Qwen3-1.7B": "Qwen3ForCausalLM",
    "Qwen/Qwen3-8B": "Qwen3ForCausalLM",
    "Qwen/Qwen3-32B": "Qwen3ForCausalLM",
    "Qwen/Qwen3-30B-A3B": "Qwen3MoeForCausalLM",
    "Qwen/Qwen3-235B-A22B": "Qwen3MoeForCausalLM",
    "Qwen/Qwen3-Next-80B-A3B-Instruct": "Qwen3NextForCausalLM",
    "Qwen/Qwen3-Coder-Next": "Qwen3NextForCausalLM",
    "Qwen/Qwen3.5-35B-A3B": "Qwen3_5MoeForConditionalGeneration",
    "Qwen/Qwen3.5-397B-A17B": "Qwen3_5MoeForConditionalGeneration",
    "MiniMaxAI/MiniMax-M2.5": "MiniMaxM2ForCausalLM",
    "deepseek-ai/DeepSeek-V2-Lite": "DeepseekV2ForCausalLM",
    "openai/gpt-oss-120b": "GptOssForCausalLM",
    "openai/gpt-oss-20b": "GptOssForCausalLM",
    "zai-org/GLM-4.5-Air": "Glm4MoeForCausalLM",
    "zai-org/GLM-4.5-Air-FP8": "Glm4MoeForCausalLM",
}
_VARIANT = ("-FP8", "-NVFP4", "-GGUF", "-FP4")
# Owners that publish quantized or GGUF copies of another owner's models under the same name.
_REPUBLISHED: dict[str, tuple[str, ...]] = {"nvidia": ("Qwen", "openai"), "unsloth": ("Qwen", "openai", "zai-org")}


def hub_architecture(hub_id: str) -> str | None:
    """The architecture of a well-known hub id (owner/name, a GGUF type after ':' ignored), or None."""
    owner, _, name = hub_id.split(":", 1)[0].partition("/")
    owners = (owner, *_REPUBLISHED.get(owner, ()))
    names = (name, *(name.removesuffix(s) for s in _VARIANT if name.endswith(s)))
    return next((HUB_ARCHITECTURES[f"{o}/{n}"] for n in names for o in owners if f"{o}/{n}" in HUB_ARCHITECTURES),
                None)
