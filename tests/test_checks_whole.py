"""The profile's grammars match a value whole: `^...$` under re.match let any of them end in a line break, so
an env var named "FOO\\n" passed and split its env-file line in two ("FOO", which docker reads as "pass the
host's FOO", and "=1"). Free text and an argument refuse exactly their classes of control characters and
Unicode separators."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from spark_compile.overlay.registry import FLAGS
from spark_compile.overlay.values import FlagValueError, parse_value
from spark_compile.spec import checks

from conftest import REFERENCE_PROFILE, refuses, run_cli

VALID: list[tuple[Callable[[str], object], str]] = [
    (checks.name, "spark-0"), (checks.iface, "enp1s0f0np0"), (checks.docker_size, "112g"),
    (checks.env_name, "NCCL_DEBUG"), (checks.ssh, "spark@192.0.2.11"), (checks.image, "lmsysorg/sglang:v0.5"),
    (checks.text, "a line"), (checks.abs_path, "/home/spark"), (checks.word, "bf16"), (checks.gpus, "all"),
    (checks.rdma, "rocep1s0f0"), (checks.snapshot, "abc123"), (checks.container_name, "sglang-0"),
    (checks.hub_id, "deepseek-ai/DeepSeek-V3"), (checks.gguf, "Q4_K_M"), (checks.docker_user, "1000:1000"),
    (checks.security_opt, "seccomp=unconfined"), (checks.cpuset, "0-3"), (checks.kwarg_name, "top_k"),
    (checks.free_text, "two\nlines"), (checks.arg_text, "--x=1"),
]


@pytest.mark.parametrize(("check", "value"), VALID, ids=[check.__name__ for check, _ in VALID])
def test_a_value_with_a_line_break_after_it_is_refused(check: Callable[[str], object], value: str) -> None:
    assert check(value) is not None
    with pytest.raises(PydanticCustomError):
        check(value + ("\x0b" if check is checks.free_text else "\n"))


# What free text and an argument may hold, matched whole.
FREE_TEXT = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]*")
ARG_TEXT = re.compile(r"[^\x00-\x1f\x7f\x85\u2028\u2029]*")
TEXTS = st.text(st.sampled_from("a é\t\n\r\x00\x0b\x1f\x7f\x80\x85\x9f\u2027\u2028\u2029\u202a"), max_size=8)


@given(TEXTS)
def test_free_text_and_an_argument_refuse_exactly_their_class(value: str) -> None:
    assert refuses(checks.free_text, value, PydanticCustomError) == (not FREE_TEXT.fullmatch(value))
    assert refuses(checks.arg_text, value, PydanticCustomError) == ("\0" in value or not ARG_TEXT.fullmatch(value))


def test_an_overlay_number_with_a_line_break_is_refused() -> None:
    flag = next(flag for flag in FLAGS if flag.kind == "int")
    with pytest.raises(FlagValueError):
        parse_value(flag, "5\n")


def test_an_env_name_with_a_line_break_stops_the_profile(tmp_path: Path) -> None:
    text = REFERENCE_PROFILE.read_text().replace("\n  env:\n", '\n  env:\n    "FOO\\n": "1"\n', 1)
    assert '"FOO\\n"' in text
    profile = tmp_path / "profile.yaml"
    profile.write_text(text)
    config = "dsv41-flash.config.json"  # the profile's model config, beside it
    (tmp_path / config).write_bytes((REFERENCE_PROFILE.parent / config).read_bytes())
    result = run_cli("check", str(profile))
    assert result.returncode == 1
    # The key's line break is shown as an escape: the finding stays one line.
    assert result.stdout.startswith(
        f"{profile}:82:14: SC111 error: engine.env.FOO\\n: 'FOO\\n' is not an environment variable name: use A-Z, "
        "0-9 and '_', not starting with a digit\n")
