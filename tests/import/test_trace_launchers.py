"""`import --trace` runs real launchers as written (issue 36 item 2): arguments, the whole folder, --env HOME,
readiness loops, ssh with `--`, the exit status and last lines of a failed run, the public field launcher."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sandbox_support import launcher

from spark_compile.cli import main
from spark_compile.common.errors import EXIT_USAGE
from spark_compile.importer.trace import run_traced

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
SERVE = "python3 -m sglang.launch_server --model-path m"


@pytest.fixture(autouse=True)
def _stage_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", "/tmp")  # the staging folder: /tmp is open to the sandbox's user


def test_trace_passes_its_arguments_to_the_script(tmp_path: Path) -> None:
    script = launcher(tmp_path, 'echo "$# [$1] [$2]"\n')
    assert run_traced(script, (), {}, args=("0", "a b")).output == "2 [0] [a b]"


def test_trace_copies_the_subfolders_too(tmp_path: Path) -> None:
    script = launcher(tmp_path, "source conf/deep/node.env; echo \"$NODE\"\n")
    (script.parent / "conf" / "deep").mkdir(parents=True)
    (script.parent / "conf" / "deep" / "node.env").write_text("NODE=worker-1\n")
    assert run_traced(script, (), {}).output == "worker-1"


def test_trace_honours_env_home(tmp_path: Path) -> None:
    script = launcher(tmp_path, 'echo "$HOME"; : > "$HOME/written" && echo writable\n')
    assert run_traced(script, (), {"HOME": "/home/ops"}).output == "/home/ops\nwritable"


def test_a_readiness_loop_ends(tmp_path: Path) -> None:
    script = launcher(tmp_path, "until curl -sf http://127.0.0.1:30000/health; do sleep 5; done\n"
                                "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models\n")
    traced = run_traced(script, (), {}, limit=20)
    assert (traced.status, traced.output) == (0, '{"status":"ok"}\n200')


def test_ssh_standin_takes_double_dash_as_the_host(tmp_path: Path) -> None:
    script = launcher(tmp_path, f"ssh -o BatchMode=yes -p 22 -- ops@192.0.2.32 'hostname -I; docker run img {SERVE}'\n")
    traced = run_traced(script, ("192.0.2.31",), {})
    assert [(host, argv[0]) for host, argv in traced.calls] == [
        ("", "ssh"), ("ops@192.0.2.32", "hostname"), ("ops@192.0.2.32", "docker")]
    assert traced.output.splitlines()[0] == "192.0.2.32"


def test_a_tool_called_by_its_path_is_the_stand_in(tmp_path: Path) -> None:
    tools = {name: shutil.which(name, path="/usr/local/bin:/usr/bin:/usr/sbin") for name in ("ssh", "curl", "docker")}
    assert all(tools.values()), tools  # the host's own, which the sandbox must never run
    script = launcher(tmp_path, f"{tools['ssh']} -- ops@192.0.2.32 'hostname -I'\n"
                                f"{tools['curl']} -s -w '%{{http_code}}' http://127.0.0.1:30000/health; echo\n"
                                f"{tools['docker']} run img {SERVE}\n")
    traced = run_traced(script, ("192.0.2.31",), {})
    assert [(host, argv[0]) for host, argv in traced.calls] == [
        ("", "ssh"), ("ops@192.0.2.32", "hostname"), ("", "curl"), ("", "docker")]
    assert (traced.status, traced.output.splitlines()[:2]) == (0, ["192.0.2.32", "200"])


def test_a_failed_launcher_reports_its_status_and_last_lines(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    script = launcher(tmp_path, "echo 'checking the nodes'\necho 'WORKER_HOST is not set' >&2\nexit 3\n")
    assert main(["import", "--trace", str(script), "-o", str(tmp_path / "p.yaml")]) == EXIT_USAGE
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"spark-compile: error: {script}: the traced run exited 3; its last lines:\\nchecking the nodes\\n"
        "WORKER_HOST is not set\\n(no `docker run … sglang.launch_server` call was recorded)")


def test_the_field_launcher_traces_as_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = FIELD / "mark-ramsey-ri_sglang-dgx-spark"  # the repository's layout: the script beside its config.env
    out = tmp_path / "gptoss.yaml"
    main(["import", "--trace", str(folder / "start_cluster.sh"), "--hosts", "192.0.2.31,192.0.2.32",
          "--env", "WORKER_IB_IP=192.0.2.32", "-o", str(out)])  # the nodes' addresses, nothing else
    err = capsys.readouterr().err
    assert f"note: {folder}/start_cluster.sh: the traced run exited 0 and made 23 recorded call(s)" in err
    data = yaml.safe_load(out.read_text())
    assert [node["fabric_ip"] for node in data["fleet"]["nodes"]] == ["192.0.2.31", "192.0.2.32"]
