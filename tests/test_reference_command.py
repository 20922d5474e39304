"""The reference profile reproduces the deployment document's rank-0 `docker run`, with listed differences."""

from __future__ import annotations

from typing import Any

from reference_command import engine_pairs, reference_argv, split_docker

# Every difference between the document's command and rank 0's plan, with its reason. No others.
DOCKER_OPTIONS_ONLY_IN_REFERENCE = {
    # systemd runs the container in the foreground (Type=exec) so the unit's state is the container's.
    ("-d", None),
}
ENGINE_FLAG_RENAMES = {
    # --tp works only as argparse's prefix abbreviation of --tp-size; the plan writes the real name.
    "--tp": "--tp-size",
}
PROBED = {"NCCL_IB_GID_INDEX", "B12X_ROCE_GID_INDEX"}  # found on the node at start, written to runtime.env


def _env_from_e(options: list[tuple[str, str | None]]) -> dict[str, str]:
    env = {}
    for flag, value in options:
        if flag == "-e":
            assert value is not None
            name, _, val = value.partition("=")
            env[name] = val
    return env


def _same_value(a: str | None, b: str | None) -> bool:
    if a == b:
        return True
    try:
        return a is not None and b is not None and float(a) == float(b)  # 0.80 and 0.8 are one value
    except ValueError:
        return False


def test_docker_options_match(reference_plan: Any) -> None:
    ref_options, _, _ = split_docker(reference_argv())
    plan_options, _, _ = split_docker(list(reference_plan.ranks[0].docker_argv))
    ref = {o for o in ref_options if o[0] != "-e"} - DOCKER_OPTIONS_ONLY_IN_REFERENCE
    ours = {o for o in plan_options if o[0] != "--env-file"}
    assert ours == ref
    # The environment travels in env files (one per concern, plus the runtime file) instead of -e.
    env_files = [value for flag, value in plan_options if flag == "--env-file"]
    assert env_files == [
        "/etc/spark-compile/dsv41-4spark/engine.env", "/etc/spark-compile/dsv41-4spark/nccl.env",
        "/etc/spark-compile/dsv41-4spark/overlay.env", "/run/spark-compile/dsv41-4spark/runtime.env",
    ]


# Set by the profile beyond the document's command, as the peer launcher does (the profile says why).
ONLY_IN_PROFILE = {"NCCL_DEBUG": "WARN"}


def test_environment_matches_as_a_set(reference_plan: Any) -> None:
    ref_options, _, _ = split_docker(reference_argv())
    ref_env = {**_env_from_e(ref_options), **ONLY_IN_PROFILE}
    plan_env = reference_plan.ranks[0].env
    assert set(plan_env) == set(ref_env)
    assert {n: v for n, v in ref_env.items() if n not in PROBED} == {
        n: v for n, v in plan_env.items() if n not in PROBED
    }
    assert {n for n, v in plan_env.items() if v is None} == PROBED
    assert set(reference_plan.ranks[0].runtime_env) == PROBED
    assert {ref_env[n] for n in PROBED} == {"<probed>"}


def test_image_and_entrypoint_match(reference_plan: Any) -> None:
    ref_options, ref_image, ref_command = split_docker(reference_argv())
    plan_options, plan_image, plan_command = split_docker(list(reference_plan.ranks[0].docker_argv))
    assert plan_image == ref_image == "aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7.1"
    assert dict(plan_options)["--entrypoint"] == dict(ref_options)["--entrypoint"] == "python3"
    assert plan_command[:2] == ref_command[:2] == ["-m", "sglang.launch_server"]


def test_engine_flags_match(reference_plan: Any) -> None:
    _, _, ref_command = split_docker(reference_argv())
    _, _, plan_command = split_docker(list(reference_plan.ranks[0].docker_argv))
    ref = {ENGINE_FLAG_RENAMES.get(flag, flag): value for flag, value in engine_pairs(ref_command).items()}
    ours = engine_pairs(plan_command)
    assert set(ours) == set(ref)
    different = {flag: (ref[flag], ours[flag]) for flag in ref if not _same_value(ref[flag], ours[flag])}
    assert different == {}


def test_reference_command_parses_whole() -> None:
    argv = reference_argv()
    assert argv[-2:] == ["--default-chat-template-kwargs", '{"thinking":true}']
    assert ("-e", "SPARK_ENGRAM_DIR=/engram-local") in split_docker(argv)[0]
