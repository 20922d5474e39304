"""Typed read-only access to the catalogs in spec/catalogs/: engine flags, engine env vars, NCCL env vars.

A catalog's JSON is read whole, with json.load, into its entries the first time the catalog is asked for
(each loader is a functools.cache, keyed on the catalog's name). Entries and catalogs compare by identity
(eq=False): each is made once per run. Every check returns one sentence saying what was expected, or None
when the value is fine (the NCCL variables and their checks are in spec/nccl_catalog.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_compile.spec.catalog_entries import as_tuple, close_matches, or_list
from spark_compile.spec.nccl_catalog import NcclCatalog, parse_nccl_catalog


class CatalogNotFound(LookupError):  # noqa: N818 - the name is part of the module's published API
    def __init__(self, what: str, name: str, available: Sequence[str]) -> None:
        self.name, self.available = name, list(available)
        super().__init__(f"no {what} catalog named {name!r}; available: {', '.join(available) or 'none'}")


def _directories() -> tuple[Path, ...]:
    """Where the catalogs are: the package data beside this module (tests add folders of their own)."""
    return (Path(__file__).with_name("catalogs"),)


def _catalog_files() -> list[str]:
    return sorted({path.name for d in _directories() for path in d.glob("*.json")})


def _read(filename: str) -> Any:
    path = next(path for d in _directories() if (path := d / filename).is_file())
    with path.open(encoding="utf-8") as file:
        return json.load(file)


IMAGE_BUILDS = "image-builds.json"


def available_engine_catalogs() -> list[str]:
    return [f[:-5] for f in _catalog_files() if "-env-" not in f and not f.startswith("nccl-") and f != IMAGE_BUILDS]


@functools.cache
def image_builds() -> dict[str, str]:
    """The operator's table (spec/catalogs/image-builds.json): ``repository@sha256:<digest>`` -> the engine
    catalog of the build that image holds."""
    if IMAGE_BUILDS not in _catalog_files():
        return {}
    return {str(image): str(build) for image, build in _read(IMAGE_BUILDS)["images"].items()}


@functools.cache
def engine_catalog(name: str) -> EngineCatalog:
    if name not in available_engine_catalogs():
        raise CatalogNotFound("engine", name, available_engine_catalogs())
    return parse_engine_catalog(_read(f"{name}.json"))


@functools.cache
def env_catalog(name: str) -> EnvCatalog:
    # "sglang-0.5.23" lives in sglang-env-0.5.23.json: an env catalog carries its engine catalog's name.
    package, _, version = name.rpartition("-")
    if f"{package}-env-{version}.json" not in _catalog_files():
        known = [f[:-5].replace("-env-", "-") for f in _catalog_files() if "-env-" in f]
        raise CatalogNotFound("environment", name, known)
    return parse_env_catalog(_read(f"{package}-env-{version}.json"))


@functools.cache
def nccl_catalog(name: str = "nccl-2.30.7") -> NcclCatalog:
    if f"{name}.json" not in _catalog_files():
        raise CatalogNotFound("NCCL", name, [f[:-5] for f in _catalog_files() if f.startswith("nccl-")])
    return parse_nccl_catalog(_read(f"{name}.json"))


_SWITCH_ACTIONS = frozenset({"store_true", "store_false", "boolean_optional", "count"})  # no argument
_CONVERTERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "int": ("a whole number", int), "float": ("a number", float), "str": ("text", str),
    "json": ("JSON", json.loads),  # its JSONDecodeError is a ValueError, like int()'s and float()'s
}


@dataclass(frozen=True, slots=True, eq=False)
class EngineFlag:
    """One command-line flag of the engine, as argparse declares it."""

    dest: str
    options: tuple[str, ...]
    kind: str  # int | float | str | bool | json | other
    action: str  # store | store_true | store_false | boolean_optional | append | count | other
    nargs: str | int | None
    choices: tuple[Any, ...] | None
    default: Any
    deprecated: bool
    replacement: str | None
    help: str

    @property
    def option(self) -> str:
        return next((o for o in self.options if o.startswith("--")), self.options[0])

    @property
    def takes_value(self) -> bool:
        return self.action not in _SWITCH_ACTIONS and self.nargs != 0

    def check_value(self, value: str) -> str | None:
        """One argument, converted and compared with the choices the way argparse does it."""
        if not self.takes_value:
            return f"{self.option} is an on/off switch and takes no value; got {value!r}."
        # "bool" and "other" flags go through SGLang's own converters, which are not mirrored here, and
        # argparse compares choices only after converting, so those flags are left alone.
        if self.kind not in _CONVERTERS:
            return None
        expected, convert = _CONVERTERS[self.kind]
        try:
            converted = convert(value)
        except ValueError:
            return f"{self.option} takes {expected}; got {value!r}."
        if self.choices is not None and converted not in self.choices:
            return f"{self.option} takes {or_list(self.choices)}; got {value!r}."
        return None


@dataclass(frozen=True, slots=True, eq=False)
class GpuGate:
    """A setting the engine ties to GPU generations (spec/generators/sglang_hardware.py): refused outside
    ``majors`` (a requirement) or on them (a refusal), or, with ``sets``, replaced by another value on them."""

    site: str  # sglang/…:function that judges it
    when: tuple[tuple[str, Any, bool], ...]  # (dest, value, equal): all must hold; "a|b": a, else b (`a or b`)
    majors: tuple[int, ...]  # compute-capability majors
    message: str  # the engine's own words, f-string holes as {...}
    architectures: tuple[str, ...] = ()  # only for these model architectures; () = any
    sets: tuple[str, Any] | None = None  # a rewrite: (dest, the value the engine runs)


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What one engine build decides by GPU generation, and the MoE runners a quantization forces."""

    requirements: tuple[GpuGate, ...] = ()
    refusals: tuple[GpuGate, ...] = ()
    rewrites: tuple[GpuGate, ...] = ()
    runners: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)  # quant -> (allowed, forced)


@dataclass(frozen=True, eq=False)  # no slots: cached_property keeps its value in the instance's __dict__
class EngineCatalog:
    """Every flag one engine release accepts, indexed by option string."""

    name: str
    package: str
    version: str
    by_option: Mapping[str, EngineFlag] = field(repr=False)
    gpu: GpuFacts = field(default_factory=GpuFacts)  # none recorded: the catalog predates the hardware facts

    @functools.cached_property
    def flags(self) -> tuple[EngineFlag, ...]:
        """Every flag once, in the catalog's order."""
        return tuple(dict.fromkeys(self.by_option.values()))

    def lookup(self, option: str) -> EngineFlag | None:
        return self.by_option.get(option)

    def abbreviation_of(self, option: str) -> EngineFlag | None:
        """The flag argparse would expand `option` to, or None (an exact option, ambiguous, or no match).

        argparse (3.11) counts matching option *strings*: a prefix of two spellings of one flag is as
        ambiguous to it as a prefix of two flags, and it then refuses the whole command line.
        """
        prefix = option.split("=", 1)[0]
        if not prefix.startswith("--") or prefix in self.by_option:
            return None
        matches = [o for o in self.by_option if o.startswith(prefix)]
        return self.by_option[matches[0]] if len(matches) == 1 else None

    def suggest(self, option: str) -> list[str]:
        return close_matches(option, list(self.by_option))

    def by_dest(self, dest: str) -> EngineFlag | None:
        return next((flag for flag in self.flags if flag.dest == dest), None)

    def knows(self, argv: Sequence[str]) -> bool:
        """Every option (``--x``) in ``argv`` is one of this build's."""
        return all(token in self.by_option for token in argv if token.startswith("--"))


def spelling(catalog: str, *alternatives: list[str]) -> list[str]:
    """The first of several ways to write one setting that the build ``catalog`` accepts (flags are renamed
    between releases); the first way when none is, or the catalog is unknown (other rules report those)."""
    try:
        build = engine_catalog(catalog)
    except CatalogNotFound:
        return alternatives[0]
    return next((argv for argv in alternatives if build.knows(argv)), alternatives[0])


def parse_engine_catalog(document: Mapping[str, Any]) -> EngineCatalog:
    """An engine catalog's JSON document as its catalog: each flag under every option string it has (an
    option listed twice is its last flag's)."""
    by_option: dict[str, EngineFlag] = {}
    for data in document["flags"]:
        flag = EngineFlag(**{**data, "options": tuple(data["options"]), "choices": as_tuple(data["choices"])})
        by_option.update(dict.fromkeys(flag.options, flag))
    return EngineCatalog(document["catalog"], document["package"], document["version"], by_option,
                         _gpu_facts(document.get("hardware") or {}))


def _gate(data: Mapping[str, Any]) -> GpuGate:
    sets = data.get("set")
    when = tuple((str(c[0]), c[-1], len(c) == 2) for c in data["when"])  # [dest, v] or [dest, "!=", v]
    return GpuGate(data["site"], when, tuple(data["majors"]),
                   data.get("message", ""), tuple(data.get("architectures", ())),
                   (str(sets[0]), sets[1]) if sets else None)


def _gpu_facts(data: Mapping[str, Any]) -> GpuFacts:
    runners = {str(q): (tuple(r["allowed"]), str(r["forced"])) for q, r in data.get("quantization_runners", {}).items()}
    requirements, refusals, rewrites = (tuple(map(_gate, data.get(kind, ())))
                                        for kind in ("requirements", "refusals", "rewrites"))
    return GpuFacts(requirements, refusals, rewrites, runners)


# What EnvBool.parse in sglang/srt/environ.py accepts after lower-casing; it does not strip spaces.
_SGLANG_BOOLS = frozenset({"true", "1", "yes", "y", "false", "0", "no", "n"})


@dataclass(frozen=True, slots=True, eq=False)
class EnvVar:
    """One environment variable the engine reads."""

    name: str
    kind: str  # bool | int | float | str | other
    default: Any
    deprecated: bool
    replacement: str | None
    source: str  # environ.py (typed, declared in class Envs) | os.environ (read ad hoc elsewhere)


@dataclass(frozen=True, eq=False)  # no slots: cached_property keeps its value in the instance's __dict__
class EnvCatalog:
    """Every environment variable one engine release reads, indexed by name."""

    name: str
    by_name: Mapping[str, EnvVar] = field(repr=False)

    @functools.cached_property
    def variables(self) -> tuple[EnvVar, ...]:
        return tuple(self.by_name.values())

    def lookup(self, name: str) -> EnvVar | None:
        return self.by_name.get(name)

    def suggest(self, name: str) -> list[str]:
        """Close names, compared without the SGLANG_ every name shares: with it, any two names of a few words
        look alike (SGLANG_USE_MY_KERNEL would suggest SGLANG_USE_SGL_FA3_KERNEL)."""
        bare = {_unprefixed(known): known for known in self.by_name}
        return [bare[close] for close in close_matches(_unprefixed(name), list(bare))]

    def check_value(self, name: str, value: str) -> str | None:
        var = self.by_name.get(name)
        if var is None:
            hint = self.suggest(name)
            return f"{self.name} does not read {name}" + (f"; did you mean {hint[0]}?" if hint else ".")
        # A name read straight from os.environ is parsed at its call site, so only Envs' parsers are known.
        if var.source != "environ.py" or var.kind not in ("bool", "int", "float"):
            return None
        fallback = f"SGLang would warn about {value!r} and use the default"
        if var.kind == "bool":
            ok = value.lower() in _SGLANG_BOOLS
            return None if ok else f"{name} takes true/false, 1/0, yes/no or y/n in any case; {fallback}."
        expected, convert = _CONVERTERS[var.kind]
        try:
            convert(value)  # EnvInt and EnvFloat call int() and float() on the raw string, as here
        except ValueError:
            return f"{name} takes {expected}; {fallback}."
        return None


_SGLANG = "SGLANG_"


def _unprefixed(name: str) -> str:
    return name[len(_SGLANG):] if name[:len(_SGLANG)].upper() == _SGLANG else name


def parse_env_catalog(document: Mapping[str, Any]) -> EnvCatalog:
    """An env catalog's JSON document as its catalog (a name listed twice is its last entry's)."""
    return EnvCatalog(document["catalog"], {data["name"]: EnvVar(**data) for data in document["variables"]})
