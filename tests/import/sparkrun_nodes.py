"""Run inside sparkrun 0.4.2's own venv: print, as JSON, the serve command sparkrun generates for every node of
RECIPE on HOSTS (its SglangRuntime.generate_node_command, the call its launcher makes for head and workers).

    python sparkrun_nodes.py RECIPE H1,H2,...
"""

import json
import shlex
import sys

from sparkrun.core.recipe import Recipe
from sparkrun.runtimes.sglang import SglangRuntime

recipe_path, hosts = sys.argv[1], sys.argv[2].split(",")
recipe = Recipe.load(recipe_path, offline=True)
runtime = SglangRuntime()
commands = [
    shlex.split(runtime.generate_node_command(recipe=recipe, overrides={}, head_ip=hosts[0], num_nodes=len(hosts),
                                              node_rank=rank, init_port=25000, hosts=hosts).replace("\\\n", " "))
    for rank in range(len(hosts))
]
print(json.dumps(commands))
