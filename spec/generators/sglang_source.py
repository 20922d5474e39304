"""Build SGLang's flag catalog from a source tree, statically: ``ast`` over ``sglang/srt/server_args.py``.

``spark-compile catalog sglang --source DIR`` uses it for an image built from SGLang at some commit, or
a release unpacked from its sdist or wheel, without installing or importing anything from that tree.
Every ``add_argument(...)`` call becomes one entry in the probe's format (spec/generators/sglang_probe.py): its
option strings, dest, action, type, nargs, choices and default, each resolved from literals, module-level
constants (``X_CHOICES = [...]``, ``[*A, "b"]``, ``A + [B]``) and the ``ServerArgs`` field defaults. What
only running code can know (choices computed at run time) is left out: ``choices`` is then ``None`` and
values are not checked against a list. Trees that declare flags another way (0.5.23's ``arg_groups``
fields) have no such calls: extract those with the engine venv (``--python``) instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from spark_compile.spec.generators.sglang_probe import FORMAT, first_sentence, jsonable, sort_choices

_UNKNOWN = object()
_TYPE_KINDS = {"int": "int", "human_readable_int": "int", "float": "float", "str": "str", "nullable_str": "str",
               "loads": "json", "json_list_type": "json"}
_ACTIONS = {"store": "store", "store_true": "store_true", "store_false": "store_false", "append": "append",
            "count": "count", "BooleanOptionalAction": "boolean_optional", "DeprecatedStoreTrueAction": "store_true",
            "DeprecatedAliasStoreAction": "store"}
_DEPRECATED_HELP = re.compile(r"^\W*deprecated\b", re.IGNORECASE)
_USE_FLAG = re.compile(r"\buse\s+'?(--[^\s')]+)", re.IGNORECASE)
_SWITCHES = ("store_true", "store_false", "boolean_optional", "count")
MIN_FLAGS = 50  # fewer add_argument calls than this: the tree declares its flags another way


class SourceError(Exception):
    """The tree has no SGLang sources this extractor can read; the message says what was looked for."""


def find_package(root: Path) -> Path:
    """The ``sglang`` package directory in a checkout (python/sglang), an unpacked sdist or a wheel."""
    for candidate in (root / "sglang", root / "python" / "sglang", root):
        if (candidate / "srt" / "server_args.py").is_file():
            return candidate
    raise SourceError(f"no sglang/srt/server_args.py under {root} (looked in sglang/, python/sglang/ and the folder)")


def tree_version(package: Path) -> str | None:
    """The release version the tree states: _version.py, a wheel's METADATA, or pyproject.toml."""
    version_py = package / "_version.py"
    if version_py.is_file():
        for node in ast.parse(version_py.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("__version__", "version")
                                                    for t in node.targets):
                value = _literal(node.value, {})
                if isinstance(value, str):
                    return value
    for metadata in sorted(package.parent.glob("sglang-*.dist-info/METADATA")):
        match = re.search(r"^Version: (\S+)$", metadata.read_text(encoding="utf-8"), re.MULTILINE)
        if match:
            return match.group(1)
    for pyproject in (package.parent / "pyproject.toml", package.parent.parent / "pyproject.toml"):
        if pyproject.is_file():
            match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
            if match:
                return match.group(1)
    return None


def _literal(node: ast.AST, names: dict[str, Any]) -> Any:
    """The value of a constant expression, following module-level names; _UNKNOWN when it is not one."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id, _UNKNOWN)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand, names)
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else _UNKNOWN
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items: list[Any] = []
        for element in node.elts:
            inner = element.value if isinstance(element, ast.Starred) else element
            value = _literal(inner, names)
            if value is _UNKNOWN:
                return _UNKNOWN
            items.extend(value if isinstance(element, ast.Starred) else [value])
        return items
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names), _literal(node.right, names)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        return _UNKNOWN
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "sorted") \
            and len(node.args) == 1 and not node.keywords:
        value = _literal(node.args[0], names)
        return list(value) if isinstance(value, list) else _UNKNOWN
    if isinstance(node, ast.JoinedStr):
        return _UNKNOWN
    return _UNKNOWN


def _module_names(tree: ast.Module) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _literal(node.value, names)
            if value is not _UNKNOWN:
                names[node.targets[0].id] = value
    return names


def _field_defaults(tree: ast.Module, names: dict[str, Any]) -> dict[str, Any]:
    """``ServerArgs`` dataclass fields with a constant default (``field(default=...)`` included)."""
    defaults: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == "ServerArgs"):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                value = item.value
                if isinstance(value, ast.Call) and _name_of(value.func) == "field":
                    value = next((k.value for k in value.keywords if k.arg == "default"), ast.Constant(None))
                defaults[item.target.id] = _literal(value, names)
    return defaults


def _name_of(node: ast.AST | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _kind(action: str, type_name: str, nargs: Any, choices: list[Any] | None) -> str:
    if action in ("store_true", "store_false", "boolean_optional"):
        return "bool"
    if action == "count":
        return "int"
    if not type_name:
        return "str" if choices is None or all(isinstance(c, str) for c in choices) else "other"
    return _TYPE_KINDS.get(type_name, "other")


def _entry(call: ast.Call, names: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any] | None:
    options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not options or not all(o.startswith("-") for o in options):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action_cls = _name_of(kw.get("action")) or "store"
    action = _ACTIONS.get(action_cls, "other")
    long = next((o for o in options if o.startswith("--")), options[0])
    dest = _literal(kw["dest"], names) if "dest" in kw else long.lstrip("-").replace("-", "_")
    if action == "boolean_optional":
        options += [f"--no-{o[2:]}" for o in options if o.startswith("--")]
    choices_value = _literal(kw["choices"], names) if "choices" in kw else None
    choices = sort_choices(choices_value) if isinstance(choices_value, list) else None
    default = _default(kw.get("default"), names, defaults, action)
    help_value = _literal(kw["help"], names) if "help" in kw else ""
    help_text = help_value if isinstance(help_value, str) else ""
    # argparse's switches take no argument: their actions carry nargs=0.
    nargs = _literal(kw["nargs"], names) if "nargs" in kw else (0 if action in _SWITCHES else None)
    deprecated = action_cls.startswith("Deprecated") or bool(_DEPRECATED_HELP.search(" ".join(help_text.split())))
    use = _USE_FLAG.search(help_text) if deprecated else None
    return {"dest": dest, "options": sorted(options), "kind": _kind(action, _name_of(kw.get("type")), nargs, choices),
            "action": action, "nargs": None if nargs is _UNKNOWN else nargs, "choices": choices,
            "default": default, "deprecated": deprecated,
            "replacement": use.group(1).rstrip(".,;:") if use else None, "help": first_sentence(help_text)}


def _default(node: ast.AST | None, names: dict[str, Any], defaults: dict[str, Any], action: str) -> Any:
    if node is None:
        return {"store_true": False, "store_false": True}.get(action)
    if isinstance(node, ast.Attribute) and _name_of(node.value) == "ServerArgs":
        value = defaults.get(node.attr, _UNKNOWN)
    else:
        value = _literal(node, names)
    return None if value is _UNKNOWN else jsonable(value)


def flag_entries(server_args_py: Path) -> list[dict[str, Any]]:
    """One catalog entry per ``add_argument`` call in server_args.py, sorted like the probe's."""
    tree = ast.parse(server_args_py.read_text(encoding="utf-8"))
    names = _module_names(tree)
    defaults = _field_defaults(tree, names)
    entries = [e for node in ast.walk(tree)
               if isinstance(node, ast.Call) and _name_of(node.func) == "add_argument"
               and (e := _entry(node, names, defaults)) is not None]
    if len(entries) < MIN_FLAGS:
        raise SourceError(f"{server_args_py} has {len(entries)} add_argument calls; this tree declares its flags "
                          "another way: extract its catalog from an install with --python")
    unique = {"/".join(e["options"]): e for e in entries}
    return sorted(unique.values(), key=lambda e: (e["dest"], e["options"]))


def source_catalog(root: Path, name: str | None = None) -> dict[str, Any]:
    """The flag catalog document of the SGLang tree at ``root``."""
    package = find_package(root)
    flags = flag_entries(package / "srt" / "server_args.py")
    version = tree_version(package)
    if version is None and name is None:
        raise SourceError(f"{package} states no version (no _version.py, dist-info or pyproject.toml): pass --name")
    catalog = name or f"sglang-{version}"
    return {"format": FORMAT, "catalog": catalog, "package": "sglang", "version": version or catalog,
            "flags": flags}
