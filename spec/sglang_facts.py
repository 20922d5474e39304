"""Judgements SGLang 0.5.23 makes that the static rules repeat, as data, each with where SGLang makes it.

tests/engine/test_sglang_facts.py reads the tables SGLang keeps as literals out of the installed SGLang's source,
so a new build that changes one fails there instead of leaving a rule stale; the measured ones (the KV cache and
attention backend pairs, GB10's default backend) are held by the negative profiles' recorded verdicts
(tests/engine/test_negative_engine.py) and the differential corpus (tests/engine/test_differential.py).
"""

from __future__ import annotations

# serving_hook.handle_deprecated_args: a deprecated --tool-call-parser is replaced, with a warning.
DEPRECATED_TOOL_CALL_PARSERS = {"qwen25": "qwen", "glm45": "glm"}
# speculative_hook._resolve_speculative_algorithm_alias: NEXTN is another name of EAGLE (with a Gemma4 assistant
# draft both become FROZEN_KV_MTP, which no Spark profile's draft is).
SPECULATIVE_ALIASES = {"NEXTN": "EAGLE"}

# configs/model_config.py ModelConfig._verify_quantization: a --quantization that differs from the
# checkpoint's quant_method is kept only when it is compatible with it or asks for requantization.
COMPATIBLE_QUANTIZATION = {
    "modelopt_fp8": ("modelopt",),
    "modelopt_fp4": ("modelopt", "fp8"),
    "modelopt_mixed": ("modelopt",),
    "nvfp4_online": ("fp8", "modelopt_fp8"),
    "minimax_m3_nvfp4": ("mxfp8",),
    "petit_nvfp4": ("modelopt",),
    "w8a8_int8": ("compressed-tensors", "compressed_tensors"),
    "w8a8_fp8": ("compressed-tensors", "compressed_tensors"),
    "auto-round-int8": ("compressed-tensors", "compressed_tensors"),
}
REQUANTIZATION_METHODS = ("quark_mxfp4",)

# arg_groups/moe_hook.py handle_moe_kernel_config: these MoE runners assert ep_size in (1, tp_size).
EP_ONE_OR_TP_RUNNERS = ("flashinfer_cutlass", "flashinfer_cutedsl")
# The same hook: flashinfer_cutlass serves only these quantizations (None: unquantized, BF16), and cutlass with
# FP8/MXFP8 weights asserts ep_size == 1.
FLASHINFER_CUTLASS_QUANTIZATIONS = ("modelopt_fp4", "modelopt_fp8", "modelopt_mixed", None)
CUTLASS_EP_ONE_QUANTIZATIONS = ("fp8", "mxfp8")

# arg_groups/speculative_hook.py _handle_eagle_family: with --speculative-eagle-topk 1 the draft-token count is
# set to num_steps + 1 whatever was written. These algorithms need a trained draft model: without
# --speculative-draft-model-path SGLang loads the target itself as the draft.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN")
NEEDS_DRAFT_MODEL = ("EAGLE3", "STANDALONE")
# The same hook sets the draft of EAGLE and NEXTN to the target itself only for these architectures, whose
# checkpoints carry their own MTP draft layers; any other one loads the whole target as the draft at boot
# (ModelConfig.from_server_args).
MTP_DRAFT_ARCHITECTURES = (
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
    "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
)
# configs/model_config.py ModelConfig._config_draft_model: a draft worker built from one of these architectures'
# checkpoints loads its MTP (NextN) layers, not the whole model (whether the checkpoint carries them is known
# only at load), so a draft-less EAGLE or NEXTN on them is SGLang's MTP path.
DRAFT_MTP_ARCHITECTURES = (
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "DeepseekV4ForCausalLM",
    "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "Glm5NextForConditionalGeneration",
    "GlmOcrForConditionalGeneration", "LongcatFlashForCausalLM", "MiMoForCausalLM", "Step3p5ForCausalLM",
    "InklingForConditionalGeneration", "GigaChat35ForCausalLM", "Step3p7ForConditionalGeneration",
    "BailingMoeV2ForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "Ernie4_5_MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration", "Qwen3MoeForCausalLM",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM", "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "NemotronH_Omni_Reasoning_V3", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "HYV3ForCausalLM", "HYV4ForCausalLM",
)
# arg_groups/deepseek_v4_hook.py validate_deepseek_v41_features: a checkpoint of this model_type refuses every
# speculative algorithm but these.
SPECULATIVE_BY_MODEL_TYPE: dict[str, tuple[str, ...]] = {"deepseek_v41": ("DSPARK",)}
# The same function refuses pipeline parallelism for these model types; validation_hook.py
# check_pipeline_parallel_compat refuses it with speculative decoding unless the deployment is disaggregated (a
# prefill node) or this variable relays EAGLE's drafts between the stages.
NO_PP_MODEL_TYPES = ("deepseek_v41",)
PP_SPEC_ENV = "SGLANG_ENABLE_PP_SPEC"

# arg_groups/kv_cache_hook.py handle_kv4_compatibility and attention_hook.py, on an SM12x GPU:
# (kv-cache dtype, attention backend) -> what SGLang does, measured with tests/profiles/negative/kv-*.yaml.
KV4_MHA_BACKENDS = ("triton", "torch_native", "flex_attention", "trtllm_mha")
KV4_MLA_BACKENDS = ("flashinfer", "trtllm_mla")
KV_BACKEND_REFUSALS = {
    ("fp8_e4m3", "trtllm_mha"): "TRTLLM FMHAv2 prefill on SM120 does not support an fp8_e4m3 KV cache",
    ("nvfp4", "triton"): "NVFP4 prefill needs an FP8 E4M3 workspace or native NVFP4, which triton provides neither",
}
KV_BACKEND_REWRITES = {("fp8_e5m2", "fa3"): "triton"}  # FlashAttention3 takes only fp8_e4m3 among FP8 caches
# The attention backend SGLang picks for a multi-head-attention model on GB10 when none is written (measured with
# `check --engine`: an FP4 KV cache is refused "..., but got flashinfer").
GB10_DEFAULT_MHA_BACKEND = "flashinfer"

# speculative/spec_info.py handle_server_args: _handle_eagle_family runs for the EAGLE family and STANDALONE, so
# num_steps, eagle_topk and num_draft_tokens are theirs; it asserts top-k and draft tokens are unset when
# num_steps is (SGLang then chooses all three).
STEP_ALGORITHMS = (*EAGLE_FAMILY, "STANDALONE")
# The same hook and _handle_ngram turn --enable-mixed-chunk off for the algorithms whose
# SpeculativeAlgorithm.supports_mixed_chunk() is false (spec_info.py: only EAGLE, EAGLE3, DFLASH and DSPARK resume).
NO_MIXED_CHUNK_ALGORITHMS = ("STANDALONE", "NGRAM")
# The same hook: top-k above 1 is refused with trtllm_mha, and with a KV page above 1 outside these backends.
TOPK_ONE_BACKENDS = ("trtllm_mha",)
PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
# arg_groups/parallel_hook.py _handle_deprecated_dp_attention: --enable-dp-attention with --dp-size N is the old
# spelling of --attn-dp-size N (dp_size becomes 1, the flag false); _handle_data_parallelism then divides
# --chunked-prefill-size by N, with a warning.
DP_ATTENTION_FLAGS = ("--enable-dp-attention", "--dp-size")
