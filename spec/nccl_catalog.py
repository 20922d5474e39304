"""The NCCL catalog: the variables libnccl 2.30.7 and its neighbours read, and the check of each value.

Each value check mirrors the parser catalogs/sources/nccl-env-2.30.7.md describes for the kind, and
refuses what that parser would silently misread as well as what it rejects. All return
"NAME takes <expected>; ...".
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_compile.spec.catalog_entries import as_tuple, close_matches, or_list

INT64 = (-(2**63), 2**63 - 1)
IFNAMSIZ = 15  # Linux interface names are at most 15 characters, so a longer entry can never match


@dataclass(frozen=True, slots=True, eq=False)
class NcclVar:
    """One environment variable of the NCCL fact table, typed by the parser that reads it."""

    name: str
    kind: str  # the parser family, a key of CHECKS (or "other"/"string"/"plugin": not checked)
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


@dataclass(frozen=True, slots=True, eq=False)
class NcclFamily:
    """A name prefix read by an NCCL plugin or library rather than libnccl itself."""

    prefix: str
    source: str
    doc: str


@dataclass(frozen=True, eq=False)  # no slots: cached_property keeps its value in the instance's __dict__
class NcclCatalog:
    """The NCCL variables of one release, with the token sets NCCL_ALGO and NCCL_PROTO use."""

    name: str
    families: tuple[NcclFamily, ...]
    collectives: tuple[str, ...]
    algorithms: tuple[str, ...]
    protocols: tuple[str, ...]
    by_name: Mapping[str, NcclVar] = field(repr=False)

    @functools.cached_property
    def variables(self) -> tuple[NcclVar, ...]:
        return tuple(self.by_name.values())

    def lookup(self, name: str) -> NcclVar | None:
        return self.by_name.get(name)

    def family_of(self, name: str) -> NcclFamily | None:
        return next((f for f in self.families if name.startswith(f.prefix)), None)

    def suggest(self, name: str) -> list[str]:
        return close_matches(name, [v.name for v in self.variables if v.is_read])

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
        check = CHECKS.get(var.kind)  # "string", "plugin", "other": any non-empty value goes
        return None if check is None else check(self, var, value)


def parse_nccl_catalog(document: Mapping[str, Any]) -> NcclCatalog:
    """An NCCL catalog's JSON document as its catalog (a name listed twice is its last entry's)."""
    return NcclCatalog(
        document["catalog"], tuple(NcclFamily(**family) for family in document["families"]),
        tuple(document["collectives"]), tuple(document["algorithms"]), tuple(document["protocols"]),
        {data["name"]: NcclVar(**{**data, "choices": as_tuple(data["choices"])}) for data in document["variables"]},
    )


Check = Callable[[NcclCatalog, NcclVar, str], str | None]


def _is_decimal(text: str) -> bool:
    digits = text.removeprefix("-")
    return digits.isascii() and digits.isdigit()


# Every part is optional, so the pattern always matches (text with no digits reads as 0).
_STRTOLL = re.compile(r"^\s*([+-]?)(?:0[xX]([\da-fA-F]+)|(0[0-7]*)|([1-9]\d*))?")


def _strtoll(text: str) -> int:
    """What C's strtoll(text, NULL, 0) returns: it stops quietly at the first character it cannot use."""
    sign, hexa, octal, decimal = _STRTOLL.findall(text)[0]
    number = int(hexa, 16) if hexa else int(octal, 8) if octal else int(decimal) if decimal else 0
    return -number if sign == "-" else number


def _check_int(cat: NcclCatalog, var: NcclVar, value: str) -> str | None:
    unit = " of bytes" if var.kind == "size_bytes" else ""
    choices = ("0", "1") if var.kind == "bool01" else var.choices
    expected = or_list(choices) if choices else f"a whole number{unit} in decimal"
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
            return f"{var.name} takes the collective names {or_list(cat.collectives)}; {func!r} is not one."
        for token in body.removeprefix("^").split(","):
            if token.upper() not in {t.upper() for t in tokens}:
                return (f"{var.name} takes a comma list of the {noun} {or_list(tokens)}, optionally after "
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


# Kinds whose grammar is one regular expression, and what to say was expected. CHOICES stands for the
# variable's own choices, so each pattern is completed, and matched, per variable.
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
    pattern, expected = _GRAMMARS[var.kind]
    choices = var.choices or ()
    folded = re.IGNORECASE if choices and not var.case_sensitive else 0
    if re.fullmatch(pattern.replace("CHOICES", "|".join(map(re.escape, choices))), value, re.DOTALL | folded):
        return None
    listing = or_list(choices) + (" (case-sensitive)" if var.case_sensitive else "") if choices else ""
    return f"{var.name} takes {expected.replace('CHOICES', listing)}; got {value!r}."


CHECKS: dict[str, Check] = {
    **dict.fromkeys(_GRAMMARS, _check_grammar),
    **dict.fromkeys(("int", "size_bytes", "bool01", "tristate"), _check_int),
    **dict.fromkeys(("proto", "algo"), _check_collectives),
    **dict.fromkeys(("iflist", "hcalist", "ifnames", "mergegroups"), _check_device_list),
    "cidr": _check_cidr,
    "uint64": _check_uint64,
    "paramlist": _check_paramlist,
}
