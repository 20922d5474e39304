"""`spark-compile import`: an existing deployment (a docker run line, a sparkrun recipe, a traced launcher) read
into launches (source, shell, argv, docker_run, wrapped: a server inside a shell's -c string, recipe, trace) and
mapped onto a minimal profile (mapping, profile, draft, tables, engine_flags: the chat keywords and older builds'
flags, and sparkrun_facts: what sparkrun does with a recipe). Imports common/ and stages/."""
