"""The environment catalog of an SGLang source tree, read from its environ.py by parsing: nothing of the
tree is imported or run (`catalog sglang --source` must never execute code from a directory).

It reads what the probe's `environ_entries` reads from the imported module: every `NAME = EnvX(default,
deprecated_name=...)` in class Envs, typed by EnvX's base classes in the file, and the _DEPRECATED_ENVS
table; a default that is not a literal (computed at run time) is null, as the probe makes a callable one.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_compile.spec.generators.sglang_probe import _INSTEAD, _var, jsonable, os_environ_entries
from spark_compile.spec.generators.sglang_source import SourceError

_KINDS = (("EnvBool", "bool"), ("EnvInt", "int"), ("EnvFloat", "float"), ("EnvStr", "str"))
_EMPTY_CALLS: dict[str, Any] = {"tuple": (), "list": [], "dict": {}, "frozenset": (), "set": ()}
_NOT_LITERAL = object()
_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift}
_MAX_MAGNITUDE = 1 << 64  # constant arithmetic of sizes (384 * 1024 * 1024, 2**31); nothing larger is a default


def _number(node: ast.AST) -> Any:
    """A number from literal arithmetic (the `16 * 1024` of a default), bounded; _NOT_LITERAL otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand)
        return _NOT_LITERAL if value is _NOT_LITERAL else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _number(node.left), _number(node.right)
        if _NOT_LITERAL in (left, right) or max(abs(left), abs(right)) > _MAX_MAGNITUDE:
            return _NOT_LITERAL
        if isinstance(node.op, ast.Pow | ast.LShift) and not 0 <= right <= 64:
            return _NOT_LITERAL  # 10 ** 10 ** 10 is never computed
        try:
            value = _ARITHMETIC[type(node.op)](left, right)
        except (ArithmeticError, ValueError, TypeError):
            return _NOT_LITERAL
        return value if abs(value) <= _MAX_MAGNITUDE else _NOT_LITERAL
    return _NOT_LITERAL


def _bases(classes: dict[str, ast.ClassDef], name: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """``name`` and every class it derives from, by name, through the classes of the file."""
    found = {name}
    for base in classes[name].bases if name in classes and name not in seen else []:
        if isinstance(base, ast.Name):
            found |= _bases(classes, base.id, seen | {name})
    return found


def _literal(node: ast.AST | None, constants: dict[str, Any]) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return _number(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and not node.keywords:
        return _EMPTY_CALLS.get(node.func.id, _NOT_LITERAL)
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return constants.get(f"{node.value.id}.{node.attr}", _NOT_LITERAL)
    return _NOT_LITERAL


def _argument(call: ast.Call, index: int, keyword: str) -> ast.AST | None:
    named = next((k.value for k in call.keywords if k.arg == keyword), None)
    return named if named is not None else (call.args[index] if len(call.args) > index else None)


def _constants(tree: ast.Module, classes: dict[str, ast.ClassDef]) -> dict[str, Any]:
    """Module-level literals and enum members (IntEnum classes: NAME.MEMBER -> its int), for defaults."""
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _literal(node.value, {})
            if value is not _NOT_LITERAL:
                out[node.targets[0].id] = value
    for name, cls in classes.items():
        for item in cls.body:
            if isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                value = _literal(item.value, {})
                if isinstance(value, int) and not isinstance(value, bool):
                    out[f"{name}.{item.targets[0].id}"] = value
    return out


def _assignments(cls: ast.ClassDef) -> list[tuple[str, ast.Call]]:
    out = []
    for item in cls.body:
        target = item.targets[0] if isinstance(item, ast.Assign) and len(item.targets) == 1 else \
            item.target if isinstance(item, ast.AnnAssign) else None
        value = item.value if isinstance(item, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            out.append((target.id, value))
    return out


def declared_entries(environ_py: Path) -> dict[str, dict[str, Any]]:
    """Every variable environ.py declares, with its kind, default and deprecation (see the module doc)."""
    try:
        tree = ast.parse(environ_py.read_text(encoding="utf-8"), str(environ_py))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise SourceError(f"{environ_py}: cannot parse: {exc}") from None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if "Envs" not in classes:
        raise SourceError(f"{environ_py}: no class Envs (not an SGLang environ.py of a known style)")
    constants = _constants(tree, classes)
    out: dict[str, dict[str, Any]] = {}
    aliases: list[tuple[str, str]] = []
    for name, call in _assignments(classes["Envs"]):
        bases = _bases(classes, call.func.id)  # type: ignore[attr-defined]
        if "EnvField" not in bases:
            continue
        kind = next((kind for cls, kind in _KINDS if cls in bases), "other")
        default = _literal(_argument(call, 0, "default"), constants)
        out[name] = _var(name, kind, None if default is _NOT_LITERAL else jsonable(default), "environ.py")
        old = _literal(_argument(call, 1, "deprecated_name"), constants)
        if isinstance(old, str):
            aliases.append((old, name))
    for old, name in aliases:  # renamed variables still read through their old name
        out[old] = _var(old, out[name]["kind"], None, "environ.py", name, deprecated=True)
    for old, (named, note) in _deprecated(tree).items():
        match = _INSTEAD.search(note) if named is None and note else None
        replacement = match.group(1) if match else named
        if old in out:
            out[old]["deprecated"], out[old]["replacement"] = True, replacement
            continue
        kind = out[replacement]["kind"] if replacement in out else "other"
        out[old] = _var(old, kind, None, "environ.py", replacement, deprecated=True)
    return out


def _deprecated(tree: ast.Module) -> dict[str, tuple[str | None, str | None]]:
    """_DEPRECATED_ENVS: old name -> (replacement, note), from `{"OLD": _DeprecatedEnv(...), ...}`."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "_DEPRECATED_ENVS" and isinstance(value, ast.Dict):
            out: dict[str, tuple[str | None, str | None]] = {}
            for key, item in zip(value.keys, value.values, strict=True):
                old = _literal(key, {})
                if isinstance(old, str) and isinstance(item, ast.Call):
                    replacement = _literal(_argument(item, 0, "replacement"), {})
                    note = _literal(_argument(item, 2, "note"), {})
                    out[old] = (replacement if isinstance(replacement, str) else None,
                                note if isinstance(note, str) else None)
            return out
    return {}


def env_entries_static(srt_dir: Path) -> list[dict[str, Any]]:
    """The env catalog's variables of a source tree's srt/ folder, sorted by name (the probe's env_entries,
    with environ.py parsed instead of run)."""
    declared = declared_entries(srt_dir / "environ.py")
    direct = os_environ_entries(srt_dir, set(declared))
    merged = {**direct, **declared}
    return [merged[name] for name in sorted(merged)]
