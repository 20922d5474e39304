"""Build spec/catalogs/nccl-2.30.7.json from the NCCL fact table in sources/, checked against libnccl.

Usage: python spec/generators/make_nccl_catalog.py [--table FACTS.md] [--out OUT.json] [--from-lib LIB] [--check]

The fact table is the only input, so re-running on the same file gives the same bytes. The script
refuses to write when the table holds a row or an NCCL_* name it cannot place: a silent gap in the
catalog would make the validator call a real variable a typo. With --from-lib (libnccl.so, or the
nvidia-nccl-cu12/-cu13 wheel that ships it) it also refuses when the names the library reads differ
from the ones the catalog says NCCL reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import struct
import sys
import zipfile
from pathlib import Path
from typing import IO, Any

CATALOG = "nccl-2.30.7"
Entry = dict[str, Any]

# Tokens in the text that look like variables but are not: a C constant and the macro's own name.
NOT_VARIABLES = {"NCCL_CONFIG_UNDEF_INT", "NCCL_PARAM"}

# Integer ranges are written as prose in the value-type column; these are the shapes it uses.
RANGE_BETWEEN = re.compile(r"(-?\d+)–(-?\d+)")
RANGE_ABOVE = re.compile(r"> (-?\d+)")
RANGE_AT_LEAST = re.compile(r"≥ (-?\d+)")
INT32 = (-(2**31), 2**31 - 1)


def clean(text: str) -> str:
    """Markdown cell text as plain text: no emphasis, no code ticks, ASCII minus signs."""
    text = text.replace("\\|", "|").replace("\u2212", "-")  # the table writes negatives with U+2212
    text = text.replace("*(internal)*", "(internal)")
    return re.sub(r"\*\*|`", "", text).strip()


def split_row(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def read_tables(md: str) -> tuple[dict[str, list[list[str]]], dict[str, str]]:
    """Rows of every table, keyed by section number, and each section's running text."""
    tables: dict[str, list[list[str]]] = {}
    prose: dict[str, str] = {}
    section = "0"
    for line in md.splitlines():
        heading = re.match(r"## (\d+)\.", line)
        if heading:
            section = heading.group(1)
            continue
        if line.startswith("|"):
            cells = split_row(line)
            if cells[0] == "NAME" or set(cells[0]) <= {"-"}:
                continue
            tables.setdefault(section, []).append(cells)
        else:
            prose[section] = prose.get(section, "") + line + "\n"
    return tables, prose


def names_in(cell: str) -> list[str]:
    return re.findall(r"\bNCCL_[A-Z0-9_]*[A-Z0-9]\b", clean(cell))


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def since_of(meaning: str, note: str) -> str | None:
    """First release series, from the version marks in the meaning column ("new in" in the note column).

    The note column also says when a *value* was deprecated ("GROUP deprecated since 2.9"), which is
    not when the variable appeared, so only its "new in" counts.
    """
    text = clean(meaning)
    # The table's versions come from grepping release tags; where it quotes the docs too, the tag wins.
    first_seen = re.search(r"first seen at v(\d+\.\d+)", text)
    if first_seen:
        return first_seen.group(1)
    found = re.findall(r"since (2\.\d+(?:\.\d+)?)", text)
    found += re.findall(r"new in (2\.\d+(?:\.\d+)?)", clean(note))
    found += re.findall(r"\b(2\.\d+(?:\.\d+)?)\+", text)
    found += re.findall(r"\((?:experimental, )?(2\.\d+(?:\.\d+)?)\)", text)
    return min(found, key=version_key) if found else None


def default_of(cell: str) -> str | None:
    """The literal NCCL uses when the variable is unset, or None when it is computed or unset."""
    if cell.startswith("`"):
        return cell.split("`")[1]
    text = clean(cell).removeprefix("source ")
    number = re.match(r"-?\d+", text)
    if number:
        return number.group(0)
    word = re.match(r"[A-Za-z_0-9]+", text)
    if word is None:
        return None
    if word.group(0) == "INT64_MAX":
        return str(2**63 - 1)
    if word.group(0) in {"false", "true"} or re.fullmatch(r"[A-Z][A-Z0-9_]+", word.group(0)):
        return word.group(0)
    return None  # "unset", "auto", "built-in", "stdout", "hostname-based": nothing to write down


def backticked(cell: str) -> list[str]:
    chunks = re.findall(r"`([^`]+)`", cell.replace("\\|", "|"))
    words = [word for chunk in chunks for word in re.split(r"[|\s]+", chunk)]
    return [word for word in words if re.fullmatch(r"\w[\w:]*", word)]


def int_range(vtype: str) -> tuple[int | None, int | None]:
    if vtype == "int32":
        return INT32
    text = re.sub(r"\(.*?\)", "", vtype)  # "(≤ 32 before 2.25)" is history, not the current range
    between = RANGE_BETWEEN.search(text)
    if between:
        return int(between.group(1)), int(between.group(2))
    above = RANGE_ABOVE.search(text)
    if above:
        return int(above.group(1)) + 1, None
    at_least = RANGE_AT_LEAST.search(text)
    if at_least:
        low = int(at_least.group(1))
        # "int ≥ 0, or -1": -1 is the documented "auto" value, so it is the real floor.
        return (-1 if ", or -1" in text else low), None
    return None, None


def kind_of(name: str, vtype: str, prose2: str) -> tuple[str, list[str] | None, bool]:
    """(kind, choices, case_sensitive) for one value-type cell."""
    raw = vtype
    vtype = clean(vtype)
    numbers = re.fullmatch(r"(?:enum|int) (\d+)(?: \([^)]*\))?((?: ?\| ?\d+(?: \([^)]*\))?)+)", vtype)
    if numbers or vtype == "int (1 or 2)":
        # "enum 1 (send side) | 2 (receive side)" has the values outside brackets, "int (1 or 2)" inside.
        values = re.findall(r"\b\d+\b", re.sub(r"\([^)]*\)", "", vtype) if numbers else vtype)
        return ("tristate" if values == ["0", "1", "2"] else "int"), values, False
    table: list[tuple[str, str]] = [
        ("protocol list", "proto"), ("algorithm list", "algo"), ("interface list", "iflist"),
        ("device list", "hcalist"), ("path level", "pathlevel"), ("CIDR", "cidr"), ("host:port", "hostport"),
        ("plugin selector", "plugin"), ("CPU list", "cpuset"), ("full param names", "paramlist"),
        ("strftime", "timefmt"), ("space-separated ints", "thresholds"), ("groups of", "mergegroups"),
        ("uint64", "uint64"), ("MAX:N", "netdevs"), ("EFFICIENCY", "ctapolicy"),
        ("comma list, optional leading ^", "bitset"), ("bool (", "bool"), ("bool", "bool01"),
        ("bytes", "size_bytes"), ("path", "path"), ("int", "int"), ("enum", "enum"), ("string", "string"),
    ]
    kind = next(k for marker, k in table if marker in vtype)
    case_sensitive = "case-sensitive" in vtype
    choices: list[str] | None = None
    if kind in {"enum", "bitset", "ctapolicy", "netdevs"}:
        choices = [c for c in backticked(raw) if c not in {"MAX:N", "0", "1", "2"}]
    if kind == "enum" and "(see §2)" in vtype:
        # NCCL_NET_MERGE_LEVEL: §2 says its names are matched case-sensitively (as a prefix).
        case_sensitive = "case-sensitive" in prose2.split(name, 1)[1].split("\n\n", 1)[0]
    if kind == "pathlevel":
        levels = re.search(r"Names are case-sensitive \(`strcmp`\), from `([^`]+)`", prose2)
        assert levels, "§2 no longer lists the path level names"
        choices, case_sensitive = levels.group(1).split(), True
    if kind == "bool":
        choices = ["0", "1", "F", "T", "FALSE", "TRUE"]
    return kind, choices, case_sensitive


def token_list(prose2: str, label: str) -> list[str]:
    line = re.search(rf"- {label}: (.+)", prose2)
    assert line, f"§2 no longer lists {label}"
    return re.findall(r"`([^`]+)`", line.group(1))


def plain_doc(text: str, *, whole: bool = True) -> str:
    """One line of doc; release marks are dropped because the "since" field carries them."""
    text = re.sub(r", 2\.\d+(?:\.\d+)?\)", ")", text)  # "(experimental, 2.30)" keeps "experimental"
    text = re.sub(r"\s*\((?:[^()]*?)v?2\.\d+(?:\.\d+)?\+?\)", "", text)
    text = re.sub(r"\s*since 2\.\d+(?:\.\d+)?(?: \(not in [\d.]+\))?", "", text).strip()
    return text if whole else re.split(r"(?<=[a-z)])\. ", text, maxsplit=1)[0].rstrip(". ")


def entry(name: str, **fields: Any) -> Entry:
    base: Entry = {
        "name": name, "kind": "other", "default": None, "choices": None, "since": None, "deprecated": False,
        "replacement": None, "source": "nccl", "last": None, "min": None, "max": None,
        "case_sensitive": False, "empty_ok": False, "pow2": False, "doc": "",
    }
    base.update(fields)
    return base


def documented(rows: list[list[str]], prose2: str) -> dict[str, Entry]:
    """§3-§5: the variables NCCL 2.30.7 reads, one row per variable (or per alias group)."""
    out: dict[str, Entry] = {}
    alias_of: dict[str, str] = {}
    for name_cell, vtype, default_cell, meaning, note in rows:
        names = names_in(name_cell)
        kind, choices, case_sensitive = kind_of(names[0], vtype, prose2)
        low, high = int_range(clean(vtype)) if kind == "int" and choices is None else (None, None)
        plain_note = clean(note)
        replacement = None
        if plain_note.startswith("deprecated") and "→" in plain_note:
            replacement = plain_note.split("→", 1)[1].split()[0]
        for alias in re.findall(r"older alias (NCCL_[A-Z_]+)", plain_note):
            alias_of[alias] = names[0]
        for name in names:
            assert name not in out, f"{name} has two rows"
            out[name] = entry(
                name, kind=kind, default=default_of(default_cell), choices=choices,
                since=since_of(meaning, note), deprecated=plain_note.startswith("deprecated"),
                replacement=replacement, min=low, max=high, case_sensitive=case_sensitive,
                empty_ok="empty →" in clean(vtype), pow2="power of 2" in vtype, doc=plain_doc(clean(meaning)),
            )
    # An alias of a deprecated name should point at the name that replaced both, not at the middle one.
    for alias, target in alias_of.items():
        out[alias]["replacement"] = out[target]["replacement"] or target
    return out


def removed(rows: list[list[str]], found: dict[str, Entry]) -> None:
    """§6: names no release from 2.30 on reads; kept so the validator can say "dead" instead of "typo"."""
    for name_cell, last, note in rows:
        names = names_in(name_cell)
        plain = clean(note)
        targets = [] if plain.startswith("removed") else names_in(note)
        for index, name in enumerate(names):
            target = targets[index] if len(targets) == len(names) else (targets[0] if targets else None)
            old = found.get(name, entry(name))
            reason = f"replaced by {target}" if target else plain
            found[name] = {**old, "source": "removed", "deprecated": True, "replacement": target,
                           "last": clean(last), "default": None,
                           "doc": f"last read by NCCL {clean(last)}; {reason}"}


SEEN_ELSEWHERE = [  # (marker in the row, source): who reads the §7 names that libnccl 2.30.7 does not
    ("Not in 2.30.7", "newer"), ("PyTorch", "pytorch"), ("container images", "image"),
    ("patched NCCL", "patched"), ("plugin", "plugin"), ("contrib/", "contrib"), ("Build-time", "build"),
]


def elsewhere(rows: list[list[str]], found: dict[str, Entry], families: list[Entry]) -> None:
    """§7: names met in deployments; the ones libnccl reads are already in from §5."""
    for name_cell, in_source, facts in rows:
        if clean(in_source).startswith("Yes"):
            missing = [n for n in names_in(name_cell) if n not in found]
            assert not missing, f"§7 says {missing} are read, but no table row has them"
            continue
        row = clean(in_source) + " " + clean(facts)
        source = next((s for marker, s in SEEN_ELSEWHERE if marker in row), "none")
        doc = plain_doc(clean(facts), whole=False)
        cell = clean(name_cell)
        for family in re.finditer(r"(NCCL_[A-Z_]+_)\*(?: \(e\.g\. ([^)]*)\))?", cell):
            prefix = family.group(1)
            families.append({"prefix": prefix, "source": source, "doc": doc})
            for suffix in re.findall(r"_[A-Z_]+", family.group(2) or ""):
                found[prefix[:-1] + suffix] = entry(prefix[:-1] + suffix, source=source, doc=doc)
        for name in names_in(re.sub(r"NCCL_[A-Z_]+_\*(?: \(e\.g\.[^)]*\))?", "", cell)):
            torch = "TORCH_" + name
            found[name] = entry(
                name, source=source, doc=doc, deprecated=source == "pytorch",
                replacement=torch if torch in clean(facts) else None,
                since="2.31" if source == "newer" else None,
            )


def dev_only(prose5: str, found: dict[str, Entry]) -> None:
    """The 2.31 pre-release names listed under §5: present so "too new" can be told apart from "typo"."""
    paragraph = next(line for line in prose5.splitlines() if line.startswith("Added on `dev`"))
    for name in names_in(paragraph):
        if name not in found:
            found[name] = entry(name, source="newer", since="2.31", doc="read only by NCCL 2.31 and later")


def build(md: str) -> dict[str, Any]:
    tables, prose = read_tables(md)
    found = documented(tables["3"] + tables["4"] + tables["5"], prose["2"])
    removed(tables["6"], found)
    families: list[Entry] = []
    elsewhere(tables["7"], found, families)
    dev_only(prose["5"], found)
    found["GLOO_SOCKET_IFNAME"] = entry(
        "GLOO_SOCKET_IFNAME", kind="ifnames", source="gloo",
        doc="network interfaces PyTorch's gloo backend binds to: comma-separated exact names, no prefixes",
    )
    without_families = re.sub(r"NCCL_[A-Z0-9_]+_\*", "", md)
    mentioned = set(re.findall(r"\bNCCL_[A-Z0-9_]*[A-Z0-9]\b", without_families)) - NOT_VARIABLES
    family_prefixes = tuple(f["prefix"] for f in families)
    unplaced = sorted(n for n in mentioned - found.keys() if not n.startswith(family_prefixes))
    assert not unplaced, f"names in the fact table that no rule placed: {unplaced}"
    return {
        "format": 1,
        "catalog": CATALOG,
        "collectives": token_list(prose["2"], "Functions"),
        "algorithms": token_list(prose["2"], "Algorithms"),
        "protocols": token_list(prose["2"], "Protocols"),
        "families": sorted(families, key=lambda f: str(f["prefix"])),
        "variables": [found[name] for name in sorted(found)],
    }


# NCCL_PARAM(name, "SUFFIX", default) compiles to the one literal "NCCL_SUFFIX" and ncclGetEnv/getenv
# callers name theirs whole, so each name NCCL reads is a string of its own in .rodata: the name, then NUL.
# A name that ends a message ("... via NCCL_CONFIG_INITIALIZER") follows a space and is not one; a few
# strings follow a fixed-size array without a NUL of its own, so any other byte may come first.
LIBRARY_NAME = re.compile(rb"(?<![ _])NCCL_[A-Z0-9_]*[A-Z0-9](?=\0)")
WHEEL_LIBRARY = re.compile(r"nvidia/nccl/lib/libnccl\.so[.0-9]*$")


def elf_section(stream: IO[bytes], wanted: bytes) -> bytes:
    """One section of a 64-bit little-endian ELF file, found through the section header table."""
    header = stream.read(64)
    if header[:6] != b"\x7fELF\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file")
    (table_offset,) = struct.unpack_from("<Q", header, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", header, 0x3A)
    stream.seek(table_offset)
    table = stream.read(entry_size * count)
    sections = [struct.unpack_from("<IIQQQQ", table, i * entry_size) for i in range(count)]

    def read(index: int) -> bytes:
        stream.seek(sections[index][4])
        return stream.read(sections[index][5])

    names = read(names_index)
    for index, (name_at, *_) in enumerate(sections):
        if names[name_at:names.index(b"\0", name_at)] == wanted:
            return read(index)
    raise ValueError(f"no {wanted.decode()} section")


def library_names(path: Path) -> set[str]:
    """The NCCL_* names libnccl.so reads, from the library or from a wheel that ships it."""
    with contextlib.ExitStack() as stack:
        stream: IO[bytes]
        if zipfile.is_zipfile(path):
            wheel = stack.enter_context(zipfile.ZipFile(path))
            member = next((n for n in wheel.namelist() if WHEEL_LIBRARY.search(n)), None)
            if member is None:
                raise ValueError(f"{path} holds no nvidia/nccl/lib/libnccl.so")
            stream = stack.enter_context(wheel.open(member))
        else:
            stream = stack.enter_context(path.open("rb"))
        return {name.decode() for name in LIBRARY_NAME.findall(elf_section(stream, b".rodata"))}


def cross_check(catalog: dict[str, Any], in_library: set[str]) -> dict[str, list[str]]:
    """The names read per the catalog and per the library, and where the two disagree (both lists empty)."""
    read = {v["name"] for v in catalog["variables"] if v["source"] == "nccl"}
    other = {v["name"]: v["source"] for v in catalog["variables"] if v["source"] != "nccl"}
    return {
        "catalog": sorted(read), "library": sorted(in_library),
        "only_in_library": sorted(f"{n} (catalog: {other[n]})" if n in other else n for n in in_library - read),
        "only_in_catalog": sorted(read - in_library),
    }


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent.parent / "catalogs"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", type=Path, default=here / "sources" / f"nccl-env-{CATALOG[5:]}.md")
    parser.add_argument("--out", type=Path, default=here / f"{CATALOG}.json")
    parser.add_argument("--from-lib", type=Path, help="libnccl.so or an nvidia-nccl wheel: cross-check the names")
    parser.add_argument("--check", action="store_true", help="exit 1 when --out differs from the table's catalog")
    args = parser.parse_args(argv[1:])
    catalog = build(args.table.read_text(encoding="utf-8"))
    text = json.dumps(catalog, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        if not args.out.is_file() or args.out.read_text(encoding="utf-8") != text:
            print(f"{args.out}: stale; it differs from the catalog {args.table.name} gives", file=sys.stderr)
            return 1
        return 0
    if args.from_lib:
        found = cross_check(catalog, library_names(args.from_lib))
        print(f"{args.from_lib.name}: {len(found['library'])} names read; catalog: {len(found['catalog'])}")
        for side in ("only_in_library", "only_in_catalog"):
            print(f"  {side.replace('_', ' ')}: {', '.join(found[side]) or 'none'}")
        if found["only_in_library"] or found["only_in_catalog"]:
            print("the library and the fact table disagree: nothing written", file=sys.stderr)
            return 1
    args.out.write_text(text, encoding="utf-8")
    kinds: dict[str, int] = {}
    for var in catalog["variables"]:
        kinds[var["kind"]] = kinds.get(var["kind"], 0) + 1
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    print(f"{args.out}: {len(catalog['variables'])} variables; {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
