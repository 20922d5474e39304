"""The registry walked through the runtime parser, and the `flags` command the compiler's preflight asks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from overlay_support import MASTER_ON, clean_env, make_overlay, run_python

from spark_compile.overlay import bootstrap, gates, registry, settings
from spark_compile.overlay.registry import FLAGS, HOOKS, REGISTRY_VERSION, Flag
from spark_compile.overlay.values import parse_value

SHIPPED = ["page_cache_release", "served_aliases", "kernel_load_guard", "inline_system", "sm_family_gate"]


@pytest.mark.parametrize("flag", FLAGS, ids=lambda flag: flag.name)
def test_every_default_parses_through_the_runtime_parser(flag: Flag) -> None:
    value = settings.parse_flag(flag, flag.default)
    if flag.default:
        assert value == parse_value(flag, flag.default)
    # Set explicitly to its default, a flag means the same as unset.
    assert settings.parse_environment({flag.name: flag.default or ""}).values[flag.name] == value


def test_an_empty_environment_gives_every_flag_its_default() -> None:
    parsed = settings.parse_environment({"PATH": "/bin"})
    assert list(parsed.values) == [flag.name for flag in FLAGS]
    assert parsed.explicit == {}
    assert parsed.values["SPARK_ROCE_AR_MAX"] == 1 << 20 and parsed.values["SPARK_SERVED_ALIASES"] == []
    assert parsed.values["SPARK_ENGRAM_DIR"] is None and parsed.values["SPARK_KERNEL_LOAD_RETRIES"] == 5


def test_every_hook_that_patches_something_has_a_gate() -> None:
    assert set(gates.GATES) == set(gates.armable_hooks()) == {n for n, h in HOOKS.items() if h.targets}
    for name, gate in gates.GATES.items():
        assert all(flag in registry.FLAGS_BY_NAME for flag in gate.flags), name
    # The master switch's pseudo-hook patches nothing: it is not armable.
    assert HOOKS["overlay"].targets == ()


def test_hooks_enabled_at_the_defaults() -> None:
    defaults = settings.parse_environment({}).values
    assert gates.enabled_hooks(defaults) == [
        "engram_store",
        "engram_prefetch",
        "indexer_schedule",
        "sm120_prefill_pages",
        "prefill_flush",
        "page_cache_release",
        "roce_collectives",
        "roce_health",
        "request_guard",
        "kernel_load_guard",
        "inline_system",
        "sm_family_gate",
    ]
    wide = settings.parse_environment({"SPARK_LOOKUP_DRAFT": "1", "SPARK_LOOKUP_MODE": "wide"}).values
    assert {"lookup_draft", "lookup_wide"} <= set(gates.enabled_hooks(wide))
    replace = settings.parse_environment({"SPARK_LOOKUP_DRAFT": "1"}).values
    assert "lookup_wide" not in gates.enabled_hooks(replace)


def test_the_shipped_hooks_are_the_ones_that_need_no_gb10() -> None:
    assert bootstrap.installed_hooks() == SHIPPED
    assert sorted(SHIPPED) == sorted(n for n, h in HOOKS.items() if h.targets and not h.needs_gb10)


def test_the_flags_command_lists_the_registry_under_both_package_names(tmp_path: Path) -> None:
    expected = [f"registry {REGISTRY_VERSION}", *(flag.name for flag in FLAGS)]
    # As the image has it: a top-level spark_overlay.
    make_overlay(tmp_path)
    top_level = run_python(
        "import runpy; runpy.run_module('spark_overlay', run_name='__main__')",
        cwd=tmp_path,
        path=[tmp_path],
        args=["flags"],
    )
    # As the compiler has it.
    installed = subprocess.run(
        [sys.executable, "-m", "spark_compile.overlay", "flags"],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    for result in (top_level, installed):
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == expected


def test_the_flags_json_carries_kind_default_hook_since_and_the_shipped_hooks(tmp_path: Path) -> None:
    make_overlay(tmp_path, stand_ins=False)
    result = run_python(
        "import runpy; runpy.run_module('spark_overlay', run_name='__main__')",
        cwd=tmp_path,
        path=[tmp_path],
        args=["flags", "--json"],
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["registry_version"] == REGISTRY_VERSION
    fields = ("name", "kind", "default", "hook", "since", "targets")
    assert [tuple(entry[k] for k in fields) for entry in document["flags"]] == [
        (f.name, f.kind, f.default, f.hook, f.since, list(f.targets)) for f in FLAGS
    ]
    assert [h["name"] for h in document["hooks"] if h["installed"]] == SHIPPED
    assert {h["name"]: h["targets"] for h in document["hooks"]} == {
        n: list(h.targets) for n, h in HOOKS.items() if h.targets
    }


def test_the_check_command_reports_what_start_up_would_do(tmp_path: Path) -> None:
    make_overlay(tmp_path, recording=("engram_store",))
    run = "import runpy; runpy.run_module('spark_overlay', run_name='__main__')"
    off = run_python(run, cwd=tmp_path, path=[tmp_path], args=["check", "--json"])
    assert (off.returncode, json.loads(off.stdout)) == (0, {"active": False, "hooks": [], "errors": []})
    env = {**MASTER_ON, "SPARK_ROCE_AG": "0", "SPARK_PREFILL_FLUSH_TOKENS": "0", "SPARK_ENGRAM_PREFETCH": "0"}
    on = run_python(run, cwd=tmp_path, path=[tmp_path], env=env, args=["check"])
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == (
        "overlay: would arm 8 hooks: engram_store, indexer_schedule, sm120_prefill_pages, page_cache_release, "
        "request_guard, kernel_load_guard, inline_system, sm_family_gate"
    )
    env["SPARK_ROCE_AR"] = "1"
    bad = run_python(run, cwd=tmp_path, path=[tmp_path], env=env, args=["check", "--json"])
    assert bad.returncode == 78
    assert [line.split(",")[0] for line in json.loads(bad.stdout)["errors"]] == [
        "overlay: refusing GB10-only hook roce_collectives", "overlay: refusing GB10-only hook roce_health"
    ]


def test_lookup_wide_patches_the_engram_layer_first_and_keeps_registry_order_elsewhere() -> None:
    wide = settings.parse_environment({"SPARK_LOOKUP_DRAFT": "1", "SPARK_LOOKUP_MODE": "wide",
                                       "SPARK_STEP_TIMERS": "1"}).values
    order = gates.patch_order(gates.enabled_hooks(wide))
    engram = [hook for hook, target in order if target == "sglang.srt.layers.engram"]
    assert engram == ["lookup_wide", "engram_store", "step_timers"]
    runner = [hook for hook, target in order if target == "sglang.srt.model_executor.model_runner"]
    assert runner == ["prefill_flush", "page_cache_release", "roce_health"]
