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
    assert result.stdout == (
        "profile: 4 changes\n"
        f"  engine.speculative.dspark_block_size: 5 → 15  ({WIDE}:5)\n"
        "    4 changes in 3 files, ranks 0-3\n"
        f"  engine.env.SGLANG_RAGGED_VERIFY_MODE: (unset) → compact  ({WIDE}:6)\n"
        "    3 changes in 3 files, ranks 0-3\n"
        f"  overlay.lookup_draft: (unset) → true  ({WIDE}:8)\n"
        "    5 changes in 4 files, ranks 0-3\n"
        f"  overlay.lookup_mode: (unset) → wide  ({WIDE}:9)\n"
        "    2 changes in 2 files, ranks 0-3\n"
        # The reference's description names its block size: the diff says it is now stale.
        "  stale: description still says 'DSpark block 5', but engine.speculative.dspark_block_size is now 15  "
        "(spec/profiles/dsv41-4spark.yaml:11)\n"
        "artifacts: 14 changes in 6 files; --detail lists each\n"  # 4 + 3 + 5 + 2: none derived from elsewhere
    )
    # Every artifact change is one of those settings as a file renders it (--detail nests each under its key).
    detail = run_cli("diff", "--detail", "spec/profiles/dsv41-4spark.yaml", WIDE)
    assert detail.returncode == 1, detail.stderr
    changes: list[str] = []
    for line in detail.stdout.splitlines():
        if line.startswith("        "):
            changes[-1] += line
        elif line.startswith("      "):
            changes.append(line)
    assert len(changes) == 14  # the count the default output gives
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
