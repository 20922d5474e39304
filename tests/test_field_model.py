"""The profile model fits what the field runs: RDMA access by construction, the three model path forms, a
separate draft model, typed engine settings, NCCL left alone, per-node values, docker options as typed keys,
and flags written only when something sets them. The docker CLI (against the fake daemon) reads the options."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS, ROOT
from support.tools import docker_create_request

EXAMPLES = ROOT / "spec" / "profiles" / "examples"
TCP = EXAMPLES / "two-node-tcp.yaml"
SINGLE = EXAMPLES / "single-node.yaml"


def _planned(tmp_path: Path, body: str, parent: Path = REFERENCE_PROFILE) -> Any:
    """The pipeline's outcome for a child of ``parent``."""
    from spark_compile.pipeline import run

    path = tmp_path / "child.yaml"
    path.write_text(f"extends: {os.path.relpath(parent, tmp_path)}\n{body}")
    return run(path)


def _plan(tmp_path: Path, body: str, parent: Path = REFERENCE_PROFILE) -> tuple[Any, Any]:
    """The validated profile and plan of a child of ``parent``; fails on any error finding."""
    from spark_compile.pipeline import Planned

    outcome = _planned(tmp_path, body, parent)
    assert isinstance(outcome, Planned), [f"{f.rule} {f.message}" for f in outcome.findings]
    return outcome.profile, outcome.plan


def _findings(tmp_path: Path, body: str, parent: Path = REFERENCE_PROFILE) -> list[str]:
    return [f"{f.rule} {f.message}" for f in _planned(tmp_path, body, parent).findings
            if f.rule not in REFERENCE_WARNINGS]


def _request(rank: Any) -> dict[str, Any]:
    """What the docker CLI sends for the rank's command line; the env files (on the node only) left out."""
    options = [word for o in rank.docker_options if o.flag != "--env-file" for word in o.words]
    return docker_create_request(["docker", "run", *options, "--entrypoint", rank.launcher[0], rank.image,
                                  *rank.launcher[1:], *rank.engine_argv])


def _host_config(rank: Any) -> dict[str, Any]:
    return _request(rank)["body"]["HostConfig"]  # type: ignore[no-any-return]


def _options(rank: Any, flag: str) -> list[tuple[tuple[str, ...], str]]:
    from spark_compile.common.findings import dotted

    return [(o.values, dotted(o.source)) for o in rank.docker_options if o.flag == flag]


def test_rdma_access_by_construction_means_what_the_reference_lists_by_hand(tmp_path: Path,
                                                                              reference_plan: Any) -> None:
    _, plan = _plan(tmp_path, "container:\n  cap_add: !delete\n  devices: !delete\n  ulimits:\n    memlock: !delete\n")
    derived, listed = plan.ranks[1], reference_plan.ranks[1]
    assert _options(derived, "--device") == [(("/dev/infiniband",), "fleet.fabric.kind")]
    assert _options(derived, "--cap-add") == [(("IPC_LOCK",), "fleet.fabric.kind")]
    assert _options(derived, "--ulimit") == [(("memlock=-1",), "fleet.fabric.kind"),
                                             (("stack=67108864",), "container.ulimits.stack")]
    ours, theirs = _host_config(derived), _host_config(listed)
    for key in ("CapAdd", "Devices", "Ulimits"):
        assert ours[key] == theirs[key], key
    assert theirs["Devices"] == [{"PathOnHost": "/dev/infiniband", "PathInContainer": "/dev/infiniband",
                                  "CgroupPermissions": "rwm"}]


def test_tcp_gives_no_rdma_access_and_the_profile_may_refuse_it(tmp_path: Path) -> None:
    for rank in _plan(tmp_path, "", TCP)[1].ranks:
        assert not {"--device", "--cap-add", "--ulimit"} & {o.flag for o in rank.docker_options}
        assert not {"Devices", "CapAdd", "Ulimits"} & {k for k, v in _host_config(rank).items() if v}
    assert _findings(tmp_path, "container:\n  rdma_access: false\n  devices: !delete\n") == [
        "SC426 the roce fabric's HCAs are unreachable: the container gets no /dev/infiniband (rdma_access is false, "
        "no such device, not privileged)"]


def test_the_three_model_path_forms(tmp_path: Path) -> None:
    plain_profile, plain = _plan(tmp_path, "model:\n  snapshot: !delete\n", SINGLE)
    rank = plain.ranks[0]
    assert rank.engine_argv[:2] == ("--model-path", "/models/repo")
    assert ("/srv/models/qwen3-30b-a3b", "/models/repo", True) in [(m.source, m.target, m.read_only)
                                                                   for m in rank.mounts]
    _, hub = _plan(tmp_path, "model:\n  repo: !delete\n  snapshot: !delete\n  hub_id: Qwen/Qwen3-30B-A3B\n", SINGLE)
    rank = hub.ranks[0]
    assert rank.engine_argv[:2] == ("--model-path", "Qwen/Qwen3-30B-A3B")
    assert [m.target for m in rank.mounts] == ["/root/.cache", "/hf-cache"]  # the HF cache lives in the cache
    assert plain_profile.model.snapshot is None


def test_a_gguf_file_of_a_hub_repo(tmp_path: Path) -> None:
    # SGLang 0.5.23 (arg_groups/model_path_hook.py) downloads owner/repo:TYPE as the repo's one *-TYPE.gguf
    hub = "model:\n  repo: !delete\n  snapshot: !delete\n  hub_id: example-org/Qwen3-30B-A3B-GGUF\n"
    profile, plan = _plan(tmp_path, hub + "  gguf: UD-Q4_K_XL\n", SINGLE)
    assert plan.ranks[0].engine_argv[:2] == ("--model-path", "example-org/Qwen3-30B-A3B-GGUF:UD-Q4_K_XL")
    assert profile.model.gguf == "UD-Q4_K_XL"
    assert _findings(tmp_path, "model:\n  gguf: Q6_K\n", SINGLE) == [
        "SC111 model: gguf picks the .gguf file of a hub repo (--model-path <hub_id>:<gguf>, which SGLang downloads); "
        "a directory (repo) has no such form: give hub_id instead of repo, or remove gguf"]
    assert _findings(tmp_path, hub + "  gguf: Q6_K.gguf\n", SINGLE) == [
        "SC111 model.gguf: 'Q6_K.gguf' is not a GGUF quantization type: the end of a .gguf file name in the repo "
        "(e.g. Q6_K, Q4_K_M, UD-Q4_K_XL), 1-64 letters, digits, '_' and '-'"]


def test_model_path_form_errors_say_which_forms_exist(tmp_path: Path) -> None:
    forms = ("a model path takes one of three forms: an HF cache (repo + snapshot), a plain directory (repo alone) "
             "or a hub id (hub_id alone, resolved in the container's HF cache); give exactly one of repo or hub_id")
    assert f"SC111 model: {forms}" in _findings(tmp_path, "model:\n  hub_id: Qwen/Qwen3-30B-A3B\n"
                                                          "  snapshot: !delete\n", SINGLE)
    dot = _findings(tmp_path, "model:\n  snapshot: '.'\n", SINGLE)
    assert len(dot) == 1 and "a model path takes one of three forms: an HF cache (repo + snapshot: " \
                             "<repo>/snapshots/<snapshot>), a plain directory (repo alone, no snapshot)" in dot[0]


def test_the_draft_model_is_mounted_read_only_with_its_own_quantization() -> None:
    from spark_compile.pipeline import planned, run

    outcome = planned(run(EXAMPLES / "qwen3-235b-nvfp4-2spark-roce.yaml"))
    profile, plan = outcome.profile, outcome.plan
    rank = plan.ranks[1]
    argv = list(rank.engine_argv)
    assert argv[argv.index("--speculative-draft-model-path") + 1] == "/models/draft"
    assert argv[argv.index("--speculative-draft-model-quantization") + 1] == "unquant"
    assert ("/srv/models/Qwen3-235B-A22B-EAGLE3", "/models/draft", True, "engine.speculative.draft.repo") in [
        (m.source, m.target, m.read_only, ".".join(str(p) for p in m.origin)) for m in rank.mounts]
    binds = _host_config(rank)["Binds"]
    assert "/srv/models/Qwen3-235B-A22B-EAGLE3:/models/draft:ro" in binds
    draft = profile.engine.speculative.draft
    assert draft is not None and draft.quantization == "unquant"


def test_typed_engine_settings_reach_the_argv_with_their_origin(tmp_path: Path) -> None:
    body = ("engine:\n  kv_cache_dtype: fp8_e4m3\n  page_size: 64\n  parallel: {tp: 2, dp: 2, dp_attention: true}\n"
            "  cuda_graph: {batch_sizes: [1, 2, 4]}\n  chat:\n    thinking: false\n"
            "    template_kwargs: {enable_thinking: false, reasoning_effort: low}\n"
            "  speculative: {algorithm: DFLASH}\nmodel:\n  quantization: fp8\n")
    _, plan = _plan(tmp_path, body, TCP)
    options = {o.flag: (o.values, ".".join(str(p) for p in o.source)) for o in plan.ranks[0].engine_options}
    assert options["--kv-cache-dtype"] == (("fp8_e4m3",), "engine.kv_cache_dtype")
    assert options["--page-size"] == (("64",), "engine.page_size")
    assert options["--dp-size"] == (("2",), "engine.parallel.dp")
    assert options["--enable-dp-attention"] == ((), "engine.parallel.dp_attention")
    assert options["--cuda-graph-bs-decode"] == (("1", "2", "4"), "engine.cuda_graph.batch_sizes")
    assert options["--quantization"] == (("fp8",), "model.quantization")
    assert options["--speculative-algorithm"] == (("DFLASH",), "engine.speculative.algorithm")
    assert options["--default-chat-template-kwargs"] == (
        ('{"thinking":false,"enable_thinking":false,"reasoning_effort":"low"}',), "engine.chat.thinking")
    assert _findings(tmp_path, "engine:\n  args: {page-size: 64}\n", TCP) == [
        "SC213 --page-size is written by the plan from engine.page_size"]


def test_pipeline_stages_fill_the_fleet_with_tp(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "engine:\n  parallel: {tp: 1, pp: 2}\n", TCP)
    options = {o.flag: (o.values, ".".join(str(p) for p in o.source)) for o in plan.ranks[1].engine_options}
    assert (options["--tp-size"], options["--pp-size"]) == ((("1",), "engine.parallel.tp"),
                                                            (("2",), "engine.parallel.pp"))
    assert "--pp-size" not in _plan(tmp_path, "", TCP)[1].ranks[0].engine_argv  # unset: not written
    # the stages' layer split is SGLang's: the TP split of the estimate would overstate a rank's weights
    # (the reference's DeepSeek-V4.1 refuses pipeline parallelism itself, SC253; its plan and budget are made)
    outcome = _planned(tmp_path, "engine:\n  parallel: {tp: 2, ep: 2, pp: 2}\n")
    assert [f.rule for f in outcome.findings if f.severity == "error"] == ["SC253"]
    weights = [r.terms["weights"] for r in outcome.planned.capacity.ranks]
    # nodes 0-1 are the first stage (layers 0-19 of 40), 2-3 the second: node_rank // (nnodes // pp)
    assert [w.source.split("pp stage ")[1].split(",")[0] for w in weights] == ["layers 0-19 of 40"] * 2 + [
        "layers 20-39 of 40"] * 2
    # TP 2 x PP 2 splits the model four ways, as the reference's TP 4 does: about the same share per rank
    four_ways = _planned(tmp_path, "").capacity.ranks[0].terms["weights"].gib  # the reference: no error
    assert all(abs((w.gib or 0.0) - four_ways) / four_ways < 0.01 for w in weights), (weights, four_ways)


def test_an_unknown_nccl_variable_warns(tmp_path: Path) -> None:
    # NCCL ignores a name it does not read (launchers pass NCCL_TIMEOUT): it starts all the same
    from spark_compile.pipeline import Planned

    outcome = _planned(tmp_path, "nccl:\n  extra: {NCCL_TIMEOUT: '1200000'}\n", TCP)
    assert isinstance(outcome, Planned)
    assert [(f.rule, f.severity, f.message) for f in outcome.findings if f.rule == "SC309"] == [
        ("SC309", "warning", "NCCL does not read NCCL_TIMEOUT")]


def test_flags_are_written_only_when_something_sets_them(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "model:\n  served_name: !delete\nengine:\n  host: !delete\n  parallel: !delete\n",
                    SINGLE)
    argv = plan.ranks[0].engine_argv
    assert not {"--served-model-name", "--host", "--tp-size"} & set(argv)


def test_nccl_left_at_its_defaults(tmp_path: Path) -> None:
    _, single = _plan(tmp_path, "nccl: {preset: none}\n", SINGLE)
    assert [f.name for f in single.ranks[0].env_files] == ["engine.env"]
    _, roce = _plan(tmp_path, "nccl: {preset: none, extra: {NCCL_DEBUG: INFO}}\n")
    nccl = dict(next(f for f in roce.ranks[1].env_files if f.name == "nccl.env").values)
    assert nccl == {"NCCL_DEBUG": "INFO"}
    assert "NCCL_IB_GID_INDEX" not in roce.ranks[1].runtime_env  # NCCL finds its GID itself
    assert "B12X_ROCE_GID_INDEX" in roce.ranks[1].runtime_env  # the overlay's runtime still needs it


def test_bootstrap_interface_apart_from_the_rdma_devices(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "fleet:\n  fabric: {bootstrap_interface: enP7s7}\n")
    env = plan.ranks[2].env
    assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"], env["NCCL_IB_HCA"]) == (
        "enP7s7", "enP7s7", "rocep1s0f0,roceP2p1s0f0")
    assert _findings(tmp_path, "fleet:\n  fabric: {bootstrap_interface: enP7s7}\nnccl:\n  extra: "
                               "{GLOO_SOCKET_IFNAME: enp1s0f0np0}\n") == [
        "SC416 GLOO_SOCKET_IFNAME=enp1s0f0np0 is not the bootstrap interface enP7s7 "
        "(fleet.fabric.bootstrap_interface)"]


def test_a_node_cabled_otherwise_is_judged_by_its_own_fabric(tmp_path: Path) -> None:
    # spark-3 cabled port 1 to port 0 (nccl.preset none: the variables are the profile's own)
    node = "fleet:\n  nodes:\n    - {name: spark-3, interface: enp1s0f1np1, rdma_devices: [rocep1s0f1]%s}\n"
    own = ", env: {NCCL_SOCKET_IFNAME: enp1s0f1np1, GLOO_SOCKET_IFNAME: enp1s0f1np1, NCCL_IB_HCA: %s}"

    def fabric_findings(body: str) -> list[str]:
        return [f for f in _findings(tmp_path, body) if f.startswith(("SC415", "SC416"))]
    assert fabric_findings(node % (own % "rocep1s0f1") + "nccl: {preset: none}\n") == []
    assert fabric_findings(node % (own % "rocep1s0f0") + "nccl: {preset: none}\n") == [
        "SC415 NCCL_IB_HCA=rocep1s0f0 names rocep1s0f0 outside fleet.nodes[3]'s RDMA devices rocep1s0f1"]
    # a fleet-wide value reaches every node that sets none of its own
    assert fabric_findings(node % "" + "nccl: {preset: none, extra: {NCCL_SOCKET_IFNAME: enp1s0f0np0}}\n") == [
        "SC416 NCCL_SOCKET_IFNAME=enp1s0f0np0 is not the bootstrap interface enp1s0f1np1 (fleet.nodes[3].interface)"]


def test_per_node_values(tmp_path: Path) -> None:
    body = ("fleet:\n  nodes:\n    - {name: spark-b, container_name: qwen3next_b.1, env: {NODE_IP: 198.51.100.2, "
            "OMPI_MCA_btl_tcp_if_include: enP7s7, NCCL_DEBUG: INFO}}\n")
    _, plan = _plan(tmp_path, body, TCP)
    head, worker = plan.ranks
    assert (head.container_name, worker.container_name) == ("qwen3next", "qwen3next_b.1")
    assert worker.unit.exec_stop[-1] == "qwen3next_b.1"
    engine = dict(next(f for f in worker.env_files if f.name == "engine.env").values)
    assert (engine["NODE_IP"], engine["OMPI_MCA_btl_tcp_if_include"]) == ("198.51.100.2", "enP7s7")
    assert worker.env["NCCL_DEBUG"] == "INFO" and head.env["NCCL_DEBUG"] == "WARN"
    assert "NODE_IP" not in head.env
    assert _request(worker)["name"] == "qwen3next_b.1"


def test_docker_options_as_typed_keys_reach_docker(tmp_path: Path) -> None:
    body = ("container:\n  remove: true\n  detach: true\n  privileged: true\n  user: '1000:1000'\n"
            "  security_opt: [seccomp=unconfined]\n  cpuset_cpus: 0-9\n  shm_size: 32gb\n")
    _, plan = _plan(tmp_path, body, TCP)
    host = _host_config(plan.ranks[0])
    request = _request(plan.ranks[0])["body"]
    assert (host["AutoRemove"], host["Privileged"], host["SecurityOpt"], host["CpusetCpus"]) == (
        True, True, ["seccomp=unconfined"], "0-9")
    assert (request["User"], host["ShmSize"]) == ("1000:1000", 32 << 30)
    assert plan.ranks[0].docker_argv[2] == "-d"


def test_detached_container_is_waited_for(tmp_path: Path) -> None:
    from spark_compile.pipeline import planned

    from support.tools import shellcheck

    files = {a.path: a.content.decode() for a in planned(_planned(tmp_path, "container: {detach: true}\n", TCP)).files}
    script = files["1-spark-b/docker-run.sh"]
    assert "exec /usr/bin/docker run" not in script
    assert script.endswith("status=$(/usr/bin/docker wait qwen3next)\nexit \"$status\"\n")
    (tmp_path / "docker-run.sh").write_text(script)
    assert shellcheck(tmp_path / "docker-run.sh") == ""


def test_grammars_no_stricter_than_their_consumers(tmp_path: Path) -> None:
    assert _findings(tmp_path, "engine:\n  container_name: qwen3_next.v2\ncontainer: {shm_size: 16gb}\n", TCP) == []
    assert _findings(tmp_path, "engine:\n  env: {OMPI_MCA_btl_tcp_if_include: enP7s7}\n", TCP) == []


def test_a_holder_only_with_engram(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "model:\n  holder_repo: /srv/elsewhere\n", TCP)
    assert [m.source for r in plan.ranks for m in r.mounts if m.target == "/models/repo"] == [
        "/srv/models/qwen3-next-80b-a3b"] * 2


def test_catalog_extra_allows_what_the_image_knows(tmp_path: Path) -> None:
    body = "engine:\n  args: {b12x-moe: true}\n  env: {SGLANG_B12X_SPIN: '1'}\n"
    assert _findings(tmp_path, body, TCP) == [
        "SC302 sglang-0.5.23 has no flag --b12x-moe", "SC307 sglang-0.5.23 does not read SGLANG_B12X_SPIN"]
    allowed = body + "  catalog_extra: {flags: [b12x-moe], env: [SGLANG_B12X_SPIN]}\n"
    assert _findings(tmp_path, allowed, TCP) == []


def test_dspark_block_size_from_the_committed_config(tmp_path: Path, reference_plan: Any) -> None:
    found = _findings(tmp_path, "engine:\n  speculative:\n    dspark_block_size: !delete\n    num_draft_tokens: 5\n")
    assert found == ["SC204 num_draft_tokens 5 must be dspark_block_size + 1 = 6"]
    argv = _plan(tmp_path, "engine:\n  speculative:\n    dspark_block_size: !delete\n")[1].ranks[0].engine_argv
    assert "--speculative-dspark-block-size" not in argv
    assert "--speculative-dspark-block-size" in reference_plan.ranks[0].engine_argv


def test_a_hub_id_as_the_draft_model(tmp_path: Path) -> None:
    body = ("engine:\n  speculative:\n    algorithm: EAGLE3\n    draft: {hub_id: AngelSlim/Qwen3-1.7B_eagle3}\n")
    _, plan = _plan(tmp_path, body, TCP)
    argv = list(plan.ranks[0].engine_argv)
    assert argv[argv.index("--speculative-draft-model-path") + 1] == "AngelSlim/Qwen3-1.7B_eagle3"
    assert [m.target for m in plan.ranks[0].mounts] == ["/models/repo", "/root/.cache"]


def test_a_gpu_device_list_reaches_docker_as_one_request_for_those_devices(tmp_path: Path) -> None:
    # Unquoted, docker's CSV reading of `device=0,1` is device 0 plus a count of 1, which its daemon refuses.
    from spark_compile.fleet.audit_plan import gpu_request

    rank = _plan(tmp_path, "container:\n  gpus: device=0,1\n", SINGLE)[1].ranks[0]
    assert _host_config(rank)["DeviceRequests"] == [{"Driver": "", "Count": 0, "DeviceIDs": ["0", "1"],
                                                     "Capabilities": [["gpu"]], "Options": {}}]
    (value,) = [o.values[0] for o in rank.docker_options if o.flag == "--gpus"]
    assert gpu_request(value) == _host_config(rank)["DeviceRequests"]  # what the audit expects docker to record
    rank = _plan(tmp_path, "container:\n  gpus: device=0\n", SINGLE)[1].ranks[0]
    assert _host_config(rank)["DeviceRequests"][0]["DeviceIDs"] == ["0"]
