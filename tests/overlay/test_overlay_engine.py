"""The shipped hooks against SGLang 0.5.23's real modules, on the CPU, in the engine venv.

One engine process (engine_checks.py) starts with the overlay armed by its sitecustomize, as in the
serving image, imports the real target modules through the overlay's finder and runs every check; each
test here asserts on one check's report. The interpreter comes from $ENGINE_PYTHON (made by
.ci/install-engine with .ci/engine-extra-requirements.txt); without it the tests fail under CI and are
skipped elsewhere.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from overlay_support import GB10_DEFAULTS_OFF, MASTER_ON, clean_env, engine_python, last_json, make_overlay

pytestmark = pytest.mark.engine

HERE = Path(__file__).resolve().parent
SERVED = "deepseek-v4.1-flash"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = engine_python()
    tmp = tmp_path_factory.mktemp("engine")
    # The overlay as the image has it, plus a no-op Engram hook: Engram has no "off" value and this
    # overlay ships no Engram implementation (the other GB10-only hooks are turned off by flag).
    site = make_overlay(tmp, recording=("engram_store",))
    checkpoint = tmp / "checkpoint"
    checkpoint.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "config.json"):
        (checkpoint / name).write_bytes(b"\0" * 65536)
    env = clean_env({
        **MASTER_ON, **GB10_DEFAULTS_OFF,
        "SPARK_SERVED_ALIASES": "alias-a,alias-b", "SPARK_KERNEL_LOAD_RETRIES": "3",
        "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1",
    })
    result = subprocess.run([python, "-s", str(HERE / "engine_checks.py"), str(checkpoint)], env=env, cwd=tmp,
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-5000:]
    report: dict[str, Any] = last_json(result.stdout)
    report["stderr"] = result.stderr
    report["checkpoint"] = str(checkpoint)
    return report


def _ok(engine: dict[str, Any], check: str) -> dict[str, Any]:
    outcome = engine[check]
    assert "error" not in outcome, outcome.get("error")
    return outcome["ok"]  # type: ignore[no-any-return]


def test_start_up_armed_the_hooks_and_said_so(engine: dict[str, Any]) -> None:
    assert engine["armed"] == ["engram_store", "indexer_schedule", "inline_system", "kernel_load_guard",
                               "page_cache_release", "request_guard", "served_aliases", "sm120_prefill_pages",
                               "sm_family_gate"]
    assert engine["stderr"].splitlines()[0] == (
        "overlay: 9 hooks armed: engram_store, indexer_schedule, sm120_prefill_pages, page_cache_release, "
        "request_guard, served_aliases, kernel_load_guard, inline_system, sm_family_gate"
    )
    assert "overlay: Served-model aliases: alias-a, alias-b" in engine["stderr"]


def test_aliases_are_listed_retrievable_and_served_by_the_one_model(engine: dict[str, Any]) -> None:
    report = _ok(engine, "served_aliases")
    assert report["routes_hooked"] == ["/v1/models", "/v1/models/{model:path}"]
    # The real app's /v1/models: the served model, then each alias, rooted at the served model.
    assert report["models"] == [[SERVED, SERVED], ["alias-a", SERVED], ["alias-b", SERVED]]
    assert report["retrieve"] == {"alias-a": [200, "alias-a"], "alias-b": [200, "alias-b"],
                                  SERVED: [200, SERVED], "no-such-model": [404, None]}
    # The real Responses handler: an alias passes the unknown-model check as the served name does (the
    # 400 is the next validation step), an unknown model still gets its 404.
    responses = report["responses"]
    assert responses["alias-a"] == responses[SERVED]
    assert responses["alias-a"][0] == 400 and "tool_choice" in responses["alias-a"][1]
    assert responses["no-such-model"] == [404, "The model 'no-such-model' does not exist"]
    # Every OpenAI-compatible handler resolves the alias (and alias:adapter) to the served model.
    assert report["parse"] == {"alias-b": [SERVED, None], "alias-b:my-lora": [SERVED, "my-lora"],
                               SERVED: [SERVED, None], "other:lora": ["other", "lora"]}


def test_mid_conversation_system_notes_stay_in_place_and_each_prompt_extends_the_last(
    engine: dict[str, Any],
) -> None:
    report = _ok(engine, "inline_system")
    assert report["hooked"] == "inline_system"
    # The DeepSeek-style template hoists system notes itself, yet passes SGLang's inline-system probe.
    assert report["probe_passes_hoisting_template"] is True
    for supports_inline in (False, True):
        patched = report[f"patched/inline={supports_inline}"]
        stock = report[f"stock/inline={supports_inline}"]
        # Turn N's rendered prompt is a prefix of turn N+1's with the hook; stock SGLang rewrites the top.
        assert patched["prefix_chain"] == [True, True, True]
        assert stock["prefix_chain"] == [False, False, False]
        top = "<bos>You are terse.\n<total_tokens>900 tokens left</total_tokens>"
        assert stock["last_prompt"].startswith(top)
        roles = [role for role, _ in patched["last_messages"]]
        assert roles == ["system", "user", "assistant", "tool", *["user", "assistant"] * 2, "user"]
        assert patched["last_messages"][0] == ["system", "You are terse."]
        # After the tool result (kept next to its call), before the next user turns.
        assert patched["last_messages"][4] == ["user", "<total_tokens>900 tokens left</total_tokens>"]
        assert patched["last_messages"][6] == [
            "user", "<total_tokens>800 tokens left</total_tokens>\n\nAnd now?"
        ]
        # A list-content turn: the note joins its text block, which SGLang then sends as plain text.
        assert patched["last_messages"][8] == [
            "user", "<total_tokens>700 tokens left</total_tokens>\n\nThanks"
        ]


def test_kernel_load_guard_retries_the_real_compiled_kernel_and_gives_up_after_the_bound(
    engine: dict[str, Any],
) -> None:
    report = _ok(engine, "kernel_load_guard")
    assert report["hooked"] == "kernel_load_guard"
    refusal = "Triton Error [CUDA]: operation not permitted when stream is capturing"
    # triton's own CompiledKernel._init_handles, its driver fault-injected.
    assert report["outcomes"] == {
        "refused twice": ["launcher", 3, "cu_module"],
        "always refused": [f"raised: {refusal}", 4, None],
        "next launch": ["launcher", 1, "cu_module"],
    }
    assert engine["stderr"].count("load refused") == 5


def test_capability_gate_accepts_sm_12_1(engine: dict[str, Any]) -> None:
    report = _ok(engine, "sm_family_gate")
    assert report["hooked"] == ["sm_family_gate", "sm_family_gate"]
    assert report["is_sm120"] is True and report["is_sm121"] is True
    assert report["reexported"] is True  # `from sglang.srt.utils import is_sm120` gets the patched probe
    assert report["device_sm"] == [121, 120]
    # Dense block-FP8 weights keep CUTLASS's FP32 scales on a GB10 as on an SM 12.0 card.
    assert report["requant_dense_fp8"] == {"patched": False, "stock": True}


def test_page_cache_release_advises_dontneed_on_the_checkpoint_files(engine: dict[str, Any]) -> None:
    report = _ok(engine, "page_cache_release")
    assert report["hooked"] == ["page_cache_release", "page_cache_release"]
    assert report["finalized"] == [True] and report["startup_weight_load"] is None
    checkpoint = Path(engine["checkpoint"])
    shards = [checkpoint / f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
    assert report["advised"] == [[str(shard), True] for shard in shards]
    assert f"dropped 2 weight files (0.0 GiB) of {checkpoint} from the page cache" in engine["stderr"]
