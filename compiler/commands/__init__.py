"""The command line's commands: the parser (parser), one function per command that runs the pipeline and prints
(run, compile, drift, audit, flags, schema) and the repository's regeneration (regenerate). The top of the
layering: it may import every other package; none imports it."""
