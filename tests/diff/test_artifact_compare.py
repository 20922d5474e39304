"""The file comparison on its own: keyed files key by key (YAML manifests by kind/name), others line by line."""

from __future__ import annotations

import json

from spark_compile.review.artifact_diff import Change, Renamer, Side, compare, file_changes

MANIFESTS = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sglang}
spec:
  replicas: 4
  template:
    spec:
      containers:
        - name: engine
          args: [--tp, "4", --max-running-requests, "16"]
---
apiVersion: v1
kind: Service
metadata: {name: sglang-head}
spec:
  ports: [{port: 8210}]
"""


def test_yaml_manifests_compare_by_kind_name_and_path() -> None:
    new = MANIFESTS.replace('"16"', '"24"').replace("port: 8210", "port: 8211")
    assert file_changes("k8s/all.yaml", "yaml", MANIFESTS, new) == [
        Change("k8s/all.yaml", "StatefulSet/sglang.spec.template.spec.containers[0].args",
               "--max-running-requests 16", "--max-running-requests 24"),
        Change("k8s/all.yaml", "Service/sglang-head.spec.ports[0].port", "8210", "8211"),
    ]


def test_units_keep_sections_and_repeated_keys() -> None:
    old = "[Unit]\nAfter=a\n[Service]\nExecStartPre=x\nExecStartPre=y\nTimeoutStopSec=90\n"
    new = "[Unit]\nAfter=a\n[Service]\nExecStartPre=x\nExecStartPre=z\nTimeoutStopSec=90\n# note\n"
    assert file_changes("u.service", "unit", old, new) == [
        Change("u.service", "[Service] ExecStartPre", "x\ny", "x\nz"),
        Change("u.service", "", None, "# note"),
    ]


def test_env_files_by_name_and_comments_by_line() -> None:
    old = "# header a\nA=1\nB=2\n"
    new = "# header b\nB=2\nA=1\nC=\n"
    assert file_changes("x.env", "env", old, new) == [
        Change("x.env", "C", None, ""),
        Change("x.env", "", "# header a", "# header b"),
    ]


def test_a_file_that_does_not_parse_is_compared_by_lines() -> None:
    assert file_changes("p.json", "json", "{bad", "{worse") == [Change("p.json", "", "{bad", "{worse")]


def test_renamed_profile_paths_match_and_fold() -> None:
    old = Side({"0-n0/sglang-a.service": b"# a\nX=/etc/a/x\n", "plan.json": b'{"image": "img:a"}\n'}, {"0-n0": 0})
    new = Side({"0-n0/sglang-b.service": b"# b\nX=/etc/b/x\n", "plan.json": b'{"image": "img:a"}\n'}, {"0-n0": 0})
    result = compare(old, new, Renamer([("name", "a", "b")], ["img:a"]))
    assert result.renamed == [("0-n0/sglang-a.service", "0-n0/sglang-b.service")]
    assert result.changes == []
    [fold] = result.folds
    assert (fold.lines, fold.files, fold.renamed) == (2, 1, 1)


def test_a_value_holding_the_old_name_is_not_folded() -> None:
    renamer = Renamer([("release", "r1", "r2")], ["repo/image:r1"])
    assert renamer.line("image=repo/image:r1 # r1") == ("image=repo/image:r1 # r2", {"release"})


def test_a_rename_applies_to_whole_words_only() -> None:
    renamer = Renamer([("name", "prod", "canary")], [])
    assert renamer.line("/etc/prod/x production-1.7 sglang-prod.service prod2") == (
        "/etc/canary/x production-1.7 sglang-canary.service prod2", {"name"})
    release = Renamer([("release", "r-1.7", "r-1.8")], [])
    assert release.line("r-1.7.1 (r-1.7).") == ("r-1.7.1 (r-1.8).", {"release"})


def test_a_flag_added_after_the_last_one_is_one_added_line() -> None:
    """The continuation moves to the old last line; that line did not change."""
    old = "docker run \\\n  --port 8210 \\\n  --max-running-requests 6\n"
    new = "docker run \\\n  --port 8210 \\\n  --max-running-requests 6 \\\n  --speculative-algorithm DSPARK\n"
    assert file_changes("docker-run.sh", "text", old, new) == [
        Change("docker-run.sh", "", None, "  --speculative-algorithm DSPARK")]


def test_plan_json_restatements_change_with_the_value_they_restate() -> None:
    def side(env: dict[str, str], argv: list[str]) -> Side:
        rank = {"env": env, "env_files": {"overlay.env": env}, "sources": {"env": dict.fromkeys(env, "overlay.x")},
                "docker_argv": ["docker", "run", *argv], "engine_argv": argv}
        return Side({"plan.json": json.dumps({"ranks": [rank]}).encode()}, {})

    before = side({"SPARK_A": "1"}, ["--port", "8210"])
    after = side({"SPARK_A": "1", "SPARK_X": "1"}, ["--port", "8210", "--x", "1"])
    changes = compare(before, after, Renamer([], [])).changes
    keys = sorted((g.ranks, g.change.key, g.change.old, g.change.new) for g in changes)
    assert keys == [((0,), "ranks[].docker_argv", "8210", "8210 --x 1"), ((0,), "ranks[].env.SPARK_X", None, "1")]
