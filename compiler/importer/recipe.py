"""sparkrun recipes (the format sparkrun 0.4.2 reads) as launches: the `command:` template rendered with the
recipe's `defaults` (or, without one, the command sparkrun builds from them), sparkrun's rendezvous flags
appended per node, `env` as the container's variables and `container` as the image."""

from __future__ import annotations

import re
from typing import Any

import yaml

from spark_compile.common.errors import InputError, UsageError
from spark_compile.importer import sparkrun_facts as facts
from spark_compile.importer.shell import ShellWord, commands
from spark_compile.importer.source import Launch, Leftover, Origin, Word
from spark_compile.stages.load import MAX_NODES

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_INFORMATION = ("metadata", "description", "name", "recipe_version")


def _expanded(root: yaml.Node | None) -> int:
    """Values the document holds with every alias expanded, counted up to MAX_NODES + 1 (a few KB of aliases
    expand to billions: walking or printing them would never end)."""
    count, stack = 0, [root] if root is not None else []
    while stack and count <= MAX_NODES:
        node = stack.pop()
        count += 1
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(item for pair in node.value for item in pair)
    return count


def _load(text: str, file: str) -> Any:
    """The recipe's data, once its expanded size is known to be bounded."""
    if _expanded(yaml.compose(text, Loader=yaml.SafeLoader)) > MAX_NODES:
        raise InputError(f"{file}: the recipe expands to more than {MAX_NODES} values (YAML anchors and aliases); "
                         "write the values out instead of aliasing them")
    return yaml.safe_load(text)


def is_recipe(text: str, file: str) -> bool:
    """The text is a YAML mapping with sparkrun's `runtime` key and a command or defaults."""
    try:
        data = _load(text, file)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and "runtime" in data and ("command" in data or "defaults" in data)


def _lines(text: str) -> dict[tuple[str, ...], int]:
    """1-based line of every key of the top level and of `defaults`/`env`, and of the command's first line."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    found: dict[tuple[str, ...], int] = {}
    if not isinstance(root, yaml.MappingNode):
        return found
    for key, value in root.value:
        found[(key.value,)] = key.start_mark.line + 1
        if key.value == "command":
            block = value.style in ("|", ">")
            found[("command", "start")] = value.start_mark.line + 1 + block
        if isinstance(value, yaml.MappingNode):
            for sub, _ in value.value:
                found[(key.value, sub.value)] = sub.start_mark.line + 1
    return found


def _text(value: Any) -> str:
    """A defaults value as sparkrun's template substitution writes it (Python's str)."""
    return str(value)


class _Recipe:
    def __init__(self, text: str, file: str) -> None:
        try:
            data = _load(text, file)
            self.lines = _lines(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{file}:{mark.line + 1}" if mark else file
            raise InputError(f"{where}: not a readable recipe: {getattr(exc, 'problem', exc)}") from None
        self.data: dict[str, Any] = data
        self.file = file
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, dict):
            raise InputError(f"{self.at('defaults')}: `defaults` must be a mapping")
        # sparkrun fills {model_revision} only when the recipe pins one
        pin = {"model_revision": data["model_revision"]} if data.get("model_revision") else {}
        self.config: dict[str, Any] = {"model": data.get("model"), **pin, **defaults}

    def at(self, *key: str) -> Origin:
        return Origin(self.file, self.lines.get(key, self.lines.get(key[:1], 1)))


def _rendered(recipe: _Recipe, template: str, left: list[Leftover], start: int) -> str:
    """The template with its placeholders filled, as sparkrun renders it before its shell splits the words."""
    def value(match: re.Match[str]) -> str:
        found = recipe.config.get(match.group(1))
        if found is None:
            left.append(Leftover(Origin(recipe.file, start), match.group(), f"the recipe gives no value for "
                                 f"{match.group()}"))
            return match.group()
        text = _text(found)
        if "\n" in text:
            left.append(Leftover(recipe.at("defaults", match.group(1)), match.group(1), "a value with a line break "
                                 "cannot be part of a command line"))
            return ""
        return text
    return _PLACEHOLDER.sub(value, template)


def _origins(recipe: _Recipe, template: list[list[ShellWord]], words: list[ShellWord]) -> list[ShellWord]:
    """The rendered words, each placed at the `defaults` line of the placeholder it came from where the template
    word was that placeholder alone (and the line splits into as many words), else at its template line."""
    by_line: dict[int, list[ShellWord]] = {}
    for word in (w for command in template for w in command):
        by_line.setdefault(word.origin.line, []).append(word)
    counts: dict[int, int] = {}
    for word in words:
        counts[word.origin.line] = counts.get(word.origin.line, 0) + 1
    out, seen = [], dict.fromkeys(by_line, 0)
    for word in words:
        line = word.origin.line
        index = seen.get(line, 0)
        seen[line] = index + 1
        source = by_line.get(line, [])
        aligned = counts[line] == len(source)  # a value holding spaces split into more words: keep the line
        whole = _PLACEHOLDER.fullmatch(source[index].text) if aligned else None
        key = whole.group(1) if whole else None
        origin = word.origin if key is None else recipe.at("model") if key == "model" else recipe.at("defaults", key)
        out.append(ShellWord(word.text, origin, word.expands))
    return out


def _template(recipe: _Recipe, left: list[Leftover]) -> list[ShellWord]:
    template = str(recipe.data["command"]).strip()
    start = recipe.lines.get(("command", "start"), 1)
    shifted = "\n" * (start - 1) + template  # so that words carry their line in the recipe file
    found = commands(_rendered(recipe, shifted, left, start), recipe.file)
    if len(found) > 1:
        left.append(Leftover(recipe.at("command"), "command", "the template runs more than one command; only the "
                             "server's is imported (start-up steps have no profile key)"))
    words = _origins(recipe, commands(shifted, recipe.file), found[-1] if found else [])
    served = recipe.config.get("served_model_name")
    if served is not None and "--served-model-name" not in [w.text for w in words]:
        at = recipe.at("defaults", "served_model_name")  # sparkrun appends it when the template lacks it
        words += [ShellWord("--served-model-name", at), ShellWord(_text(served), at)]
    return words


def _built(recipe: _Recipe, left: list[Leftover]) -> list[ShellWord]:
    """The command sparkrun builds from `defaults` when the recipe has no template."""
    config = recipe.config
    words = [ShellWord("sglang", recipe.at("runtime")), ShellWord("serve", recipe.at("runtime")),
             ShellWord("--model-path", recipe.at("model")), ShellWord(_text(config["model"]), recipe.at("model"))]
    if config.get("tensor_parallel"):
        at = recipe.at("defaults", "tensor_parallel")
        words += [ShellWord("--tp-size", at), ShellWord(_text(config["tensor_parallel"]), at)]
    mapped = {key for key, _ in facts.FLAG_MAP}
    for key, flag in facts.FLAG_MAP:
        value, at = config.get(key), recipe.at("defaults", key)
        if key in ("tensor_parallel", "data_parallel") or value is None:
            continue
        if key in facts.BOOL_KEYS:
            words += [ShellWord(flag, at)] if value else []
        elif isinstance(value, dict | list):
            left.append(Leftover(at, key, "a structured value (sparkrun writes it as JSON) is not imported"))
        else:
            words += [ShellWord(flag, at), ShellWord(_text(value), at)]
    for key in config:
        if key not in mapped and key != "model":
            left.append(Leftover(recipe.at("defaults", key), key, "sparkrun makes no SGLang flag of this key"))
    if config.get("data_parallel"):
        left.append(Leftover(recipe.at("defaults", "data_parallel"), "data_parallel",
                             "sparkrun places --dp-size by the launch's topology; write it in a command template"))
    return words


def _check_nodes(recipe: _Recipe, hosts: tuple[str, ...]) -> None:
    if not hosts:
        raise UsageError(f"{recipe.file}: a recipe names no machines: give --hosts H1,H2,... (head first)")
    low, high = recipe.data.get("min_nodes", 1), recipe.data.get("max_nodes")
    if not isinstance(low, int) or len(hosts) < low or (isinstance(high, int) and len(hosts) > high):
        wanted = f"{low}" + (f" to {high}" if high else " or more")
        raise UsageError(f"{recipe.at('min_nodes')}: the recipe runs on {wanted} node(s); --hosts names {len(hosts)}")


def _env(recipe: _Recipe, left: list[Leftover]) -> list[tuple[str, str, Origin]]:
    env = recipe.data.get("env") or {}
    if not isinstance(env, dict):
        left.append(Leftover(recipe.at("env"), "env", "`env` must be a mapping of names to values"))
        return []
    return [(str(name), _text(value), recipe.at("env", str(name))) for name, value in env.items()]


def recipe_launches(text: str, file: str, hosts: tuple[str, ...], left: list[Leftover],
                    notes: list[str]) -> list[Launch]:
    """One launch per host, rank order: what sparkrun would start on each node."""
    recipe = _Recipe(text, file)
    if recipe.data.get("runtime") != "sglang":
        raise InputError(f"{recipe.at('runtime')}: runtime {recipe.data.get('runtime')!r}: only sglang recipes "
                         "import")
    _check_nodes(recipe, hosts)
    for key in recipe.data:
        if key not in facts.RECIPE_KEYS:
            left.append(Leftover(recipe.at(key), key, "a sparkrun recipe key with no profile equivalent"))
        elif key in _INFORMATION and key != "metadata":
            notes.append(f"{recipe.at(key)}: {key} is information for sparkrun's catalog; not imported")
    for key in (k for k in metadata_of(recipe.data) if k != "description"):
        notes.append(f"{recipe.at('metadata', key)}: metadata.{key} is information for sparkrun's catalog; not "
                     "imported")
    words = _template(recipe, left) if recipe.data.get("command") else _built(recipe, left)
    image = recipe.data.get("container")
    if not isinstance(image, str):
        raise InputError(f"{recipe.at('container')}: the recipe names no container image (`container:`)")
    env = _env(recipe, left)
    options = _executor(recipe, left)
    _sparkrun_steps(recipe, words, left, notes)
    head = hosts[0].rsplit("@", 1)[-1]
    launches = []
    for rank in range(len(hosts)):
        extra = []
        if len(hosts) > 1:
            at = recipe.at("min_nodes")
            extra = [ShellWord(w, at) for w in ("--dist-init-addr", f"{head}:{facts.INIT_PORT}", "--nnodes",
                                                str(len(hosts)), "--node-rank", str(rank))]
        launches.append(Launch(recipe.at("runtime"), options=list(options),
                               image=ShellWord(image, recipe.at("container")), command=[*words, *extra],
                               env=list(env), own_container=False))
    if len(hosts) > 1:
        notes.append(f"{recipe.at('min_nodes')}: sparkrun appends --dist-init-addr {head}:{facts.INIT_PORT} "
                     f"--nnodes {len(hosts)} --node-rank R on each node")
    notes.append(f"{recipe.at('runtime')}: sparkrun's own container options and variables (added at launch, not "
                 "in the recipe) are not imported; the profile's come from spark-compile's plan")
    return launches


def _executor(recipe: _Recipe, left: list[Leftover]) -> list[tuple[Word, Word | None]]:
    """executor_config's container options (user, shm_size) as docker options; its other keys left out."""
    config = recipe.data.get("executor_config") or {}
    if not isinstance(config, dict):
        left.append(Leftover(recipe.at("executor_config"), "executor_config", "`executor_config` must be a mapping"))
        return []
    found: list[tuple[Word, Word | None]] = []
    for key, value in config.items():
        at = recipe.at("executor_config", str(key))
        if key in facts.EXECUTOR_OPTIONS and isinstance(value, str | int):
            found.append((Word(facts.EXECUTOR_OPTIONS[key], at), Word(_text(value), at)))
        elif key in facts.EXECUTOR_SWITCHES and isinstance(value, bool):
            found += [(Word(facts.EXECUTOR_SWITCHES[key], at), None)] if value else []
        else:
            left.append(Leftover(at, f"executor_config.{key}", "a setting of sparkrun's executor with no profile "
                                 "key (user, shm_size, auto_remove and privileged are the container's)"))
    return found


def _sparkrun_steps(recipe: _Recipe, words: list[ShellWord], left: list[Leftover], notes: list[str]) -> None:
    """What sparkrun does around the serve command: the model pin of its download, and each mod."""
    pin = recipe.data.get("model_revision")
    if pin and "--revision" not in [w.text for w in words]:
        notes.append(f"{recipe.at('model_revision')}: model_revision {pin} pins sparkrun's download of the model; "
                     "the serve command passes no --revision, so the engine loads the cache's default (set "
                     "model.revision to pin the engine too)")
    mods = recipe.data.get("mods") or []
    for mod in mods if isinstance(mods, list) else [mods]:
        left.append(Leftover(recipe.at("mods"), f"mods: {mod}", facts.MOD_MEANING))


def metadata_of(data: object) -> dict[str, Any]:
    """A recipe's metadata mapping (description and the like), empty when it has none."""
    meta = data.get("metadata") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else {}


def metadata(text: str, file: str) -> dict[str, Any]:
    """The metadata of a recipe's text."""
    return metadata_of(_load(text, file))
