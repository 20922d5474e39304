"""Every leaf key of the profile schema and one value for it: what the schema walk sets, one key at a time.

`leaf_paths` walks the JSON Schema `spark-compile schema` prints ("[]" a list item, "*" a mapping's value,
"<key>" its key). A Case is a child of a base profile that sets one key; its needle is the text that must
reach a generated file (default: the value as text). Simple scalars (switches, numbers, choices) get a value
from the schema itself (`scalar_value`); every other key is written out in CASES.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from conftest import REFERENCE_PROFILE, ROOT

Body = dict[str, Any]
# Who reads a key: the generated files (compile); the checks (a finding's message or the memory budget, for a
# value only rules and `plan --capacity` consume); the review page (`report`, for the release notes); `check
# --engine`'s verdict on SGLang's resolution (an acceptance of a rewrite that did not happen is SC604).
Reader = Literal["files", "check", "report", "engine"]
SINGLE = ROOT / "spec" / "profiles" / "examples" / "single-node.yaml"
TCP = ROOT / "spec" / "profiles" / "examples" / "two-node-tcp.yaml"
EAGLE3 = ROOT / "spec" / "profiles" / "examples" / "qwen3-235b-nvfp4-2spark-roce.yaml"
SPARK0 = {"name": "spark-0"}


@dataclass(frozen=True)
class Case:
    """One key set in a child of ``base``: ``at`` is where the value stands in the child (for findings),
    ``needle`` what must appear in a generated line the base does not have (None: any new line)."""

    body: Body
    at: tuple[str | int, ...]
    needle: str | None = None
    base: Path = REFERENCE_PROFILE
    reader: Reader = "files"


class Removed(str):
    """`- !delete NAME` in a keyed list of the dumped child."""


class Replace(dict):  # type: ignore[type-arg]
    """`!replace` in the dumped child: the mapping replaces the inherited one (a keyed list's item by name)."""


def leaf_paths(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every leaf of the schema: dotted path -> its schema node (refs resolved, nulls dropped)."""
    defs = schema.get("$defs", {})
    found: dict[str, dict[str, Any]] = {}

    def deref(node: dict[str, Any]) -> dict[str, Any]:
        return deref(defs[node["$ref"].rsplit("/", 1)[-1]]) if "$ref" in node else node

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        node = deref(node)
        options = [deref(sub) for sub in node.get("anyOf", [node]) if deref(sub).get("type") != "null"]
        for sub in options:
            kind = sub.get("type")
            if kind == "object" and "properties" in sub:
                for name, child in sub["properties"].items():
                    walk(child, (*path, name))
            elif kind == "object":
                for value in [sub.get("additionalProperties"), *sub.get("patternProperties", {}).values()]:
                    if isinstance(value, dict):
                        found[".".join((*path, "<key>"))] = {"type": "string"}
                        walk(value, (*path, "*"))
            elif kind == "array" and isinstance(sub.get("items"), dict):
                walk(sub["items"], (*path, "[]"))
            else:
                found.setdefault(".".join(path), {**node, **sub} if len(options) == 1 else sub)

    walk(schema, ())
    return found


def scalar_value(node: dict[str, Any], current: object) -> object | None:
    """A valid value for a simple scalar node that differs from ``current`` and the default, or None."""
    avoid = (current, node.get("default"))
    choices = [*node.get("enum", []), *([node["const"]] if "const" in node else [])]
    if choices:
        return next((c for c in choices if c not in avoid), None)
    kind = node.get("type")
    if kind == "boolean":
        return not (current if isinstance(current, bool) else node.get("default", False))
    if kind == "integer":
        low, high = node.get("minimum", 1), node.get("maximum", 1 << 30)
        return next(n for n in (7, 13, low + 1, low) if low <= n <= high and n not in avoid)
    if kind == "number":
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return next(n for n in (0.37, low + 1.25) if n not in avoid)
    return None


def at(*path: str | int) -> tuple[str | int, ...]:
    return path


def nest(path: tuple[str | int, ...], value: object) -> Body:
    """{a: {b: value}} for path (a, b)."""
    node: Any = value
    for part in reversed(path):
        node = {part: node}
    return node  # type: ignore[no-any-return]


def _needle(value: object) -> str | None:
    """A scalar's text; a list's last item; a mapping's first value (or key, for a structured value)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, list):
        return _needle(value[-1])
    if isinstance(value, dict):
        key, first = next(iter(value.items()))
        return str(key) if isinstance(first, dict | list | bool) else _needle(first)
    return str(value)


def set_at(value: object, *path: str, needle: str | None = None, base: Path = REFERENCE_PROFILE) -> Case:
    return Case(nest(path, value), path, needle or _needle(value), base)


def _node(key: str, value: object, needle: str | None = None) -> Case:
    return Case(
        {"fleet": {"nodes": [{**SPARK0, key: value}]}},
        ("fleet", "nodes", 0, key),
        needle if needle is not None else str(value),
    )


def _draft(needle: str, **fields: object) -> Case:
    """A draft key set on the EAGLE3 example (a profile with a separate draft)."""
    key = next(iter(fields))
    return Case({"engine": {"speculative": {"draft": fields}}}, ("engine", "speculative", "draft", key), needle, EAGLE3)


def _window(needle: str, **fields: object) -> Case:
    check = {"name": "sum", "prompt": "What is 2+2?", "expect": "4", **fields}
    key = next(iter(fields))
    return Case(
        {"operations": {"window": {"checks": [{k: v for k, v in check.items() if v is not None}]}}},
        ("operations", "window", "checks", 0, key),
        needle,
    )


_NODE1 = {"name": "spark-b", "fabric_ip": "198.51.100.2", "ssh": "ops@spark-b.example.net", "home": "/home/ops"}
CASES: dict[str, Case] = {
    "name": set_at("walk-renamed", "name"),
    "release": set_at("production-9.9.9", "release"),
    "description": set_at("Walked description text", "description"),
    "overlay.late_tail_skip": Case(
        {"overlay": {"late_tail_skip": False, "late_tail_skip_all": None}},
        ("overlay", "late_tail_skip"),
        "SPARK_LATE_TAIL_SKIP=0",
    ),
    "release_notes.date": Case(
        {"release_notes": {"date": "2026-11-30", "reason": "r"}},
        ("release_notes", "date"),
        "2026-11-30",
        reader="report",
    ),
    "release_notes.reason": Case(
        {"release_notes": {"date": "2026-09-29", "reason": "walked reason"}},
        ("release_notes", "reason"),
        "walked reason",
        reader="report",
    ),
    "release_notes.link": Case(
        {"release_notes": {"date": "2026-09-29", "reason": "r", "link": "https://example.com/walk"}},
        ("release_notes", "link"),
        "https://example.com/walk",
        reader="report",
    ),
    "extends": Case({"extends": TCP}, ("extends",), "two-node-tcp.yaml", SINGLE),
    "hardware": replace(set_at("dgx-h100", "hardware"), reader="check"),
    "fleet.fabric.kind": Case(
        {"fleet": {"fabric": {"kind": "infiniband", "rdma_devices": ["mlx5_0"]}}},
        ("fleet", "fabric", "kind"),
        "NCCL_IB_DISABLE=0",
        TCP,
    ),
    "fleet.fabric.interface": set_at("enp9s0f1np1", "fleet", "fabric", "interface"),
    "fleet.fabric.bootstrap_interface": set_at("enP7s7", "fleet", "fabric", "bootstrap_interface"),
    "fleet.fabric.subnet": set_at("192.0.0.0/16", "fleet", "fabric", "subnet"),
    "fleet.fabric.rdma_devices.[]": set_at(["rocep9s0f1"], "fleet", "fabric", "rdma_devices"),
    "fleet.fabric.gid_index": set_at(5, "fleet", "fabric", "gid_index"),
    "fleet.nodes.[].name": Case(
        {
            "fleet": {
                "nodes": [
                    Removed("spark-a"),
                    {
                        "name": "walk-node",
                        "fabric_ip": "198.51.100.21",
                        "ssh": "ops@198.51.100.21",
                        "home": "/home/ops",
                    },
                ]
            }
        },
        ("fleet", "nodes", 0, "name"),
        "walk-node",
        SINGLE,
    ),
    "fleet.nodes.[].fabric_ip": _node("fabric_ip", "192.0.2.77"),
    "fleet.nodes.[].ssh": _node("ssh", "ops@192.0.2.11"),
    "fleet.nodes.[].home": _node("home", "/srv/home/spark"),
    "fleet.nodes.[].gid_index": _node("gid_index", 7),
    "fleet.nodes.[].interface": Case(
        {"fleet": {"nodes": [{"name": "spark-b", "interface": "enp1s0f0np0"}]}},
        ("fleet", "nodes", 1, "interface"),
        "enp1s0f0np0",
        EAGLE3,
    ),
    "fleet.nodes.[].rdma_devices.[]": Case(
        {"fleet": {"nodes": [{"name": "spark-b", "rdma_devices": ["rocep9s0f0"]}]}},
        ("fleet", "nodes", 1, "rdma_devices"),
        "NCCL_IB_HCA=rocep9s0f0",
        EAGLE3,
    ),
    "fleet.nodes.[].container_name": _node("container_name", "walkhead"),
    "fleet.nodes.[].holds_checkpoint": Case(
        {"fleet": {"nodes": [{**SPARK0, "holds_checkpoint": True}, {"name": "spark-1", "holds_checkpoint": False}]}},
        ("fleet", "nodes", 0, "holds_checkpoint"),
    ),
    "fleet.nodes.[].env.*": _node("env", {"NODE_TAG": "walked-value"}, "walked-value"),
    "fleet.nodes.[].env.<key>": _node("env", {"WALK_NODE_VAR": "1"}, "WALK_NODE_VAR"),
    "model.architecture": replace(set_at("Qwen3MoeForCausalLM", "model", "architecture"), reader="check"),
    "model.repo": set_at("/mnt/walked", "model", "repo"),
    "model.holder_repo": set_at("/mnt/holder-walk", "model", "holder_repo"),
    "model.container_repo": set_at("/models/walked", "model", "container_repo"),
    "model.snapshot": set_at("a" * 40, "model", "snapshot"),
    "model.hub_id": Case(
        {"model": {"hub_id": "Qwen/Qwen3-30B-A3B", "repo": None, "snapshot": None}},
        ("model", "hub_id"),
        "Qwen/Qwen3-30B-A3B",
        SINGLE,
    ),
    "model.gguf": Case(
        {"model": {"hub_id": "Qwen/Qwen3-30B-A3B-GGUF", "gguf": "Q6_K", "repo": None, "snapshot": None}},
        ("model", "gguf"),
        "Q6_K",
        SINGLE,
    ),
    "model.tokenizer": set_at("Qwen/Qwen3-Walk-Tokenizer", "model", "tokenizer"),
    "model.revision": set_at("walkrev", "model", "revision"),
    "engine.mamba.ssm_dtype": set_at("float32", "engine", "mamba", "ssm_dtype", needle="--mamba-ssm-dtype float32"),
    "engine.mamba.backend": set_at("flashinfer", "engine", "mamba", "backend", needle="--linear-attn-backend"),
    "model.quantization": set_at("fp8", "model", "quantization"),
    "model.served_name": set_at("walked-name", "model", "served_name"),
    "model.aliases.[]": set_at(["walked-alias"], "model", "aliases"),
    "model.max_context_length": replace(set_at(262144, "model", "max_context_length"), reader="check"),
    "model.config_json": replace(
        set_at(
            "../spec/profiles/examples/qwen3-30b-a3b.config.json",
            "model",
            "config_json",
            needle="qwen3-30b-a3b.config.json",
        ),
        reader="check",
    ),
    "model.weights_per_rank.[]": replace(set_at([33.5] * 4, "model", "weights_per_rank"), reader="check"),
    "model.draft_weights_per_rank.[]": replace(
        set_at([1.25] * 2, "model", "draft_weights_per_rank", base=EAGLE3), reader="check"
    ),
    "model.available_per_rank.[]": replace(set_at([40.5] * 4, "model", "available_per_rank"), reader="check"),
    "model.pre_load_available_per_rank.[]": replace(
        set_at([109.5] * 4, "model", "pre_load_available_per_rank"), reader="check"
    ),
    "model.cuda_graph_per_rank.[]": replace(set_at([2.75] * 4, "model", "cuda_graph_per_rank"), reader="check"),
    "model.engram.local_dir": set_at("/srv/engram-walk", "model", "engram", "local_dir"),
    "model.engram.container_dir": set_at("/engram-walk", "model", "engram", "container_dir"),
    "model.engram.tables.*": set_at({1: 384006169, 14: 384016682}, "model", "engram", "tables"),
    "model.engram.tables.<key>": set_at(
        {1: 384006168, 14: 384016682, 20: 1000}, "model", "engram", "tables", needle="20"
    ),
    "engine.image": set_at("example.com/walk/sglang:walk-1", "engine", "image"),
    "engine.catalog": set_at("sglang-0.5.10.post1", "engine", "catalog", needle="--cuda-graph-max-bs", base=SINGLE),
    "engine.image_build": replace(set_at("sglang-0.5.10.post1", "engine", "image_build"), reader="check"),  # SC318
    "engine.container_name": set_at("walkedname", "engine", "container_name"),
    "engine.launcher.[]": set_at(
        ["python3", "-X", "utf8", "-m", "sglang.launch_server"], "engine", "launcher", needle="-X utf8"
    ),
    "engine.host": set_at("192.0.2.200", "engine", "host"),
    "engine.load_format": set_at("auto", "engine", "load_format"),
    "engine.kv_cache_dtype": set_at("fp8_e4m3", "engine", "kv_cache_dtype"),
    "engine.backends.attention": set_at("flashinfer", "engine", "backends", "attention"),
    "engine.backends.moe_runner": set_at("triton", "engine", "backends", "moe_runner"),
    "engine.backends.fp8_gemm": set_at("triton", "engine", "backends", "fp8_gemm"),
    "engine.backends.fp4_gemm": set_at("cutlass", "engine", "backends", "fp4_gemm"),
    "engine.speculative.algorithm": Case(
        {"engine": {"speculative": {"algorithm": "NGRAM", "dspark_block_size": None}}},
        ("engine", "speculative", "algorithm"),
        "NGRAM",
    ),
    "engine.speculative.draft.repo": _draft("/srv/models/draft", repo="/srv/models/draft"),
    "engine.speculative.draft.hub_id": _draft("Qwen/Qwen3-0.6B", hub_id="Qwen/Qwen3-0.6B", repo=None),
    "engine.speculative.draft.snapshot": _draft("b" * 40, snapshot="b" * 40),
    "engine.speculative.draft.gguf": _draft("Q4_K_M", gguf="Q4_K_M", hub_id="Qwen/Qwen3-0.6B-GGUF", repo=None),
    "engine.speculative.draft.container_repo": _draft("/models/walkdraft", container_repo="/models/walkdraft"),
    "engine.speculative.draft.config_json": replace(
        _draft("qwen3-30b-a3b.config.json", config_json="qwen3-30b-a3b.config.json"), reader="check"
    ),
    "engine.speculative.draft.quantization": _draft("fp8", quantization="fp8"),
    "engine.speculative.dspark_block_size": set_at(7, "engine", "speculative", "dspark_block_size"),
    "engine.catalog_extra.flags.[]": Case(
        {"engine": {"catalog_extra": {"flags": ["walk-extra-flag"]}, "args": {"walk-extra-flag": True}}},
        ("engine", "catalog_extra", "flags"),
        "--walk-extra-flag",
    ),
    "engine.catalog_extra.env.[]": Case(
        {"engine": {"catalog_extra": {"env": ["B12X_WALK"]}, "env": {"B12X_WALK": "1"}}},
        ("engine", "catalog_extra", "env"),
        "B12X_WALK",
        base=SINGLE,
    ),
    "engine.catalog_extra.values.*.[]": Case(
        {"engine": {"backends": {"moe_runner": "b12x"}, "catalog_extra": {"values": {"moe-runner-backend": ["b12x"]}}}},
        ("engine", "catalog_extra", "values", "moe-runner-backend"),
        "--moe-runner-backend b12x",
        SINGLE,
    ),
    "engine.catalog_extra.values.<key>": Case(
        {"engine": {"catalog_extra": {"values": {"attention-backend": ["walk"]}}}},
        ("engine", "catalog_extra", "values", "attention-backend"),
        "attention-backend",
        SINGLE,
    ),
    "engine.chat.template_kwargs.*": set_at(
        {"enable_thinking": False}, "engine", "chat", "template_kwargs", needle='"enable_thinking":false'
    ),
    "engine.chat.template_kwargs.<key>": set_at(
        {"walk_kwarg": 3}, "engine", "chat", "template_kwargs", needle="walk_kwarg"
    ),
    "engine.chat.tool_call_parser": set_at("qwen", "engine", "chat", "tool_call_parser"),
    "engine.chat.reasoning_parser": set_at("qwen3", "engine", "chat", "reasoning_parser"),
    "engine.cuda_graph.enabled": Case(
        {"engine": {"cuda_graph": {"enabled": False, "max_bs_decode": None}}},
        ("engine", "cuda_graph", "enabled"),
        "--cuda-graph-backend-decode disabled",
    ),
    "engine.cuda_graph.max_bs_decode": set_at(12, "engine", "cuda_graph", "max_bs_decode"),
    "engine.cuda_graph.batch_sizes.[]": set_at([1, 2, 4, 16], "engine", "cuda_graph", "batch_sizes", needle="1 2 4 16"),
    "engine.args.*": set_at({"schedule-policy": "lpm"}, "engine", "args"),
    "engine.args.*.[]": set_at({"cuda-graph-bs-prefill": [3, 5]}, "engine", "args", needle="3 5"),
    "engine.args.<key>": set_at({"enable-metrics": True}, "engine", "args", needle="--enable-metrics"),
    "engine.accept_rewrites.*": replace(set_at({"page-size": 128}, "engine", "accept_rewrites"), reader="engine"),
    "engine.accept_rewrites.*.[]": replace(
        set_at({"cuda-graph-bs-prefill": [1, 2]}, "engine", "accept_rewrites", needle="cuda-graph-bs-prefill"),
        reader="engine",
    ),
    "engine.accept_rewrites.<key>": replace(
        set_at({"walk-rewrite": "x"}, "engine", "accept_rewrites", needle="walk-rewrite"), reader="engine"
    ),
    "engine.env.*": set_at({"MY_SITE_VAR": "walked-env"}, "engine", "env"),
    "engine.env.<key>": set_at({"WALK_ENGINE_VAR": "1"}, "engine", "env", needle="WALK_ENGINE_VAR"),
    "container.memory": set_at("100g", "container", "memory"),
    "container.memory_swap": set_at("101g", "container", "memory_swap"),
    "container.shm_size": set_at("31g", "container", "shm_size"),
    "container.ulimits.*": set_at({"nofile": "65536:65536"}, "container", "ulimits"),
    "container.ulimits.<key>": set_at({"nproc": "4096"}, "container", "ulimits", needle="nproc"),
    "container.cap_add.[]": set_at(["SYS_NICE"], "container", "cap_add"),
    "container.devices.[]": set_at(["/dev/fuse"], "container", "devices"),
    "container.gpus": set_at('"device=0"', "container", "gpus"),
    "container.user": set_at("1000:1000", "container", "user"),
    "container.security_opt.[]": set_at(["seccomp=unconfined"], "container", "security_opt"),
    "container.cpuset_cpus": set_at("0-9", "container", "cpuset_cpus"),
    "container.network": set_at("bridge", "container", "network"),
    "container.ipc": set_at("private", "container", "ipc"),
    "container.cache_dir": set_at(".cache/walked", "container", "cache_dir"),
    "container.mounts.[].source": set_at(
        [{"source": "/srv/walk-src", "target": "/mnt/extra"}], "container", "mounts", needle="/srv/walk-src"
    ),
    "container.mounts.[].target": set_at(
        [{"source": "/srv/extra", "target": "/mnt/walk-tgt"}], "container", "mounts", needle="/mnt/walk-tgt"
    ),
    "container.mounts.[].read_only": Case(
        {"container": {"mounts": [{"source": "/srv/extra", "target": "/mnt/x", "read_only": False}]}},
        ("container", "mounts", 0, "read_only"),
        "/srv/extra:/mnt/x ",
    ),
    "nccl.extra.*": set_at({"NCCL_HOSTID": "walked-host"}, "nccl", "extra"),
    "nccl.extra.<key>": set_at({"NCCL_ALGO": "Tree"}, "nccl", "extra", needle="NCCL_ALGO"),
    "overlay.roce_ag_max": set_at("8MB", "overlay", "roce_ag_max"),
    "overlay.roce_ar_max": set_at("2MB", "overlay", "roce_ar_max"),
    "overlay.lookup_mode": set_at("table", "overlay", "lookup_mode"),
    "deploy.install_dir": set_at("/opt/walk-install", "deploy", "install_dir"),
    "deploy.runtime_dir": set_at("/run/walk-runtime", "deploy", "runtime_dir"),
    "deploy.unit_name": set_at("walk-unit.service", "deploy", "unit_name"),
    "deploy.docker": set_at("/usr/local/bin/docker", "deploy", "docker"),
    "operations.log_dir": set_at("walk-logs", "operations", "log_dir"),
    "operations.previous_stack.unit": set_at("old-walk.service", "operations", "previous_stack", "unit"),
    "operations.previous_stack.stop.[]": Case(
        {"operations": {"previous_stack": {"stop": ["/usr/local/bin/walkstop"], "relaunch": ["x"]}}},
        ("operations", "previous_stack", "stop"),
        "walkstop",
    ),
    "operations.previous_stack.relaunch.[]": Case(
        {"operations": {"previous_stack": {"stop": ["x"], "relaunch": ["/usr/local/bin/walkgo"]}}},
        ("operations", "previous_stack", "relaunch"),
        "walkgo",
    ),
    "operations.smoke.needle_tokens.[]": set_at([4097], "operations", "smoke", "needle_tokens"),
    "operations.verify.kv_tokens": set_at([4100000, 6700000], "operations", "verify", "kv_tokens"),
    "operations.window.checks.[].name": _window("walkcheck", name="walkcheck"),
    "operations.window.checks.[].prompt": _window("Walk prompt text?", prompt="Walk prompt text?"),
    "operations.window.checks.[].expect": _window("walkanswer", expect="walkanswer"),
    "operations.window.checks.[].pattern": _window("walk[0-9]+", pattern="walk[0-9]+", expect=None),
    "operations.window.checks.[].max_tokens": _window("257", max_tokens=257),
    "operations.window.checks.[].thinking": _window("thinking", thinking=True),
    "kubernetes.name": set_at("walk-lws", "kubernetes", "name"),
    "kubernetes.namespace": set_at("walk-ns", "kubernetes", "namespace"),
    "kubernetes.image": set_at("example.com/walk/k8s@sha256:" + "c" * 64, "kubernetes", "image"),
    "kubernetes.memory": set_at("99g", "kubernetes", "memory", needle="99Gi"),
    "kubernetes.shm_size": set_at("29g", "kubernetes", "shm_size", needle="29Gi"),
    "kubernetes.rdma.resource": Case(
        {"kubernetes": {"rdma": {"mode": "device-plugin", "resource": "rdma/walk_device"}}},
        ("kubernetes", "rdma", "resource"),
        "rdma/walk_device",
    ),
    "kubernetes.node_selector.*": set_at({"example.com/pool": "walkpool"}, "kubernetes", "node_selector"),
    "kubernetes.node_selector.<key>": set_at(
        {"walk.example.com/tier": "gb10"}, "kubernetes", "node_selector", needle="walk.example.com/tier"
    ),
    "secrets.env.*.file": set_at({"HF_TOKEN": {"file": "/etc/walk/hf"}}, "secrets", "env", needle="/etc/walk/hf"),
    "secrets.env.*.env": set_at({"HF_TOKEN": {"env": "WALK_TOKEN_SRC"}}, "secrets", "env", needle="WALK_TOKEN_SRC"),
    "secrets.env.<key>": set_at({"WALK_SECRET": {"file": "/etc/walk/s"}}, "secrets", "env", needle="WALK_SECRET"),
    "secrets.api_key.file": set_at({"file": "/etc/walk/api"}, "secrets", "api_key", needle="/etc/walk/api"),
    "secrets.api_key.env": set_at({"env": "WALK_API_SRC"}, "secrets", "api_key", needle="WALK_API_SRC"),
    # Beyond the schema's leaves: the overlay concern of engine.env on a profile without an overlay section.
    "engine.env.<key> (B12X_* without an overlay)": Case(
        {"engine": {"env": {"B12X_SPIN": "7"}, "catalog_extra": {"env": ["B12X_SPIN"]}}},
        ("engine", "env", "B12X_SPIN"),
        "B12X_SPIN",
        base=SINGLE,
    ),
    "engine.env.<key> (SPARK_* without an overlay)": Case(
        {"engine": {"env": {"SPARK_WALK": "1"}}}, ("engine", "env", "SPARK_WALK"), "SPARK_WALK", base=TCP
    ),
    "overlay.step_timers (no Engram)": Case(
        {"overlay": {"step_timers": True}}, ("overlay", "step_timers"), "SPARK_STEP_TIMERS", base=SINGLE
    ),
    "fleet.nodes.[].env.<key> (B12X_* on one node)": Case(
        {"fleet": {"nodes": [{"name": "spark-b", "env": {"B12X_NODE": "1"}}]}},
        ("fleet", "nodes", 1, "env", "B12X_NODE"),
        "B12X_NODE",
        base=TCP,
    ),
}
