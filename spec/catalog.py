"""Typed read-only access to the catalogs in spec/catalogs/: engine flags, engine env vars, NCCL env vars.

This sits on the pre-commit hot path, so importing it does no I/O, compiles no regex and imports only
light standard-library modules: a catalog's JSON is read on first use and cached. The dataclasses skip
generated __eq__/__hash__ (identity is enough for cached catalogs) because building them costs import
time. Every check returns one sentence saying what was expected, or None when the value is fine.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from spark_compile.spec.value_class import field, field_names, value_class

if TYPE_CHECKING:
    from pathlib import Path

    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
INT64 = (-(2**63), 2**63 - 1)
IFNAMSIZ = 15  # Linux interface names are at most 15 characters, so a longer entry can never match


class CatalogNotFound(LookupError):  # noqa: N818 - the name is part of the module's published API
    def __init__(self, what: str, name: str, available: Sequence[str]) -> None:
        self.name, self.available = name, list(available)
        super().__init__(f"no {what} catalog named {name!r}; available: {', '.join(available) or 'none'}")


def _or_list(items: Sequence[object]) -> str:
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _close(word: str, candidates: Sequence[str]) -> list[str]:
    import difflib

    other_case = [c for c in candidates if c.casefold() == word.casefold() and c != word]
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.75)  # 0.6 pairs NCCL_NET, NCCL_MNNVL
    return other_case + [c for c in close if c not in other_case]


@functools.cache
def _field_set(cls: type[Any]) -> frozenset[str]:
    return frozenset(field_names(cls))


def _make(cls: type[T], data: Mapping[str, Any], **converted: Any) -> T:
    """A catalog entry from its JSON object, whose keys are the entry's fields; `converted` replaces the
    values JSON cannot spell (tuples).

    Thousands of entries are made per run: filling the instance's __dict__ from the JSON object at once
    (C-level copies) takes a fifth of what __init__, or copying field by field, did."""
    if data.keys() != _field_set(cls):
        raise ValueError(f"a {cls.__name__} entry of the catalog has the keys {sorted(data)}; "
                         f"its fields are {sorted(_field_set(cls))}")
    entry = object.__new__(cls)
    entry.__dict__.update(data)
    entry.__dict__.update(converted)
    return entry


@functools.cache
def _directories() -> tuple[Path, ...]:
    # The JSON files are package data beside this module, in a checkout and in an installed wheel alike;
    # importlib.resources would cost a few milliseconds of imports on every pre-commit run for nothing, and
    # pathlib (re, ipaddress, urllib) is imported only once a catalog is wanted.
    from pathlib import Path

    return (Path(__file__).with_name("catalogs"),)


def _catalog_files() -> list[str]:
    # os.listdir, not Path.iterdir: a run lists the folders several times, and a Path per entry cost 0.15 ms each.
    found = {name for d in _directories() if os.path.isdir(d) for name in os.listdir(d)}
    return sorted(name for name in found if name.endswith(".json"))


def _read(filename: str) -> Any:
    import json

    path = next(path for d in _directories() if os.path.isfile(path := os.path.join(d, filename)))
    with open(path, encoding="utf-8") as file:
        return json.loads(file.read())


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


def _json(text: str) -> Any:
    import json

    return json.loads(text)  # its JSONDecodeError is a ValueError, like int()'s and float()'s


_SWITCH_ACTIONS = frozenset({"store_true", "store_false", "boolean_optional", "count"})  # no argument
_CONVERTERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "int": ("a whole number", int), "float": ("a number", float), "str": ("text", str),
    "json": ("JSON", _json),
}


@value_class(eq=False)
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
            return f"{self.option} takes {_or_list(self.choices)}; got {value!r}."
        return None


@value_class(eq=False)
class EngineCatalog:
    """Every flag one engine release accepts, indexed by option string."""

    name: str
    package: str
    version: str
    flags: tuple[EngineFlag, ...]
    by_option: Mapping[str, EngineFlag] = field(repr=False)

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
        return _close(option, list(self.by_option))

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


def _tuple(items: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if items is None else tuple(items)


def parse_engine_catalog(data: Mapping[str, Any]) -> EngineCatalog:
    flags = tuple(_make(EngineFlag, f, options=tuple(f["options"]), choices=_tuple(f["choices"]))
                  for f in data["flags"])
    index = {option: flag for flag in flags for option in flag.options}
    return EngineCatalog(data["catalog"], data["package"], data["version"], flags, index)


# What EnvBool.parse in sglang/srt/environ.py accepts after lower-casing; it does not strip spaces.
_SGLANG_BOOLS = frozenset({"true", "1", "yes", "y", "false", "0", "no", "n"})


@value_class(eq=False)
class EnvVar:
    """One environment variable the engine reads."""

    name: str
    kind: str  # bool | int | float | str | other
    default: Any
    deprecated: bool
    replacement: str | None
    source: str  # environ.py (typed, declared in class Envs) | os.environ (read ad hoc elsewhere)


@value_class(eq=False)
class EnvCatalog:
    """Every environment variable one engine release reads, indexed by name."""

    name: str
    variables: tuple[EnvVar, ...]
    by_name: Mapping[str, EnvVar] = field(repr=False)

    def lookup(self, name: str) -> EnvVar | None:
        return self.by_name.get(name)

    def suggest(self, name: str) -> list[str]:
        return _close(name, list(self.by_name))

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


def parse_env_catalog(data: Mapping[str, Any]) -> EnvCatalog:
    variables = tuple(_make(EnvVar, v) for v in data["variables"])
    return EnvCatalog(data["catalog"], variables, {v.name: v for v in variables})


@value_class(eq=False)
class NcclVar:
    """One environment variable of the NCCL fact table, typed by the parser that reads it."""

    name: str
    kind: str  # the parser family, a key of _CHECKS (or "other"/"string"/"plugin": not checked)
    default: str | None
    choices: tuple[str, ...] | None
    since: str | None
    deprecated: bool
    replacement: str | None
    # Who reads it: nccl (libnccl 2.30.7) | gloo | removed (an older libnccl) | newer (2.31+) | pytorch |
    # plugin | contrib | patched (patched libnccl builds) | image | build | none (nobody).
    source: str
    last: str | None  # removed names: the last release that read them
    min: int | None
    max: int | None
    case_sensitive: bool
    empty_ok: bool
    pow2: bool
    doc: str

    @property
    def is_read(self) -> bool:
        return self.source in ("nccl", "gloo")


@value_class(eq=False)
class NcclFamily:
    """A name prefix read by an NCCL plugin or library rather than libnccl itself."""

    prefix: str
    source: str
    doc: str


@value_class(eq=False)
class NcclCatalog:
    """The NCCL variables of one release, with the token sets NCCL_ALGO and NCCL_PROTO use."""

    name: str
    variables: tuple[NcclVar, ...]
    families: tuple[NcclFamily, ...]
    collectives: tuple[str, ...]
    algorithms: tuple[str, ...]
    protocols: tuple[str, ...]
    by_name: Mapping[str, NcclVar] = field(repr=False)

    def lookup(self, name: str) -> NcclVar | None:
        return self.by_name.get(name)

    def family_of(self, name: str) -> NcclFamily | None:
        return next((f for f in self.families if name.startswith(f.prefix)), None)

    def suggest(self, name: str) -> list[str]:
        return _close(name, [v.name for v in self.variables if v.is_read])

    def check_value(self, name: str, value: str) -> str | None:
        var = self.by_name.get(name)
        if var is None and self.family_of(name) is None:
            hint = self.suggest(name)
            return f"{name} is not a variable NCCL reads" + (f"; did you mean {hint[0]}?" if hint else ".")
        if var is None or not var.is_read:
            return None  # libnccl 2.30.7 never parses the value; the name itself is the finding
        if value != value.strip() and var.kind != "timefmt":  # a timestamp prefix may well end in a space
            return f"{name} takes a value without surrounding spaces; got {value!r}."
        if not value:
            return None if var.empty_ok else f"{name} takes a value; an empty one means unset, so drop it."
        check = _CHECKS.get(var.kind)  # "string", "plugin", "other": any non-empty value goes
        return None if check is None else check(self, var, value)


def parse_nccl_catalog(data: Mapping[str, Any]) -> NcclCatalog:
    variables = tuple(_make(NcclVar, v, choices=_tuple(v["choices"])) for v in data["variables"])
    return NcclCatalog(
        data["catalog"], variables, tuple(_make(NcclFamily, f) for f in data["families"]),
        tuple(data["collectives"]), tuple(data["algorithms"]), tuple(data["protocols"]),
        {v.name: v for v in variables},
    )


# NCCL value checks. Each mirrors the parser catalogs/sources/nccl-env-2.30.7.md describes for the kind, and
# refuses what that parser would silently misread as well as what it rejects. All return "NAME takes <expected>; ...".

Check = Callable[[NcclCatalog, NcclVar, str], str | None]


def _is_decimal(text: str) -> bool:
    digits = text.removeprefix("-")
    return digits.isascii() and digits.isdigit()


def _strtoll(text: str) -> int:
    """What C's strtoll(text, NULL, 0) returns: it stops quietly at the first character it cannot use."""
    import re

    # Every part is optional, so the pattern always matches once (text with no digits reads as 0).
    pattern = r"^\s*([+-]?)(?:0[xX]([\da-fA-F]+)|(0[0-7]*)|([1-9]\d*))?"
    sign, hexa, octal, decimal = re.findall(pattern, text)[0]
    number = int(hexa, 16) if hexa else int(octal, 8) if octal else int(decimal) if decimal else 0
    return -number if sign == "-" else number


def _check_int(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    unit = " of bytes" if var.kind == "size_bytes" else ""
    choices = ("0", "1") if var.kind == "bool01" else var.choices
    expected = _or_list(choices) if choices else f"a whole number{unit} in decimal"
    # A leading 0 makes NCCL read octal, so "010" is refused although it looks decimal.
    if not _is_decimal(value) or _strtoll(value) != int(value):
        return f"{var.name} takes {expected}; {value!r} would be read as {_strtoll(value)}."
    number = int(value)
    if not INT64[0] <= number <= INT64[1]:
        return f"{var.name} takes {expected}; {value} overflows 64 bits, so NCCL would use its default."
    if value == var.default:  # the source's own sentinel (-2 auto, -1 unset) is always acceptable
        return None
    low = 0 if var.kind == "size_bytes" and var.min is None else var.min
    if choices is not None and value not in choices:
        return f"{var.name} takes {expected}; got {value}."
    if (low is not None and number < low) or (var.max is not None and number > var.max):
        span = f"from {low} to {var.max}" if var.max is not None else f"of at least {low}"
        return f"{var.name} takes a whole number{unit} {span}; got {value}."
    if var.pow2 and number & (number - 1):
        return f"{var.name} takes a power of two; got {value}."
    return None


def _check_collectives(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    """NCCL_PROTO / NCCL_ALGO: `[func:][^]tok[,tok...]` entries joined by `;`, case-insensitive."""
    tokens = cat.protocols if var.kind == "proto" else cat.algorithms
    proto = var.kind == "proto"
    noun, example = ("protocols", "^LL128;allreduce:LL") if proto else ("algorithms", "ring;allreduce:^tree")
    for index, entry in enumerate(value.split(";")):
        func, colon, body = entry.rpartition(":")
        if not entry or (not colon and index > 0):
            return f"{var.name} takes a collective name before each list but the first, as in {example!r}."
        if colon and func.upper() not in {c.upper() for c in cat.collectives}:
            return f"{var.name} takes the collective names {_or_list(cat.collectives)}; {func!r} is not one."
        for token in body.removeprefix("^").split(","):
            if token.upper() not in {t.upper() for t in tokens}:
                return (f"{var.name} takes a comma list of the {noun} {_or_list(tokens)}, optionally after "
                        f"one leading ^; {token!r} is not one.")
    return None


def _check_device_list(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    """`[^][=]entry[,entry...]`, each entry `name[:port[:rail[:plane]]]`; interface lists take names only."""
    if var.kind == "mergegroups":  # groups of NICs to fuse, each group a list of its own
        return next((p for group in value.split(";") if (p := _device_list(var, group))), None)
    return _device_list(var, value)


def _device_list(var: NcclVar, value: str) -> str | None:
    interfaces = var.kind in ("iflist", "ifnames")
    if var.kind == "iflist" and len(value) < 2:
        return f"{var.name} takes at least 2 characters; NCCL ignores {value!r} and picks interfaces itself."
    for entry in (value if var.kind == "ifnames" else value.removeprefix("^").removeprefix("=")).split(","):
        name, *fields = entry.split(":")
        if entry[:1] in ("^", "="):
            where = "no ^ or = flags" if var.kind == "ifnames" else "^ and = once each, at the start, ^ first"
            return f"{var.name} takes {where}; got {value!r}."
        if not name:
            return f"{var.name} takes a name in every comma-separated entry; got {value!r}."
        if interfaces and (fields or len(name) > IFNAMSIZ):
            return (f"{var.name} takes interface names of at most {IFNAMSIZ} characters with no ':' fields "
                    f"(NCCL would ignore them); got {entry!r}.")
        if len(fields) > 3 or not all(f == "" or (f.isascii() and f.isdigit()) for f in fields):
            return f"{var.name} takes entries shaped name[:port[:rail[:plane]]] with numbers; got {entry!r}."
        if fields[:1] not in ([], [""]) and int(fields[0]) == 0:
            return f"{var.name} takes port numbers from 1; got {entry!r}."
    return None


def _check_cidr(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    import ipaddress

    address, slash, length = value.partition("/")
    try:
        width = ipaddress.ip_address(address).max_prefixlen if slash else -1
    except ValueError:
        width = -1
    if _is_decimal(length) and 0 <= int(length) <= width:
        return None
    return f"{var.name} takes an address range such as 192.0.2.0/24; NCCL ignores {value!r}."


def _check_uint64(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    digits, base = (value[2:], 16) if value[:2] in ("0x", "0X") else (value, 10)
    try:  # isalnum() keeps out the signs, spaces and underscores int() would let through
        ok = digits.isascii() and digits.isalnum() and int(digits, base) < 2**64
    except ValueError:
        ok = False
    return None if ok else f"{var.name} takes a whole number in decimal or 0x hex below 2^64; got {value!r}."


def _check_paramlist(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    for item in value.split(","):
        known = cat.by_name.get(item)
        if item != "ALL" and (known is None or known.source != "nccl"):
            return f"{var.name} takes full NCCL variable names, comma-separated, or ALL; {item!r} is not one."
    return None


# Kinds whose grammar is one regular expression, compiled by `re` on first use (never at import), and
# what to say was expected. CHOICES stands for the variable's own choices.
_PORT = r"(?:[1-9]\d{0,3}|[1-5]\d{4}|6[0-4]\d{3}|65[0-4]\d\d|655[0-2]\d|6553[0-5])"
_GRAMMARS: dict[str, tuple[str, str]] = {
    "enum": ("CHOICES", "CHOICES"),
    "pathlevel": (r"CHOICES|\d+", "CHOICES, or an older number (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and up SYS)"),
    "bitset": (r"\^?(?:CHOICES)(?:,(?:CHOICES))*", "a comma list of CHOICES, optionally after one leading ^"),
    "ctapolicy": (r"[012]|(?:CHOICES)(?:\|(?:CHOICES))*", "CHOICES joined by |, or an older digit 0, 1 or 2"),
    "bool": (r"[01]|(?i:t|f|true|false)", "1, 0, T, F, TRUE or FALSE"),
    "netdevs": (r"(?i:AUTO|ALL|MAX:0*[1-9]\d*)", "AUTO, ALL or MAX:N with N a whole number above 0"),
    "hostport": (rf"(?:\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):{_PORT}", "host:port, an IPv6 address as [addr]:port"),
    "cpuset": (r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*", "CPU numbers and ranges such as 0-3,8"),
    "thresholds": (r"-?\d+(?: +-?\d+){0,5}", "up to 6 whole numbers separated by spaces"),
    "path": (r"[^~].*", "a path that does not start with '~', which nothing expands"),
    # strftime codes plus at most one %Nf (N digits of fractional seconds, 1 to 9); %% is a literal %.
    "timefmt": (r"(?:[^%]|%[^0-9])*(?:%[1-9]f(?:[^%]|%[^0-9])*)?", "strftime codes and one %Nf at most"),
}


def _check_grammar(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    import re

    pattern, expected = _GRAMMARS[var.kind]
    choices = var.choices or ()
    folded = re.IGNORECASE if choices and not var.case_sensitive else 0
    if re.fullmatch(pattern.replace("CHOICES", "|".join(map(re.escape, choices))), value, re.DOTALL | folded):
        return None
    listing = _or_list(choices) + (" (case-sensitive)" if var.case_sensitive else "") if choices else ""
    return f"{var.name} takes {expected.replace('CHOICES', listing)}; got {value!r}."


_CHECKS: dict[str, Check] = {
    **dict.fromkeys(_GRAMMARS, _check_grammar),
    **dict.fromkeys(("int", "size_bytes", "bool01", "tristate"), _check_int),
    **dict.fromkeys(("proto", "algo"), _check_collectives),
    **dict.fromkeys(("iflist", "hcalist", "ifnames", "mergegroups"), _check_device_list),
    "cidr": _check_cidr,
    "uint64": _check_uint64,
    "paramlist": _check_paramlist,
}
