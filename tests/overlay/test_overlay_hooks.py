"""The shipped hooks against stand-in target modules of the same shape as the real ones, no SGLang.

kernel_load_guard and page_cache_release run in fresh interpreters behind the real start-up; the
pure parts of inline_system, served_aliases and sm_family_gate are called directly. The same hooks
against SGLang 0.5.23's real modules: test_overlay_engine.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from overlay_support import GB10_DEFAULTS_OFF, MASTER_ON, last_json, make_modules, make_overlay, run_python

from spark_compile.overlay.hooks import MARK, inline_system, served_aliases, sm_family_gate

# triton 3.x's shape: CompiledKernel._init_handles loads the binary through driver.active.utils.load_binary
# on first use of .run; here the driver refuses a configurable number of loads.
STAND_IN_TRITON = {
    "triton.runtime.driver": """
class _Utils:
    def __init__(self):
        self.refusals, self.error, self.calls = 0, "operation not permitted when stream is capturing", 0

    def get_device_properties(self, device):
        return {"max_shared_mem": 101376}

    def load_binary(self, name, kernel, shared, device):
        self.calls += 1
        if self.refusals:
            self.refusals -= 1
            raise RuntimeError("Triton Error [CUDA]: " + self.error)
        return ("cu_module", "cu_function", 32, 0, 1024)


class _Active:
    utils = _Utils()

    def get_current_device(self):
        return 0

    def launcher_cls(self, src, metadata):
        return "launcher"


class _Driver:
    active = _Active()


driver = _Driver()
""",
    "triton.compiler.compiler": """
from types import SimpleNamespace
from ..runtime.driver import driver


class CompiledKernel:
    def __init__(self, name):
        self.name, self.kernel = name, b"cubin"
        self.metadata = SimpleNamespace(shared=0)
        self.module = self.function = None

    def _init_handles(self):
        if self.module is not None:
            return
        device = driver.active.get_current_device()
        self._run = driver.active.launcher_cls(None, self.metadata)
        self.module, self.function, self.n_regs, self.n_spills, self.n_max_threads = (
            driver.active.utils.load_binary(self.name, self.kernel, self.metadata.shared, device))

    @property
    def run(self):
        self._init_handles()
        return self._run
""",
}

GUARD_SCRIPT = """
import json, sys, time
import triton.compiler.compiler as compiler
from triton.runtime.driver import driver
guard = sys.modules.get("spark_overlay.hooks.kernel_load_guard")
if guard is not None:
    guard.BASE_DELAY_SECONDS, guard.MAX_DELAY_SECONDS = 0.001, 0.004
sleeps = []
real_sleep = time.sleep
time.sleep = lambda seconds: (sleeps.append(seconds), real_sleep(seconds))[1]
utils = driver.active.utils
outcomes = []
for refusals, error in ((2, None), (99, None), (1, "out of memory")):
    utils.refusals, utils.calls = refusals, 0
    if error:
        utils.error = error
    del sleeps[:]
    kernel = compiler.CompiledKernel("_fwd_kernel")
    try:
        outcome = kernel.run
    except RuntimeError as caught:
        outcome = "raised: " + str(caught)
    outcomes.append([outcome, utils.calls, list(sleeps)])
print(json.dumps({"outcomes": outcomes, "hooked": getattr(compiler.CompiledKernel._init_handles,
                                                         "__spark_overlay_hook__", None)}))
"""


def _run_guard(tmp_path: Path, retries: str) -> tuple[Any, str]:
    site = make_overlay(tmp_path, recording=("engram_store",))
    fake = make_modules(tmp_path / "fake", STAND_IN_TRITON)
    result = run_python(
        GUARD_SCRIPT,
        cwd=tmp_path,
        path=[site, fake],
        env={**MASTER_ON, **GB10_DEFAULTS_OFF, "SPARK_KERNEL_LOAD_RETRIES": retries},
    )
    assert result.returncode == 0, result.stderr
    return last_json(result.stdout), result.stderr


def test_kernel_load_guard_retries_a_refused_load_then_gives_up_after_the_bound(tmp_path: Path) -> None:
    report, stderr = _run_guard(tmp_path, "3")
    assert report["hooked"] == "kernel_load_guard"
    refused, forever, other = report["outcomes"]
    # Two refusals, then the load goes through: three calls, two waits that double.
    assert refused == ["launcher", 3, [0.001, 0.002]]
    # Always refused: the first call plus 3 retries, then the driver's own error, unchanged.
    assert forever == [
        "raised: Triton Error [CUDA]: operation not permitted when stream is capturing",
        4,
        [0.001, 0.002, 0.004],
    ]
    # Any other failure is not retried.
    assert other == ["raised: Triton Error [CUDA]: out of memory", 1, []]
    assert stderr.count("load refused") == 5
    assert "retry 3/3" in stderr


def test_kernel_load_guard_is_off_at_zero_retries(tmp_path: Path) -> None:
    report, stderr = _run_guard(tmp_path, "0")
    assert report["hooked"] is None and "kernel_load_guard" not in stderr
    assert report["outcomes"][0][:2] == [
        "raised: Triton Error [CUDA]: operation not permitted when stream is capturing",
        1,
    ]


MODEL_RUNNER = """
from types import SimpleNamespace


class ModelRunner:
    def __init__(self, model_path, overlapped):
        self.model_config = SimpleNamespace(model_path=model_path)
        self.overlapped = overlapped
        self.startup_weight_load = None

    def load_model(self):
        if self.overlapped:
            self.startup_weight_load = object()  # placeholder weights; files still being read
        return "loaded"

    def finalize_startup_weight_load(self):
        self.startup_weight_load = None
"""

PAGE_CACHE_SCRIPT = """
import json, os, sys
from sglang.srt.model_executor.model_runner import ModelRunner
advised = []
real_fadvise = os.posix_fadvise
def recording_fadvise(fd, offset, length, advice):
    advised.append([os.readlink(f"/proc/self/fd/{fd}"), offset, length, advice == os.POSIX_FADV_DONTNEED])
    return real_fadvise(fd, offset, length, advice)
os.posix_fadvise = recording_fadvise
steps = {}
runner = ModelRunner(sys.argv[1], overlapped=False)
steps["load"] = [runner.load_model(), list(advised)]
del advised[:]
runner = ModelRunner(sys.argv[1], overlapped=True)
runner.load_model()
steps["overlapped_load"] = list(advised)
runner.finalize_startup_weight_load()
steps["finalize"] = list(advised)
print(json.dumps(steps))
"""


def test_page_cache_release_advises_dontneed_on_the_checkpoint_files_once_loaded(tmp_path: Path) -> None:
    checkpoint = tmp_path / "snapshot"
    (checkpoint / "draft").mkdir(parents=True)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for name in (
        "model-00001-of-00002.safetensors",
        "draft/model.safetensors",
        "config.json",
        "tokenizer.json",
    ):
        (checkpoint / name).write_bytes(b"\0" * 4096)
    # A HuggingFace snapshot links its files to blobs: the blob is what gets released.
    (blobs / "abc123").write_bytes(b"\0" * 8192)
    (checkpoint / "model-00002-of-00002.safetensors").symlink_to(blobs / "abc123")
    site = make_overlay(tmp_path, recording=("engram_store",))
    fake = make_modules(tmp_path / "fake", {"sglang.srt.model_executor.model_runner": MODEL_RUNNER})
    result = run_python(
        PAGE_CACHE_SCRIPT,
        cwd=tmp_path,
        path=[site, fake],
        env={**MASTER_ON, **GB10_DEFAULTS_OFF},
        args=[str(checkpoint)],
    )
    assert result.returncode == 0, result.stderr
    steps = last_json(result.stdout)
    # In path order: draft/ sorts before model-*; the symlink is released through its blob.
    released = [
        checkpoint / "draft" / "model.safetensors",
        checkpoint / "model-00001-of-00002.safetensors",
        blobs / "abc123",
    ]
    expected = [[str(path), 0, 0, True] for path in released]
    assert steps["load"] == ["loaded", expected]
    assert steps["overlapped_load"] == []
    assert steps["finalize"] == expected
    assert (
        result.stderr.count(f"overlay: page_cache_release: dropped 3 weight files (0.0 GiB) of {checkpoint}")
        == 2
    )


# inline_system's folding, on stand-ins for SGLang's pydantic messages.
@dataclass(frozen=True)
class Block:
    type: str
    text: str = ""

    def model_copy(self, update: dict[str, Any]) -> Block:
        return replace(self, **update)


@dataclass(frozen=True)
class Message:
    role: str
    content: Any = field(default="")

    def model_copy(self, update: dict[str, Any]) -> Message:
        return replace(self, **update)


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content.strip() or None
    return "\n".join(b.text for b in content if b.type == "text") or None


def _fold(*messages: Message) -> list[Message] | None:
    return inline_system.fold_system_notes(list(messages), _text, Block)


def test_inline_system_folds_notes_into_the_neighbouring_user_message() -> None:
    u1, a1, u2 = Message("user", "u1"), Message("assistant", "a1"), Message("user", "u2")
    note, lead = Message("system", "<n>1</n>"), Message("system", "lead")
    assert _fold(lead, u1, a1, u2) is None  # a leading system message is already at the top
    # Followed by a user message: prepended to it.
    assert _fold(lead, u1, a1, note, u2) == [lead, u1, a1, Message("user", "<n>1</n>\n\nu2")]
    # Followed by an assistant message or nothing: appended to the user message before it, so the
    # note sits at the same place in this turn's prompt and in the next turn's.
    assert _fold(u1, note) == [Message("user", "u1\n\n<n>1</n>")]
    assert _fold(u1, note, a1, u2) == [Message("user", "u1\n\n<n>1</n>"), a1, u2]
    # No user message next to it: a user message of its own, in place.
    assert _fold(u1, a1, note) == [u1, a1, Message("user", "<n>1</n>")]
    # Consecutive notes are joined; an empty one vanishes as in stock SGLang.
    assert (_fold(u1, a1, note, Message("system", "  "), Message("system", "<n>2</n>"), u2) or [])[-1] == Message(
        "user", "<n>1</n>\n<n>2</n>\n\nu2"
    )
    assert _fold(u1, a1, Message("system", ""), u2) == [u1, a1, u2]


def test_inline_system_keeps_tool_results_next_to_the_tool_calls() -> None:
    u1, call, note = (
        Message("user", "u1"),
        Message("assistant", [Block("tool_use")]),
        Message("system", "note"),
    )
    results = Message("user", [Block("tool_result"), Block("tool_result"), Block("text", "then this")])
    folded = _fold(u1, call, note, results)
    assert folded is not None
    assert folded[-1].content == [
        Block("tool_result"),
        Block("tool_result"),
        Block("text", "note\n\nthen this"),
    ]
    only_results = _fold(u1, call, note, Message("user", [Block("tool_result")]))
    assert only_results is not None and only_results[-1].content == [
        Block("tool_result"),
        Block("text", "note"),
    ]


def test_inline_system_joins_the_note_to_a_neighbouring_text_block() -> None:
    u1, a1, note = Message("user", "u1"), Message("assistant", "a"), Message("system", "note")
    # Read the same as the plain-text case: SGLang would join two text parts with a space.
    plain = _fold(u1, a1, note, Message("user", [Block("text", "u2")]))
    assert plain is not None and plain[-1].content == [Block("text", "note\n\nu2")]
    image_first = _fold(u1, a1, note, Message("user", [Block("image"), Block("text", "u2")]))
    assert image_first is not None
    assert image_first[-1].content == [Block("text", "note"), Block("image"), Block("text", "u2")]
    appended = _fold(Message("user", [Block("text", "u1")]), note)
    assert appended == [Message("user", [Block("text", "u1\n\nnote")])]


def test_served_aliases_are_read_from_the_flag_deduplicated() -> None:
    assert served_aliases.aliases_of({"SPARK_SERVED_ALIASES": ["a", " b", "", "a"]}) == ("a", "b")
    assert served_aliases.aliases_of({"SPARK_SERVED_ALIASES": []}) == ()


def test_sm_family_gate_widens_the_exact_sm120_checks() -> None:
    capability = [(12, 1)]
    torch = SimpleNamespace(cuda=SimpleNamespace(get_device_capability=lambda: capability[0]))
    common = ModuleType("sglang.srt.utils.common")
    common.torch = torch  # type: ignore[attr-defined]
    common.is_cuda = lambda: True  # type: ignore[attr-defined]
    common.is_sm120 = lambda: False  # type: ignore[attr-defined]
    sm_family_gate.apply(common, {})
    assert common.is_sm120() is True and getattr(common.is_sm120, MARK, None) == "sm_family_gate"
    loader_utils = ModuleType("sglang.srt.model_loader.utils")
    sms = iter([121, 120, 90, 130])
    loader_utils.get_device_sm = lambda: next(sms)  # type: ignore[attr-defined]
    sm_family_gate.apply(loader_utils, {})
    assert [loader_utils.get_device_sm() for _ in range(4)] == [120, 120, 90, 130]


def test_hook_implementations_import_only_the_standard_library(tmp_path: Path) -> None:
    code = """
import json, sys
before = set(sys.modules)  # whatever the interpreter itself loads (.pth files of site-packages)
from spark_overlay import bootstrap, cli
for hook in bootstrap.installed_hooks():
    bootstrap.load_hook(hook)
roots = {name: name.split(".")[0] for name in set(sys.modules) - before}
foreign = sorted(n for n, root in roots.items() if root not in sys.stdlib_module_names | {"spark_overlay"})
print(json.dumps(foreign))
"""
    make_overlay(tmp_path)
    result = run_python(code, cwd=tmp_path, path=[tmp_path])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    assert os.path.isdir(tmp_path / "spark_overlay" / "hooks")
