"""Hostile sources: every value the profile takes round-trips through its YAML exactly (quoted by construction),
a comment cannot be broken out of, a secret is never echoed, and what cannot be carried is reported."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.cli import main
from spark_compile.importer.draft import Draft, render
from spark_compile.importer.source import Origin

HOSTILE = ["a # not a comment", "it's \"quoted\"", "key: value", "- item", "*alias", "&anchor", "!tag", "{a: 1}",
           "[1, 2]", "yes", "null", "~", "0o17", "1e3", "%percent", "@at", "`tick`", "trailing ", " leading",
           "tab\there", "uni\u00e9\u2028code", "back\\slash", "$HOME", "a\u0085b", "\U0001f600"]


def _script(tmp_path: Path, env: dict[str, str], name: str = "run.sh") -> Path:
    words = ["docker", "run", "--name", "web", *(w for k, v in env.items() for w in ("-e", f"{k}={v}")),
             "lmsysorg/sglang:v0.5.23", "python3", "-m", "sglang.launch_server", "--model-path",
             "/models/repo/snapshots/abc", "--served-model-name", "m"]
    path = tmp_path / name
    path.write_text(shlex.join(words) + "\n", encoding="utf-8")
    return path


def test_hostile_values_round_trip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    env = {f"V{i}": value for i, value in enumerate(HOSTILE)}
    out = tmp_path / "web.yaml"
    main(["import", str(_script(tmp_path, env)), "--hosts", "192.0.2.1", "-o", str(out)])
    err = capsys.readouterr().err
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    carried = data["engine"]["env"]
    refused = {name for name, value in env.items() if any(c in value for c in "\t\u0085\u2028")}
    assert carried == {name: value for name, value in env.items() if name not in refused}
    for name in sorted(refused):  # a control or line-break character: no argument can carry it
        assert f"left out: {tmp_path}/run.sh:1: -e {name}: the value holds a line break or control character" in err


def test_an_engine_value_no_argument_can_carry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "run.sh"
    source.write_text("docker run --name web img:1 python3 -m sglang.launch_server --model-path "
                      "/models/repo/snapshots/a --served-model-name m --chat-template 'line one\nline two'\n")
    assert main(["import", str(source), "--hosts", "192.0.2.1", "-o", str(tmp_path / "web.yaml")]) == 1
    err = capsys.readouterr().err
    assert (f"left out: {source}:1: --chat-template line one\\nline two: engine.args refuses it: 'line one\\nline "
            "two' cannot be an argument") in err


def test_a_file_name_cannot_break_a_comment(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = _script(tmp_path, {"A": "1"}, name="evil\nname: pwned # x.sh")
    out = tmp_path / "web.yaml"
    main(["import", str(source), "--hosts", "192.0.2.1", "-o", str(out)])
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert data["name"] == "web" and "pwned" not in str(data)
    assert "evil\\nname: pwned # x.sh:1" in text


def test_a_secret_is_never_echoed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "web.yaml"
    code = main(["import", str(_script(tmp_path, {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123"})), "--hosts",
                 "192.0.2.1", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "hf_abcdef" not in err and "hf_abcdef" not in out.read_text()
    assert (f"left out: {tmp_path}/run.sh:1: -e HF_TOKEN=(redacted): a secret's value is never copied into a "
            "profile; set secrets.env.HF_TOKEN to a file or variable on the node") in err


def test_an_empty_secret_is_noted_not_left_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # launchers pass `-e HF_TOKEN=${HF_TOKEN:-}`: with no token set it is empty, which reads as no token at all
    source, out = tmp_path / "run.sh", tmp_path / "web.yaml"
    source.write_text("docker run --name web -e HF_TOKEN= -e A=1 -v /srv/m:/models/m:ro lmsysorg/sglang:v0.5.23 "
                      "python3 -m sglang.launch_server --model-path /models/m\n")
    code = main(["import", str(source), "--hosts", "192.0.2.1", "--architecture", "LlamaForCausalLM", "-o",
                 str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (f"spark-compile import: note: {source}:1: -e HF_TOKEN is set empty: not imported (huggingface_hub reads "
            "an empty token as none, as if it were unset)") in err.splitlines()
    data = yaml.safe_load(out.read_text())
    assert data["engine"]["env"] == {"A": "1"} and "secrets" not in data


def test_words_the_shell_would_expand_are_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "run.sh"
    source.write_text('docker run --name web -e "A=$B" -v "$DIR:/data" lmsysorg/sglang:v0.5.23 python3 -m '
                      'sglang.launch_server --model-path /models/repo/snapshots/abc --served-model-name m '
                      '--port "$PORT"\n')
    out = tmp_path / "web.yaml"
    code = main(["import", str(source), "--hosts", "192.0.2.1", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "$" not in str(yaml.safe_load(out.read_text()))  # nothing the shell would expand is written
    assert (f"left out: {source}:1: -e A=$B: 'A=$B' is expanded by the shell; its value is not in the source "
            "(import the script with --trace)") in err
    assert f"left out: {source}:1: -v $DIR:/data: '$DIR:/data' is expanded by the shell (import with --trace)" \
        in err
    assert (f"left out: {source}:1: --port $PORT: '$PORT' is expanded by the shell; its value is not in the "
            "source (import the script with --trace)") in err


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=40))
def test_any_string_round_trips_through_the_emitter(value: str) -> None:
    draft = Draft()
    draft.set(("engine", "env", "X"), value, Origin("f", 1))
    assert yaml.safe_load(render(draft, [])) == {"engine": {"env": {"X": value}}}
