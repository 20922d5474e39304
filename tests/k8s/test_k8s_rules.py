"""The SC5xx rules on profiles, through the real CLI: each finding placed in the profile with its fix;
the target selected by the profile or by --target; `check --generated` and `diff` cover the manifests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS, run_cli
from k8s_support import K8S_PROFILE, compile_profile


def _check(tmp_path: Path, text: str, *args: str, base: Path = K8S_PROFILE) -> tuple[int, list[dict[str, Any]]]:
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {os.path.relpath(base, tmp_path)}\n{text}")
    result = run_cli("check", "--format", "json", *args, str(child))
    return result.returncode, json.loads(result.stdout)["findings"]


def _rules(findings: list[dict[str, Any]]) -> set[str]:
    return {f["rule"] for f in findings}


def test_the_fixture_has_only_the_node_bound_warning(tmp_path: Path) -> None:
    code, findings = _check(tmp_path, "")
    assert code == 0 and _rules(findings) == {"SC442", "SC506"}  # SC442: the reference's KV pool, inherited


@pytest.mark.parametrize(("text", "rule", "line"), [
    ("fleet:\n  fabric:\n    gid_index: 3\n", "SC503", 4),
    ("model:\n  holder_repo: /data/dsv41\n", "SC503", 3),
    ("kubernetes:\n  startup_policy: LeaderReady\n", "SC502", 3),
    ("kubernetes:\n  memory: 128g\n", "SC504", 3),
    ("kubernetes:\n  shm_size: 113g\n", "SC504", 3),
    ("secrets:\n  api_key: {file: /etc/sglang/api-key}\n", "SC507", 3),
])
def test_errors_point_at_the_profile_line(tmp_path: Path, text: str, rule: str, line: int) -> None:
    code, findings = _check(tmp_path, text)
    hits = [f for f in findings if f["rule"] == rule]
    assert code == 1 and hits, findings
    assert hits[0]["file"].endswith("child.yaml") and hits[0]["line"] == line, hits
    assert hits[0]["severity"] == "error" and hits[0]["hint"]


def test_a_tag_alone_is_one_warning_per_target(tmp_path: Path) -> None:
    code, findings = _check(tmp_path, "kubernetes: {}\n", base=REFERENCE_PROFILE)
    assert code == 0 and _rules(findings) == {"SC442", "SC505", "SC506"}
    code, _ = _check(tmp_path, "kubernetes: {}\n", "--strict", base=REFERENCE_PROFILE)
    assert code == 1
    code, findings = _check(tmp_path, "", base=REFERENCE_PROFILE)
    assert code == 0 and _rules(findings) == set(REFERENCE_WARNINGS)  # the docker target's own tag warning, not SC505


def test_target_on_the_command_line_equals_an_empty_section(tmp_path: Path) -> None:
    code, findings = _check(tmp_path, "", "--target", "kubernetes", base=REFERENCE_PROFILE)
    assert code == 0 and _rules(findings) == {"SC442", "SC505", "SC506"}
    flag, section = tmp_path / "flag", tmp_path / "section"
    result = run_cli(str(REFERENCE_PROFILE), "--target", "kubernetes", "--out", str(flag))
    assert result.returncode == 0, result.stderr
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\nkubernetes: {{}}\n")
    assert run_cli(str(child), "--out", str(section)).returncode == 0
    files = sorted(p.name for p in (flag / "dsv41-4spark" / "k8s").iterdir())
    assert files == ["README.md", "configmap.yaml", "kustomization.yaml", "leaderworkerset.yaml", "service.yaml"]
    for name in files:
        ours = (flag / "dsv41-4spark" / "k8s" / name).read_bytes()
        assert ours == (section / "dsv41-4spark" / "k8s" / name).read_bytes(), name


def test_schema_errors_in_the_section(tmp_path: Path) -> None:
    code, findings = _check(tmp_path, "kubernetes:\n  rdma: {mode: device-plugin}\n")
    assert code == 1 and "rdma.resource is needed with mode device-plugin" in findings[0]["message"]
    code, findings = _check(tmp_path, "kubernetes:\n  name: Bad_Name\n")
    assert code == 1 and findings[0]["line"] == 3
    code, findings = _check(tmp_path, "kubernetes:\n  startup_polcy: LeaderCreated\n")
    assert code == 1 and findings[0]["rule"] == "SC101" and "startup_policy" in findings[0]["hint"]


def test_check_generated_covers_the_manifests(tmp_path: Path) -> None:
    compile_profile(tmp_path)
    out = tmp_path / "generated"
    (out / "profile.schema.json").write_text(run_cli("schema").stdout)
    assert run_cli("check", "--generated", "--out", str(out), str(K8S_PROFILE)).returncode == 0
    (out / "dsv41-k8s" / "k8s" / "service.yaml").unlink()
    result = run_cli("check", "--generated", "--out", str(out), str(K8S_PROFILE))
    assert result.returncode == 1 and "k8s/service.yaml: missing (the profile produces it)" in result.stdout


def test_diff_shows_manifest_changes(tmp_path: Path) -> None:
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {os.path.relpath(K8S_PROFILE, tmp_path)}\nkubernetes:\n  namespace: serving\n"
                     "  image: aidendle94/sparkrun-sglang-dsv41-gb10@sha256:" + "ab" * 32 + "\n"
                     "container:\n  shm_size: 16g\n")
    result = run_cli("diff", str(K8S_PROFILE), str(child))
    assert result.returncode == 1, result.stderr
    assert result.stdout.endswith("artifacts: 13 changes in 7 files; --detail lists each\n")
    # Since issue 17 the diff compares every rendered file, manifests key by key; a file of no rank has no prefix.
    # --detail nests each under the profile key it comes from: a value the manifest spells out (a size in
    # Kubernetes' form).
    detail = run_cli("diff", "--detail", str(K8S_PROFILE), str(child))
    assert detail.returncode == 1, detail.stderr
    assert (f"  kubernetes.namespace: inference → serving  ({child}:3)\n    5 changes in 4 files\n"
            in detail.stdout)
    assert ("      k8s/configmap.yaml: metadata.namespace inference → serving\n"
            "      k8s/leaderworkerset.yaml: metadata.namespace inference → serving\n"
            "      k8s/service.yaml: metadata.namespace inference → serving\n"
            "  kubernetes.image: ") in detail.stdout
    assert (f"  container.shm_size: 32g → 16g  ({child}:6)\n    6 changes in 5 files, ranks 0-3\n" in detail.stdout)
    assert ("      k8s/leaderworkerset.yaml: spec.leaderWorkerTemplate.workerTemplate.spec.volumes[1].emptyDir"
            ".sizeLimit 32Gi → 16Gi\n      ranks 0-3 plan.json: ranks[].docker_argv --shm-size 32g → --shm-size 16g\n"
            "  kubernetes.namespace: ") in detail.stdout
    unified = run_cli("diff", "--unified", str(K8S_PROFILE), str(child)).stdout
    assert "+++ b/k8s/leaderworkerset.yaml" in unified and "-  namespace: inference" in unified


def test_check_of_a_kubernetes_profile_does_not_import_the_engine() -> None:
    """SGLang and torch are not installed where the compiler runs."""
    import subprocess
    import sys

    probe = ("import sys\nfrom spark_compile.cli import main\nmain(['check', sys.argv[1]])\n"
             "print(sorted(m for m in ('sglang', 'torch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe, str(K8S_PROFILE)], capture_output=True, text=True,
                            check=False)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr


def test_the_manifest_is_built_once_per_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SC5xx rules read the Context's manifest: one build per profile, none kept between profiles."""
    from spark_compile.pipeline import run
    from spark_compile.targets import k8s

    built: list[str] = []
    real = k8s.leaderworkerset

    def counted(*args: Any) -> dict[str, Any]:
        built.append(args[1].name)
        return real(*args)

    monkeypatch.setattr(k8s, "leaderworkerset", counted)
    first, second = run(K8S_PROFILE).findings, run(K8S_PROFILE).findings
    # The profile's node-local Engram copy, and the KV pool it inherits from the reference.
    assert [f.rule for f in first] == [f.rule for f in second] == ["SC506", "SC442"]
    assert built == ["dsv41-k8s", "dsv41-k8s"]
