"""commands: the command line's commands. parser.py is the one argparse parser (a subparser per command, naming
its handler in run.py); each handler runs the pipeline or a review, import, export or audit step and prints what
it returns; compile.py and drift.py write and compare generated/, catalog.py rebuilds the engine catalogs,
error_log.py keeps an internal error's traceback, audit.py compares a node's captures, flags.py prints the
SPARK_* registry, schema.py the profile's JSON Schema, and regenerate.py (`python -m`) rebuilds every generated
file. It may import every other package; only cli.py imports it."""
