"""Every string-typed field of the profile schema (and every string key of a mapping), and how to set it.

`schema_string_fields` walks the JSON Schema the CLI prints; FIELDS says, for each, how a child profile of
the reference sets one value there. test_schema_coverage fails when the schema grows a string field that
FIELDS does not cover.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from hostile import setting

Body = dict[str, Any]
SPARK0 = {"name": "spark-0"}
NEW_NODE = {"fabric_ip": "192.0.2.99", "ssh": "spark@192.0.2.99", "home": "/home/spark"}


def schema_string_fields(schema: dict[str, Any]) -> set[str]:
    """Dotted paths of every string in the schema: "[]" a list item, "*" a mapping's value, "<key>" its key."""
    defs = schema.get("$defs", {})
    found: set[str] = set()

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        if "$ref" in node:
            walk(defs[node["$ref"].rsplit("/", 1)[-1]], path)
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                walk(sub, path)
        kind = node.get("type")
        choices = [*node.get("enum", []), *([node["const"]] if "const" in node else [])]
        if kind == "string" or any(isinstance(choice, str) for choice in choices):
            found.add(".".join(path))
        if kind == "object":
            for name, sub in node.get("properties", {}).items():
                walk(sub, (*path, name))
            extra = [node.get("additionalProperties"), *node.get("patternProperties", {}).values()]
            for sub in extra:
                if isinstance(sub, dict):
                    walk(sub, (*path, "*"))
                    found.add(".".join((*path, "<key>")))
        if kind == "array" and isinstance(node.get("items"), dict):
            walk(node["items"], (*path, "[]"))

    walk(schema, ())
    return {path for path in found if path}


def _at(*path: str) -> Callable[[str], Body]:
    return lambda value: setting(path, value)


def _node(key: str) -> Callable[[str], Body]:
    return lambda value: {"fleet": {"nodes": [{**SPARK0, key: value}]}}


def _window_check(**fields: str | None) -> Body:
    check = {"name": "sum", "prompt": "What is 2+2? Reply with the number only.", "expect": "4", **fields}
    return {"operations": {"window": {"checks": [{k: v for k, v in check.items() if v is not None}]}}}


class Delete:
    """`!delete` in the dumped child profile: removes the inherited key."""


yaml.SafeDumper.add_representer(Delete, lambda dumper, _: dumper.represent_scalar("!delete", ""))


def _draft(**fields: str | None) -> Body:
    draft = {"repo": "/srv/models/draft", **fields}
    speculative = {"algorithm": "EAGLE", "dspark_block_size": Delete(),
                   "draft": {k: v for k, v in draft.items() if v is not None}}
    return {"engine": {"speculative": speculative}}


FIELDS: dict[str, Callable[[str], Body]] = {
    "name": _at("name"),
    "release": _at("release"),
    "description": _at("description"),
    "release_notes.date": lambda v: {"release_notes": {"date": v, "reason": "r"}},
    "release_notes.reason": lambda v: {"release_notes": {"date": "2026-09-23", "reason": v}},
    "release_notes.link": lambda v: {"release_notes": {"date": "2026-09-23", "reason": "r", "link": v}},
    "extends": _at("extends"),
    "hardware": _at("hardware"),
    "fleet.fabric.kind": _at("fleet", "fabric", "kind"),
    "fleet.fabric.interface": _at("fleet", "fabric", "interface"),
    "fleet.fabric.subnet": _at("fleet", "fabric", "subnet"),
    "fleet.fabric.rdma_devices.[]": _at("fleet", "fabric", "rdma_devices", "[]"),
    "fleet.fabric.gid_index": _at("fleet", "fabric", "gid_index"),
    "fleet.fabric.bootstrap_interface": _at("fleet", "fabric", "bootstrap_interface"),
    "fleet.nodes.[].name": lambda v: {"fleet": {"nodes": [{"name": v, **NEW_NODE}]}},
    "fleet.nodes.[].fabric_ip": _node("fabric_ip"),
    "fleet.nodes.[].ssh": _node("ssh"),
    "fleet.nodes.[].home": _node("home"),
    "fleet.nodes.[].gid_index": _node("gid_index"),
    "fleet.nodes.[].container_name": _node("container_name"),
    "fleet.nodes.[].interface": _node("interface"),
    "fleet.nodes.[].rdma_devices.[]": lambda v: {"fleet": {"nodes": [{**SPARK0, "rdma_devices": [v]}]}},
    "fleet.nodes.[].env.*": lambda v: {"fleet": {"nodes": [{**SPARK0, "env": {"NODE_IP": v}}]}},
    "fleet.nodes.[].env.<key>": lambda v: {"fleet": {"nodes": [{**SPARK0, "env": {v: "x"}}]}},
    "model.architecture": _at("model", "architecture"),
    "model.repo": _at("model", "repo"),
    "model.holder_repo": _at("model", "holder_repo"),
    "model.container_repo": _at("model", "container_repo"),
    "model.snapshot": _at("model", "snapshot"),
    "model.hub_id": lambda v: {"model": {"hub_id": v, "repo": Delete(), "snapshot": Delete()}},
    "model.gguf": lambda v: {"model": {"hub_id": "Qwen/Qwen3-8B-GGUF", "gguf": v, "repo": Delete(),
                                       "snapshot": Delete()}},
    "model.quantization": _at("model", "quantization"),
    "model.tokenizer": _at("model", "tokenizer"),
    "model.revision": _at("model", "revision"),
    "engine.mamba.ssm_dtype": _at("engine", "mamba", "ssm_dtype"),
    "engine.mamba.backend": _at("engine", "mamba", "backend"),
    "model.served_name": _at("model", "served_name"),
    "model.aliases.[]": lambda v: {"model": {"aliases": ["dsv41-flash", v]}},
    "model.config_json": _at("model", "config_json"),
    "model.engram.local_dir": _at("model", "engram", "local_dir"),
    "model.engram.container_dir": _at("model", "engram", "container_dir"),
    "model.engram.tables.<key>": lambda v: {"model": {"engram": {"tables": {v: 10}}}},
    "engine.image": _at("engine", "image"),
    "engine.catalog": _at("engine", "catalog"),
    "engine.image_build": _at("engine", "image_build"),
    "engine.container_name": _at("engine", "container_name"),
    "engine.launcher.[]": lambda v: {"engine": {"launcher": ["python3", "-m", "sglang.launch_server", v]}},
    "engine.host": _at("engine", "host"),
    "engine.load_format": _at("engine", "load_format"),
    "engine.backends.attention": _at("engine", "backends", "attention"),
    "engine.backends.moe_runner": _at("engine", "backends", "moe_runner"),
    "engine.backends.fp8_gemm": _at("engine", "backends", "fp8_gemm"),
    "engine.speculative.algorithm": _at("engine", "speculative", "algorithm"),
    "engine.speculative.draft.repo": lambda v: _draft(repo=v),
    "engine.speculative.draft.hub_id": lambda v: _draft(hub_id=v, repo=None),
    "engine.speculative.draft.snapshot": lambda v: _draft(snapshot=v),
    "engine.speculative.draft.gguf": lambda v: _draft(hub_id="Qwen/Qwen3-0.6B-GGUF", repo=None, gguf=v),
    "engine.speculative.draft.container_repo": lambda v: _draft(container_repo=v),
    "engine.speculative.draft.config_json": lambda v: _draft(config_json=v),
    "engine.speculative.draft.quantization": lambda v: _draft(quantization=v),
    "engine.kv_cache_dtype": _at("engine", "kv_cache_dtype"),
    "engine.backends.fp4_gemm": _at("engine", "backends", "fp4_gemm"),
    "engine.catalog_extra.flags.[]": _at("engine", "catalog_extra", "flags", "[]"),
    "engine.catalog_extra.env.[]": _at("engine", "catalog_extra", "env", "[]"),
    "engine.catalog_extra.values.*.[]": lambda v: {"engine": {"catalog_extra": {"values": {"fp8-gemm-backend": [v]}}}},
    "engine.catalog_extra.values.<key>": lambda v: {"engine": {"catalog_extra": {"values": {v: ["x"]}}}},
    "engine.chat.template_kwargs.*": lambda v: {"engine": {"chat": {"template_kwargs": {"enable_thinking": v}}}},
    "engine.chat.template_kwargs.<key>": lambda v: {"engine": {"chat": {"template_kwargs": {v: "x"}}}},
    "engine.cuda_graph.max_bs_decode": _at("engine", "cuda_graph", "max_bs_decode"),
    "engine.chat.tool_call_parser": _at("engine", "chat", "tool_call_parser"),
    "engine.chat.reasoning_parser": _at("engine", "chat", "reasoning_parser"),
    "engine.args.*": lambda v: {"engine": {"args": {"chat-template": v}}},
    "engine.args.*.[]": lambda v: {"engine": {"args": {"allowed-media-domains": ["a.example", v]}}},
    "engine.args.<key>": lambda v: {"engine": {"args": {v: "x"}}},
    "engine.accept_rewrites.*": lambda v: {"engine": {"accept_rewrites": {"chat-template": v}}},
    "engine.accept_rewrites.*.[]": lambda v: {"engine": {"accept_rewrites": {"allowed-media-domains": [v]}}},
    "engine.accept_rewrites.<key>": lambda v: {"engine": {"accept_rewrites": {v: "x"}}},
    "engine.env.*": lambda v: {"engine": {"env": {"MY_SITE_VAR": v}}},
    "engine.env.<key>": lambda v: {"engine": {"env": {v: "x"}}},
    "container.memory": _at("container", "memory"),
    "container.memory_swap": _at("container", "memory_swap"),
    "container.shm_size": _at("container", "shm_size"),
    "container.ulimits.*": lambda v: {"container": {"ulimits": {"nofile": v}}},
    "container.ulimits.<key>": lambda v: {"container": {"ulimits": {v: "1024"}}},
    "container.cap_add.[]": _at("container", "cap_add", "[]"),
    "container.devices.[]": _at("container", "devices", "[]"),
    "container.gpus": _at("container", "gpus"),
    "container.user": _at("container", "user"),
    "container.security_opt.[]": _at("container", "security_opt", "[]"),
    "container.cpuset_cpus": _at("container", "cpuset_cpus"),
    "container.network": _at("container", "network"),
    "container.ipc": _at("container", "ipc"),
    "container.cache_dir": _at("container", "cache_dir"),
    "container.mounts.[].source": lambda v: {"container": {"mounts": [{"source": v, "target": "/mnt/extra"}]}},
    "container.mounts.[].target": lambda v: {"container": {"mounts": [{"source": "/srv/extra", "target": v}]}},
    "container.restart": _at("container", "restart"),
    "nccl.preset": _at("nccl", "preset"),
    "nccl.debug": _at("nccl", "debug"),
    "nccl.extra.*": lambda v: {"nccl": {"extra": {"NCCL_HOSTID": v}}},
    "nccl.extra.<key>": lambda v: {"nccl": {"extra": {v: "x"}}},
    "overlay.engram_mode": _at("overlay", "engram_mode"),
    "overlay.lookup_mode": _at("overlay", "lookup_mode"),
    "overlay.mxfp8_backend": _at("overlay", "mxfp8_backend"),
    "overlay.roce_ag_max": _at("overlay", "roce_ag_max"),
    "overlay.roce_ar_max": _at("overlay", "roce_ar_max"),
    "deploy.install_dir": _at("deploy", "install_dir"),
    "deploy.runtime_dir": _at("deploy", "runtime_dir"),
    "deploy.unit_name": _at("deploy", "unit_name"),
    "deploy.docker": _at("deploy", "docker"),
    "operations.log_dir": _at("operations", "log_dir"),
    "operations.image_check.mode": _at("operations", "image_check", "mode"),
    "operations.previous_stack.unit": _at("operations", "previous_stack", "unit"),
    "operations.previous_stack.stop.[]": lambda v: {"operations": {"previous_stack": {"stop": ["/usr/local/bin/old",
                                                                                             v], "relaunch": ["x"]}}},
    "operations.previous_stack.relaunch.[]": lambda v: {"operations": {"previous_stack": {"stop": ["x"],
                                                                                           "relaunch": [v]}}},
    "operations.window.checks.[].name": lambda v: _window_check(name=v),
    "operations.window.checks.[].prompt": lambda v: _window_check(prompt=v),
    "operations.window.checks.[].expect": lambda v: _window_check(expect=v),
    "operations.window.checks.[].pattern": lambda v: _window_check(pattern=v, expect=None),
    "kubernetes.name": _at("kubernetes", "name"),
    "kubernetes.namespace": _at("kubernetes", "namespace"),
    "kubernetes.image": _at("kubernetes", "image"),
    "kubernetes.memory": _at("kubernetes", "memory"),
    "kubernetes.shm_size": _at("kubernetes", "shm_size"),
    "kubernetes.service_type": _at("kubernetes", "service_type"),
    "kubernetes.restart_policy": _at("kubernetes", "restart_policy"),
    "kubernetes.startup_policy": _at("kubernetes", "startup_policy"),
    "kubernetes.rdma.mode": _at("kubernetes", "rdma", "mode"),
    "kubernetes.rdma.resource": lambda v: {"kubernetes": {"rdma": {"mode": "device-plugin", "resource": v}}},
    "kubernetes.node_selector.*": lambda v: {"kubernetes": {"node_selector": {"example.com/pool": v}}},
    "kubernetes.node_selector.<key>": lambda v: {"kubernetes": {"node_selector": {v: "gb10"}}},
    "secrets.env.*.file": lambda v: {"secrets": {"env": {"HF_TOKEN": {"file": v}}}},
    "secrets.env.*.env": lambda v: {"secrets": {"env": {"HF_TOKEN": {"env": v}}}},
    "secrets.env.<key>": lambda v: {"secrets": {"env": {v: {"file": "/etc/spark-compile/x"}}}},
    "secrets.api_key.file": _at("secrets", "api_key", "file"),
    "secrets.api_key.env": _at("secrets", "api_key", "env"),
}
