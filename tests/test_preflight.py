"""The per-rank preflight script, run for real by bash against a fake sysfs and a stand-in nvidia-smi."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, run_cli

HCA = "rocep1s0f0"
SECRET = "hf_" + "Q" * 34  # shaped like a token; must never reach a generated file


def _compile(tmp: Path, extra: str = "") -> Path:
    child = tmp / "profile.yaml"
    child.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp)}\n"
                     f"deploy:\n  runtime_dir: {tmp / 'run'}\n  gpu_wait_tries: 2\n  gpu_wait_seconds: 1\n{extra}")
    result = run_cli(str(child), "--out", str(tmp / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp / "out" / "dsv41-4spark"


def _sysfs(root: Path, entries: dict[int, tuple[str, str]]) -> None:
    port = root / "sys" / "class" / "infiniband" / HCA / "ports" / "1"
    (port / "gids").mkdir(parents=True)
    (port / "gid_attrs" / "types").mkdir(parents=True)
    for index, (gid, kind) in entries.items():
        (port / "gids" / str(index)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")


def _run(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], env={"PATH": os.environ["PATH"], **env},
                          capture_output=True, text=True, check=False, timeout=60)


SPARK0_V2 = "0000:0000:0000:0000:0000:ffff:c000:020b"  # 192.0.2.11


def test_runtime_writes_the_roce_v2_gid(tmp_path: Path) -> None:
    out = _compile(tmp_path)
    _sysfs(tmp_path / "fs", {0: ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"),
                             2: (SPARK0_V2, "IB/RoCE v1"), 3: (SPARK0_V2, "RoCE v2")})
    result = _run(out / "0-spark-0" / "preflight.sh", "runtime", env={"SPARK_SYSFS_ROOT": str(tmp_path / "fs")})
    assert result.returncode == 0, result.stderr
    runtime = tmp_path / "run" / "dsv41-4spark" / "runtime.env"
    assert runtime.read_text().splitlines()[1:] == ["NCCL_IB_GID_INDEX=3", "B12X_ROCE_GID_INDEX=3"]
    assert runtime.stat().st_mode & 0o777 == 0o600
    assert result.stderr == "rank 0: RoCE v2 GID index 3 for 192.0.2.11 on rocep1s0f0\n"


def test_no_roce_v2_gid_aborts(tmp_path: Path) -> None:
    out = _compile(tmp_path)
    _sysfs(tmp_path / "fs", {2: (SPARK0_V2, "IB/RoCE v1")})
    result = _run(out / "0-spark-0" / "preflight.sh", "gid", env={"SPARK_SYSFS_ROOT": str(tmp_path / "fs")})
    assert result.returncode == 1
    assert result.stderr == "ABORT: rank 0: no RoCE v2 GID for 192.0.2.11 on rocep1s0f0\n"


def _nvidia_smi(bin_dir: Path, output: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "nvidia-smi"
    stub.write_text(f"#!/bin/sh\nprintf '%s' '{output}'\n")
    stub.chmod(0o755)


def test_gpu_held_by_a_previous_engine_aborts_after_retries(tmp_path: Path) -> None:
    out = _compile(tmp_path)
    _nvidia_smi(tmp_path / "bin", "4242, python3, 97000 MiB\n")
    result = _run(out / "1-spark-1" / "preflight.sh", "gpu-free",
                  env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "rank 1: GPU busy (4242, python3, 97000 MiB;), waiting 1 s (try 1/2)",
        "ABORT: rank 1 GPU still busy after 2 tries: 4242, python3, 97000 MiB; -- a previous engine still holds it",
    ]


def test_free_gpu_passes(tmp_path: Path) -> None:
    out = _compile(tmp_path)
    _nvidia_smi(tmp_path / "bin", "")
    result = _run(out / "2-spark-2" / "preflight.sh", "gpu-free",
                  env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert (result.returncode, result.stderr) == (0, "")


def test_secrets_are_read_on_the_node_and_never_generated(tmp_path: Path) -> None:
    token_file = tmp_path / "hf-token"
    token_file.write_text(SECRET + "\n")
    out = _compile(tmp_path, f"secrets:\n  env:\n    HF_TOKEN: {{file: {token_file}}}\n"
                             "  api_key: {env: SERVED_API_KEY}\n")
    plan = json.loads((out / "plan.json").read_text())
    assert plan["ranks"][0]["runtime_env"] == ["NCCL_IB_GID_INDEX", "B12X_ROCE_GID_INDEX", "HF_TOKEN"]
    assert plan["ranks"][0]["engine_argv"][-2:] == ["--config", "/run/spark-secrets/engine-secrets.yaml"]
    _sysfs(tmp_path / "fs", {3: (SPARK0_V2, "RoCE v2")})
    result = _run(out / "0-spark-0" / "preflight.sh", "runtime",
                  env={"SPARK_SYSFS_ROOT": str(tmp_path / "fs"), "SERVED_API_KEY": "it's-a-key"})
    assert result.returncode == 0, result.stderr
    runtime = (tmp_path / "run" / "dsv41-4spark" / "runtime.env").read_text()
    assert f"HF_TOKEN={SECRET}\n" in runtime
    engine = tmp_path / "run" / "dsv41-4spark" / "secrets" / "engine-secrets.yaml"
    import yaml

    assert yaml.safe_load(engine.read_text()) == {"api-key": "it's-a-key"}
    assert engine.stat().st_mode & 0o777 == 0o600
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text() and "it's-a-key" not in path.read_text(), path


def test_missing_secret_aborts(tmp_path: Path) -> None:
    out = _compile(tmp_path, "secrets:\n  env:\n    HF_TOKEN: {file: /nonexistent/token}\n")
    _sysfs(tmp_path / "fs", {3: (SPARK0_V2, "RoCE v2")})
    result = _run(out / "0-spark-0" / "preflight.sh", "runtime", env={"SPARK_SYSFS_ROOT": str(tmp_path / "fs")})
    assert result.returncode == 1
    assert "ABORT: rank 0: secret file /nonexistent/token is missing or unreadable" in result.stderr


@pytest.mark.parametrize("literal", [SECRET, "sk-" + "a1" * 15])
def test_literal_secret_in_a_profile_is_a_finding(tmp_path: Path, literal: str) -> None:
    child = tmp_path / "profile.yaml"
    child.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\nengine:\n  env:\n"
                     f"    HF_TOKEN: {literal}\n")
    result = run_cli("check", str(child))
    assert result.returncode == 1
    assert f"{child}:4:15: SC230 error: engine.env.HF_TOKEN holds a literal secret" in result.stdout
    assert literal not in result.stdout
