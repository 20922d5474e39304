"""Generator: the inventory of SGLang's judgements (spec/catalogs/sglang-judgements-VERSION.md).

Reads an SGLang source tree by AST (no import): every function of the argument pipeline (arg_groups/,
server_args.py) and of configs/model_config.py that refuses (``raise``, ``assert``) or rewrites
(``declare_resolution``, a registered model-family override or post-process pass) a setting, with the
settings it reads and how spark-compile covers it: the static rules that repeat it (STATIC below), and whether
`check --engine` runs it.
``python -m spark_compile.spec.generators.sglang_judgements (SGLANG_DIR | --python PY) [--out DIR] [--check]`` writes
the table (or, with --check, exits 1 when the committed one differs); tests/engine/test_judgements.py runs the
check against the installed SGLang.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from spark_compile.spec.generators.catalog_extract import default_catalog_dir, package_of

SCOPE = ("srt/arg_groups", "srt/server_args.py", "srt/configs/model_config.py")
REGISTERING = {"_register_for", "register_post_process", "register_model_override_predicate"}
MAX_READS = 8

# Judgements a static rule repeats (site -> rule ids); the engine check runs every resolution site anyway.
STATIC: dict[str, tuple[str, ...]] = {
    "srt/arg_groups/speculative_hook.py:_handle_eagle_family": ("SC205", "SC240", "SC241", "SC254", "SC255", "SC256",
                                                             "SC262"),
    "srt/arg_groups/parallel_hook.py:handle_data_parallelism": ("SC257", "SC258"),
    "srt/arg_groups/speculative_hook.py:_handle_dspark": ("SC203", "SC204", "SC205"),
    "srt/arg_groups/deepseek_v4_hook.py:apply_deepseek_v4_defaults": ("SC202", "SC207", "SC219", "SC259"),
    "srt/arg_groups/model_overrides/deepseek_v4.py:_deepseek_v4_overrides": ("SC217", "SC218"),
    "srt/arg_groups/serving_hook.py:handle_deprecated_args": ("SC246", "SC305"),
    "srt/arg_groups/moe_hook.py:handle_moe_kernel_config": ("SC243", "SC248"),
    "srt/arg_groups/overrides.py:_moe_runner_backend_quant_constraints": ("SC243", "SC259", "SC260"),
    "srt/arg_groups/moe_hook.py:handle_a2a_moe": ("SC259",),
    "srt/arg_groups/kv_cache_hook.py:handle_nvfp4_prefill_kv_dequant_dtype": ("SC259",),
    "srt/arg_groups/kv_cache_hook.py:handle_mxfp8_kv_cache_compatibility": ("SC259",),
    "srt/arg_groups/kv_cache_hook.py:handle_cache_compatibility": ("SC261",),
    "srt/arg_groups/mamba_hook.py:handle_mamba_backend": ("SC259",),
    "srt/arg_groups/attention_hook.py:handle_linear_attn_backend": ("SC259",),
    "srt/arg_groups/speculative_hook.py:_handle_ngram": ("SC262",),
    "srt/arg_groups/kv_cache_hook.py:handle_kv4_compatibility": ("SC245",),
    "srt/arg_groups/overrides.py:_attention_backend_fa3_fp8_fallback": ("SC245",),
    "srt/arg_groups/attention_hook.py:handle_attention_backend_compatibility": ("SC245",),
    "srt/arg_groups/validation_hook.py:check_server_args": ("SC211", "SC252", "SC401"),
    "srt/configs/model_config.py:ModelConfig._verify_quantization": ("SC244",),
    "srt/configs/model_config.py:ModelConfig._derive_context_length": ("SC209",),
    "srt/arg_groups/model_hook.py:handle_model_specific_adjustments": ("SC249",),
    "srt/arg_groups/deepseek_v4_hook.py:validate_deepseek_v41_features": ("SC202", "SC253"),
    "srt/arg_groups/validation_hook.py:check_pipeline_parallel_compat": ("SC253",),
    "srt/arg_groups/model_overrides/gpt_oss.py:_gpt_oss_overrides": ("SC245", "SC249"),
    "srt/arg_groups/memory_hook.py:handle_gpu_memory_settings": ("SC250",),
    "srt/arg_groups/speculative_hook.py:handle_speculative_decoding": ("SC251",),
    "srt/arg_groups/speculative_hook.py:_resolve_speculative_algorithm_alias": ("SC251",),
}
# Judgements the scan does not see: a fallback without a raise, and the asserts made while the layers are
# built (file:function -> (what, how covered)); tests/engine/test_judgements.py checks each site still exists.
BEYOND: dict[str, tuple[str, str]] = {
    "srt/arg_groups/argparse_actions.py:DeprecatedAction.__call__": (
        "a deprecated flag is accepted with a warning (and its replacement's meaning)",
        "SC305 (the catalog's deprecated flags); engine: parse"),
    "srt/configs/model_config.py:ModelConfig.from_server_args": (
        "a draft worker with no draft model path loads the target's (model_path or cfg.model_path)",
        "SC241; engine: model stage (SC601)"),
    "srt/configs/model_config.py:ModelConfig._config_draft_model": (
        "a draft worker built from an MTP architecture's checkpoint loads its MTP (NextN) layers, not the whole model",
        "SC241 (no draft model needed); engine: model stage"),
    "srt/models/qwen3_moe.py:Qwen3MoeAttention.__init__": (
        "attention heads, and KV heads, divisible by the attention TP size (assert)",
        "SC242; not run: the layers are built at load"),
    "srt/models/llama.py:LlamaAttention.__init__": (
        "attention heads, and KV heads, divisible by TP (assert)", "SC242; not run: the layers are built at load"),
    "srt/model_executor/model_runner_components/moe_ep_setup.py:*": (
        "tp_size divisible by ep_size (raise)", "SC201; not run: the model runner starts at load"),
}


@dataclass(frozen=True, slots=True)
class Site:
    """One function of SGLang that judges settings."""

    where: str  # path under the sglang package : function name
    refuses: int
    rewrites: int
    families: tuple[str, ...]
    reads: tuple[str, ...]
    stage: str


def _decorators(node: ast.FunctionDef) -> tuple[set[str], tuple[str, ...]]:
    names: set[str] = set()
    families: list[str] = []
    for deco in node.decorator_list:
        call = deco.func if isinstance(deco, ast.Call) else deco
        name = call.attr if isinstance(call, ast.Attribute) else call.id if isinstance(call, ast.Name) else ""
        names.add(name)
        if isinstance(deco, ast.Call) and name == "_register_for":
            families += [a.value for a in deco.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names, tuple(families)


def _counts(node: ast.FunctionDef, dests: set[str]) -> tuple[int, int, tuple[str, ...]]:
    refuses = rewrites = 0
    reads: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Raise, ast.Assert)):
            refuses += 1
        elif isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            rewrites += name == "declare_resolution"
        elif isinstance(sub, ast.Attribute) and sub.attr in dests and isinstance(sub.ctx, ast.Load):
            reads.add(sub.attr)
    return refuses, rewrites, tuple(sorted(reads))


def _model_stage(tree: ast.Module) -> set[str]:
    """ModelConfig methods reached from its constructor (self.method() calls, transitively)."""
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelConfig"), None)
    if cls is None:
        return set()
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    reached, todo = set(), ["__init__", "from_server_args"]
    while todo:
        name = todo.pop()
        if name in reached or name not in methods:
            continue
        reached.add(name)
        todo += [c.func.attr for c in ast.walk(methods[name]) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                 and c.func.value.id == "self"]
    return reached


def _stage(rel: str, qualname: str, model_stage: set[str]) -> str:
    if rel.endswith("argparse_actions.py"):
        return "engine: parse"
    if rel.endswith("model_config.py"):
        method = qualname.removeprefix("ModelConfig.")
        return "engine: model stage" if method in model_stage and method != qualname else \
            "not run: the model loads (weights, GPU)"
    return "engine: resolution"


def functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    """Every function of a module with its qualified name (Class.method, outer.inner)."""
    out: list[tuple[str, ast.FunctionDef]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef):
                out.append((f"{prefix}{node.name}", node))
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return out


def sites(package: Path, dests: set[str]) -> list[Site]:
    """Every judging function in SCOPE of the sglang package directory, in path and line order."""
    files: list[Path] = []
    for part in SCOPE:
        path = package / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    out: list[Site] = []
    for file in files:
        rel = file.relative_to(package).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"))
        model_stage = _model_stage(tree)
        for qualname, node in functions(tree):
            names, families = _decorators(node)
            refuses, rewrites, reads = _counts(node, dests)
            rewrites += bool(names & REGISTERING)
            if refuses or rewrites:
                out.append(Site(f"{rel}:{qualname}", refuses, rewrites, families, reads,
                                _stage(rel, qualname, model_stage)))
    return sorted(out, key=lambda s: s.where)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(version: str, found: list[Site]) -> str:
    """The Markdown inventory."""
    lines = [
        f"# SGLang {version}: its judgements and how spark-compile covers them",
        "",
        "Generated by `python -m spark_compile.spec.generators.sglang_judgements` from the SGLang source (AST: every",
        "function of the argument pipeline and of ModelConfig that raises, asserts, declares a resolved value or is",
        "a registered model-family override / post-process pass); tests/engine/test_judgements.py fails when the",
        "installed SGLang differs. *refuses*: raise and assert sites; *rewrites*: resolution declarations (+1 for",
        "a registered override). *Engine*: `check --engine` runs it (parse, resolution = resolve_once and",
        "check_server_args, model stage = the ModelConfig built at boot and the MoE checks under its quantization).",
        "Parser choices and types (every flag) are the catalog sglang-" + version + ".json: SC303, SC304, SC305.",
        "",
        "| where (sglang/…:function) | refuses | rewrites | model families | settings read | covered by |",
        "|---|---|---|---|---|---|",
    ]
    for site in found:
        reads = ", ".join(site.reads[:MAX_READS]) + (", …" if len(site.reads) > MAX_READS else "")
        rules = ", ".join(STATIC.get(site.where, ()))
        covered = f"{rules}; {site.stage}" if rules else site.stage
        lines.append(f"| `{_cell(site.where)}` | {site.refuses} | {site.rewrites} | "
                     f"{_cell(', '.join(site.families))} | {_cell(reads)} | {_cell(covered)} |")
    lines += ["", "## Judgements the scan does not see", "",
              "| where | judgement | covered by |", "|---|---|---|"]
    lines += [f"| `{where}` | {what} | {covered} |" for where, (what, covered) in sorted(BEYOND.items())]
    return "\n".join(lines) + "\n"


def catalog_dests(version: str) -> set[str]:
    data = json.loads((default_catalog_dir() / f"sglang-{version}.json").read_text(encoding="utf-8"))
    return {str(flag["dest"]) for flag in data["flags"]}


def table_path(version: str, out: Path | None = None) -> Path:
    """Where the table lives (``out``: another catalog directory, e.g. the source tree's spec/catalogs)."""
    return (out or default_catalog_dir()) / f"sglang-judgements-{version}.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sglang_judgements", description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, nargs="?", help="the installed sglang package directory")
    parser.add_argument("--python", help="an engine interpreter whose sglang to read (instead of PACKAGE)")
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--out", type=Path, help="catalog directory (default: the package's spec/catalogs)")
    parser.add_argument("--check", action="store_true", help="compare with the committed table instead")
    args = parser.parse_args(argv)
    if (args.package is None) == (args.python is None):
        parser.error("name the sglang package directory or --python, one of the two")
    package = args.package or package_of(args.python)
    text = render(args.version, sites(package, catalog_dests(args.version)))
    path = table_path(args.version, args.out)
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'up to date' if same else 'differs from the installed SGLang'}", file=sys.stderr)
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
