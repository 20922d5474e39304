"""An SGLang command line split into options the way SGLang's argparse reads it, spellings made canonical.

Each option keeps the words it came from; every change of spelling (an abbreviation, an alias, `--x=v`) is
recorded as a normalisation, so the round trip can say exactly what it compared loosely.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_compile.importer.source import Origin, Word
from spark_compile.spec.catalog import EngineCatalog, EngineFlag, engine_catalog
from spark_compile.stages.engine_options import TYPED_FLAGS

# The builds an imported command line is read against, newest first: a flag only an older build knows
# (--cuda-graph-max-bs) still gets its arity from the build that has it.
CATALOGS = ("sglang-0.5.23", "sglang-0.5.10.post1")
LAUNCHERS = ("sglang.launch_server",)


@dataclass(frozen=True, slots=True)
class EngineOption:
    """One engine option: the canonical flag (as the plan spells it), its values, where it was written."""

    flag: str
    values: tuple[str, ...]
    origin: Origin
    written: str  # the flag as the source spelled it
    words: tuple[Word, ...] = ()
    known: bool = True


@dataclass(slots=True)
class EngineCommand:
    """The launcher words and the engine options of one container command."""

    launcher: list[Word]
    options: list[EngineOption] = field(default_factory=list)
    stray: list[Word] = field(default_factory=list)  # positional words SGLang would refuse
    normalised: list[str] = field(default_factory=list)


def _catalogs() -> list[EngineCatalog]:
    return [engine_catalog(name) for name in CATALOGS]


def preferred(entry: EngineFlag) -> str:
    """The spelling the plan writes for a flag: its typed spelling when the plan has one, else argparse's first."""
    return next((o for o in entry.options if o in TYPED_FLAGS), entry.option)


def resolve_flag(flag: str) -> tuple[EngineFlag | None, str]:
    """The catalog entry of a flag as written (exact, else argparse's unique-prefix expansion), and why renamed:
    a typed flag takes the plan's spelling, any other keeps the source's."""
    for catalog in _catalogs():
        entry = catalog.lookup(flag)
        if entry is not None:
            if preferred(entry) == flag or preferred(entry) not in TYPED_FLAGS:
                return entry, ""
            return entry, f"{flag} is SGLang's alias of {preferred(entry)}"
    for catalog in _catalogs():
        entry = catalog.abbreviation_of(flag)
        if entry is not None:
            return entry, f"{flag} is argparse's abbreviation of {preferred(entry)}"
    return None, ""


def launcher_split(command: list[Word]) -> tuple[list[Word], list[Word]] | None:
    """(launcher words, engine words) of a container command that starts SGLang's server, else None."""
    for i, word in enumerate(command):
        if word.text in LAUNCHERS:
            return command[:i + 1], command[i + 1:]
        if word.text == "serve" and i > 0 and command[i - 1].text.rsplit("/", 1)[-1] == "sglang":
            return command[:i + 1], command[i + 1:]
    return None


def _knows(catalog: EngineCatalog, option: EngineOption) -> bool:
    return catalog.lookup(option.written) is not None or catalog.abbreviation_of(option.written) is not None


def build_of(options: list[EngineOption]) -> tuple[str, EngineOption] | None:
    """The older catalog a command line is read against: one that knows every flag it uses that some catalog
    knows, when the newest lacks one of them (with the flag that says so); None when the newest knows them or
    no single older build knows them all (then each old flag is taken on its own: see older_only)."""
    newest, *older = _catalogs()
    known = [o for o in options if any(_knows(c, o) for c in (newest, *older))]
    missing = next((o for o in known if not _knows(newest, o)), None)
    if missing is None:
        return None
    found = next((c for c in older if all(_knows(c, o) for o in known)), None)
    return (found.name, missing) if found is not None else None


def older_only(option: EngineOption) -> str | None:
    """The older build that knows a flag the newest catalog lacks, or None."""
    newest, *older = _catalogs()
    if _knows(newest, option):
        return None
    return next((c.name for c in older if _knows(c, option)), None)


def _arity(entry: EngineFlag | None, rest: list[Word]) -> int:
    """How many of the following words the option consumes."""
    free = 0
    while free < len(rest) and not rest[free].text.startswith("--"):
        free += 1
    if entry is None:
        return min(free, 1)
    if not entry.takes_value:
        return 0
    if entry.nargs in ("+", "*"):
        return free
    if entry.nargs == "?":
        return min(free, 1)
    if isinstance(entry.nargs, int):
        return min(free, entry.nargs)
    return min(len(rest), 1)  # one value, even one starting with '-' (argparse takes `-1` as a value)


def parse_engine(words: list[Word]) -> EngineCommand:
    """Split ``words`` (a command starting SGLang's server) into canonical engine options."""
    split = launcher_split(words)
    if split is None:
        raise ValueError("not an SGLang server command")
    launcher, rest = split
    cmd = EngineCommand(launcher)
    i = 0
    while i < len(rest):
        word = rest[i]
        if not word.text.startswith("-"):
            cmd.stray.append(word)
            i += 1
            continue
        written, eq, inline = word.text.partition("=")
        entry, why = resolve_flag(written)
        if why:
            cmd.normalised.append(f"{word.origin}: {why}")
        if eq:
            cmd.normalised.append(f"{word.origin}: {written}=VALUE read as {written} VALUE")
            values, used = [Word(inline, word.origin)], 0
        else:
            used = _arity(entry, rest[i + 1:])
            values = rest[i + 1:i + 1 + used]
        flag = written if entry is not None and written in entry.options and not why else \
            preferred(entry) if entry else written
        cmd.options.append(EngineOption(flag, tuple(v.text for v in values), word.origin, written,
                                        (word, *values), entry is not None))
        i += 1 + used
    return cmd
