"""Wide mode as one switch: the release diff of turning lookup-wide mode on over the reference deployment is
exactly the switch and the settings SC226 asks for (the negative profile wide-mode-one-switch.yaml shows the
switch alone failing check, with those settings in its hints)."""

from __future__ import annotations

from conftest import run_cli

WIDE = "tests/profiles/positive/dsv41-wide-mode.yaml"


# Every rendered trace of the four settings: the engine flag, the engine variable, the overlay variables.
TRACES = ("dspark-block-size", "SGLANG_RAGGED_VERIFY_MODE", "SPARK_LOOKUP_DRAFT", "SPARK_LOOKUP_MODE")


def test_turning_wide_mode_on_is_exactly_its_settings() -> None:
    result = run_cli("diff", "spec/profiles/dsv41-4spark.yaml", WIDE)
    assert result.returncode == 1, result.stderr
    profile, artifacts = result.stdout.split("artifacts:", 1)
    assert profile == (
        "profile: 4 changes\n"
        f"  engine.speculative.dspark_block_size: 5 → 15  ({WIDE}:5)\n"
        f"  engine.env.SGLANG_RAGGED_VERIFY_MODE: (unset) → compact  ({WIDE}:6)\n"
        f"  overlay.lookup_draft: (unset) → true  ({WIDE}:8)\n"
        f"  overlay.lookup_mode: (unset) → wide  ({WIDE}:9)\n"
        # The reference's description names its block size: the diff says it is now stale.
        "  stale: description still says 'DSpark block 5', but engine.speculative.dspark_block_size is now 15  "
        "(spec/profiles/dsv41-4spark.yaml:11)\n"
    )
    # Every artifact change is one of those settings as a file renders it.
    changes: list[str] = []
    for line in artifacts.splitlines()[1:]:
        if line.startswith("    "):
            changes[-1] += line
        else:
            changes.append(line)
    assert changes
    for change in changes:
        # The capacity prediction follows the block size too (SGLang inflates the KV pool per draft token).
        assert any(trace in change for trace in (*TRACES, "predicted_full_token")), change
    for trace in TRACES:
        assert any(trace in change for change in changes), trace


def test_the_switch_alone_fails_check_with_the_fix_in_the_hints() -> None:
    result = run_cli("check", "tests/profiles/negative/wide-mode-one-switch.yaml")
    assert result.returncode == 1
    assert result.stdout.count("SC226 error") == 2
    assert "hint: add engine.env.SGLANG_RAGGED_VERIFY_MODE: compact" in result.stdout
    assert "hint: set engine.speculative.dspark_block_size: 15" in result.stdout


def test_the_1_7_release_ran_wide_mode_with_its_settings() -> None:
    result = run_cli("check", "spec/profiles/releases/production-1.7.yaml")
    assert result.returncode == 0, result.stdout
