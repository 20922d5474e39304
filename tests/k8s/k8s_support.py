"""Helpers for the Kubernetes target's tests: compile a profile, read its objects, validate them against
the real schemas (kubernetes-validate's bundled strict OpenAPI schemas; our LWS v1 schema), and run the
generated entrypoint under bash against a fake sysfs with a stand-in launcher that records what it got."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from conftest import ROOT, run_cli
from support.fleet_install import SCRIPTS

K8S_PROFILE = Path(__file__).resolve().parent / "profiles" / "dsv41-k8s.yaml"
LWS_SCHEMA = ROOT / "spec" / "schemas" / "leaderworkerset-v1.schema.json"
KUBE_VERSION = "1.33"  # a recent Kubernetes; LWS needs >= 1.26
HCA = "rocep1s0f0"
IFACE = "enp1s0f0np0"


def compile_profile(root: Path, text: str = "", *args: str, base: Path = K8S_PROFILE) -> Path:
    """Compile ``base`` (or a child of it with ``text`` appended) under root; return generated/<name>/."""
    profile = base
    if text:
        profile = root / "child.yaml"
        profile.write_text(f"extends: {os.path.relpath(base, root)}\n{text}")
    result = run_cli(str(profile), "--out", str(root / "generated"), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return next(p for p in (root / "generated").iterdir() if p.is_dir() and p.name != SCRIPTS)


def objects(out: Path) -> dict[str, dict[str, Any]]:
    """Every YAML file under k8s/, parsed, by file name."""
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((out / "k8s").glob("*.yaml"))}


def kube_validate(obj: dict[str, Any]) -> None:
    """Strict validation against the bundled Kubernetes schema; an unknown kind is a failure, not a warning."""
    from kubernetes_validate import utils

    try:
        utils.validate(obj, KUBE_VERSION, strict=True)
    except utils.SchemaNotFoundError as missing:  # the CLI's WARN: no schema means nothing was checked
        raise AssertionError(missing.message) from None


# The OpenAPI schemas state these enums only in prose ("One of Always, Never, IfNotPresent"), so the JSON
# Schema accepts any string; test_enum_table_matches_the_schema_text holds this table to that prose.
ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("Container", "imagePullPolicy"): ("Always", "Never", "IfNotPresent"),
    ("PodSpec", "dnsPolicy"): ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
    ("PodSpec", "restartPolicy"): ("Always", "OnFailure", "Never"),
    ("ContainerPort", "protocol"): ("UDP", "TCP", "SCTP"),
    ("EmptyDirVolumeSource", "medium"): ("", "Memory"),
}


def _enum_errors(template: dict[str, Any]) -> list[str]:
    spec = template.get("spec", {})
    found: list[tuple[str, str, Any]] = [("PodSpec", k, spec[k]) for k in ("dnsPolicy", "restartPolicy") if k in spec]
    for container in spec.get("containers", []):
        if "imagePullPolicy" in container:
            found.append(("Container", "imagePullPolicy", container["imagePullPolicy"]))
        found += [("ContainerPort", "protocol", p["protocol"]) for p in container.get("ports", []) if "protocol" in p]
    found += [("EmptyDirVolumeSource", "medium", v["emptyDir"]["medium"]) for v in spec.get("volumes", [])
              if "medium" in v.get("emptyDir", {})]
    return [f"{kind}.{field}: {value!r} is not one of {ENUMS[kind, field]}" for kind, field, value in found
            if value not in ENUMS[kind, field]]


def pod_template_errors(template: dict[str, Any]) -> str:
    """'' when ``template`` is a valid PodTemplateSpec (checked as a v1 PodTemplate, plus the enums the
    schema states in prose), else the errors."""
    from kubernetes_validate.utils import ValidationError

    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "probe"}, "template": template}
    errors = _enum_errors(template)
    try:
        kube_validate(wrapper)
    except ValidationError as err:
        errors.insert(0, f"{'.'.join(str(p) for p in err.path)}: {err.message}")
    return "; ".join(errors)


def schema_description(kind: str, field: str) -> str:
    """The bundled core/v1 schema's description of kind.field."""
    from kubernetes_validate import utils

    version = f"v{[v for v in utils.all_versions() if utils.major_minor(v) <= KUBE_VERSION][-1]}-local-strict"
    defs = utils.schema_contents(f"kubernetes-json-schema/{version}/_definitions.json", KUBE_VERSION)["$defs"]
    return str(defs[f"io.k8s.api.core.v1.{kind}"]["properties"][field]["description"])


@functools.cache
def _lws_validator() -> Any:
    import jsonschema

    schema = json.loads(LWS_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def lws_errors(obj: dict[str, Any]) -> list[str]:
    """Every error of the LeaderWorkerSet envelope against our LWS v1 schema."""
    return [f"{'.'.join(str(p) for p in e.path)}: {e.message}" for e in _lws_validator().iter_errors(obj)]


def fake_sysfs(root: Path, ip: str, extra_hcas: tuple[str, ...] = ("roceP2p1s0f0",), index: int = 3) -> Path:
    """A sysfs whose first HCA carries a link-local GID at 0, a RoCE v1 GID of ``ip`` at 1 and its RoCE v2
    GID at ``index``, as the kernel lays them out; returns the root to put in SPARK_SYSFS_ROOT."""
    a, b, c, d = (int(x) for x in ip.split("."))
    mapped = f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"
    port = root / "sys" / "class" / "infiniband" / HCA / "ports" / "1"
    entries = {0: ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"), 1: (mapped, "IB/RoCE v1"),
               index: (mapped, "RoCE v2")}
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True, exist_ok=True)
    for n, (gid, kind) in entries.items():
        (port / "gids" / str(n)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(n)).write_text(kind + "\n")
        (port / "gid_attrs" / "ndevs" / str(n)).write_text(IFACE + "\n")
    for hca in extra_hcas:
        (root / "sys" / "class" / "infiniband" / hca).mkdir(parents=True, exist_ok=True)
    return root


def fake_fib_trie(root: Path, local: tuple[str, ...]) -> Path:
    """A /proc/net/fib_trie (Main and Local tables, as the kernel prints them) whose node owns ``local``,
    plus a loopback and an address on another network; returns the root to put in SPARK_SYSFS_ROOT."""
    def leaf(ip: str, kind: str) -> str:
        return f"        |-- {ip}\n           /32 host {kind}\n"

    table = ("     +-- 0.0.0.0/0 3 0 5\n        |-- 0.0.0.0\n           /0 universe UNICAST\n"
             + leaf("127.0.0.1", "LOCAL") + leaf("10.9.8.7", "LOCAL") + "".join(leaf(ip, "LOCAL") for ip in local)
             + "        |-- 10.9.8.255\n           /32 link BROADCAST\n")
    path = root / "proc" / "net" / "fib_trie"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"Main:\n{table}Local:\n{table}")
    return root


RECORDER = """#!/bin/bash
# Stand-in launcher: records its argv and environment NUL-separated, as exec handed them over.
printf '%s\\0' "$@" > "$RECORD_DIR/argv"
env -0 > "$RECORD_DIR/env"
"""


def kubelet_expand(value: str, env: dict[str, str]) -> str:
    """The kubelet's expansion of command/args: $(VAR) from the container env, $$ is a literal $,
    anything else kept (k8s.io/kubernetes third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i) and ")" in value[i:]:
            end = value.index(")", i)
            name = value[i + 2:end]
            out.append(env.get(name, value[i:end + 1]))
            i = end + 1
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def run_pod(config: dict[str, str], container: dict[str, Any], lws_env: dict[str, str], sysfs: Path,
            work: Path) -> tuple[subprocess.CompletedProcess[str], list[str], dict[str, str]]:
    """Run one pod's container as the kubelet would: the ConfigMap mounted, $(VAR) expanded, bash running
    the entrypoint with a recording `python3` first on PATH. Returns the run, the argv and env it exec'd."""
    mount, bin_dir, record = work / "config", work / "bin", work / "record"
    for folder in (mount, bin_dir, record):
        folder.mkdir(parents=True, exist_ok=True)
    for key, text in config.items():
        (mount / key).write_text(text)
    (bin_dir / "python3").write_text(RECORDER)
    (bin_dir / "python3").chmod(0o755)
    command = [kubelet_expand(a, lws_env) for a in container["command"]]
    args = [kubelet_expand(a, lws_env) for a in container["args"]]
    assert command == ["/bin/bash", "/etc/spark-compile/entrypoint.sh"]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD_DIR": str(record), "SPARK_SYSFS_ROOT": str(sysfs),
           **lws_env}
    proc = subprocess.run(["/bin/bash", str(mount / "entrypoint.sh"), *args], env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0 or not (record / "argv").exists():
        return proc, [], {}
    argv = (record / "argv").read_text().split("\0")[:-1]
    pairs = [item.partition("=") for item in (record / "env").read_text().split("\0")[:-1]]
    return proc, argv, {k: v for k, _, v in pairs}
