"""Releases as profile diffs: the production history, the diff command, drift checks, pre-commit."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

from conftest import REFERENCE_TAG_WARNING, ROOT, run_cli
from support.precommit import HookRepo

RELEASES = ROOT / "spec" / "profiles" / "releases"
RELEASES_REL = "spec/profiles/releases"
TAGS = ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.7.1"]


def test_each_release_extends_its_predecessor() -> None:
    for older, newer in itertools.pairwise(TAGS):
        text = (RELEASES / f"production-{newer}.yaml").read_text()
        assert f"extends: production-{older}.yaml\n" in text
        assert f"release: production-{newer}\n" in text


def test_reference_profile_resolves_to_the_newest_release() -> None:
    ours = run_cli("plan", "spec/profiles/dsv41-4spark.yaml", "--json")
    newest = run_cli("plan", "spec/profiles/releases/production-1.7.1.yaml", "--json")
    assert ours.returncode == newest.returncode == 0
    assert json.loads(ours.stdout) == json.loads(newest.stdout)


def test_diff_1_7_to_1_7_1_is_the_wide_mode_change() -> None:
    result = run_cli("diff", f"{RELEASES_REL}/production-1.7.yaml", f"{RELEASES_REL}/production-1.7.1.yaml")
    assert result.returncode == 1
    r = "spec/profiles/releases/production-"
    # One line per profile change, its effects as a nested count; a deletion cites its !delete line.
    assert result.stdout == (
        "profile: 13 changes\n"
        f"  release: production-1.7 → production-1.7.1  ({r}1.7.1.yaml:6)\n"
        "    every mention follows (14 lines in 13 files)\n"
        "  engine.image: aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7 → "
        f"aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7.1  ({r}1.7.1.yaml:8)\n"
        "    6 changes in 4 files, ranks 0-3\n"
        f"  engine.speculative.dspark_block_size: 15 → 5  ({r}1.7.1.yaml:10)\n"
        "    4 changes in 3 files, ranks 0-3\n"
        f"  release_notes.date: 2026-09-28 → 2026-09-29  ({r}1.7.1.yaml:26)\n"
        "    no effect on the rendered files\n"
        "  release_notes.reason: prompt-lookup drafting in wide mode, on by default → wide mode off after a "
        f"device-side assert; lookups stop at the vocabulary  ({r}1.7.1.yaml:27)\n"
        "    no effect on the rendered files\n"
        f"  operations.verify.hooks_armed: (unset) → 21  ({r}1.7.1.yaml:24)\n"
        "    no effect on the rendered files\n"
        f"  engine.env.CUDA_LOG_FILE: stderr → (unset)  ({r}1.7.1.yaml:13)\n"
        "    3 changes in 3 files, ranks 0-3\n"
        f"  engine.env.SGLANG_RAGGED_VERIFY_MODE: compact → (unset)  ({r}1.7.1.yaml:12)\n"
        "    2 changes in 2 files, ranks 0-3\n"
        f"  overlay.lookup_draft: true → (unset)  ({r}1.7.1.yaml:15)\n"
        "    6 changes in 4 files, ranks 0-3\n"
        f"  overlay.lookup_mode: wide → (unset)  ({r}1.7.1.yaml:16)\n"
        "    2 changes in 2 files, ranks 0-3\n"
        f"  overlay.lookup_sync_gate: true → (unset)  ({r}1.7.1.yaml:17)\n"
        "    2 changes in 2 files, ranks 0-3\n"
        f"  overlay.lookup_narrow_slots: true → (unset)  ({r}1.7.1.yaml:18)\n"
        "    2 changes in 2 files, ranks 0-3\n"
        f"  overlay.lookup_fused_c2: true → (unset)  ({r}1.7.1.yaml:19)\n"
        "    2 changes in 2 files, ranks 0-3\n"
        "artifacts: 29 changes in 6 files besides 1 rename; --detail lists each\n"  # plan.json's once (issue 27)
    )
    # --detail lists every rendered file's change under the profile change that makes it (issue 17's coverage).
    detail = run_cli("diff", "--detail", f"{RELEASES_REL}/production-1.7.yaml", f"{RELEASES_REL}/production-1.7.1.yaml")
    assert detail.returncode == 1
    for expected in (
        "  engine.speculative.dspark_block_size: 15 → 5  "
        f"({r}1.7.1.yaml:10)\n    4 changes in 3 files, ranks 0-3\n"
        "      ranks 0-3 docker-run.sh:\n"
        "        -   --speculative-dspark-block-size 15 \\\n"
        "        +   --speculative-dspark-block-size 5 \\\n",
        "        -   aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7 \\\n"
        "        +   aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7.1 \\\n",
        f"({r}1.7.1.yaml:13)\n    3 changes in 3 files, ranks 0-3\n"
        "      ranks 0-3 engine.env: CUDA_LOG_FILE stderr → (unset)\n",
        f"({r}1.7.1.yaml:12)\n    2 changes in 2 files, ranks 0-3\n"
        "      ranks 0-3 engine.env: SGLANG_RAGGED_VERIFY_MODE compact → (unset)\n",
        *(f"  overlay.lookup_{name.lower()}: true → (unset)  ({r}1.7.1.yaml:{line})\n"
          f"    {count} changes in {files} files, ranks 0-3\n"
          f"      ranks 0-3 overlay.env: SPARK_LOOKUP_{name} {value} → (unset)\n"
          for name, value, line, count, files in (("DRAFT", 1, 15, 6, 4), ("SYNC_GATE", 1, 17, 2, 2),
                                                  ("NARROW_SLOTS", 1, 18, 2, 2), ("FUSED_C2", 1, 19, 2, 2))),
        "      ranks 0-3 overlay.env: SPARK_LOOKUP_MODE wide → (unset)\n",
        "      ranks 0-3 plan.json: ranks[].docker_argv --speculative-dspark-block-size 15 → "
        "--speculative-dspark-block-size 5\n",
        "      README.md:  (with overlay.lookup_mode, overlay.lookup_sync_gate, overlay.lookup_narrow_slots, "
        "overlay.lookup_fused_c2)\n        - | `SPARK_LOOKUP_DRAFT` | `1` (differs) | `0` |\n",
        "      ranks 0-3 fleet/fleet.env: rank_docker --speculative-dspark-block-size 15 → "
        "--speculative-dspark-block-size 5\n",
    ):
        assert expected in detail.stdout, expected
    # The hooks 1.7 arms by its flags (the overlay's own count) → the 21 that 1.7.1 records for every rank.
    assert re.search(r"\n      fleet/fleet\.env: rank_hooks \((\d+) \1 \1 \1\) → \(21 21 21 21\)  "
                     r"\(with overlay\.lookup_mode, overlay\.lookup_sync_gate, "
                     r"overlay\.lookup_narrow_slots, overlay\.lookup_fused_c2, "
                     r"operations\.verify\.hooks_armed\)\n", detail.stdout)


def test_diff_1_1_to_1_2_shows_the_request_cap_and_what_it_derives() -> None:
    result = run_cli("diff", f"{RELEASES_REL}/production-1.1.yaml", f"{RELEASES_REL}/production-1.2.yaml")
    assert result.returncode == 1
    r = "spec/profiles/releases/production-"
    # SPARK_ENGRAM_MAX_IDS stays 65536: the 2048-token chunk dominates max(chunk, 8 x requests).
    assert result.stdout == (
        "profile: 6 changes\n"
        f"  release: production-1.1 → production-1.2  ({r}1.2.yaml:5)\n"
        "    every mention follows (14 lines in 13 files)\n"
        "  engine.image: aidendle94/sparkrun-sglang-dsv41-gb10:production-1.1 → "
        f"aidendle94/sparkrun-sglang-dsv41-gb10:production-1.2  ({r}1.2.yaml:7)\n"
        "    6 changes in 4 files, ranks 0-3\n"
        f"  engine.limits.max_running_requests: 8 → 16  ({r}1.2.yaml:9)\n"
        "    4 changes in 3 files, ranks 0-3\n"
        f"  overlay.engram_early: (unset) → true  ({r}1.2.yaml:11)\n"
        "    5 changes in 4 files, ranks 0-3\n"
        f"  release_notes.date: 2026-09-21 → 2026-09-23  ({r}1.2.yaml:13)\n"
        "    no effect on the rendered files\n"
        "  release_notes.reason: first named production release: 8 import hooks, row store ABI 2 → sixteen "
        f"streams: 1.9x the decode ceiling; Engram gathers early  ({r}1.2.yaml:14)\n"
        "    no effect on the rendered files\n"
        "  engine.cuda_graph.max_bs_decode (a value derived from the changes above): 2 changes in 2 files, "
        "ranks 0-3\n"
        "artifacts: 17 changes in 5 files besides 1 rename; --detail lists each\n"
    )
    detail = run_cli("diff", "--detail", f"{RELEASES_REL}/production-1.1.yaml", f"{RELEASES_REL}/production-1.2.yaml")
    assert detail.returncode == 1
    for expected in (
        f"  engine.limits.max_running_requests: 8 → 16  ({r}1.2.yaml:9)\n"
        "    4 changes in 3 files, ranks 0-3\n"
        "      ranks 0-3 docker-run.sh:  (with engine.cuda_graph.max_bs_decode)\n"
        "        -   --max-running-requests 8 \\\n"
        "        -   --cuda-graph-max-bs-decode 8 \\\n"
        "        +   --max-running-requests 16 \\\n"
        "        +   --cuda-graph-max-bs-decode 16 \\\n",
        "      ranks 0-3 docker-run.sh:\n"
        "        -   aidendle94/sparkrun-sglang-dsv41-gb10:production-1.1 \\\n"
        "        +   aidendle94/sparkrun-sglang-dsv41-gb10:production-1.2 \\\n"
        "      README.md:\n"
        "        - - Image: `aidendle94/sparkrun-sglang-dsv41-gb10:production-1.1`\n"
        "        + - Image: `aidendle94/sparkrun-sglang-dsv41-gb10:production-1.2`\n",
        "    5 changes in 4 files, ranks 0-3\n"
        "      ranks 0-3 overlay.env: SPARK_ENGRAM_EARLY (unset) → 1\n"
        "      README.md:\n"
        "        + | `SPARK_ENGRAM_EARLY` | `1` | `1` |\n",
        # Twice the request slots cost KV pool: SGLang's SWA pool is sized per request (the memory budget).
        "      fleet/fleet.env: predicted_full_token (5899520 5899520 5899520 5899520) → "
        "(5591040 5591040 5591040 5591040)  (with engine.cuda_graph.max_bs_decode)\n",
    ):
        assert expected in detail.stdout, expected
    assert "SPARK_ENGRAM_MAX_IDS 65536 →" not in detail.stdout


def test_identical_profiles_diff_empty_with_exit_0() -> None:
    result = run_cli("diff", "spec/profiles/dsv41-4spark.yaml", "spec/profiles/releases/production-1.7.1.yaml")
    assert (result.returncode, result.stdout) == (0, "profile: 0 changes\nartifacts: 0 changes (byte-identical)\n")


def test_diff_json_and_unified() -> None:
    result = run_cli("diff", "--format", "json", "--unified", "spec/profiles/releases/production-1.4.yaml",
                     "spec/profiles/releases/production-1.5.yaml")
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["identical"] is False
    assert {"path": "overlay.late_tail_skip_all", "old": None, "new": True, "old_origin": None,
            "new_origin": "spec/profiles/releases/production-1.5.yaml:8", "effect": True} in body["profile"]
    assert {"ranks": [0, 1, 2, 3], "file": "overlay.env", "name": "SPARK_LATE_TAIL_SKIP_ALL", "old": None,
            "new": "1", "source": "overlay.late_tail_skip_all"} in body["artifacts"]
    assert "+SPARK_LATE_TAIL_SKIP_ALL=1\n" in body["unified"]
    assert "--- a/0-spark-0/overlay.env\n+++ b/0-spark-0/overlay.env\n" in body["unified"]


def test_diff_against_a_git_revision(tmp_path: Path) -> None:
    repo = tmp_path / "infra"
    shutil.copytree(ROOT / "spec" / "profiles", repo / "spec" / "profiles")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo,
                       check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "production-1.7.1")
    profile = repo / "spec" / "profiles" / "dsv41-4spark.yaml"
    profile.write_text(profile.read_text().replace("max_running_requests: 16", "max_running_requests: 24"))
    git("commit", "-qam", "raise the request cap")
    result = run_cli("diff", "HEAD~1:spec/profiles/dsv41-4spark.yaml", "spec/profiles/dsv41-4spark.yaml", cwd=repo)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[:2] == [
        "profile: 1 change",
        "  engine.limits.max_running_requests: 16 → 24  (spec/profiles/dsv41-4spark.yaml:73)",
    ]
    detail = run_cli("diff", "--detail", "HEAD~1:spec/profiles/dsv41-4spark.yaml", "spec/profiles/dsv41-4spark.yaml",
                     cwd=repo)
    assert detail.returncode == 1, detail.stderr
    assert "SPARK_ENGRAM_MAX_IDS 65536 →" not in detail.stdout  # 2048 still wins
    assert "        +   --cuda-graph-max-bs-decode 24 \\\n" in detail.stdout
    missing = run_cli("diff", "HEAD~5:spec/profiles/dsv41-4spark.yaml", "spec/profiles/dsv41-4spark.yaml", cwd=repo)
    assert missing.returncode == 2
    assert "HEAD~5" in missing.stderr and "Traceback" not in missing.stderr


def _copy_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "spec" / "profiles", root / "spec" / "profiles")
    shutil.copytree(ROOT / "generated", root / "generated")
    return root


def test_drift_names_edited_missing_and_extra_files(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    assert run_cli("check", "--generated", "spec/profiles/dsv41-4spark.yaml", cwd=root).returncode == 0
    out = root / "generated" / "dsv41-4spark"
    (out / "0-spark-0" / "nccl.env").write_text((out / "0-spark-0" / "nccl.env").read_text() + "NCCL_DEBUG=INFO\n")
    (out / "2-spark-2" / "preflight.sh").unlink()
    (out / "3-spark-3" / "hotfix.env").write_text("X=1\n")
    result = run_cli("check", "--generated", "spec/profiles/dsv41-4spark.yaml", cwd=root)
    assert result.returncode == 1
    assert result.stdout.startswith(REFERENCE_TAG_WARNING)
    assert result.stdout[result.stdout.index("0 errors"):] == (
        "0 errors, 2 warnings in 1 profile\n"  # SC312 and SC442 (REFERENCE_WARNINGS)
        "generated/dsv41-4spark/0-spark-0/nccl.env: differs from what spec/profiles/dsv41-4spark.yaml produces\n"
        "generated/dsv41-4spark/2-spark-2/preflight.sh: missing (the profile produces it)\n"
        "generated/dsv41-4spark/3-spark-3/hotfix.env: not generated by spark-compile (compiling keeps it): delete it"
        " or move it out of the generated directory\n"
        "drift: 3 files stale; run `spark-compile` on spec/profiles/dsv41-4spark.yaml and commit the result\n"
    )


def test_drift_over_a_folder_checks_every_profile_below_it_and_names_only_the_stale(tmp_path: Path) -> None:
    """A folder stands for every *.yaml below it (the drift hook's args): a release file nobody listed is
    checked; a folder spark-compile wrote (its k8s/*.yaml) and a hidden file are not profiles."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for name in ("dsv41-4spark.yaml", "dsv41-flash.config.json"):
        shutil.copy(ROOT / "spec" / "profiles" / name, profiles / name)
    (profiles / "k8s.yaml").write_text("extends: dsv41-4spark.yaml\nname: dsv41-k8s\nkubernetes: {}\n")
    for profile in ("profiles/dsv41-4spark.yaml", "profiles/k8s.yaml"):
        assert run_cli(profile, cwd=tmp_path).returncode == 0
    assert list((profiles / "generated" / "dsv41-k8s" / "k8s").glob("*.yaml"))
    (profiles / ".pre-commit-config.yaml").write_text("repos: []\n")
    current = run_cli("check", "--generated", "--format", "summary", "profiles", cwd=tmp_path)
    assert current.returncode == 0 and " in 2 profiles " in current.stdout, current.stdout + current.stderr
    (profiles / "release-1.8.yaml").write_text("extends: dsv41-4spark.yaml\nname: dsv41-1-8\n")
    result = run_cli("check", "--generated", "--format", "summary", "profiles", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("0 errors, ") and " in 3 profiles " in result.stdout, result.stdout
    assert "profiles/generated/dsv41-1-8/plan.json: missing (the profile produces it)\n" in result.stdout
    assert result.stdout.endswith(" stale; run `spark-compile` on profiles/release-1.8.yaml and commit the "
                                  "result\n"), result.stdout
    empty = run_cli("check", "--generated", "profiles/generated", cwd=tmp_path)
    assert (empty.returncode, empty.stdout) == (2, "") and "no profile (*.yaml) under the folder" in empty.stderr


def test_repository_generated_output_is_current() -> None:
    result = run_cli("check", "--generated", "spec/profiles/dsv41-4spark.yaml")
    assert result.returncode == 0, result.stdout



def test_pre_commit_hooks_in_an_infra_repo(tmp_path: Path, hook_repo: HookRepo) -> None:
    repo = _copy_project(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)

    def hooks(*files: str) -> subprocess.CompletedProcess[str]:
        return hook_repo.run(repo, "spark-compile-check", *files)

    clean = hooks("spec/profiles/dsv41-4spark.yaml")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    broken = repo / "spec" / "profiles" / "broken.yaml"
    broken.write_text("extends: dsv41-4spark.yaml\nengine:\n  prot: 8210\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    failed = hooks("spec/profiles/broken.yaml")
    assert failed.returncode == 1
    assert "spec/profiles/broken.yaml:3:3: SC101 error: unknown key 'prot' in engine" in failed.stdout


def test_diff_reads_a_parent_that_exists_only_at_the_revision(tmp_path: Path) -> None:
    repo = tmp_path / "infra"
    shutil.copytree(ROOT / "spec" / "profiles", repo / "spec" / "profiles")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo,
                       check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "history")
    git("rm", "-q", "spec/profiles/releases/production-1.6.yaml")
    git("commit", "-qm", "drop 1.6 from the tree")
    result = run_cli("diff", "--detail", "HEAD~1:spec/profiles/releases/production-1.7.yaml",
                     "HEAD~1:spec/profiles/releases/production-1.7.1.yaml", cwd=repo)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("  overlay.lookup_mode: wide → (unset)  (HEAD~1:spec/profiles/releases/production-1.7.1.yaml:16)\n"
            "    2 changes in 2 files, ranks 0-3\n"
            "      ranks 0-3 overlay.env: SPARK_LOOKUP_MODE wide → (unset)\n") in result.stdout
    # CUDA_LOG_FILE's old value comes from 1.6, read at the revision; the deletion cites 1.7.1's !delete line.
    assert ("  engine.env.CUDA_LOG_FILE: stderr → (unset)  (HEAD~1:spec/profiles/releases/production-1.7.1.yaml:13)\n"
            "    3 changes in 3 files, ranks 0-3\n"
            "      ranks 0-3 engine.env: CUDA_LOG_FILE stderr → (unset)\n") in result.stdout


def test_diff_1_6_to_1_7_lists_each_real_change_once() -> None:
    """plan.json restates each variable three times (env, env_files, sources) and the engine argv inside the
    docker argv; the diff lists the nine real plan changes of 1.7 once each (checked by hand against 1.7's
    file: the image, the block size, the ragged-verify variable and the five lookup flags' six variables)."""
    result = run_cli("diff", "--detail", f"{RELEASES_REL}/production-1.6.yaml", f"{RELEASES_REL}/production-1.7.yaml")
    plan = [line.split("  (with ")[0] for line in result.stdout.splitlines() if "plan.json: " in line]
    image = "aidendle94/sparkrun-sglang-dsv41-gb10:production-1."
    assert plan == [
        f"      plan.json: image {image}6 → {image}7",
        f"      ranks 0-3 plan.json: ranks[].docker_argv python3 {image}6 → python3 {image}7",
        "      ranks 0-3 plan.json: ranks[].docker_argv --speculative-dspark-block-size 5 → "
        "--speculative-dspark-block-size 15",
        "      ranks 0-3 plan.json: ranks[].env.SGLANG_RAGGED_VERIFY_MODE (unset) → compact",
        *(f"      ranks 0-3 plan.json: ranks[].env.SPARK_LOOKUP_{name} (unset) → {value}"
          for name, value in (("DRAFT", 1), ("MODE", "wide"), ("SYNC_GATE", 1), ("NARROW_SLOTS", 1), ("FUSED_C2", 1))),
    ]
    # fleet.env's per-rank flag lists compare name by name, not as one 2,000-character line.
    assert ("      fleet/fleet.env: rank_flags SPARK_LATE_TAIL_SKIP_ALL → SPARK_LATE_TAIL_SKIP_ALL SPARK_LOOKUP_DRAFT "
            "SPARK_LOOKUP_FUSED_C2 SPARK_LOOKUP_MODE SPARK_LOOKUP_NARROW_SLOTS SPARK_LOOKUP_SYNC_GATE  (with "
            "overlay.lookup_fused_c2, overlay.lookup_mode, overlay.lookup_narrow_slots, "
            "overlay.lookup_sync_gate)\n") in result.stdout
    assert result.stdout.endswith("\nartifacts: 27 changes in 6 files besides 1 rename\n")
    # Every artifact change, by file, key and profile key: tests/diff/test_release_diff_counts.py
