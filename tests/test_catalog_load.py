"""A catalog's JSON read into its entries (spec/catalog.py, spec/nccl_catalog.py): every entry holds what its
JSON object holds and is found under each of its names, a name listed twice is its last entry's, and an entry
of two names is one entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_compile.spec import catalog
from spark_compile.spec.catalog import EngineCatalog, EnvCatalog, parse_engine_catalog, parse_env_catalog
from spark_compile.spec.nccl_catalog import NcclCatalog, parse_nccl_catalog

CATALOGS = Path(catalog.__file__).with_name("catalogs")
SHIPPED = sorted(p.name for p in CATALOGS.glob("*.json") if p.name != "image-builds.json")


def _fields(entry: object, data: dict[str, Any]) -> Any:
    """The entry's values of the JSON object's keys, as JSON reads them back (tuples become lists)."""
    return json.loads(json.dumps({key: getattr(entry, key) for key in data}))


def _parsed(document: dict[str, Any]) -> EngineCatalog | EnvCatalog | NcclCatalog:
    if "flags" in document:
        return parse_engine_catalog(document)
    return parse_nccl_catalog(document) if "families" in document else parse_env_catalog(document)


def _entries(parsed: EngineCatalog | EnvCatalog | NcclCatalog) -> dict[str, Any]:
    return dict(parsed.by_option) if isinstance(parsed, EngineCatalog) else dict(parsed.by_name)


def _names(data: dict[str, Any]) -> list[str]:
    return list(data["options"]) if "options" in data else [data["name"]]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_entry_holds_its_json_and_is_found_under_each_of_its_names(name: str) -> None:
    document = json.loads((CATALOGS / name).read_text(encoding="utf-8"))
    entries = _entries(_parsed(document))
    expected: dict[str, dict[str, Any]] = {}
    for data in document.get("flags") or document["variables"]:
        expected.update(dict.fromkeys(_names(data), data))
    assert list(entries) == list(expected)
    assert {key: _fields(entry, expected[key]) for key, entry in entries.items()} == expected


def test_the_loader_reads_the_shipped_file_once_per_run() -> None:
    loaded = catalog.nccl_catalog()
    assert catalog.nccl_catalog() is loaded
    document = json.loads((CATALOGS / "nccl-2.30.7.json").read_text(encoding="utf-8"))
    assert [_fields(family, data) for family, data in zip(loaded.families, document["families"], strict=True)] \
        == document["families"]
    assert (loaded.collectives, loaded.algorithms, loaded.protocols) == \
        tuple(tuple(document[key]) for key in ("collectives", "algorithms", "protocols"))


def _env(*variables: dict[str, Any]) -> dict[str, Any]:
    return {"catalog": "x", "variables": [{"kind": "str", "default": None, "deprecated": False, "replacement": None,
                                           "source": "environ.py", **v} for v in variables]}


def test_a_name_listed_twice_is_its_last_entry() -> None:
    parsed = parse_env_catalog(_env({"name": "A", "default": "1"}, {"name": "B"}, {"name": "A", "default": "2"}))
    assert list(parsed.by_name) == ["A", "B"]
    assert [(v.name, v.default) for v in parsed.variables] == [("A", "2"), ("B", None)]


def test_a_flag_of_several_options_is_one_entry_listed_once() -> None:
    flag = {"dest": "tp_size", "options": ["--tp-size", "--tp"], "kind": "int", "action": "store", "nargs": None,
            "choices": None, "default": 1, "deprecated": False, "replacement": None, "help": ""}
    parsed = parse_engine_catalog({"catalog": "c", "package": "p", "version": "1", "flags": [flag]})
    assert parsed.lookup("--tp") is parsed.lookup("--tp-size")
    assert [f.options for f in parsed.flags] == [("--tp-size", "--tp")]


def test_an_entry_with_a_key_its_class_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'typo'"):
        parse_env_catalog(_env({"name": "A", "typo": 1}))
