"""Run SGLang's own argument resolution and boot checks on each rank's argv, on simulated hardware.

Runs INSIDE the engine venv (standard library + sglang; never imports spark_compile), started by
``compiler/engine/check.py``:

    .venv-engine/bin/python -I compiler/engine/resolve_probe.py < request.json > result.json

Request: {"hardware": {...}, "jobs": [{"paths": {container path: local path}, "ranks": [{"rank", "argv", "env"}]}]}
(one job per profile, all on the same hardware; the result lists each job's ranks in the same order).
Per rank it does what ``sglang serve`` does before it touches a GPU: ``prepare_server_args(argv)``,
``ServerArgs.resolve_once()`` (which runs ``arg_groups.pipeline.run_resolution_pipeline``), then
``check_server_args()``, then the model stage of boot: the ModelConfig SGLang builds (whose quantization, read
from the checkpoint, replaces --quantization) and, under that quantization, the MoE-runner choice and its
checks; then the draft worker's ModelConfig from the draft's own config.json (its quantization, its context
limit); given a rank's ``available_bytes``, SGLang's DeepSeek-V4 pool configurator on them (its
``bytes_per_full_token`` and ``full_token``). It reports, per flag the argv wrote, the value SGLang resolved
and which handlers declared it (only when the resolution completed), or the error SGLang (or argparse) raised,
with its own message. The GPU
is simulated by answering torch's device queries (capability, count, memory, name) and ``platform.machine()``
for the profile's hardware; CUDA-only binary packages missing here (sgl_kernel, flashinfer, torchvision) are
import-only stand-ins, and an error raised by a stand-in or a real device call is reported as "could not run".
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import logging
import os
import platform
import re
import sys
import traceback
import types
from importlib.metadata import version
from typing import Any

STANDIN_PACKAGES = ("sgl_kernel", "flashinfer", "torchvision", "deep_gemm", "flash_mla")
# Flags SGLang folds into one structured field during resolution: (dest, field, phase, key).
FOLDED = {
    "cuda_graph_max_bs_decode": ("cuda_graph_config", "decode", "max_bs"),
    "cuda_graph_backend_decode": ("cuda_graph_config", "decode", "backend"),
    "cuda_graph_max_bs_prefill": ("cuda_graph_config", "prefill", "max_bs"),
    "cuda_graph_backend_prefill": ("cuda_graph_config", "prefill", "backend"),
}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_STANDIN_MARK = "spark-compile import-only stand-in"


# ---------------------------------------------------------------------------- stand-ins


class _StandInMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _standin_class(name)

    def __getitem__(cls, item: Any) -> Any:
        return cls


class _StandIn(metaclass=_StandInMeta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__} called: {_STANDIN_MARK}")


def _standin_class(name: str) -> type:
    return _StandInMeta(name, (_StandIn,), {})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _standin_class(name)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes the named packages (and any submodule) importable as inert modules."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".", 1)[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        module.__dict__["__version__"] = "0.0.0+stand-in"  # transformers reads one from what it finds
        module.__doc__ = _STANDIN_MARK
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_standins() -> list[str]:
    """Stand-ins for the CUDA-only packages this venv lacks; returns their names."""
    missing = {name for name in STANDIN_PACKAGES if importlib.util.find_spec(name) is None}
    if missing:
        sys.meta_path.append(_StandInFinder(missing))
    try:  # transformers imports soundfile when it is installed; its C library may not be
        importlib.import_module("soundfile")
    except OSError:
        sys.modules["soundfile"] = types.ModuleType("soundfile")
        missing.add("soundfile")
    return sorted(missing)


# ---------------------------------------------------------------------------- hardware


def simulate(hardware: dict[str, Any]) -> None:
    """Answer torch's device queries (and platform.machine) as the profile's hardware would."""
    # torch only after main() installed the stand-ins of the CUDA-only packages it may import
    import torch

    major, minor = hardware["capability"]
    total = int(float(hardware["memory_gib"]) * (1 << 30))
    name = hardware["gpu_name"]
    props = types.SimpleNamespace(name=name, major=major, minor=minor, total_memory=total,
                                  multi_processor_count=hardware.get("sms", 48), is_integrated=hardware["unified"])
    machine = hardware["machine"]
    platform.machine = lambda: machine
    torch.cuda.is_available = lambda: True
    torch.version.cuda = hardware.get("cuda", "13.0")
    torch.cuda.device_count = lambda: int(hardware["gpus"])
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_name = lambda device=None: name
    torch.cuda.current_device = lambda: 0
    torch.cuda.mem_get_info = lambda device=None: (total, total)
    torch.cuda.get_device_properties = lambda device=None: props


# ---------------------------------------------------------------------------- one rank


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    try:
        return jsonable(importlib.import_module("msgspec").to_builtins(value))
    except Exception:
        return _ADDRESS.sub("", repr(value))


def _resolved(server_args: Any, dest: str) -> tuple[Any, list[str]]:
    """(resolved value, handlers that declared it) for one dest."""
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.arg_groups.overrides import resolution_result

    declarations = list(getattr(server_args, "_resolved_overrides", None) or ())
    if dest in FOLDED:
        field, phase, key = FOLDED[dest]
        config = jsonable(resolution_result(server_args, field))
        sources = [s for s, fields in declarations if field in fields]
        value = config.get(phase, {}).get(key) if isinstance(config, dict) else None
        return value, sources
    sources = [source for source, fields in declarations if dest in fields]
    return jsonable(resolution_result(server_args, dest)), sources


def _cannot_run(exc: BaseException) -> bool:
    """True when the failure is this machine's (a stand-in, a missing module, a real device call)."""
    if isinstance(exc, (ImportError, OSError)) or _STANDIN_MARK in str(exc):
        return True
    frames = traceback.extract_tb(exc.__traceback__)
    return any("/torch/cuda/" in f.filename or "/triton/" in f.filename for f in frames)


def _printable(text: str) -> str:
    """One line, control characters shown as escapes: SGLang's messages can quote values from the argv."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in " ".join(text.split()))


def _asserted(exc: BaseException) -> str:
    """A bare assert's condition, read from the source statement that raised it, with where it is in sglang/."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    try:
        with open(last.filename, encoding="utf-8") as source:
            text = source.read()
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return ""
    tests = [ast.get_source_segment(text, node.test) for node in ast.walk(tree)
             if isinstance(node, ast.Assert) and node.lineno <= (last.lineno or 0) <= (node.end_lineno or 0)]
    where = last.filename.rpartition("/sglang/")[2] or last.filename.rpartition("/")[2]
    return f"assert {' '.join(tests[-1].split())} failed ({where}:{last.lineno})" if tests and tests[-1] else ""


def _message(exc: BaseException) -> str:
    text = _printable(str(exc))
    if not text and isinstance(exc, AssertionError):
        text = _printable(_asserted(exc))
    return f"{type(exc).__name__}: {text or '(no message)'}"


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(" ".join(record.getMessage().split()))


class _PoolLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("DSV4 memory calculation:"):
            self.lines.append(message)


def pool_sizes(server_args: Any, available_bytes: int,
               stage: tuple[int, int, int, int] | None = None) -> dict[str, Any]:
    """SGLang's own DeepSeek-V4 pool configurator on this rank's resolved arguments, given the bytes the
    static pool has after the weights: what ModelRunner hands it at boot (the model itself is not built).
    ``stage``: (start layer, end layer, pp rank, pp size) of a pipeline stage; unset, all layers."""
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.configs.model_config import ModelConfig, is_deepseek_v4
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import SpecAuxHiddenStateConfig
    from sglang.srt.model_executor.pool_configurator import DSV4PoolConfigurator
    from sglang.srt.runtime_context import SpawnRanks, get_model, get_schedule, publish
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    # World rank 0 for every rank: the pool does not depend on it, and a rank published for a bigger fleet
    # checked earlier in this process would otherwise be refused by the next, smaller one.
    publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=0, dp_rank=None, gpu_id=0))
    config = ModelConfig.from_server_args(server_args)
    if not (is_deepseek_v4(config.hf_config) and config.is_hybrid_swa):
        return {"outcome": "not_dsv4"}
    stages = int(getattr(config.hf_config, "num_nextn_predict_layers", 0) or 0)
    start, end, pp_rank, pp = stage or (0, config.num_hidden_layers, 0, 1)
    kvc = types.SimpleNamespace(
        kv_cache_dtype_str=get_model().kv_cache_dtype, model_config=config,
        spec_algorithm=SpeculativeAlgorithm.from_string(server_args.speculative_algorithm),
        layer_info=types.SimpleNamespace(start_layer=start, end_layer=end), pp_size=pp,
        pp_group=types.SimpleNamespace(rank_in_group=pp_rank),
        sliding_window_size=config.sliding_window_size, page_size=get_schedule().page_size,
        attn_dp_size=1, spec_aux_config=SpecAuxHiddenStateConfig(dspark_num_stages=stages or None))
    lines = _PoolLines()
    logger = logging.getLogger("sglang.srt.model_executor.pool_configurator")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        configurator = DSV4PoolConfigurator(kvc)
        pool = configurator.calculate_pool_sizes(available_bytes, get_schedule().page_size)
    finally:
        logger.removeHandler(lines)
    return {"outcome": "ok", "bytes_per_full_token": configurator.bytes_per_full_token,
            "full_token": pool.full_max_total_num_tokens, "log": lines.lines}


class _RefusalError(Exception):
    """argparse's own refusal of the command line, with its message (not the SystemExit it would raise)."""


def _parser() -> Any:
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.server_args import ServerArgs

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:
            raise _RefusalError(message)

    parser = Parser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def _spelled(parser: Any, argv: list[str]) -> dict[str, dict[str, Any]]:
    """dest -> {"option", "value"} for every flag the argv spells out, the value as written (before parsing)."""
    out: dict[str, dict[str, Any]] = {}
    for index, token in enumerate(argv):
        option, _, inline = token.partition("=")
        action = parser._option_string_actions.get(option) if option.startswith("--") else None
        if action is None or option == "--config":
            continue
        following = argv[index + 1] if index + 1 < len(argv) and not argv[index + 1].startswith("--") else None
        value = inline if "=" in token else following if action.nargs != 0 else True
        out[action.dest] = {"option": option, "value": value}
    return out


def _boot_view(argv: list[str], quantization: str) -> None:
    """Resolve again with the quantization the checkpoint gives the model at boot: the MoE runner and its
    checks are chosen from it there (ModelConfig._verify_quantization), not from the flag."""
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.server_args import prepare_server_args

    server_args = prepare_server_args([*argv, "--quantization", quantization])
    server_args.resolve_once()
    server_args.check_server_args()


def _model_stage(server_args: Any, argv: list[str], result: dict[str, Any]) -> None:
    """The model config SGLang builds at boot: its quantization (reported as the flag's resolved value) and
    the MoE checks under it."""
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.arg_groups.model_override_base import model_config_of

    model_config = model_config_of(server_args)
    quantization = model_config.quantization
    result["model"] = {"quantization": quantization, "context_length": model_config.context_len}
    entry = result["written"].get("quantization")
    if entry is not None:
        entry["boot"] = quantization
    if quantization is not None and quantization != server_args.quantization:
        result["stage"] = f"moe, with the checkpoint's quantization {quantization}"
        _boot_view(argv, quantization)
    _draft_stage(server_args, result)


def _draft_stage(server_args: Any, result: dict[str, Any]) -> None:
    """The draft worker's ModelConfig, built from the draft's own config.json as the scheduler builds it at boot:
    its quantization (reported as --speculative-draft-model-quantization's resolved value) and its checks (the
    context length against the draft's own maximum)."""
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.configs.model_config import ModelConfig

    draft, _ = _resolved(server_args, "speculative_draft_model_path")
    target, _ = _resolved(server_args, "model_path")
    if draft is None or draft == target:
        return
    result["stage"] = "model, the draft's"
    config = ModelConfig.from_server_args(server_args, model_path=draft, is_draft_model=True)
    result["draft"] = {"quantization": config.quantization, "context_length": config.context_len}
    entry = result["written"].get("speculative_draft_model_quantization")
    if entry is not None:
        entry["boot"] = config.quantization


def run_rank(request: dict[str, Any], base_env: dict[str, str]) -> dict[str, Any]:
    # sglang only after main() installed the stand-ins it imports and simulated the device
    from sglang.srt.server_args import prepare_server_args

    argv = [request["paths"].get(a, a) for a in request["argv"]]
    os.environ.clear()
    os.environ.update(base_env)
    os.environ.update({k: v for k, v in request["env"].items() if v is not None})
    parser = _parser()
    result: dict[str, Any] = {"rank": request["rank"], "outcome": "ok", "stage": None, "error": None,
                              "written": _spelled(parser, argv), "warnings": [], "resolved": False, "implied": {}}
    server_args = None
    captured = _Warnings()
    try:
        result["stage"] = "parse"
        with contextlib.redirect_stderr(io.StringIO()):
            namespace = parser.parse_args(argv)
        for dest, entry in result["written"].items():
            entry["value"] = jsonable(getattr(namespace, dest, None))
        server_args = prepare_server_args(argv)
        logging.getLogger().addHandler(captured)
        result["stage"] = "resolve"
        server_args.resolve_once()
        result["resolved"] = True
        result["stage"] = "check"
        server_args.check_server_args()
        result["stage"] = "model"
        _model_stage(server_args, argv, result)
        result["stage"] = None
    except _RefusalError as exc:
        result.update(outcome="refused", error=f"argparse: {_printable(str(exc))}")
    except BaseException as exc:
        outcome = "not_run" if _cannot_run(exc) else "refused"
        result.update(outcome=outcome, error=_message(exc))
    finally:
        logging.getLogger().removeHandler(captured)
    result["warnings"] = captured.messages
    if result["resolved"]:
        for dest, entry in result["written"].items():
            entry["resolved"], entry["sources"] = _resolved(server_args, dest)
            if "boot" in entry and entry["boot"] != entry["resolved"]:
                entry["resolved"], entry["sources"] = entry.pop("boot"), ["ModelConfig._verify_quantization"]
            entry.pop("boot", None)
        result["implied"] = _implied(server_args, result["written"], request["paths"])
    if result["outcome"] == "ok" and request.get("available_bytes") is not None:
        try:
            result["pool"] = pool_sizes(server_args, int(request["available_bytes"]))
        except BaseException as exc:
            result["pool"] = {"outcome": "not_run" if _cannot_run(exc) else "refused", "error": _message(exc)}
    return result


def _implied(server_args: Any, written: dict[str, Any], paths: dict[str, str]) -> dict[str, Any]:
    """A draft worker with no draft model path: at boot its ModelConfig falls back to the target's path
    (ModelConfig.from_server_args: ``model_path or cfg.model_path``). A handler that declares the target as
    the draft on purpose (a bundled draft, MTP layers) is not reported."""
    algorithm, _ = _resolved(server_args, "speculative_algorithm")
    draft, _ = _resolved(server_args, "speculative_draft_model_path")
    if algorithm in (None, "NGRAM") or draft is not None or "speculative_draft_model_path" in written:
        return {}
    target, _ = _resolved(server_args, "model_path")
    back = {local: container for container, local in paths.items()}
    return {"speculative_draft_model_path": {"option": "--speculative-draft-model-path",
                                             "resolved": back.get(target, target),
                                             "sources": ["ModelConfig.from_server_args"]}}


def main() -> int:
    request = json.load(sys.stdin)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}
    with contextlib.redirect_stdout(sys.stderr):
        standins = install_standins()
        simulate(request["hardware"])
        jobs = [[run_rank({**rank, "paths": job["paths"]}, base_env) for rank in job["ranks"]]
                for job in request["jobs"]]
        sglang_version = version("sglang")
    out = {"sglang": sglang_version, "standins": standins, "jobs": jobs}
    sys.stdout.write(json.dumps(out, ensure_ascii=False, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
