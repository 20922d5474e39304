"""The Kubernetes target's files, checked offline by the tools and schemas that consume them: the strict
Kubernetes OpenAPI schemas (kubernetes-validate) for the pod templates, Service and ConfigMap, our LWS v1
schema for the LeaderWorkerSet envelope, `kubectl kustomize` for the folder, shellcheck for the entrypoint."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ROOT, run_cli_process
from k8s_support import K8S_PROFILE, compile_profile, kube_validate, lws_errors, objects, pod_template_errors
from support.tools import require_tool, shellcheck


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_profile(tmp_path_factory.mktemp("k8s"))


@pytest.fixture(scope="module")
def objs(out: Path) -> dict[str, dict[str, Any]]:
    return objects(out)


def _templates(lws: dict[str, Any]) -> dict[str, dict[str, Any]]:
    lwt = lws["spec"]["leaderWorkerTemplate"]
    return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}


def test_the_folder_holds_the_objects_the_kustomization_lists(out: Path, objs: dict[str, Any]) -> None:
    assert sorted(p.name for p in (out / "k8s").iterdir()) == [
        "README.md", "configmap.yaml", "kustomization.yaml", "leaderworkerset.yaml", "service.yaml"]
    assert objs["kustomization.yaml"]["resources"] == ["configmap.yaml", "service.yaml", "leaderworkerset.yaml"]


def test_pod_templates_pass_the_strict_podtemplatespec_schema(objs: dict[str, Any]) -> None:
    for role, template in _templates(objs["leaderworkerset.yaml"]).items():
        assert pod_template_errors(template) == "", role


def test_enum_table_matches_the_schema_text() -> None:
    from k8s_support import ENUMS, schema_description

    for (kind, field), values in ENUMS.items():
        text = schema_description(kind, field)
        for value in values:
            assert (value or "empty string") in text, (kind, field, value, text)


def test_lws_envelope_passes_our_lws_v1_schema(objs: dict[str, Any]) -> None:
    assert lws_errors(objs["leaderworkerset.yaml"]) == []


def test_service_and_configmap_pass_the_strict_schemas(objs: dict[str, Any]) -> None:
    kube_validate(objs["service.yaml"])
    kube_validate(objs["configmap.yaml"])


def test_kubernetes_validate_cli_strict_passes_service_and_configmap(out: Path) -> None:
    # The tool itself, as an operator would run it: --strict rejects unknown fields. It has no schema
    # for LeaderWorkerSet (a CRD) or Kustomization (not an API object), and says so with a WARN line;
    # those two are checked by our LWS schema and by kustomize instead.
    tool = require_tool("kubernetes-validate")
    files = [str(out / "k8s" / name) for name in ("configmap.yaml", "service.yaml", "leaderworkerset.yaml")]
    proc = subprocess.run([tool, "--strict", "-k", "1.33.0", *files], capture_output=True, text=True, check=False)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [ln for ln in lines if ln.startswith("INFO")] and not [ln for ln in lines if ln.startswith("ERROR")]
    warnings = [ln for ln in lines if ln.startswith("WARN")]
    assert len(warnings) == 1 and "LeaderWorkerSet" in warnings[0], lines


def test_kubectl_kustomize_renders_the_folder_into_valid_objects(out: Path, objs: dict[str, Any]) -> None:
    kubectl = require_tool("kubectl")
    proc = subprocess.run([kubectl, "kustomize", str(out / "k8s")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    rendered = {doc["kind"]: doc for doc in yaml.safe_load_all(proc.stdout)}
    assert sorted(rendered) == ["ConfigMap", "LeaderWorkerSet", "Service"]
    kube_validate(rendered["ConfigMap"])
    kube_validate(rendered["Service"])
    assert lws_errors(rendered["LeaderWorkerSet"]) == []
    # kustomize changes nothing of ours: the same objects come out.
    assert rendered["LeaderWorkerSet"] == objs["leaderworkerset.yaml"]
    assert rendered["ConfigMap"] == objs["configmap.yaml"]


def test_entrypoint_passes_shellcheck(objs: dict[str, Any], tmp_path: Path) -> None:
    script = tmp_path / "entrypoint.sh"
    script.write_text(objs["configmap.yaml"]["data"]["entrypoint.sh"])
    assert shellcheck(script) == ""


def test_pods_have_what_sglang_needs_over_roce(objs: dict[str, Any]) -> None:
    lws = objs["leaderworkerset.yaml"]
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 4
    assert lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    for role, template in _templates(lws).items():
        spec, container = template["spec"], template["spec"]["containers"][0]
        assert (spec["hostNetwork"], spec["dnsPolicy"], spec["hostIPC"]) == (True, "ClusterFirstWithHostNet", True)
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "1", "memory": "112Gi"}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
        assert volumes["infiniband"]["hostPath"]["path"] == "/dev/infiniband"
        assert "livenessProbe" not in container, role
        assert container["image"].partition("@")[2].startswith("sha256:")
    leader = _templates(lws)["leader"]["spec"]["containers"][0]
    assert leader["ports"] == [{"name": "api", "containerPort": 8210, "protocol": "TCP"}]
    assert leader["startupProbe"]["httpGet"] == {"path": "/health", "port": "api"}
    assert leader["startupProbe"]["failureThreshold"] * leader["startupProbe"]["periodSeconds"] == 2400
    assert "ports" not in _templates(lws)["worker"]["spec"]["containers"][0]


def test_device_plugin_mode_asks_for_the_resource_instead_of_privilege(tmp_path: Path) -> None:
    out = compile_profile(tmp_path, "kubernetes:\n  rdma: {mode: device-plugin, resource: rdma/rdma_shared_device_a}\n")
    lws = objects(out)["leaderworkerset.yaml"]
    for role, template in _templates(lws).items():
        container = template["spec"]["containers"][0]
        assert container["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
        assert "privileged" not in container["securityContext"]
        assert "infiniband" not in {v["name"] for v in template["spec"]["volumes"]}
        assert pod_template_errors(template) == "", role


def test_output_is_byte_deterministic_across_hash_seeds_locales_and_zones(tmp_path: Path) -> None:
    runs = []
    for seed, locale, zone in (("0", "C.UTF-8", "UTC"), ("1234", "C", "Pacific/Chatham")):
        root = tmp_path / seed
        root.mkdir()
        env = {"PYTHONHASHSEED": seed, "LC_ALL": locale, "TZ": zone}
        result = run_cli_process(str(K8S_PROFILE), "--out", str(root), env=env)
        assert result.returncode == 0, result.stderr
        runs.append({p.name: p.read_bytes() for p in sorted((root / "dsv41-k8s" / "k8s").iterdir())})
    assert runs[0] == runs[1]


HOSTILE = ["yes", "on", "0x1F", "1e3", "012", "# not a comment", "a: b", "...", "---", "- item", "{x}", "'q'",
           '"d"', "~", "null", " lead", "trail ", "tab\tin", "two\nlines\n", "last line has no newline\nx",
           "*alias", "&anchor", "!tag", "%directive", "@at", "`tick`", "\u00e9", "", "=", "0o17", "1_000", ".inf",
           "-.5", "+1", "0b101", "1:20", "2026-11-30", "Yes", "NO", "True", "Null", "<<", "? key", "| block"]


def test_hostile_strings_are_quoted_by_the_serialiser(tmp_path: Path) -> None:
    # What YAML would read as something else (a boolean, a number, a comment, a mapping, null, an alias),
    # written by our serialiser and read back by kustomize's Go YAML parser, the real consumer.
    from spark_compile.targets.k8s_render import yaml_text

    kubectl = require_tool("kubectl")
    data = {f"k{i}": value for i, value in enumerate(HOSTILE)}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile"}, "data": data}
    (tmp_path / "configmap.yaml").write_text(yaml_text(config, "hostile"))
    (tmp_path / "kustomization.yaml").write_text("resources: [configmap.yaml]\n")
    assert yaml.safe_load((tmp_path / "configmap.yaml").read_text())["data"] == data
    proc = subprocess.run([kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    # kustomize prints "=" and "<<" plain (YAML 1.2 strings), which PyYAML's 1.1 loader cannot construct as
    # values (yaml/pyyaml#89): read them as the text they are.
    class Loader(yaml.SafeLoader):
        pass

    def as_text(load: yaml.SafeLoader, node: yaml.Node) -> str:
        assert isinstance(node, yaml.ScalarNode)
        return str(load.construct_scalar(node))

    loader = Loader
    for tag in ("tag:yaml.org,2002:value", "tag:yaml.org,2002:merge"):
        loader.add_constructor(tag, as_text)
    assert yaml.load(proc.stdout, Loader=loader)["data"] == data


def test_a_dollar_in_a_flag_reaches_the_engine_literally(tmp_path: Path) -> None:
    from k8s_support import kubelet_expand

    out = compile_profile(tmp_path, "engine:\n  args:\n    chat-template: /t/$(HOME)-$$x.jinja\n")
    args = objects(out)["leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    values = args["spec"]["containers"][0]["args"]
    # The kubelet expands $(VAR) in args, and $$ is its escape for a literal $.
    written = values[values.index("--chat-template") + 1]
    assert written == "/t/$$(HOME)-$$$$x.jinja"
    assert kubelet_expand(written, {"HOME": "/root"}) == "/t/$(HOME)-$$x.jinja"


def test_secret_variables_come_from_a_secret_never_from_the_files(tmp_path: Path) -> None:
    out = compile_profile(tmp_path, "secrets:\n  env:\n    HF_TOKEN: {file: /etc/sglang/hf-token}\n")
    objs = objects(out)
    worker = objs["leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    env = worker["spec"]["containers"][0]["env"]
    ref = {"secretKeyRef": {"name": "dsv41-k8s-secrets", "key": "HF_TOKEN"}}
    assert env == [{"name": "HF_TOKEN", "valueFrom": ref}]
    assert pod_template_errors(worker) == ""
    assert not any("HF_TOKEN" in text for text in objs["configmap.yaml"]["data"].values())
    assert "`dsv41-k8s-secrets`" in (out / "k8s" / "README.md").read_text()


@pytest.mark.parametrize("example", sorted(p.stem for p in (ROOT / "spec" / "profiles" / "examples").glob("*.yaml")))
def test_every_shipped_example_compiles_to_valid_objects(example: str, tmp_path: Path) -> None:
    from conftest import REFERENCE_PROFILE

    base = REFERENCE_PROFILE.parent / "examples" / f"{example}.yaml"
    out = compile_profile(tmp_path, "", "--target", "kubernetes", base=base)
    objs = objects(out)
    lws = objs["leaderworkerset.yaml"]
    assert lws_errors(lws) == []
    kube_validate(objs["service.yaml"])
    kube_validate(objs["configmap.yaml"])
    for role, template in _templates(lws).items():
        assert pod_template_errors(template) == "", (example, role)
        container, volumes = template["spec"]["containers"][0], {v["name"] for v in template["spec"]["volumes"]}
        rdma = "roce" in example
        assert ("infiniband" in volumes) == rdma and container["securityContext"].get("privileged", False) == rdma
        node_ip = {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
        assert (node_ip in container.get("env", [])) == ("1spark" in example or example == "single-node")
    script = tmp_path / "entrypoint.sh"
    script.write_text(objs["configmap.yaml"]["data"]["entrypoint.sh"])
    assert shellcheck(script) == ""


def test_every_target_writes_env_files_with_the_one_writer() -> None:
    """The ConfigMap's env files and the nodes' come from quoting.env_file: a value either consumer would read
    differently is refused as a finding (exit 1), never a ValueError (exit 3)."""
    from spark_compile.common import quoting
    from spark_compile.common.errors import EXIT_FINDINGS, UnquotableError
    from spark_compile.stages import render
    from spark_compile.targets import k8s

    assert vars(k8s)["env_file"] is quoting.env_file is render.environment().filters["envfile"]
    assert quoting.env_file([("A", "1"), ("B", "x y")]) == "A=1\nB=x y\n"
    with pytest.raises(UnquotableError) as refused:
        quoting.env_file([("A", "1"), ("B", 'say "hi"')])
    assert refused.value.exit_code == EXIT_FINDINGS
    assert str(refused.value) == ("'say \"hi\"' cannot be written for an env file: contains a quote or backslash: "
                                  "systemd unquotes and unescapes it, docker keeps it as written")
