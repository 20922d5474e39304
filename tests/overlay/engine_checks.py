"""Run in the engine interpreter (SGLang 0.5.23 on the CPU) with the overlay armed by its sitecustomize.

Importing SGLang's HTTP server costs 15-25 s here, so one process runs every check and prints one JSON
object on its last stdout line: {check name: {"ok": data} or {"error": traceback}}. The test module
(test_overlay_engine.py) asserts on the data. Each check drives SGLang's real modules; where one needs
state that only a launched server has (the tokenizer manager, a GPU), it gets a minimal stand-in, named
as such below.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import traceback
from collections import namedtuple
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import engine_standins

SERVED = "deepseek-v4.1-flash"
ALIASES = ("alias-a", "alias-b")


def hooked(function: Any) -> str | None:
    return getattr(function, "__spark_overlay_hook__", None)


def check_served_aliases() -> dict[str, Any]:
    from fastapi.testclient import TestClient
    from sglang.srt.entrypoints import http_server
    from sglang.srt.entrypoints.openai.serving_responses import OpenAIServingResponses

    # Stand-ins for what launch_server publishes: the tokenizer manager and the LoRA config bag.
    manager = SimpleNamespace(
        served_model_name=SERVED, model_config=SimpleNamespace(context_len=524288), lora_registry=None
    )
    http_server.set_global_state(
        http_server._GlobalState(tokenizer_manager=manager, template_manager=None, scheduler_info={})
    )
    http_server.get_lora = lambda: SimpleNamespace(enable_lora=False)
    # The real Responses handler, without its __init__ (which loads templates and a tokenizer).
    responses = OpenAIServingResponses.__new__(OpenAIServingResponses)
    responses.tokenizer_manager = manager
    responses._translates_tools = False
    responses.enable_response_store = False
    http_server.app.state.openai_serving_responses = responses
    client = TestClient(http_server.app)
    listing = client.get("/v1/models")
    retrieved = {model: client.get(f"/v1/models/{model}") for model in (*ALIASES, SERVED, "no-such-model")}
    # tool_choice "required" with no tool fails validation right after the model check: a 400 about tools
    # proves the model was accepted as the served one, a 404 that it was not.
    posted = {
        model: client.post("/v1/responses", json={"model": model, "input": "hi", "tool_choice": "required"})
        for model in (ALIASES[0], SERVED, "no-such-model")
    }
    base = http_server.app.state.openai_serving_responses
    return {
        "models": [[card["id"], card["root"]] for card in listing.json()["data"]],
        "retrieve": {model: [r.status_code, r.json().get("id")] for model, r in retrieved.items()},
        "responses": {model: [r.status_code, r.json()["error"]["message"]] for model, r in posted.items()},
        "parse": {
            model: list(base._parse_model_parameter(model))
            for model in (ALIASES[1], f"{ALIASES[1]}:my-lora", SERVED, "other:lora")
        },
        "routes_hooked": sorted(
            r.path
            for r in http_server.app.router.routes
            if hooked(getattr(r, "endpoint", None)) == "served_aliases"
        ),
    }


# A DeepSeek-style template: every system message, wherever it is, is collected into the top. SGLang's
# inline-system probe passes on it (its sentinel does appear in the output).
HOISTING_TEMPLATE = (
    "{% set ns = namespace(system='') %}{% for m in messages %}{% if m.role == 'system' %}"
    "{% set ns.system = ns.system + m.content + '\n' %}{% endif %}{% endfor %}<bos>{{ ns.system }}"
    "{% for m in messages %}{% if m.role == 'user' %}<user>{{ m.content }}"
    "{% elif m.role == 'assistant' %}<assistant>{{ m.content }}<eos>"
    "{% elif m.role == 'tool' %}<tool>{{ m.content }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def check_inline_system() -> dict[str, Any]:
    import jinja2
    from sglang.srt.entrypoints.anthropic.protocol import AnthropicMessagesRequest
    from sglang.srt.entrypoints.anthropic.serving import AnthropicServing
    from sglang.srt.parser.template_detection import detect_inline_system_support

    u1 = {"role": "user", "content": "Read main.py"}
    a1 = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]}
    r1 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"}]}
    a2 = {"role": "assistant", "content": "It prints 1."}
    u3 = {"role": "user", "content": "And now?"}
    a3 = {"role": "assistant", "content": "Still 1."}
    u4 = {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}

    def note(tokens: int) -> dict[str, str]:
        return {"role": "system", "content": f"<total_tokens>{tokens} tokens left</total_tokens>"}

    # Claude Code's pattern: a fresh system note before every new user turn.
    turns = [
        [u1],
        [u1, a1, note(900), r1],
        [u1, a1, note(900), r1, a2, note(800), u3],
        [u1, a1, note(900), r1, a2, note(800), u3, a3, note(700), u4],
    ]
    template = jinja2.Environment().from_string(HOISTING_TEMPLATE)
    patched = AnthropicServing._convert_to_chat_completion_request
    stock = patched.__wrapped__
    results: dict[str, Any] = {
        "hooked": hooked(patched),
        "probe_passes_hoisting_template": detect_inline_system_support(HOISTING_TEMPLATE),
    }
    # Both ways stock SGLang hoists: it merges itself (native encoders such as DeepSeek-V4's) or leaves
    # the note to a template that hoists it.
    for supports_inline in (False, True):
        serving = AnthropicServing(
            SimpleNamespace(supports_inline_system=supports_inline, apply_reasoning_enabled=lambda *a: None)
        )
        for label, convert in (("patched", patched), ("stock", stock)):
            prompts, message_lists = [], []
            for messages in turns:
                request = AnthropicMessagesRequest(
                    model=SERVED, max_tokens=16, system="You are terse.", messages=messages
                )
                chat = convert(serving, request)
                rendered = [
                    m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in chat.messages
                ]
                message_lists.append([[m["role"], m.get("content")] for m in rendered])
                prompts.append(
                    template.render(messages=[_flat(m) for m in rendered], add_generation_prompt=True)
                )
            results[f"{label}/inline={supports_inline}"] = {
                "prefix_chain": [prompts[i + 1].startswith(prompts[i]) for i in range(len(prompts) - 1)],
                "last_messages": message_lists[-1],
                "last_prompt": prompts[-1],
            }
    return results


def _flat(message: dict[str, Any]) -> dict[str, str]:
    """The message with its content as text, the way a chat template sees it."""
    content = message.get("content") or ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return {"role": message["role"], "content": content}


def check_kernel_load_guard() -> dict[str, Any]:
    import triton
    # The copy the sitecustomize armed, under the image's package name.
    kernel_load_guard: Any = importlib.import_module("spark_overlay.hooks.kernel_load_guard")
    from triton.compiler import compiler

    kernel_load_guard.BASE_DELAY_SECONDS, kernel_load_guard.MAX_DELAY_SECONDS = 0.001, 0.004
    refusal = "Triton Error [CUDA]: operation not permitted when stream is capturing"

    class Utils:
        # The driver's loader, fault-injected: refuses the first `refusals` loads.
        refusals, calls = 0, 0

        def load_binary(self, name: str, kernel: bytes, shared: int, device: int) -> tuple[Any, ...]:
            Utils.calls += 1
            if Utils.refusals:
                Utils.refusals -= 1
                raise RuntimeError(refusal)
            return ("cu_module", "cu_function", 32, 0, 1024)

        def get_device_properties(self, device: int) -> dict[str, int]:
            return {"max_shared_mem": 101376}

        def unload_module(self, module: Any) -> None:
            pass

    class Active:
        utils = Utils()

        def get_current_device(self) -> int:
            return 0

        def launcher_cls(self, src: Any, metadata: Any) -> str:
            return "launcher"

    Metadata = namedtuple("Metadata", "shared tmem_size warp_size num_warps target")

    def kernel() -> Any:
        # A compiled kernel as triton's compile() leaves it, minus the files: nothing loaded yet.
        made = compiler.CompiledKernel.__new__(compiler.CompiledKernel)
        made.__dict__.update(
            src=None,
            hash="0",
            name="_fwd_kernel",
            kernel=b"",
            metadata_group={},
            metadata=Metadata(0, None, 32, 4, SimpleNamespace(arch=121)),
            module=None,
            _module_pid=None,
            function=None,
            _run=None,
        )
        return made

    real_driver = compiler.driver
    compiler.driver = SimpleNamespace(active=Active())
    outcomes, subjects = {}, []
    try:
        for label, refusals in (("refused twice", 2), ("always refused", 99)):
            Utils.refusals, Utils.calls = refusals, 0
            subjects.append(kernel())
            try:
                outcome = subjects[-1].run
            except RuntimeError as error:
                outcome = f"raised: {error}"
            outcomes[label] = [outcome, Utils.calls, subjects[-1].module]
        # After giving up, the kernel is not left half-loaded: its next launch loads again.
        Utils.refusals, Utils.calls = 0, 0
        outcomes["next launch"] = [subjects[-1].run, Utils.calls, subjects[-1].module]
    finally:
        for subject in subjects:
            subject.module = None  # nothing for CompiledKernel.__del__ to unload through the real driver
        compiler.driver = real_driver
    return {
        "triton": triton.__version__,
        "hooked": hooked(compiler.CompiledKernel._init_handles),
        "outcomes": outcomes,
    }


def check_page_cache_release(checkpoint: str) -> dict[str, Any]:
    from sglang.srt.model_executor import model_runner

    advised = []
    real_fadvise = os.posix_fadvise

    def recording_fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append([os.readlink(f"/proc/self/fd/{fd}"), advice == os.POSIX_FADV_DONTNEED])
        real_fadvise(fd, offset, length, advice)

    # The real finalize_startup_weight_load (the end of an overlapped load), with stand-ins for its
    # collaborators: the load being committed and the distributed barrier after it.
    runner = model_runner.ModelRunner.__new__(model_runner.ModelRunner)
    runner.model_config = SimpleNamespace(model_path=checkpoint)
    finalized = []
    runner.startup_weight_load = SimpleNamespace(finalize=lambda: finalized.append(True))
    saved = {
        name: getattr(model_runner, name) for name in ("dist_barrier_after_load", "get_exec", "get_parallel")
    }
    model_runner.dist_barrier_after_load = lambda **kwargs: None
    model_runner.get_exec = lambda: SimpleNamespace(
        moe=SimpleNamespace(elastic_ep_backend=None, is_ep_joiner=False)
    )
    model_runner.get_parallel = lambda: SimpleNamespace(tp_rank=0)
    os.posix_fadvise = recording_fadvise
    try:
        runner.finalize_startup_weight_load()
    finally:
        os.posix_fadvise = real_fadvise
        for name, value in saved.items():
            setattr(model_runner, name, value)
    return {
        "hooked": [
            hooked(model_runner.ModelRunner.load_model),
            hooked(model_runner.ModelRunner.finalize_startup_weight_load),
        ],
        "finalized": finalized,
        "advised": advised,
        "startup_weight_load": runner.startup_weight_load,
    }


def check_sm_family_gate() -> dict[str, Any]:
    import sglang.srt.utils
    import torch
    from sglang.srt.model_loader import utils as loader_utils
    from sglang.srt.utils import common

    # Stand-in device: a GB10 (SM 12.1), already initialized so NVML is not asked.
    fakes = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "get_device_capability": lambda device=None: (12, 1),
    }
    saved = {name: getattr(torch.cuda, name) for name in fakes}
    saved_cuda_version = torch.version.cuda
    for name, fake in fakes.items():
        setattr(torch.cuda, name, fake)
    torch.version.cuda = "13.0"
    deep_gemm = loader_utils.deep_gemm_wrapper
    saved_deep_gemm = (deep_gemm.ENABLE_JIT_DEEPGEMM, deep_gemm.DEEPGEMM_SCALE_UE8M0)
    deep_gemm.ENABLE_JIT_DEEPGEMM, deep_gemm.DEEPGEMM_SCALE_UE8M0 = True, True
    try:
        # SGLang caches its probes; they may have answered "no GPU" during the imports.
        for probe in (common.is_cuda, common.is_sm120, common.is_sm121):
            probe.cache_clear()
        patched_get_sm = loader_utils.get_device_sm

        def requant(get_sm: Callable[[], int]) -> bool:
            loader_utils.get_device_sm = get_sm
            try:
                return bool(loader_utils.should_deepgemm_weight_requant_ue8m0([128, 128], grouped_moe=False))
            finally:
                loader_utils.get_device_sm = patched_get_sm

        return {
            "hooked": [hooked(common.is_sm120), hooked(loader_utils.get_device_sm)],
            "is_sm120": common.is_sm120(),
            "is_sm121": common.is_sm121(),
            "reexported": sglang.srt.utils.is_sm120 is common.is_sm120,
            "device_sm": [common.get_device_sm(), loader_utils.get_device_sm()],
            "requant_dense_fp8": {
                "patched": requant(patched_get_sm),
                "stock": requant(patched_get_sm.__wrapped__),
            },
        }
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)
        torch.version.cuda = saved_cuda_version
        deep_gemm.ENABLE_JIT_DEEPGEMM, deep_gemm.DEEPGEMM_SCALE_UE8M0 = saved_deep_gemm
        for probe in (common.is_cuda, common.is_sm120, common.is_sm121):
            probe.cache_clear()


def main() -> None:
    checkpoint = sys.argv[1]
    engine_standins.install()
    checks: dict[str, Callable[[], dict[str, Any]]] = {
        "served_aliases": check_served_aliases,
        "inline_system": check_inline_system,
        "kernel_load_guard": check_kernel_load_guard,
        "page_cache_release": lambda: check_page_cache_release(checkpoint),
        "sm_family_gate": check_sm_family_gate,
    }
    report: dict[str, Any] = {}
    for name, check in checks.items():
        # SGLang and its dependencies print to stdout while importing; keep stdout for the report.
        with contextlib.redirect_stdout(sys.stderr):
            try:
                report[name] = {"ok": check()}
            except Exception:
                report[name] = {"error": traceback.format_exc()}
    finder: Any = next(f for f in sys.meta_path if getattr(f, "_spark_overlay_finder", False))
    armed = [patch.hook for patch in finder.patches]
    report["armed"] = sorted(set(armed))
    print(json.dumps(report, default=repr))


if __name__ == "__main__":
    main()
