"""Print SGLang's flag and environment-variable catalogs as JSON.

Runs INSIDE the engine venv (standard library + sglang only; never imports spark_compile):

    .venv-engine/bin/python spec/generators/sglang_probe.py > catalog.json

Output: {"flags": <sglang-VERSION.json document>, "env": <sglang-env-VERSION.json document>}.
(``spark-compile catalog sglang --source`` never runs this: it parses a tree, see sglang_environ.py.)
The flags come from the real parser, ``ServerArgs.add_cli_args(argparse.ArgumentParser())``;
the variables from ``class Envs`` in ``sglang/srt/environ.py`` (loaded by file path), its
deprecation registry, and the SGLANG_* names that the rest of ``sglang/srt/`` reads straight from
the environment (found by parsing the installed sources). The output is deterministic: sorted, no
memory addresses, no absolute paths, no timestamps.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.abc
import importlib.util
import json
import math
import os
import re
import sys
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

FORMAT = 1

# argparse type callables, by __name__ → catalog kind.
_TYPE_KINDS = {
    "int": "int",
    "human_readable_int": "int",  # accepts 1k / 1Mi suffixes, stores an int
    "float": "float",
    "str": "str",
    "nullable_str": "str",  # "" or "None" → None
    "parse_cuda_graph_backend_arg": "str",
    "loads": "json",
    "json_list_type": "json",
    "parse_cuda_graph_config_arg": "json",
}
_ACTION_NAMES = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "BooleanOptionalAction": "boolean_optional",
    "_AppendAction": "append",
    "_CountAction": "count",
    # sglang's own deprecated spellings that behave like the stock actions
    "DeprecatedStoreTrueAction": "store_true",
    "DeprecatedAliasStoreAction": "store",
}
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "incl.", "cf.", "resp.", "ex.")
_DEPRECATED_HELP = re.compile(r"^\W*deprecated\b", re.IGNORECASE)
_USE_FLAG = re.compile(r"\buse\s+'?(--[^\s')]+)", re.IGNORECASE)
_INSTEAD = re.compile(
    r"\b(?:use|pass)\s+'?((?:--[\w-]+(?:[ =][\w.-]+)?)|(?:SGLANG_[A-Z0-9_]+))'?\s+instead", re.IGNORECASE
)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_ENV_NAME = re.compile(r"^SGLANG_[A-Z0-9_]+$")


def jsonable(value: Any) -> Any:
    """A JSON value for ``value``; anything else as its repr without memory addresses."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)  # IntEnum members → plain int
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    return _ADDRESS.sub("", repr(value))


def _order(value: Any) -> tuple[int, float, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, json.dumps(value, sort_keys=True))


def first_sentence(text: str | None) -> str:
    if not text or text == argparse.SUPPRESS:
        return ""
    text = " ".join(text.split())
    for match in re.finditer(r"[.!?](?=\s|$)", text):
        head = text[: match.end()]
        word = head.rsplit(" ", 1)[-1].lstrip("(").lower()
        if word in _ABBREVIATIONS or head.count("(") > head.count(")"):
            continue
        if len(head) < 16:  # "Deprecated." alone says too little: take the next sentence too
            continue
        return head
    return text


# ---------------------------------------------------------------------------- flags


def _flag_kind(action: argparse.Action, action_name: str) -> str:
    if action_name in ("store_true", "store_false", "boolean_optional"):
        return "bool"
    if action_name == "count":
        return "int"
    if action.type is None:
        if action.nargs == 0:
            return "bool" if isinstance(action.const, bool) else "other"
        choices = list(action.choices) if action.choices is not None else []
        return "str" if all(isinstance(c, str) for c in choices) else "other"
    return _TYPE_KINDS.get(getattr(action.type, "__name__", ""), "other")


def sort_choices(choices: Any) -> list[Any]:
    """Choices in catalog order: some lists are built from sets, so sort (independent of PYTHONHASHSEED)."""
    return sorted((jsonable(c) for c in choices), key=_order)


def _choices(action: argparse.Action) -> list[Any] | None:
    return None if action.choices is None else sort_choices(action.choices)


def flag_entry(action: argparse.Action) -> dict[str, Any]:
    cls = type(action).__name__
    action_name = _ACTION_NAMES.get(cls, "other")
    help_text = " ".join((action.help or "").split())
    new_flag = getattr(action, "new_flag", None)
    deprecated = cls.startswith("Deprecated") or bool(_DEPRECATED_HELP.search(help_text))
    replacement: str | None = None
    if deprecated:
        if isinstance(new_flag, str) and new_flag:
            replacement = new_flag
        else:
            match = _USE_FLAG.search(help_text)
            replacement = match.group(1).rstrip(".,;:") if match else None
    nargs = action.nargs
    return {
        "dest": action.dest,
        "options": sorted(action.option_strings),
        "kind": _flag_kind(action, action_name),
        "action": action_name,
        "nargs": nargs if nargs is None or isinstance(nargs, (int, str)) else jsonable(nargs),
        "choices": _choices(action),
        "default": jsonable(action.default),
        "deprecated": deprecated,
        "replacement": replacement,
        "help": first_sentence(action.help),
    }


def flag_entries() -> list[dict[str, Any]]:
    # sglang is only in the engine venv; catalog_extract imports this module (FORMAT) in the compiler's
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    entries = [
        flag_entry(a) for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]
    # Two actions may share a dest (--enable-amd-monokernel / --monokernel-backend): tie-break on options.
    return sorted(entries, key=lambda e: (e["dest"], e["options"]))


# ---------------------------------------------------------------------------- environment


def _load_environ(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("_spark_probe_sglang_environ", path)
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot load sglang/srt/environ.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _env_kind(module: Any, field: Any) -> str:
    for cls_name, kind in (("EnvBool", "bool"), ("EnvInt", "int"), ("EnvFloat", "float"), ("EnvStr", "str")):
        if isinstance(field, getattr(module, cls_name)):
            return kind
    return "other"


def _var(
    name: str,
    kind: str,
    default: Any,
    source: str,
    replacement: str | None = None,
    *,
    deprecated: bool = False,
) -> Any:
    return {"name": name, "kind": kind, "default": default, "deprecated": deprecated,
            "replacement": replacement, "source": source}  # fmt: skip


def environ_entries(module: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    fields = [v for v in vars(module.Envs).values() if isinstance(v, module.EnvField)]
    for field in fields:
        # A callable default is computed at run time (platform, cache dir): no static value.
        default = None if callable(field.default) else jsonable(field.default)
        out[field.name] = _var(field.name, _env_kind(module, field), default, "environ.py")
    for field in fields:  # renamed variables still read through their old name
        old = getattr(field, "deprecated_name", None)
        if isinstance(old, str):
            out[old] = _var(old, out[field.name]["kind"], None, "environ.py", field.name, deprecated=True)
    for old, dep in getattr(module, "_DEPRECATED_ENVS", {}).items():
        replacement = dep.replacement
        if replacement is None and dep.note:
            match = _INSTEAD.search(dep.note)
            replacement = match.group(1) if match else None
        if old in out:
            out[old]["deprecated"], out[old]["replacement"] = True, replacement
            continue
        kind = out[replacement]["kind"] if replacement in out else "other"
        out[old] = _var(old, kind, None, "environ.py", replacement, deprecated=True)
    return out


_NOT_LITERAL = object()
_ABSENT = object()
# Where a direct read starts; group 1: an int( / float( right around it. Parsing all of srt/ (36 MB)
# with ast takes ~25 s, so only each read's own expression is cut out and parsed.
_READ_START = re.compile(
    r"(?<![\w.])(?:(int|float)\(\s*)?"
    r"((?:os\.environ\.(?:get|pop)|os\.getenv|get_bool_env_var|get_int_env_var)\s*\(|os\.environ\s*\[)"
)
_MEMBERSHIP = re.compile(r"[\"'](SGLANG_[A-Z0-9_]+)[\"']\s+(?:not\s+)?in\s+os\.environ\b(?!\s*\.)")
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return _NOT_LITERAL


def _typed_default(kind: str, raw: Any) -> Any:
    if raw is _NOT_LITERAL:
        return _NOT_LITERAL
    if raw is None:
        return None
    try:
        if kind == "bool":
            return str(raw).lower() in ("true", "1")
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        return _NOT_LITERAL
    return jsonable(raw)


def _balanced_end(text: str, open_at: int) -> int:
    """Index of the bracket closing the one at ``open_at`` (skipping string literals), or -1."""
    stack: list[str] = []
    i = open_at
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < len(text) and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i
        elif ch == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
        i += 1
    return -1


def _read_at(node: ast.AST, wrapper: str | None) -> tuple[str, str, Any] | None:
    """(name, kind, default or _ABSENT) for one parsed read expression."""
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value, wrapper or "str", _ABSENT
        return None
    if not (isinstance(node, ast.Call) and node.args):
        return None
    key = node.args[0]
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return None
    func = node.func
    fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    default_node = node.args[1] if len(node.args) > 1 else None
    for kw in node.keywords:
        if kw.arg == "default":
            default_node = kw.value
    if fname in ("get_bool_env_var", "get_int_env_var"):
        kind = "bool" if fname == "get_bool_env_var" else "int"
        raw = _literal(default_node) if default_node is not None else ("false" if kind == "bool" else 0)
        return key.value, kind, _typed_default(kind, raw)
    kind = wrapper or "str"
    return key.value, kind, _typed_default(kind, _literal(default_node))


def _reads_in(text: str) -> list[tuple[str, str, Any]]:
    """(name, kind, default or _ABSENT) for each direct SGLANG_* environment read in one module."""
    reads: list[tuple[str, str, Any]] = []
    for match in _READ_START.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if "#" in text[line_start : match.start()]:
            continue  # (roughly) inside a comment
        end = _balanced_end(text, match.end(2) - 1)
        if end < 0:
            continue
        rest = text[end + 1 : end + 40]
        if match.group(2).endswith("[") and re.match(r"\s*(=(?!=)|[-+*/|&]=)", rest):
            continue  # os.environ["X"] = ...: a write
        try:
            node = ast.parse(text[match.start(2) : end + 1], mode="eval").body
        except SyntaxError:
            continue
        wrapper = match.group(1) if match.group(1) and re.match(r"\s*[),]", rest) else None
        read = _read_at(node, wrapper)
        if read is not None:
            reads.append(read)
    reads.extend((m.group(1), "other", _ABSENT) for m in _MEMBERSHIP.finditer(text))
    return [r for r in reads if _ENV_NAME.match(r[0])]


def os_environ_entries(srt_dir: Path, known: set[str]) -> dict[str, dict[str, Any]]:
    kinds: dict[str, set[str]] = {}
    defaults: dict[str, set[str]] = {}
    for path in sorted(srt_dir.rglob("*.py")):
        if path == srt_dir / "environ.py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if "SGLANG_" not in text:
            continue
        for name, kind, default in _reads_in(text):
            if name in known:
                continue
            kinds.setdefault(name, set()).add(kind)
            if default is not _ABSENT:
                defaults.setdefault(name, set()).add(
                    "?" if default is _NOT_LITERAL else json.dumps(default, sort_keys=True)
                )
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(kinds):
        typed = kinds[name] - {"other", "str"}
        kind = typed.pop() if len(typed) == 1 else ("str" if not typed and "str" in kinds[name] else "other")
        seen = defaults.get(name, set())
        default = json.loads(next(iter(seen))) if len(seen) == 1 and "?" not in seen else None
        out[name] = _var(name, kind, default, "os.environ")
    return out


def env_entries(srt_dir: Path) -> list[dict[str, Any]]:
    declared = environ_entries(_load_environ(srt_dir / "environ.py"))
    direct = os_environ_entries(srt_dir, set(declared))
    merged = {**direct, **declared}
    return [merged[name] for name in sorted(merged)]


# ---------------------------------------------------------------------------- main


def build() -> dict[str, Any]:
    # Defaults must not depend on whoever runs the probe.
    for key in [k for k in os.environ if k.startswith(("SGLANG_", "SGL_"))]:
        del os.environ[key]
    import sglang  # after the clean-up above, and only in the engine venv

    pkg_version = dist_version("sglang")
    name = f"sglang-{pkg_version}"
    srt_dir = Path(sglang.__file__).resolve().parent / "srt"
    flags = {
        "format": FORMAT,
        "catalog": name,
        "package": "sglang",
        "version": pkg_version,
        "flags": flag_entries(),
    }
    env = {"format": FORMAT, "catalog": name, "variables": env_entries(srt_dir)}
    return {"flags": flags, "env": env}


def main() -> int:
    # Anything sglang prints while importing must not end up in the JSON on stdout.
    with contextlib.redirect_stdout(sys.stderr):
        result = build()
    sys.stdout.write(json.dumps(result, ensure_ascii=False, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
