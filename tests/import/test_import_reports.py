"""`spark-compile import` reports every setting of the source it does not carry, and why, with the source line:
a value the profile's type refuses, a flag no catalog knows, a repeat of SGLang's default, a short option; a
source that names one deployment twice or does not say where it runs is refused whole. The written profile is
read back by the loader and holds exactly what was carried."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_compile.cli import main
from spark_compile.stages.load import load_file

PREFIX = "spark-compile import: "
LINE = ("docker run --name web -v /srv/m:/models/repo img:1 python3 -m sglang.launch_server "
        "--model-path /models/repo/snapshots/a --served-model-name m --tp-size 2 {extra}\n")


def _import(capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: str, hosts: str | None = "192.0.2.1",
            text: str | None = None) -> tuple[int, list[str], Path]:
    source = tmp_path / "run.sh"
    source.write_text(text if text is not None else LINE.format(extra=extra))
    out = tmp_path / "web.yaml"
    given = ["--hosts", hosts] if hosts else []
    code = main(["import", str(source), *given, "--architecture", "X", "-o", str(out)])
    lines = [line.replace(f"{tmp_path}/", "") for line in capsys.readouterr().err.splitlines()]
    return code, lines, out


def test_a_number_the_source_spells_wrong_is_left_out_with_its_reason(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    code, lines, out = _import(capsys, tmp_path, "--port abc")
    assert code == 1
    assert lines[-2:] == [
        f"{PREFIX}left out: run.sh:1: --port abc: 'abc' is not a number, which engine.port needs",
        f"{PREFIX}1 setting(s) left out; the profile does not reproduce the source until they are resolved"]
    assert "port" not in load_file(out).data["engine"]


def test_a_value_the_schema_refuses_names_the_profile_key(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    code, lines, out = _import(capsys, tmp_path, "--chunked-prefill-size 0")
    assert code == 1
    left = [line for line in lines if "left out: " in line]
    assert len(left) == 1 and left[0].startswith(
        f"{PREFIX}left out: run.sh:1: --chunked-prefill-size 0: engine.limits.chunked_prefill_size refuses it: ")
    assert "limits" not in load_file(out).data["engine"]


def test_an_unknown_flag_is_kept_in_engine_args_with_a_note(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    code, lines, out = _import(capsys, tmp_path, "--no-such-flag 1 --also-unknown")
    assert code == 0
    assert [line for line in lines if "no shipped SGLang catalog" in line] == [
        f"{PREFIX}note: run.sh:1: --no-such-flag is in no shipped SGLang catalog; kept in engine.args (`check` "
        "reports it unless the image's SGLang knows it)",
        f"{PREFIX}note: run.sh:1: --also-unknown is in no shipped SGLang catalog; kept in engine.args (`check` "
        "reports it unless the image's SGLang knows it)"]
    assert load_file(out).data["engine"]["args"] == {"no-such-flag": "1", "also-unknown": True}


def test_a_repeat_of_sglangs_default_is_kept_and_noted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, lines, out = _import(capsys, tmp_path, "--watchdog-timeout 300")
    assert code == 0
    assert (f"{PREFIX}note: run.sh:1: --watchdog-timeout 300 is SGLang's default; kept so the command stays the "
            "source's (it may go)") in lines
    assert load_file(out).data["engine"]["limits"] == {"watchdog_timeout": 300}


def test_a_short_option_is_no_engine_arg(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, lines, _ = _import(capsys, tmp_path, "-x")
    assert code == 1
    assert f"{PREFIX}left out: run.sh:1: -x: not a long option engine.args can hold" in lines


def test_every_written_value_names_its_source_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "# launcher\n\n" + LINE.format(extra="\\\n  --context-length 8192")
    code, _, out = _import(capsys, tmp_path, "", text=text)
    assert code == 0
    written = out.read_text().replace(f"{tmp_path}/", "")
    assert '  image: "img:1"  # from run.sh:3\n' in written
    assert "    context_length: 8192  # from run.sh:4\n" in written  # the continued line's own number
    doc = load_file(out)
    assert doc.data["engine"]["limits"] == {"context_length": 8192}
    assert doc.data["model"] == {"architecture": "X", "repo": "/srv/m", "snapshot": "a", "served_name": "m"}


@pytest.mark.parametrize(("text", "hosts", "message"), [
    ("docker run img:1 python3 -m sglang.launch_server --model-path /m --node-rank 0 --nnodes 2\n"
     "docker run img:1 python3 -m sglang.launch_server --model-path /m --node-rank 0 --nnodes 2\n",
     "192.0.2.1,192.0.2.2",
     "run.sh:2: this docker run and the one at run.sh:1 are both node rank 0; import one deployment at a time"),
    (LINE.format(extra=""), "192.0.2.1,192.0.2.2",
     "--hosts names 2 host(s) but the deployment has 1 node(s)"),
    (LINE.format(extra=""), "spark-a",
     "node 0's host 'spark-a' is not an IPv4 address; give --hosts as addresses (user@192.0.2.1)"),
    (LINE.format(extra=""), None,
     "the source does not say which machine runs it: give --hosts HOST (its address, or user@address)"),
    ("docker run --rm -e A img:1 python3 -m sglang.launch_server --model-path /m --nnodes 2\n",
     None, "the source does not name the address of every one of its 2 nodes: give --hosts "
                        "H1,H2,... (the head first, as user@address or address)"),
])
def test_a_source_import_cannot_place_is_refused_whole(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      text: str, hosts: str | None, message: str) -> None:
    code, lines, out = _import(capsys, tmp_path, "", hosts, text=text)
    assert code != 0
    assert lines[-1] == f"spark-compile: error: {message}"
    assert not out.exists()  # nothing half-imported is written


def test_an_address_in_the_rendezvous_that_is_not_the_heads_is_left_out(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    code, lines, out = _import(capsys, tmp_path, "--dist-init-addr 10.0.0.9:5000")
    assert code == 1
    assert (f"{PREFIX}left out: run.sh:1: --dist-init-addr 10.0.0.9:5000: the rendezvous is always the head's "
            "fabric address (192.0.2.1)") in lines
    assert load_file(out).data["engine"]["dist_init_port"] == 5000


def test_the_same_source_imports_to_the_same_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _import(capsys, tmp_path, "--context-length 8192 --no-such-flag 1")
    first = (tmp_path / "web.yaml").read_bytes()
    (tmp_path / "web.yaml").unlink()
    _import(capsys, tmp_path, "--context-length 8192 --no-such-flag 1")
    assert (tmp_path / "web.yaml").read_bytes() == first
