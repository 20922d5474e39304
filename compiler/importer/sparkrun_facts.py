"""What sparkrun 0.4.2 does with an SGLang recipe (facts read from its runtimes/sglang.py and core/recipe.py,
the release PyPI ships): the recipe keys it reads, the flag each `defaults` key becomes when a recipe has no
`command:`, and the rendezvous flags it appends on every node of a multi-node run."""

from __future__ import annotations

VERSION = "0.4.2"
# Top-level recipe keys sparkrun reads for an SGLang deployment.
RECIPE_KEYS = ("model", "runtime", "min_nodes", "max_nodes", "container", "metadata", "defaults", "command", "env",
               "recipe_version", "description", "name", "model_revision", "executor_config", "mods")
# executor_config keys that are docker run options of the serving container (sparkrun's docker executor).
EXECUTOR_OPTIONS = {"user": "--user", "shm_size": "--shm-size"}
# executor_config switches of the container: true is the docker switch, false the profile's own default.
EXECUTOR_SWITCHES = {"auto_remove": "--rm", "privileged": "--privileged"}
# A mod: a folder whose run.sh sparkrun copies into the container and runs there before the serve command.
MOD_MEANING = ("sparkrun copies the mod's folder into the container and runs its run.sh there before the serve "
               "command (a pre_exec step); the profile's container starts the server only: apply the mod's change "
               "to the image instead")
# A command-less recipe is built as `sglang serve --model-path MODEL [--tp-size N]` and then these flags, in
# this order, for each key `defaults` sets (tensor_parallel and data_parallel are placed separately).
FLAG_MAP: tuple[tuple[str, str], ...] = (
    ("port", "--port"), ("host", "--host"), ("tensor_parallel", "--tp-size"), ("pipeline_parallel", "--pp-size"),
    ("expert_parallel", "--ep-size"), ("data_parallel", "--dp-size"), ("enable_dp_attention", "--enable-dp-attention"),
    ("gpu_memory_utilization", "--mem-fraction-static"), ("max_model_len", "--context-length"),
    ("max_num_seqs", "--max-running-requests"), ("served_model_name", "--served-model-name"), ("dtype", "--dtype"),
    ("quantization", "--quantization"), ("trust_remote_code", "--trust-remote-code"),
    ("chunked_prefill", "--chunked-prefill-size"), ("kv_cache_dtype", "--kv-cache-dtype"),
    ("tokenizer_path", "--tokenizer-path"), ("api_key", "--api-key"), ("attention_backend", "--attention-backend"),
    ("load_format", "--load-format"), ("revision", "--revision"), ("model_type", "--model-type"),
    ("max_total_tokens", "--max-total-tokens"), ("random_seed", "--random-seed"),
    ("reasoning_parser", "--reasoning-parser"), ("tool_call_parser", "--tool-call-parser"),
    ("mm_feature_transport", "--mm-feature-transport"), ("speculative_algorithm", "--speculative-algorithm"),
    ("speculative_draft_model_path", "--speculative-draft-model-path"),
    ("speculative_draft_model_revision", "--speculative-draft-model-revision"),
    ("speculative_num_steps", "--speculative-num-steps"), ("speculative_eagle_topk", "--speculative-eagle-topk"),
    ("speculative_num_draft_tokens", "--speculative-num-draft-tokens"),
    ("speculative_dspark_block_size", "--speculative-dspark-block-size"), ("cuda_graph_bs", "--cuda-graph-bs"),
    ("cuda_graph_max_bs", "--cuda-graph-max-bs"), ("cuda_graph_max_bs_decode", "--cuda-graph-max-bs-decode"),
    ("torch_compile_max_bs", "--torch-compile-max-bs"),
    ("num_continuous_decode_steps", "--num-continuous-decode-steps"),
    ("fp8_gemm_backend", "--fp8-gemm-backend"), ("fp4_gemm_backend", "--fp4-gemm-backend"),
    ("moe_runner_backend", "--moe-runner-backend"), ("mamba_ssm_dtype", "--mamba-ssm-dtype"),
    ("mamba_full_memory_ratio", "--mamba-full-memory-ratio"), ("enable_torch_compile", "--enable-torch-compile"),
    ("disable_radix_cache", "--disable-radix-cache"), ("disable_prefill_cuda_graph", "--disable-prefill-cuda-graph"),
    ("enable_decoder_swa_bounded_replay", "--enable-decoder-swa-bounded-replay"),
)
BOOL_KEYS = frozenset({"enable_dp_attention", "trust_remote_code", "enable_torch_compile", "disable_radix_cache",
                       "disable_prefill_cuda_graph", "enable_decoder_swa_bounded_replay"})
# On every node of a multi-node run sparkrun appends `--dist-init-addr HEAD:PORT --nnodes N --node-rank R`,
# HEAD being the first host; the port is its SGLang init port.
INIT_PORT = 25000
