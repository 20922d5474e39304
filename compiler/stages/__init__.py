"""The pipeline's stages, one module each: load a profile file with positions (load), apply `extends:` (resolve),
validate it into the typed Profile (validate; model_keys reads the model as a map of keys), build the launch plan
every target renders and every rule reads (plan, launch_plan, engine_options, envsets, model_paths, checkpoint),
render the per-rank files through the templates (render, readme), write them atomically (write), and report
findings (report). Imports common/ only."""
