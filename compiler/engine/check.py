"""Stage: `check --engine`, SGLang's own judgement of every rank's arguments, on simulated hardware.

The compiler's process never imports sglang or torch: ``resolve_probe.py`` runs in the engine
venv's interpreter, in a subprocess, once per hardware kind for all the profiles checked (every rank of
each). What it reports becomes findings at the profile line that set the value: a value SGLang resolves
differently from what the plan wrote (SC601, unless ``engine.accept_rewrites`` accepts it), an error SGLang
would raise at boot (SC602), a check that could not run here and why (SC603), and an accepted rewrite that
no longer happens (SC604). For DeepSeek-V4/V4.1 it also runs SGLang's pool configurator on each rank's
predicted available bytes and says, on stderr, its ``full_token`` next to the static model's
(`spark_compile.engine.pool`).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_compile.capacity.preload import hardware_total_gib
from spark_compile.common.findings import Finding, dotted
from spark_compile.engine.pool import available_bytes, pool_notes
from spark_compile.engine.probe import NotRunError, run_probe_jobs
from spark_compile.pipeline import Planned
from spark_compile.rules import load_all
from spark_compile.spec.engine_values import DRAFT_PATH, draft_model, own_mtp_draft
from spark_compile.spec.generators.catalog_extract import default_engine_python
from spark_compile.spec.hardware import HARDWARE
from spark_compile.spec.sglang_facts import DEPRECATED_TOOL_CALL_PARSERS, DP_ATTENTION_FLAGS, SPECULATIVE_ALIASES
from spark_compile.stages.checkpoint import ConfigError, committed_path, is_regular, read_config
from spark_compile.stages.load import YamlPath
from spark_compile.stages.model_paths import container_path
from spark_compile.stages.validate import locate

# A written value that asks SGLang to choose: resolving it is not a rewrite.
CHOOSE_FOR_ME = (None, "auto")
DRAFT_FLAG = "--speculative-draft-model-path"
# A written value SGLang spells another way once resolved: "unquant" is the explicit no-quantization, None.
SAME_MEANING = {("unquant", None)}

# How SGLang's messages name some settings in words rather than by flag or field (moe_hook.py, model_config.py).
SPOKEN = {"ep_size": ("expert parallel size",), "tp_size": ("tensor parallel size", "tensor_model_parallel_size"),
          "quantization": ("quantization method",), "speculative_algorithm": ("speculative decoding",),
          "kv_cache_dtype": ("KV4 ",), "moe_runner_backend": ("FlashInfer Cutlass MOE",),
          "dp_size": ("data-parallel",), "pp_size": ("pipeline parallelism", "Pipeline parallelism")}


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One written flag SGLang resolves to another value, and the ranks where it does."""

    option: str
    wrote: Any
    resolved: Any
    sources: tuple[str, ...]
    ranks: tuple[int, ...]


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _same(wrote: Any, resolved: Any) -> bool:
    return wrote == resolved or _show(wrote) == _show(resolved) or (wrote, resolved) in SAME_MEANING


def _beside_profile(validated: Planned, name: str, at: YamlPath) -> Path:
    """A committed file named relative to the profile file that names it, or NotRunError."""
    path = committed_path(validated.resolved, name, at)
    if not is_regular(path):
        raise NotRunError(f"{dotted(at)} names {path}, which is not a file here", at)
    return path


def config_json(validated: Planned, at: YamlPath = ("model",)) -> Path:
    """The config.json of the model (or, with ``at`` engine.speculative.draft, the draft) the profile names, or
    NotRunError saying where it was looked for."""
    profile, checkpoint = validated.profile, validated.plan.checkpoint
    source = profile.model if at == ("model",) else profile.engine.speculative.draft
    files = checkpoint.target if at == ("model",) else checkpoint.draft  # where the plan reads the model
    assert source is not None and files is not None
    where, name = files.config_at, dotted(at)
    if files.config_json is not None:
        return _beside_profile(validated, files.config_json, where)
    directory = files.directory
    if directory is None:
        raise NotRunError(f"no config.json: {name}.hub_id {source.hub_id} is resolved on the node, and "
                          f"{name}.config_json is unset (commit a copy of its config.json beside the profile and "
                          "name it there)", where)
    path = Path(directory) / "config.json"
    if not is_regular(path):
        raise NotRunError(f"no config.json: {path} is not on this machine and {name}.config_json is unset "
                          "(commit a copy of the checkpoint's config.json beside the profile and name it there)",
                          where)
    return path


def model_config(path: Path, where: YamlPath = ("model", "config_json")) -> str:
    """The config.json text handed to SGLang: only a JSON object naming its architectures, re-serialised, so a
    profile cannot make the engine read (and echo) some other file."""
    try:
        data = read_config(path)
    except ConfigError as why:
        raise NotRunError(str(why), where) from None
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def hardware_request(name: str) -> dict[str, Any]:
    """The device facts the probe answers torch's queries with, from the hardware catalog."""
    hw = HARDWARE[name]
    # What CUDA reports, as the capacity stage reads it: SGLang's memory tiers and fraction then agree with the plan's.
    return {"name": hw.name, "capability": list(hw.sm), "gpus": hw.gpus_per_node,
            "memory_gib": round(hardware_total_gib(hw)[0], 2),
            "gpu_name": hw.gpu_name or hw.name, "unified": hw.unified_memory, "machine": hw.cpu_arch}


def probe_job(validated: Planned, model_dir: Path, draft_dir: Path | None = None) -> dict[str, Any]:
    """One profile's part of the probe's request: the container-to-local path map (the model's, and the draft's
    when it has one), every rank's argv, env and predicted KV bytes. A draft model with no config.json here
    (``draft_dir`` None) is left out of the argv."""
    profile, plan = validated.profile, validated.plan
    paths = {container_path(profile.model): str(model_dir)}
    draft = profile.engine.speculative.draft
    # --config names the secrets file written on the node at start; it holds only the API key.
    skipped = {"--config"} if draft is None or draft_dir is not None else {"--config", DRAFT_FLAG}
    if draft is not None and draft_dir is not None:
        paths[container_path(draft)] = str(draft_dir)
    ranks = [{"rank": r.rank, "env": r.env, "available_bytes": available_bytes(validated, r.rank),
              "argv": [word for o in r.engine_options if o.flag not in skipped for word in o.words]}
             for r in plan.ranks]
    return {"paths": paths, "ranks": ranks}


def _stage_models(validated: Planned, model_dir: Path) -> tuple[dict[str, Any], list[Finding]]:
    """Write the target's (and the draft's) config.json where the probe reads them; the probe job, and an
    SC603 when the draft's checks cannot run (the target is resolved all the same)."""
    (model_dir / "config.json").write_text(model_config(config_json(validated)), encoding="utf-8")
    if draft_model(validated.profile) is None:
        return probe_job(validated, model_dir), []
    try:
        text = model_config(config_json(validated, DRAFT_PATH), (*DRAFT_PATH, "config_json"))
    except NotRunError as why:
        build = validated.profile.engine.catalog
        return probe_job(validated, model_dir), [_finding(
            validated, why.path, "SC603", f"engine checks of the draft model for {build} did not run: {why}; the "
            f"target was resolved without {DRAFT_FLAG}", "commit the draft's config.json beside the profile and "
            "name it in engine.speculative.draft.config_json")]
    draft_dir = model_dir / "draft"
    draft_dir.mkdir()
    (draft_dir / "config.json").write_text(text, encoding="utf-8")
    return probe_job(validated, model_dir, draft_dir), []


def rewrites(ranks: list[dict[str, Any]]) -> list[Rewrite]:
    """Every written flag whose resolved value differs, merged over the ranks where it does."""
    merged: dict[tuple[str, str, str], Rewrite] = {}
    for rank in ranks:
        for entry in rank["written"].values():
            if "resolved" not in entry or entry["value"] in CHOOSE_FOR_ME or _same(entry["value"], entry["resolved"]):
                continue
            key = (entry["option"], _show(entry["value"]), _show(entry["resolved"]))
            old = merged.get(key)
            ranks_seen = (*old.ranks, rank["rank"]) if old else (rank["rank"],)
            merged[key] = Rewrite(entry["option"], entry["value"], entry["resolved"],
                                  tuple(dict.fromkeys(entry["sources"])), ranks_seen)
    return list(merged.values())


def flag_path(validated: Planned, option: str, rank: int | None = None) -> YamlPath:
    """The profile path that set ``option`` in the plan's argv (the plan records it with the option)."""
    plan = validated.plan
    ranks = [r for r in plan.ranks if r.rank == rank] or list(plan.ranks)
    options = ranks[0].engine_options if ranks else ()
    path: YamlPath = next((tuple(o.source) for o in options if o.flag == option), ("engine",))
    if path == ("fleet", "nodes") and rank is not None:
        path = ("fleet", "nodes", rank)
    present = validated.resolved.origins
    while len(path) > 1 and path not in present:
        path = path[:-1]  # a model default: point at the section that would set it
    return path


def _where(ranks: tuple[int, ...], total: int) -> str:
    if len(ranks) == total:
        return "on every rank" if total > 1 else ""
    return "on rank " + ", ".join(str(r) for r in ranks) if len(ranks) == 1 else \
        "on ranks " + ", ".join(str(r) for r in ranks)


def _finding(validated: Planned, path: YamlPath, rule: str, message: str, hint: str,
             *, at_key: bool = False) -> Finding:
    return locate(validated.resolved, path, rule, load_all()[rule].severity, message, hint, at_key=at_key)


def documented(validated: Planned, rw: Rewrite) -> bool:
    """A rewrite SGLang documents as the same setting under another name (the NEXTN alias, a deprecated parser,
    attention DP's old spelling and its per-rank prefill chunk): the static rules warn about it with the same
    text in both modes (SC246, SC251, SC258), so it is no SC601 error."""
    wrote, resolved, par = _show(rw.wrote), _show(rw.resolved), validated.profile.engine.parallel
    attention_dp = (par.dp or 1) if par.dp_attention else 1
    return {"--speculative-algorithm": SPECULATIVE_ALIASES.get(wrote) == resolved,
            "--tool-call-parser": DEPRECATED_TOOL_CALL_PARSERS.get(wrote) == resolved,
            "--chunked-prefill-size": attention_dp > 1 and str(rw.wrote).isdigit()
            and int(rw.wrote) // attention_dp == rw.resolved}.get(rw.option, False) or \
        (rw.option in DP_ATTENTION_FLAGS and attention_dp > 1 and rw.resolved in (1, False))


def _rewrite_findings(validated: Planned, build: str, found: list[Rewrite], total: int,
                      resolved_everywhere: bool) -> list[Finding]:
    accepted = validated.profile.engine.accept_rewrites
    out: list[Finding] = []
    for rw in found:
        name = rw.option.removeprefix("--")
        if (name in accepted and _same(accepted[name], rw.resolved)) or documented(validated, rw):
            continue
        where = _where(rw.ranks, total)
        by = f" ({', '.join(rw.sources)})" if rw.sources else ""
        message = (f"{build} resolves {rw.option} {_show(rw.wrote)} to {_show(rw.resolved)}{by}"
                   + (f" {where}" if where else ""))
        hint = (f"write {_show(rw.resolved)}, or accept it with engine.accept_rewrites: "
                f"{{{name}: {_show(rw.resolved)}}}")
        out.append(_finding(validated, flag_path(validated, rw.option, rw.ranks[0]), "SC601", message, hint))
    if not resolved_everywhere:
        return out  # whether an acceptance is stale is known only where the resolution ran
    happened = {(rw.option.removeprefix("--"), _show(rw.resolved)) for rw in found}
    for name, value in accepted.items():
        if (name, _show(value)) not in happened:
            out.append(_finding(validated, ("engine", "accept_rewrites", name), "SC604",
                                f"{build} does not resolve --{name} to {_show(value)} here",
                                "remove the acceptance, or fix the value it names", at_key=True))
    return out


# Where an implied setting belongs in the profile: the setting that made SGLang fill it in.
IMPLIED_AT: dict[str, YamlPath] = {"--speculative-draft-model-path": ("engine", "speculative", "algorithm")}


def _implied_findings(validated: Planned, build: str, ranks: list[dict[str, Any]]) -> list[Finding]:
    """A setting the profile left out that SGLang filled in (the draft model: with the whole target, for an
    architecture without MTP layers of its own). A draft the profile names but this machine lacks is left out of
    the argv on purpose: nothing to report then."""
    profile = validated.profile
    if draft_model(profile) is not None or own_mtp_draft(profile.model.architecture,
                                                         profile.engine.speculative.algorithm):
        return []  # SGLang's MTP path: the target's own draft layers, not the whole target
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for rank in ranks:
        for entry in rank.get("implied", {}).values():
            seen.setdefault((entry["option"], _show(entry["resolved"])), entry)
    target = container_path(validated.profile.model)
    out = []
    for (option, value), entry in seen.items():
        what = f"the target model {value}" if value == target else value
        by = f" ({', '.join(entry['sources'])})" if entry["sources"] else ""
        out.append(_finding(validated, IMPLIED_AT.get(option, ("engine",)), "SC601",
                            f"{build} sets {option} to {what}{by}",
                            "name the value in the profile (for a draft model: engine.speculative.draft)"))
    return out


def _mention(error: str, dest: str, entry: dict[str, Any], by_value: bool = False) -> int:
    """Where SGLang's message first names a written flag: by option, field (dashes, spaces or underscores) or
    words SGLang uses for it, or (``by_value``) by its value; -1 when it does not."""
    if by_value:
        value = entry["value"]
        if not isinstance(value, str) or len(value) < 3:
            return -1
        spellings = [r"\b" + re.escape(value) + r"\b"]
    else:
        spellings = [re.escape(entry["option"]) + r"\b", r"\b" + re.escape(dest).replace("_", "[_ -]")]
        spellings += [r"\b" + re.escape(words) for words in SPOKEN.get(dest, ())]
    hits = [m.start() for pattern in spellings if (m := re.search(pattern, error))]
    return min(hits) if hits else -1


def _error_path(validated: Planned, rank: dict[str, Any], error: str) -> YamlPath:
    """The profile path of the written flag SGLang's message names first (by its name; failing that, by its
    value)."""
    for by_value in (False, True):
        named = [(at, entry["option"]) for dest, entry in rank["written"].items()
                 if (at := _mention(error, dest, entry, by_value)) >= 0]
        if named:
            return flag_path(validated, min(named)[1], rank["rank"])
    return ("engine", "catalog")


def _refusal_findings(validated: Planned, build: str, ranks: list[dict[str, Any]]) -> list[Finding]:
    grouped: dict[tuple[str, str, str], list[int]] = {}
    for rank in ranks:
        if rank["outcome"] != "ok":
            grouped.setdefault((rank["outcome"], rank["stage"] or "", rank["error"] or ""), []).append(rank["rank"])
    out: list[Finding] = []
    for (outcome, stage, error), numbers in grouped.items():
        where = _where(tuple(numbers), len(ranks))
        first = next(r for r in ranks if r["rank"] == numbers[0])
        if outcome == "refused":
            message = f"{build} refuses the arguments at boot ({stage}){' ' + where if where else ''}: {error}"
            out.append(_finding(validated, _error_path(validated, first, error), "SC602", message,
                                "change the value SGLang names, or the setting it depends on"))
        else:
            message = f"SGLang's {stage} step could not run here{' ' + where if where else ''}: {error}"
            out.append(_finding(validated, ("engine", "catalog"), "SC603", message,
                                "this machine lacks what that step needs; the rest was checked"))
    return out


def _not_run(validated: Planned, why: NotRunError) -> list[Finding]:
    build = validated.profile.engine.catalog
    return [_finding(validated, why.path, "SC603", f"engine checks for {build} did not run: {why}",
                     "run `check --engine` where the engine venv and the model's config.json are")]


def _verdict(validated: Planned, version: str, ranks: list[dict[str, Any]]) -> list[Finding]:
    build = validated.profile.engine.catalog
    if f"sglang-{version}" != build:
        return _not_run(validated, NotRunError(f"the engine interpreter runs sglang-{version}, but engine.catalog "
                                          f"selects {build}; point ENGINE_PYTHON at a venv with {build}"))
    everywhere = all(rank.get("resolved") for rank in ranks)
    findings = _rewrite_findings(validated, build, rewrites(ranks), len(ranks), everywhere)
    findings += _implied_findings(validated, build, ranks)
    findings += _refusal_findings(validated, build, ranks)
    return sorted(findings, key=Finding.sort_key)


def run_note(hardware: str, result: dict[str, Any]) -> str:
    """What a probe run simulated and stood in for: said once per run, on stderr, never a finding."""
    hw = hardware_request(hardware)
    major, minor = hw["capability"]
    stand_ins = ", ".join(result.get("standins", [])) or "none"
    return (f"check --engine: sglang-{result['sglang']} on simulated {hardware} (compute capability {major}.{minor}, "
            f"{hw['gpus']} GPU, {hw['memory_gib']} GiB, {hw['machine']}); import-only stand-ins: {stand_ins} "
            "(a step that calls one is reported as SC603)")


def engine_findings_many(profiles: list[Planned], python: str | None = None,
                         notes: list[str] | None = None) -> list[list[Finding]]:
    """SGLang's own verdict on every rank of each schema-valid profile: one probe run per hardware kind.
    ``notes`` receives one line per probe run saying what was simulated."""
    out: list[list[Finding]] = [[] for _ in profiles]
    python = python or default_engine_python()
    groups: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory(prefix="spark-engine-") as tmp:
        jobs: dict[int, dict[str, Any]] = {}
        early: dict[int, list[Finding]] = {}
        for index, validated in enumerate(profiles):
            try:
                if python is None:
                    raise NotRunError("no engine interpreter: set ENGINE_PYTHON or make .venv-engine with "
                                 ".ci/install-engine")
                model_dir = Path(tmp) / str(index)
                model_dir.mkdir()
                jobs[index], early[index] = _stage_models(validated, model_dir)
                groups.setdefault(validated.profile.hardware, []).append(index)
            except NotRunError as why:
                out[index] = _not_run(validated, why)
        for hardware, members in groups.items():
            assert python is not None  # a profile joins a group only when there is an interpreter
            try:
                result = run_probe_jobs(python, hardware_request(hardware), [jobs[i] for i in members])
            except NotRunError as why:
                for i in members:
                    out[i] = _not_run(profiles[i], why)
                continue
            if notes is not None:
                notes.append(run_note(hardware, result))
            for i, ranks in zip(members, result["jobs"], strict=True):
                out[i] = sorted(early[i] + _verdict(profiles[i], str(result["sglang"]), ranks), key=Finding.sort_key)
                if notes is not None:
                    notes.extend(pool_notes(profiles[i], ranks))
    return out
