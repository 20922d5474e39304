"""Stage: `spark-compile export --sparkrun` — a validated profile as a sparkrun 0.4.2 recipe whose serve command is
the profile's engine argv. sparkrun adds the per-node rendezvous flags and runs its own container, so what the
recipe cannot carry (docker options, mounts, per-node values) is reported on stderr."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from spark_compile.capacity.budget import Capacity
from spark_compile.common.errors import EXIT_OK, UsageError
from spark_compile.common.quoting import sparkrun_word
from spark_compile.importer import sparkrun_facts as facts
from spark_compile.importer.draft import comment, scalar
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan
from spark_compile.stages.write import write_file

MARK = "# Written by spark-compile export from "
_RENDEZVOUS = ("--dist-init-addr", "--nnodes", "--node-rank")
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
# Flags sparkrun's `defaults` keys stand for: exported as a default and a placeholder, so `sparkrun run -o KEY=…`
# overrides them as it does in its own recipes.
_AS_DEFAULT = {flag: key for key, flag in facts.FLAG_MAP if key not in facts.BOOL_KEYS}


def _yaml_value(text: str) -> str:
    """A defaults value: a number when sparkrun's str() of the parsed number gives the text back, else a string."""
    if re.fullmatch(r"-?[1-9][0-9]*|0", text):
        return text
    try:
        if repr(float(text)) == text:
            return text
    except ValueError:
        pass
    return scalar(text)


def _template(rank: RankPlan, model_word: str, defaults: dict[str, str]) -> list[str]:
    lines = [" ".join(sparkrun_word(w) for w in rank.launcher)]
    for option in rank.engine_options:
        if option.flag in _RENDEZVOUS:
            continue
        words = [option.flag, *option.values]
        if any(_PLACEHOLDER.search(w) for w in words):
            raise UsageError(f"{option.flag} {' '.join(option.values)}: a value shaped like a sparkrun placeholder "
                             "({name}) would be replaced by sparkrun; the profile cannot be exported")
        # A placeholder only for a value sparkrun may paste raw; any other is written quoted in the command.
        raw = len(option.values) == 1 and sparkrun_word(option.values[0]) == option.values[0]
        if option.flag == "--model-path" and raw:
            lines.append(f"--model-path {{{model_word}}}")
        elif raw and option.flag in _AS_DEFAULT and _AS_DEFAULT[option.flag] not in defaults:
            key = _AS_DEFAULT[option.flag]
            defaults[key] = option.values[0]
            lines.append(f"{option.flag} {{{key}}}")
        else:
            lines.append(" ".join(sparkrun_word(w) for w in words))
    return lines


def _env(rank: RankPlan) -> dict[str, str]:
    return {name: value for env_file in rank.env_files for name, value in env_file.values}


def _shared_env(ranks: tuple[RankPlan, ...], notes: list[str]) -> list[tuple[str, str]]:
    """The variables every rank has with the same value (a recipe's env is the same on every node); the others
    are reported."""
    each = [_env(rank) for rank in ranks]
    shared = []
    for name, value in each[0].items():
        if all(env.get(name) == value for env in each[1:]):
            shared.append((name, value))
        else:
            notes.append(f"{name}: differs between ranks; a sparkrun recipe's env is the same on every node")
    for name in sorted({n for env in each[1:] for n in env} - set(each[0])):
        notes.append(f"{name}: set on some ranks only; a sparkrun recipe's env is the same on every node")
    return shared


def _model(rank: RankPlan) -> str:
    path = next(o for o in rank.engine_options if o.flag == "--model-path")
    return path.values[0]


def _not_carried(rank: RankPlan, notes: list[str]) -> None:
    docker = [o for o in rank.docker_options if o.flag not in ("--env-file", "--restart", "--name")]
    for option in docker:
        notes.append(f"docker {' '.join(option.words)}: sparkrun runs its container with its own options")
    for name in rank.runtime_env:
        notes.append(f"{name}: found on the node at start (runtime.env); sparkrun has no such step")


def capacity_metadata(capacity: Capacity | None, tp: int) -> list[str]:
    """sparkrun's model_vram (GiB of weights for one GPU, which it divides by TP) and kv_vram_per_token (GiB
    per token, also divided by TP for a head-sharded cache), from the budget's own figures for rank 0."""
    if capacity is None or not capacity.ranks:
        return []
    rank = capacity.ranks[0]
    lines = []
    if rank.terms["weights"].gib is not None and rank.terms["draft"].gib is not None:
        lines.append(f"  model_vram: {(rank.gib('weights') + rank.gib('draft')) * tp:.3f}")
    if rank.kv is not None and rank.kv.bytes_per_full_token is not None:
        lines.append(f"  kv_vram_per_token: {rank.kv.bytes_per_full_token * tp / (1 << 30):.12f}")
    return lines


def recipe_text(plan: LaunchPlan, profile: Profile, source: str, notes: list[str],
                capacity: Capacity | None = None) -> tuple[str, list[str]]:
    """The recipe, and the hosts to give `sparkrun run --hosts`."""
    head = plan.ranks[0]
    if profile.engine.dist_init_port != facts.INIT_PORT and len(plan.ranks) > 1:
        notes.append(f"engine.dist_init_port {profile.engine.dist_init_port}: sparkrun rendezvouses on port "
                     f"{facts.INIT_PORT}")
    defaults: dict[str, str] = {}
    template = _template(head, "model", defaults)
    env = _shared_env(plan.ranks, notes)
    _not_carried(head, notes)
    lines = [f"{MARK}{comment(source)}.", "# Run it with:", f"#   sparkrun run RECIPE --hosts "
             f"{comment(','.join(r.fabric_ip for r in plan.ranks))}",
             f"model: {scalar(_model(head))}", 'runtime: "sglang"', f"min_nodes: {len(plan.ranks)}",
             f"max_nodes: {len(plan.ranks)}", f"container: {scalar(profile.engine.image)}", "metadata:",
             f"  description: {scalar(profile.description or profile.name)}",
             *capacity_metadata(capacity, profile.engine.parallel.tp or 1)]
    if defaults:
        lines += ["defaults:", *(f"  {key}: {_yaml_value(value)}" for key, value in defaults.items())]
    if env:
        lines += ["env:", *(f"  {name}: {scalar(value)}" for name, value in env)]
    lines.append("command: |")
    lines += [f"  {line}" + (" \\" if i < len(template) - 1 else "") for i, line in enumerate(template)]
    return "\n".join(lines) + "\n", [r.fabric_ip for r in plan.ranks]


def run_export(plan: LaunchPlan, profile: Profile, source: Path, output: Path | None, *, force: bool,
               capacity: Capacity | None = None) -> int:
    """Write (or print) the recipe; list on stderr what of the deployment sparkrun does its own way."""
    notes: list[str] = []
    text, _ = recipe_text(plan, profile, str(source), notes, capacity)
    if output is None:
        sys.stdout.write(text)
    else:
        write_file(output, text.encode("utf-8"), ours=MARK.encode("utf-8"), force=force)
    for note in notes:
        sys.stderr.write(f"spark-compile export: not carried: {comment(note)}\n")
    return EXIT_OK

