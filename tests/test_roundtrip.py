"""Property: any text in a free-text field either yields a finding at compile time or reaches bash,
docker's env-file parser and systemd's exactly as written. Nothing is ever injected into a command."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import REFERENCE_PROFILE
from support.tools import bash_argv, docker_env_file, systemd_environment

TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" \t\n\"'\\$`;&|*?<>(){}[]#~=%!,:@/.-_")),
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
    ),
    max_size=24,
)
# Values of each field's own grammar, metacharacters included where it allows them: most arbitrary text is
# refused, and a field that refused every example would never reach the round-trip's asserts.
PRINTABLE = st.from_regex(r"[!-~]([ -~]{0,22}[!-~])?", fullmatch=True)
PATH = st.from_regex(r"/[!-~]{0,23}", fullmatch=True)
ACCEPTED = {
    "container_name": st.from_regex(r"[a-z0-9]([a-z0-9-]{0,22}[a-z0-9])?", fullmatch=True),
    "snapshot": st.from_regex(r"[A-Za-z0-9._-]{1,24}", fullmatch=True),
    # --device HOST[:CONTAINER][:rwm], each a clean path (spec/fields.py DeviceSpec).
    "device": st.from_regex(r"/dev/[A-Za-z0-9._+@=-]{1,16}(:/dev/[A-Za-z0-9._+@=-]{1,16})?(:[rwm]{1,3})?",
                            fullmatch=True),
    **dict.fromkeys(("served_name", "alias", "engine_env_value", "nccl_extra_value", "engine_arg_value"),
                    PRINTABLE),
    **dict.fromkeys(("repo", "engram_local_dir", "home", "cache_dir"), PATH),
}
# Shell metacharacters that are legal in most fields (they must round-trip), and one legal in every field.
EXAMPLES = ["/a;b&c|d*e?f~g<h>", "/x(y)[z]{w}#!%^", "rank0-x9"]

# Where each free-text field sits in the profile; the value is set there as given.
FIELDS: dict[str, tuple[str | int, ...]] = {
    "served_name": ("model", "served_name"),
    "alias": ("model", "aliases"),
    "snapshot": ("model", "snapshot"),
    "repo": ("model", "repo"),
    "engram_local_dir": ("model", "engram", "local_dir"),
    "home": ("fleet", "nodes", 0, "home"),
    "container_name": ("engine", "container_name"),
    "engine_env_value": ("engine", "env", "SGLANG_CACHE_DIR"),  # a str variable SGLang 0.5.23 reads
    "nccl_extra_value": ("nccl", "extra", "NCCL_HOSTID"),  # a free-form string NCCL reads
    "engine_arg_value": ("engine", "args", "log-level"),
    "device": ("container", "devices"),
    "cache_dir": ("container", "cache_dir"),
}


def _set(data: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    node[path[-1]] = [value] if path[-1] in ("aliases", "devices") else value


def _compile(data: dict[str, Any], workdir: Path) -> tuple[list[Any], Any]:
    from spark_compile.commands.compile import artifacts
    from spark_compile.pipeline import Rejected, run

    profile = workdir / "profile.yaml"
    profile.write_text(yaml.safe_dump(data, allow_unicode=True))
    outcome = run(profile)
    if isinstance(outcome, Rejected):
        return [f for f in outcome.findings if f.severity == "error"], None
    return [], artifacts(outcome, workdir / "generated")


def _install(files: list[Any], rank_dir: str, target: Path) -> None:
    for artifact in files:
        if artifact.path.startswith(rank_dir + "/"):
            path = target / artifact.path.split("/", 1)[1]
            path.write_bytes(artifact.content)
            path.chmod(artifact.mode)


@pytest.fixture(scope="module")
def base_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(REFERENCE_PROFILE.read_text())
    data["fleet"]["fabric"]["gid_index"] = 3  # no runtime.env: the script runs standalone
    return data


def _refused_or_round_trips(base_data: dict[str, Any], field: str, value: str) -> bool:
    """Assert the property for one value; True when the value compiled and went through the round-trip."""
    data = copy.deepcopy(base_data)
    _set(data, FIELDS[field], value)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data.setdefault("deploy", {})["install_dir"] = str(work / "etc")
        data["deploy"]["docker"] = str(work / "bin" / "docker")  # docker-run.sh runs deploy.docker: the shim
        errors, files = _compile(data, work)
        if errors:
            assert all(f.rule.startswith("SC") and f.message for f in errors)
            return False
        plan = json.loads(next(a for a in files if a.path == "plan.json").content)
        rank = plan["ranks"][0]
        target = work / "etc" / plan["profile"]
        target.mkdir(parents=True)
        _install(files, rank["directory"], target)
        assert bash_argv(target / "docker-run.sh", shim_dir=work / "bin") == rank["docker_argv"]
        # The property is not vacuous: the value really reached an argument or an env file.
        delivered = [*rank["docker_argv"], *(v for f in rank["env_files"].values() for v in f.values())]
        assert any(value.rstrip("/") in item for item in delivered)
        for name, values in rank["env_files"].items():
            text = (target / name).read_text()
            assert docker_env_file(text) == values
            assert systemd_environment(text) == values
    return True


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_free_text_is_refused_or_round_trips(base_data: dict[str, Any], field: str,
                                             record_property: Any) -> None:
    reached: list[str] = []

    @settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(value=st.one_of(TEXT, ACCEPTED[field]))
    def check(value: str) -> None:
        if _refused_or_round_trips(base_data, field, value):
            reached.append(value)

    for value in EXAMPLES:
        check = example(value=value)(check)
    check()
    record_property("reached_round_trip", len(reached))
    assert reached, f"{field}: no example got past validation, so the round-trip asserts never ran"


def test_an_injection_attempt_is_refused() -> None:
    data = yaml.safe_load(REFERENCE_PROFILE.read_text())
    data["model"]["aliases"] = ["x\nSGLANG_EVIL=1"]
    with tempfile.TemporaryDirectory() as tmp:
        errors, files = _compile(data, Path(tmp))
    assert files is None
    assert [(e.rule, e.message) for e in errors] == [
        ("SC111", "model.aliases[0]: 'x\\nSGLANG_EVIL=1' must be printable ASCII with no leading or trailing space")]



def test_a_nul_in_an_engine_argument_is_refused() -> None:
    data = yaml.safe_load(REFERENCE_PROFILE.read_text())
    data["engine"]["args"] = {"log-level": "info\0--evil"}
    with tempfile.TemporaryDirectory() as tmp:
        errors, files = _compile(data, Path(tmp))
    assert files is None
    # The loader refuses it before the model sees it (the model refuses it too, for data built in code).
    assert [(e.rule, e.message) for e in errors] == [
        ("SC113", "the value holds the control character U+0000, which no consumer of a profile value takes")]
