"""Will it fit: each rank's memory budget (budget), its inputs from the checkpoint on disk (inputs, weights,
weights_config, safetensors_header), a pipeline-parallel rank's layers (pp_split), what SGLang measures before
the load (preload), the KV pool arithmetic SGLang uses (kv_predict, with the speculative settings it derives in
spec_defaults; kv_dsv4 for DeepSeek-V4, kv_model and kv_pools for the other kinds) and how the budget is
printed (format). Imports common/ and stages/ (the plan it sizes)."""
