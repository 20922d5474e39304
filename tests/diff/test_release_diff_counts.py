"""The 1.6 → 1.7 diff lists each real change once, and every artifact change names the profile key behind it.

The lists below were written by hand from reading spec/profiles/releases/production-1.6.yaml and
production-1.7.yaml (and, for the block size 1.6 inherits, production-1.1.yaml:58), not from the diff's
output: 1.7 sets its release label, its image, the block size 15, SGLANG_RAGGED_VERIFY_MODE and five
overlay switches, and writes new release notes. Where each real change lands follows from what the plan
renders for a flag (docker-run.sh, fleet.env's dry-run argv, plan.json's argv), a container variable (its env
file, fleet.env's dry-run environment, plan.json's env) and an overlay switch (also the README's overlay
table, fleet.env's name list and hook count); the image also shows in the README, fleet.env and plan.json.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

from conftest import run_cli

SIDES = ("spec/profiles/releases/production-1.6.yaml", "spec/profiles/releases/production-1.7.yaml")
FLAGS = ["overlay.lookup_draft", "overlay.lookup_mode", "overlay.lookup_sync_gate", "overlay.lookup_narrow_slots",
         "overlay.lookup_fused_c2"]
# Every profile value 1.7 changes, in the order 1.7 writes them.
PROFILE = ["release", "engine.image", "engine.speculative.dspark_block_size", "engine.env.SGLANG_RAGGED_VERIFY_MODE",
           *FLAGS, "release_notes.date", "release_notes.reason"]
# Each artifact change: (file, key) → the profile key(s) it comes from.
IMAGE, BLOCK, RAGGED = "engine.image", "engine.speculative.dspark_block_size", "engine.env.SGLANG_RAGGED_VERIFY_MODE"
ARTIFACTS = Counter({
    ("docker-run.sh", "", IMAGE): 1, ("README.md", "", IMAGE): 1, ("fleet/fleet.env", "image", IMAGE): 1,
    ("fleet/fleet.env", "rank_docker", IMAGE): 1, ("plan.json", "image", IMAGE): 1,
    ("plan.json", "ranks[].docker_argv", IMAGE): 1,
    ("docker-run.sh", "", BLOCK): 1, ("fleet/fleet.env", "rank_docker", BLOCK): 1,
    ("plan.json", "ranks[].docker_argv", BLOCK): 1, ("fleet/fleet.env", "predicted_full_token", BLOCK): 1,
    ("engine.env", "SGLANG_RAGGED_VERIFY_MODE", RAGGED): 1, ("fleet/fleet.env", "rank_env", RAGGED): 1,
    ("plan.json", "ranks[].env.SGLANG_RAGGED_VERIFY_MODE", RAGGED): 1,
    **{("overlay.env", f"SPARK_{flag.removeprefix('overlay.').upper()}", flag): 1 for flag in FLAGS},
    **{("plan.json", f"ranks[].env.SPARK_{flag.removeprefix('overlay.').upper()}", flag): 1 for flag in FLAGS},
    ("README.md", "", ", ".join(FLAGS)): 1, ("fleet/fleet.env", "rank_flags", ", ".join(sorted(FLAGS))): 1,
    ("fleet/fleet.env", "rank_env", ", ".join(FLAGS)): 1, ("fleet/fleet.env", "rank_hooks", ", ".join(FLAGS)): 1,
})
STALE = ("description still says 'DSpark block 5', but engine.speculative.dspark_block_size is now 15  "
         "(spec/profiles/releases/production-1.1.yaml:10)")


def test_the_1_6_to_1_7_diff_lists_each_real_change_once_with_its_profile_key() -> None:
    result = run_cli("diff", "--format", "json", *SIDES)
    assert result.returncode == 1, result.stderr
    body = json.loads(result.stdout)
    assert [c["path"] for c in body["profile"]] == PROFILE
    assert [(f["path"], f["old"], f["new"]) for f in body["folded"]] == [("release", "production-1.6",
                                                                        "production-1.7")]
    found = Counter((a["file"], a["name"], a["source"]) for a in body["artifacts"])
    assert found == ARTIFACTS
    assert sum(found.values()) == 27
    assert body["stale"] == [STALE]


def test_text_and_markdown_say_the_stale_description_and_both_sources() -> None:
    text = run_cli("diff", "--detail", *SIDES).stdout
    assert f"\n  stale: {STALE}\n" in text
    hooks = "      fleet/fleet.env: rank_hooks (16 16 16 16) → (18 18 18 18)  (with " + ", ".join(FLAGS[1:]) + ")\n"
    assert hooks in text
    markdown = run_cli("diff", "--format", "markdown", *SIDES).stdout
    assert ("| engine.speculative.dspark\\_block\\_size | 5 | spec/profiles/releases/production-1.1.yaml:58 | 15 | "
            "spec/profiles/releases/production-1.7.yaml:11 | 4 changes in 3 files, ranks 0-3 |\n") in markdown
    assert ("- stale: description still says &#x27;DSpark block 5&#x27;, but engine.speculative.dspark\\_block\\_size "
            "is now 15  (spec/profiles/releases/production-1.1.yaml:10)\n") in markdown


RELEASES = ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.7.1"]


def test_every_artifact_change_of_every_release_names_its_profile_key() -> None:
    unnamed = []
    for old, new in itertools.pairwise(RELEASES):
        result = run_cli("diff", "--format", "json", f"spec/profiles/releases/production-{old}.yaml",
                         f"spec/profiles/releases/production-{new}.yaml")
        body = json.loads(result.stdout)
        assert body["artifacts"], (old, new)
        unnamed += [(old, new, a["file"], a["name"]) for a in body["artifacts"] if not a["source"]]
    assert unnamed == []


# The counts under each 1.7 key, from ARTIFACTS above: a change several keys share counts under the first.
EFFECTS = ["every mention follows (14 lines in 13 files)", "6 changes in 4 files, ranks 0-3",
           "4 changes in 3 files, ranks 0-3", "3 changes in 3 files, ranks 0-3", "6 changes in 4 files, ranks 0-3",
           *["2 changes in 2 files, ranks 0-3"] * 4, "no effect on the rendered files",
           "no effect on the rendered files"]


def test_the_default_text_says_each_profile_change_once_with_its_effects_counted() -> None:
    lines = run_cli("diff", *SIDES).stdout.splitlines()
    keys = [line.split(":")[0].strip() for line in lines if line.startswith("  ") and not line.startswith("   ")]
    assert keys == [*PROFILE, "stale"]
    assert [line.strip() for line in lines if line.startswith("    ")] == EFFECTS
    assert lines[-1] == "artifacts: 27 changes in 6 files besides 1 rename; --detail lists each"
    assert sum(int(e.split()[0]) for e in EFFECTS if e[0].isdigit()) == sum(ARTIFACTS.values())


def test_every_release_pair_fits_a_github_comment_in_markdown() -> None:
    for old, new in itertools.pairwise(RELEASES):
        sides = (f"spec/profiles/releases/production-{old}.yaml", f"spec/profiles/releases/production-{new}.yaml")
        markdown = run_cli("diff", "--format", "markdown", *sides).stdout
        assert len(markdown) < 60_000, (old, new, len(markdown))
        assert "<details><summary>each artifact change</summary>" in markdown
        assert len(run_cli("diff", "--format", "markdown", "--unified", *sides).stdout) < 60_000, (old, new)
