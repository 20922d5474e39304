"""The overlay's start-up and import-hook runtime, in fresh interpreters, with no SGLang anywhere.

Each scenario starts Python with the activation directory (overlay/site, or a copy's) on PYTHONPATH,
as the serving image does, next to fake target modules named like SGLang's.
"""

from __future__ import annotations

from pathlib import Path

from overlay_support import (
    ACTIVATION_DIR,
    GB10_DEFAULTS_OFF,
    MASTER_ON,
    fake_target,
    last_json,
    make_modules,
    make_overlay,
    run_python,
)

MODEL_RUNNER = "sglang.srt.model_executor.model_runner"
SCHEDULER = "sglang.srt.managers.scheduler"
ENGRAM = "sglang.srt.layers.engram"
TARGETS = (MODEL_RUNNER, SCHEDULER, ENGRAM, "sglang.srt.models.deepseek_v4")

# Prints, as JSON on the last line: the hook calls so far, what each hook saw, executions per module,
# and how many overlay finders sit on sys.meta_path.
REPORT = """
import builtins, json, sys
calls = sys.modules.get("spark_overlay.hooks._calls")
print(json.dumps({
    "calls": list(calls.CALLS) if calls else [],
    "seen": list(calls.SEEN) if calls else [],
    "runs": dict(getattr(builtins, "_fake_runs", {})),
    "finders": sum(1 for f in sys.meta_path if getattr(f, "_spark_overlay_finder", False)),
    "overlay_loaded": any(name.split(".")[0] == "spark_overlay" for name in sys.modules),
}))
"""


def _fakes(tmp: Path) -> Path:
    return make_modules(tmp / "fake", {name: fake_target(name) for name in TARGETS})


def test_master_switch_off_does_nothing_at_all(tmp_path: Path) -> None:
    fake = _fakes(tmp_path)
    code = f"import {MODEL_RUNNER}\n{REPORT}"
    # Unset, then empty: even a malformed flag and an unknown one are ignored while the switch is off.
    for env in ({}, {"SPARK_ENGRAM_DIR": "", "SPARK_ROCE_AR_MAX": "1MQ", "SPARK_NOT_A_FLAG": "1"}):
        result = run_python(code, cwd=tmp_path, path=[ACTIVATION_DIR, fake], env=env)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        report = last_json(result.stdout)
        assert report == {
            "calls": [],
            "seen": [],
            "runs": {MODEL_RUNNER: 1},
            "finders": 0,
            "overlay_loaded": False,
        }


def test_hooks_fire_once_in_registry_order_right_after_their_module_executes(tmp_path: Path) -> None:
    site = make_overlay(
        tmp_path,
        recording=(
            "engram_staged",
            "engram_prefetch",
            "prefill_flush",
            "page_cache_release",
            "late_tail",
            "roce_collectives",
            "roce_health",
        ),
    )
    fake = _fakes(tmp_path)
    env = {**MASTER_ON, "SPARK_ENGRAM_MODE": "staged", "SPARK_LATE_TAIL_SKIP": "1"}
    code = f"""
import json, sys
calls = sys.modules["spark_overlay.hooks._calls"].CALLS
before = list(calls)
import {MODEL_RUNNER}
after_first = list(calls)
import {MODEL_RUNNER}
from sglang.srt.model_executor import model_runner
after_second = list(calls)
import {SCHEDULER}
print(json.dumps([before, after_first, after_second]))
{REPORT}"""
    result = run_python(code, cwd=tmp_path, path=[site, fake], env=env)
    assert result.returncode == 0, result.stderr
    before, after_first, after_second = last_json(result.stdout.strip().rsplit("\n", 1)[0])
    report = last_json(result.stdout)
    assert before == []
    # model_runner is the target of five armed hooks: they run in the registry's order, once.
    assert after_first == [
        f"{hook}@{MODEL_RUNNER}"
        for hook in ("engram_staged", "prefill_flush", "page_cache_release", "roce_health", "late_tail")
    ]
    assert after_second == after_first
    assert report["calls"][5:] == [f"engram_prefetch@{SCHEDULER}", f"late_tail@{SCHEDULER}"]
    assert set(report["seen"]) == {True}  # each hook ran after the module's body
    assert report["runs"] == {MODEL_RUNNER: 1, SCHEDULER: 1}
    assert report["finders"] == 1
    # One summary line, naming the armed hooks in registry order; nothing else on stderr.
    assert result.stderr.splitlines() == [
        "overlay: 13 hooks armed: engram_staged, engram_prefetch, indexer_schedule, sm120_prefill_pages, "
        "prefill_flush, page_cache_release, roce_collectives, roce_health, request_guard, late_tail, "
        "kernel_load_guard, inline_system, sm_family_gate"
    ]


def test_targets_imported_before_activation_are_patched_at_once_and_activation_is_idempotent(
    tmp_path: Path,
) -> None:
    make_overlay(tmp_path, recording=("engram_store",))
    fake = _fakes(tmp_path)
    env = {**MASTER_ON, **GB10_DEFAULTS_OFF}
    # No activation directory on the path: the script imports a target, then activates by hand.
    code = f"""
import os, sys
import {ENGRAM}
from spark_overlay import bootstrap
first = bootstrap.activate()
second = bootstrap.activate()
assert first.hooks == second.hooks, (first, second)
import {ENGRAM}
{REPORT}"""
    result = run_python(code, cwd=tmp_path, path=[tmp_path, fake], env=env)
    assert result.returncode == 0, result.stderr
    report = last_json(result.stdout)
    assert report["calls"] == [f"engram_store@{ENGRAM}"]
    assert report["runs"] == {ENGRAM: 1} and report["finders"] == 1
    assert result.stderr.count("hooks armed") == 1


def test_reload_re_executes_the_module_but_does_not_rerun_its_hooks(tmp_path: Path) -> None:
    site = make_overlay(tmp_path, recording=("engram_store",))
    fake = _fakes(tmp_path)
    code = f"""
import importlib
import {ENGRAM} as engram
importlib.reload(engram)
importlib.reload(engram)
{REPORT}"""
    result = run_python(code, cwd=tmp_path, path=[site, fake], env={**MASTER_ON, **GB10_DEFAULTS_OFF})
    assert result.returncode == 0, result.stderr
    report = last_json(result.stdout)
    assert report["runs"] == {ENGRAM: 3}
    assert report["calls"] == [f"engram_store@{ENGRAM}"]


def test_a_malformed_flag_stops_start_up_naming_flag_value_and_expectation(tmp_path: Path) -> None:
    result = run_python(
        "print('the program ran')",
        cwd=tmp_path,
        path=[ACTIVATION_DIR],
        env={**MASTER_ON, "SPARK_ROCE_AR_MAX": "1MQ"},
    )
    assert result.returncode == 78
    assert result.stdout == ""
    assert (
        "overlay: SPARK_ROCE_AR_MAX='1MQ' is malformed: '1MQ' is not a size: expected an integer"
        in result.stderr
    )
    assert "refusing to start" in result.stderr
    assert "Traceback" not in result.stderr and "Fatal Python error" not in result.stderr


def test_malformed_values_of_each_kind_are_refused(tmp_path: Path) -> None:
    cases = {
        "SPARK_KERNEL_LOAD_RETRIES": ("five", "expected a whole number"),
        "SPARK_ENGRAM_THREADS": ("0", "below its minimum 1"),
        "SPARK_ENGRAM_CACHE_GB": ("4GB", "expected a number"),
        "SPARK_PAGE_CACHE_RELEASE": ("yes", "expected one of 0, 1"),
        "SPARK_ENGRAM_MODE": ("remote", "expected one of hostnode, staged"),
        "SPARK_ENGRAM_ROWS": ("1:5:2", "ends before it starts"),
        "SPARK_STEP_TIMERS_EVERY": ("", "set but empty"),
    }
    env = {**MASTER_ON, **{name: value for name, (value, _) in cases.items()}}
    result = run_python("print('ran')", cwd=tmp_path, path=[ACTIVATION_DIR], env=env)
    assert result.returncode == 78
    # Every problem is reported at once, one line each.
    for name, (value, expected) in cases.items():
        line = next((ln for ln in result.stderr.splitlines() if ln.startswith(f"overlay: {name}=")), "")
        assert f"{name}={value!r}" in line and expected in line, (name, result.stderr)


def test_an_unknown_spark_name_stops_start_up_with_a_suggestion(tmp_path: Path) -> None:
    result = run_python(
        "print('ran')",
        cwd=tmp_path,
        path=[ACTIVATION_DIR],
        env={**MASTER_ON, "SPARK_SERVED_ALIAS": "a,b", "SPARK_XYZZY": "1"},
    )
    assert result.returncode == 78 and result.stdout == ""
    assert (
        "overlay: unknown flag SPARK_SERVED_ALIAS: registry 1.7.1 has no such SPARK_* variable; "
        "did you mean SPARK_SERVED_ALIASES?"
    ) in result.stderr
    assert "unknown flag SPARK_XYZZY" in result.stderr and "python -m spark_overlay flags" in result.stderr


def test_a_switch_whose_requirement_is_off_is_refused(tmp_path: Path) -> None:
    result = run_python(
        "print('ran')",
        cwd=tmp_path,
        path=[ACTIVATION_DIR],
        env={**MASTER_ON, "SPARK_LATE_TAIL_SKIP_ALL": "1"},
    )
    assert result.returncode == 78
    assert (
        "overlay: SPARK_LATE_TAIL_SKIP_ALL=1 needs SPARK_LATE_TAIL_SKIP=1, but SPARK_LATE_TAIL_SKIP is '0'"
        in result.stderr
    )


def test_an_enabled_gb10_only_hook_is_refused_naming_flag_and_hook(tmp_path: Path) -> None:
    # An overlay that ships an Engram hook (a stand-in here) refuses exactly the hook it lacks...
    site = make_overlay(tmp_path, recording=("engram_store",))
    result = run_python(
        "print('ran')",
        cwd=tmp_path,
        path=[site],
        env={**MASTER_ON, **GB10_DEFAULTS_OFF, "SPARK_MXFP8_BACKEND": "b12x"},
    )
    assert result.returncode == 78 and result.stdout == ""
    refusals = [line for line in result.stderr.splitlines() if line.startswith("overlay: refusing GB10")]
    assert refusals == [
        "overlay: refusing GB10-only hook mxfp8, enabled by SPARK_MXFP8_BACKEND=b12x: "
        "its implementation is not installed in this overlay (no module spark_overlay.hooks.mxfp8; "
        "it patches sglang.srt.layers.quantization.fp8_utils); "
        "turn the flag off or use an image whose overlay ships it"
    ]
    # ... and the shipped overlay refuses the Engram hook that the default mode enables.
    result = run_python(
        "print('ran')", cwd=tmp_path, path=[ACTIVATION_DIR], env={**MASTER_ON, **GB10_DEFAULTS_OFF}
    )
    assert result.returncode == 78
    assert "refusing GB10-only hook engram_store, enabled by SPARK_ENGRAM_MODE=hostnode" in result.stderr


def test_a_failing_hook_stops_the_process_naming_hook_and_module(tmp_path: Path) -> None:
    site = make_overlay(tmp_path, failing=("engram_store",))
    fake = _fakes(tmp_path)
    env = {**MASTER_ON, **GB10_DEFAULTS_OFF}
    # Not even a guarded import keeps going: the error is not an ImportError.
    code = f"""
try:
    import {ENGRAM}
except ImportError:
    print("carried on without the module")
print("carried on")
"""
    result = run_python(code, cwd=tmp_path, path=[site, fake], env=env)
    assert result.returncode == 1 and result.stdout == ""
    message = f"overlay: hook engram_store failed on module {ENGRAM}: ValueError: boom from engram_store"
    assert f"spark_overlay.errors.OverlayHookError: {message}" in result.stderr
    # A caller that swallows everything does not get a stock module either: it is not left imported,
    # and the hook stays armed for the next attempt.
    code = f"""
import json, sys
from spark_overlay.errors import OverlayHookError
outcomes = []
for _ in range(2):
    try:
        import {ENGRAM}
        outcomes.append("imported")
    except Exception as error:
        outcomes.append(type(error).__name__ + ":" + str(isinstance(error, RuntimeError)))
print(json.dumps([outcomes, "{ENGRAM}" in sys.modules]))
"""
    result = run_python(code, cwd=tmp_path, path=[site, fake], env=env)
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == [["OverlayHookError:True", "OverlayHookError:True"], False]


def test_a_hook_failing_on_an_already_imported_module_ends_the_process(tmp_path: Path) -> None:
    make_overlay(tmp_path, failing=("engram_store",))
    fake = _fakes(tmp_path)
    code = f"""
import {ENGRAM}
from spark_overlay import bootstrap
bootstrap.start()
print("carried on")
"""
    result = run_python(code, cwd=tmp_path, path=[tmp_path, fake], env={**MASTER_ON, **GB10_DEFAULTS_OFF})
    assert result.returncode == 70 and result.stdout == ""
    assert f"overlay: hook engram_store failed on module {ENGRAM}: ValueError: boom" in result.stderr


def test_the_shadowed_sitecustomize_still_runs(tmp_path: Path) -> None:
    system = tmp_path / "system-site"
    system.mkdir()
    (system / "sitecustomize.py").write_text("import builtins\nbuiltins.SHADOWED_RAN = True\n")
    site = make_overlay(tmp_path, recording=("engram_store",))
    code = (
        "import builtins, sys\n"
        "print(getattr(builtins, 'SHADOWED_RAN', False), sys.modules['sitecustomize'].__file__)"
    )
    for env in ({}, {**MASTER_ON, **GB10_DEFAULTS_OFF}):
        result = run_python(code, cwd=tmp_path, path=[site, system], env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["True", str(site / "sitecustomize.py")]


def test_the_overlay_arms_its_own_copy_whatever_its_folder_is_called(tmp_path: Path) -> None:
    # The repository's folder is overlay/; the activation file still loads it as spark_overlay.
    site = tmp_path / "copy" / "not_named_spark_overlay"
    make_overlay(tmp_path / "copy", recording=("engram_store",)).parent.rename(site)
    code = "import sys\nprint(sys.modules['spark_overlay'].__path__[0])"
    result = run_python(code, cwd=tmp_path, path=[site / "site"], env={**MASTER_ON, **GB10_DEFAULTS_OFF})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(site)


def test_a_hooked_module_keeps_its_loaders_services(tmp_path: Path) -> None:
    # inspect, linecache and importlib.resources ask the loader: the wrapper passes them through.
    site = make_overlay(tmp_path, recording=("engram_store",))
    fake = _fakes(tmp_path)
    code = f"""
import inspect, json
import {ENGRAM} as engram
loader = engram.__spec__.loader
print(json.dumps([type(loader).__name__, "EXECUTED = True" in inspect.getsource(engram),
                  loader.is_package("{ENGRAM}"), loader.get_filename("{ENGRAM}") == engram.__file__]))
"""
    result = run_python(code, cwd=tmp_path, path=[site, fake], env={**MASTER_ON, **GB10_DEFAULTS_OFF})
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == ["HookedLoader", True, False, True]
