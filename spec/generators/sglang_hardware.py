"""Generator: the GPU generations SGLang's argument pipeline ties settings to, read from its source by AST.

Stored in the flag catalog (its ``hardware`` object, spec/generators/catalog_extract.py) and read by SC259:
- ``requirements``: a setting SGLang refuses at start on a GPU outside some compute-capability majors (``if cfg.X
  == "v" ... if not get_platform().is_sm100: raise``, or ``assert ... is_sm100_supported()``);
- ``refusals``: one SGLang refuses on some majors (``if ... and torch.cuda.get_device_capability()[0] >= 10:
  raise``: "SM100+", which GB10's 12 is);
- ``rewrites``: a setting SGLang replaces on some majors (``if ... and get_platform().is_sm120: name = "v"``);
- ``quantization_runners``: the MoE runners a quantization allows and the one it forces instead of another.
A judgement whose conditions are not all plain settings compared with constants is left out (a rule repeating
it could refuse what SGLang accepts). Standard library only: no SGLang import.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

SCOPE = ("srt/arg_groups", "srt/server_args.py")
GATES_PY = "srt/utils/common.py"  # is_sm100_supported = ...partial(_check_cuda_device_version, majors=[10])
PLATFORM_PY = "srt/runtime_context.py"  # _PLATFORM_PROBES: get_platform().is_sm100 -> is_sm100_supported
VIEWS = {"cfg", "view", "server_args", "resolved_view", "resolving_view"}  # what SGLang reads settings through
Cond = tuple[str, Any, bool]  # (setting, value, equal): "a|b" for `cfg.a or cfg.b`


def gate_majors(package: Path) -> dict[str, tuple[int, ...]]:
    """Each probe of a compute-capability major (by function name and by its get_platform() attribute)."""
    majors: dict[str, tuple[int, ...]] = {}
    for node in ast.walk(ast.parse((package / GATES_PY).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign):
            found = [kw.value for call in ast.walk(node.value) if isinstance(call, ast.Call)
                     for kw in call.keywords if kw.arg == "device_capability_majors"]
            if found and isinstance(found[0], ast.List):
                value = tuple(int(ast.literal_eval(e)) for e in found[0].elts)
                majors.update({t.id: value for t in node.targets if isinstance(t, ast.Name)})
    for node in ast.walk(ast.parse((package / PLATFORM_PY).read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                and node.target.id == "_PLATFORM_PROBES":
            probes = ast.literal_eval(node.value)
            majors.update({attr: majors[probe] for attr, probe in probes.items() if probe in majors})
    every = tuple(sorted({m for ms in majors.values() for m in ms}))
    return {**majors, "is_cuda": every}  # every GPU a profile's hardware names is an NVIDIA one


class _Reader:
    """One function's judgements: the settings each is conditioned on, the gates it asserts or branches on."""

    def __init__(self, where: str, gates: dict[str, tuple[int, ...]], dests: set[str]) -> None:
        self.where, self.gates, self.dests = where, gates, dests
        self.aliases: dict[str, str] = {}
        self.requirements: list[dict[str, Any]] = []
        self.refusals: list[dict[str, Any]] = []
        self.rewrites: list[dict[str, Any]] = []
        self.every = gates["is_cuda"]

    def gate(self, node: ast.expr) -> tuple[int, ...] | None:
        """The majors a probe expression (or an `or` of probes) accepts."""
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            parts = [self.gate(v) for v in node.values]
            return None if any(p is None for p in parts) else tuple(sorted({m for p in parts if p for m in p}))
        if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Name):
            return self.gates.get(node.func.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "get_platform":
            return self.gates.get(node.attr)
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.GtE) and isinstance(
                node.comparators[0], ast.Constant) and isinstance(least := node.comparators[0].value, int):
            left = ast.unparse(node.left)  # "sm >= 100" (device_sm) or "major >= 10" (capability): SM121 passes
            if left == "torch.cuda.get_device_capability()[0]":
                return tuple(m for m in self.every if m >= least)
            if left == "get_platform().device_sm":
                return tuple(m for m in self.every if m * 10 >= least)
        return None

    def setting(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            parts = [self.setting(v) for v in node.values]
            return "|".join(p for p in parts if p) if all(parts) else None
        if isinstance(node, ast.Attribute) and node.attr in self.dests:
            owner = node.value.func if isinstance(node.value, ast.Call) else node.value
            return node.attr if isinstance(owner, ast.Name) and owner.id in VIEWS else None
        return None

    def cond(self, node: ast.expr) -> Cond | None:
        """`X.dest == "v"`, `X.dest != "v"` or a bare `X.dest` (true), else None."""
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) \
                and isinstance(node.comparators[0], ast.Constant):
            dest = self.setting(node.left)
            return (dest, node.comparators[0].value, isinstance(node.ops[0], ast.Eq)) if dest else None
        dest = self.setting(node)
        return (dest, True, True) if dest else None

    def split(self, test: ast.expr) -> tuple[list[Cond], list[tuple[int, ...]], list[tuple[int, ...]], bool]:
        """(conditions, negated gates, gates, whether every conjunct was understood)."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        conds, negated, gates, clear = [], [], [], True
        for part in parts:
            if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not) and (g := self.gate(part.operand)):
                negated.append(g)
            elif (g := self.gate(part)) is not None:
                gates.append(g)
            elif (c := self.cond(part)) is not None:
                conds.append(c)
            else:
                clear = False
        return conds, negated, gates, clear

    def block(self, body: list[ast.stmt], conds: list[Cond]) -> None:
        conds = list(conds)
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.assign(stmt.targets[0].id, stmt.value, conds)
            elif isinstance(stmt, ast.Assert):
                self.assertion(stmt, conds)
            elif isinstance(stmt, ast.If):
                if not self.branch(stmt, conds):
                    return  # an early return on a condition not understood: what follows is not known
            elif isinstance(stmt, ast.With):
                self.block(stmt.body, conds)
            elif isinstance(stmt, (ast.For, ast.While, ast.Try)):
                continue  # loops and handlers: conditions not read

    def assign(self, name: str, value: ast.expr, conds: list[Cond]) -> None:
        if not conds and (dest := self.setting(value)) and name not in self.aliases:
            self.aliases[name] = dest  # the function's own copy of a setting, read at its top level

    def assertion(self, stmt: ast.Assert, conds: list[Cond]) -> None:
        _, _, gates, _ = self.split(stmt.test)
        if gates and conds:
            self.requirements.append(self.fact(conds, gates, stmt.msg))

    def branch(self, stmt: ast.If, conds: list[Cond]) -> bool:
        """Read one `if`; False when its body returns on a condition not understood."""
        more, negated, gates, clear = self.split(stmt.test)
        inner = conds + more
        raises = next((s for s in stmt.body if isinstance(s, ast.Raise)), None)
        if clear and negated and raises is not None and inner:
            self.requirements.append(self.fact(inner, negated, _raised(raises)))
        if clear and gates and not negated and raises is not None and inner:
            self.refusals.append(self.fact(inner, gates, _raised(raises)))  # refused on these majors
        if clear and gates and not negated:
            for sub in stmt.body:
                if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.value, ast.Constant) \
                        and isinstance(sub.targets[0], ast.Name) and sub.targets[0].id in self.aliases and inner:
                    fact = self.fact(inner, gates, None)
                    del fact["message"]  # SGLang logs it; the rule says what runs instead
                    self.rewrites.append({**fact, "set": [self.aliases[sub.targets[0].id], sub.value.value]})
        if clear and not gates and not negated:
            self.block(stmt.body, inner)
        returns = any(isinstance(s, ast.Return) for s in stmt.body)
        negation = _negated(stmt.test, self)
        if returns and negation is not None:
            conds.append(negation)
        return not returns or negation is not None

    def fact(self, conds: list[Cond], gates: list[tuple[int, ...]], msg: ast.expr | None) -> dict[str, Any]:
        majors = sorted(set.intersection(*(set(g) for g in gates)))
        return {"site": self.where, "when": [[d, v] if equal else [d, "!=", v] for d, v, equal in conds],
                "majors": majors,
                "message": _text(msg)}


def _negated(test: ast.expr, reader: _Reader) -> Cond | None:
    """`X.dest != "v"` read as what holds after `if ...: return`: the setting is "v"."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq) \
            and isinstance(test.comparators[0], ast.Constant) and (dest := reader.setting(test.left)):
        return dest, test.comparators[0].value, True
    return None


def _raised(node: ast.Raise) -> ast.expr | None:
    exc = node.exc
    return exc.args[0] if isinstance(exc, ast.Call) and exc.args else None


def _text(node: ast.expr | None) -> str:
    """A message's literal text (f-string holes as {...})."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return " ".join(node.value.split())
    if isinstance(node, ast.JoinedStr):
        return " ".join("".join(str(v.value) if isinstance(v, ast.Constant) else "{...}" for v in node.values).split())
    return ""


def _families(node: ast.FunctionDef) -> tuple[bool, list[str]]:
    """(whether the function runs for every model, the architectures it is registered for)."""
    names: list[str] = []
    for deco in node.decorator_list:
        call = deco.func if isinstance(deco, ast.Call) else deco
        name = call.attr if isinstance(call, ast.Attribute) else call.id if isinstance(call, ast.Name) else ""
        if name == "register_model_override_predicate":
            return False, []
        if name == "_register_for" and isinstance(deco, ast.Call):
            names += [str(a.value) for a in deco.args if isinstance(a, ast.Constant)]
    return True, names


def _called_for(trees: list[ast.Module]) -> dict[str, list[str]]:
    """Functions called inside `if model_arch in [...]` (or `== "..."`): the architectures they run for (a
    judgement of one then holds for those only; one also called elsewhere is narrowed, never widened)."""
    out: dict[str, list[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.If):
                continue
            test = node.test
            if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "model_arch"
                    and isinstance(test.ops[0], (ast.In, ast.Eq))):
                continue
            try:
                value = ast.literal_eval(test.comparators[0])
            except ValueError:
                continue
            names = [value] if isinstance(value, str) else [str(v) for v in value]
            for call in (c for stmt in node.body for c in ast.walk(stmt) if isinstance(c, ast.Call)):
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                out.setdefault(name, []).extend(n for n in names if n not in out.get(name, []))
    return out


def quantization_runners(package: Path) -> dict[str, Any]:
    """MXFP8's MoE runners: the allowed list (choices.py) and the one SGLang runs instead of another on CUDA."""
    allowed: list[str] = []
    for node in ast.parse((package / "srt/arg_groups/choices.py").read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and any(
                isinstance(t, ast.Name) and t.id == "MXFP8_MOE_RUNNER_BACKEND_CHOICES"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            allowed = [str(v) for v in ast.literal_eval(node.value)]
    forced = None
    for sub in ast.walk(ast.parse((package / "srt/arg_groups/overrides.py").read_text(encoding="utf-8"))):
        if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "mxfp8_default"
                                               for t in sub.targets) and isinstance(sub.value, ast.IfExp) \
                and isinstance(sub.value.orelse, ast.Constant):
            forced = sub.value.orelse.value  # the CUDA branch (the other is ROCm gfx95's)
    return {"mxfp8": {"allowed": allowed, "forced": forced}} if allowed and forced else {}


def hardware_facts(package: Path, dests: set[str]) -> dict[str, Any]:
    """The catalog's ``hardware`` object for the sglang package directory ``package`` (empty for a tree without
    the platform probes this reads: an older layout)."""
    if not all((package / name).is_file() for name in (GATES_PY, PLATFORM_PY, "srt/arg_groups/choices.py")):
        return {}
    gates = gate_majors(package)
    requirements: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    rewrites: list[dict[str, Any]] = []
    files: list[Path] = []
    for part in SCOPE:
        path = package / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
    trees = {file.relative_to(package).as_posix(): ast.parse(file.read_text(encoding="utf-8")) for file in files}
    called_for = _called_for(list(trees.values()))
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            every, architectures = _families(node)
            architectures = architectures or called_for.get(node.name, [])
            if not every or ("model_overrides" in rel and not architectures):
                continue
            reader = _Reader(f"{rel}:{node.name}", gates, dests)
            reader.block(node.body, [])
            for fact in (*reader.requirements, *reader.refusals, *reader.rewrites):
                fact.update({"architectures": architectures} if architectures else {})
            requirements += [r for r in reader.requirements if tuple(r["majors"]) != gates["is_cuda"]]  # CUDA only
            refusals += reader.refusals
            rewrites += reader.rewrites
    return {"requirements": requirements, "refusals": refusals, "rewrites": rewrites,
            "quantization_runners": quantization_runners(package)}
