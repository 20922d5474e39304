"""Will it fit: each rank's memory budget (budget), its inputs from the checkpoint on disk (inputs, weights,
safetensors_header), the KV pool arithmetic SGLang uses (kv_dsv4) and how the budget is printed (format).
Imports common/ and stages/ (the plan it sizes)."""
