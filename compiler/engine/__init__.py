"""`check --engine`: SGLang's own judgement of each rank's arguments (check), run by a probe in the engine venv
(probe, resolve_probe; the compiler's process never imports sglang), the answer's shape (report) and the KV pool
comparison (pool). Imports everything up to the pipeline."""
