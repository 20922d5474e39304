"""The split form of a catalog (spec/catalog_store.py): from the user cache or from the JSON, every entry reads
as the JSON holds it, and an edited catalog or a damaged cache file is parsed again."""

from __future__ import annotations

import json
import marshal
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from spark_compile.spec import catalog_store, user_cache
from spark_compile.spec.catalog_store import StoredCatalog, read_catalog

CATALOGS = Path(catalog_store.__file__).with_name("catalogs")
KINDS = {"flags": "options", "variables": "name"}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "spark-compile"


def _entries_field(document: dict[str, Any]) -> str:
    return "flags" if "flags" in document else "variables"


def _as_json(stored: StoredCatalog, entries: str) -> dict[str, Any]:
    """The document ``stored`` was split from, put back together."""
    return {**stored.head, entries: [stored.entry(i) for i in range(len(stored.texts))]}


@pytest.mark.parametrize("name", sorted(p.name for p in CATALOGS.glob("*.json") if p.name != "image-builds.json"))
def test_a_catalog_reads_the_same_from_its_json_and_from_the_cache(name: str, cache: Path) -> None:
    document = json.loads((CATALOGS / name).read_text(encoding="utf-8"))
    entries = _entries_field(document)
    key = KINDS[entries]
    parsed = read_catalog(str(CATALOGS / name), entries, key)
    assert len(list(cache.glob(catalog_store.PREFIX + "*"))) == 1
    cached = read_catalog(str(CATALOGS / name), entries, key)
    by_name: dict[str, Any] = {}
    for entry in document[entries]:
        for one in [entry[key]] if isinstance(entry[key], str) else entry[key]:
            by_name[one] = entry
    for stored in (parsed, cached):
        assert _as_json(stored, entries) == document
        assert {one: stored.entry(index) for one, index in stored.keys.items()} == by_name
    assert cached.keys == parsed.keys and all(isinstance(text, str) for text in cached.texts)


def test_a_name_listed_twice_is_its_last_entry(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"catalog": "x", "variables": [{"name": "A", "n": 1}, {"name": "A", "n": 2}]}))
    stored = read_catalog(str(path), "variables", "name")
    assert stored.entry(stored.keys["A"]) == {"name": "A", "n": 2}


def test_an_edited_catalog_is_parsed_again_even_at_its_old_size_and_time(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"catalog": "x", "variables": [{"name": "A", "default": "1"}]}))
    assert read_catalog(str(path), "variables", "name").entry(0)["default"] == "1"
    before = os.stat(path)
    path.write_text(json.dumps({"catalog": "x", "variables": [{"name": "A", "default": "2"}]}))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same modification time
    assert read_catalog(str(path), "variables", "name").entry(0)["default"] == "2"


def test_a_catalog_moved_elsewhere_is_read_from_its_new_place(tmp_path: Path, cache: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"catalog": "a", "variables": []}))
    read_catalog(str(first), "variables", "name")
    shutil.copy2(first, second)
    second.write_text(json.dumps({"catalog": "b", "variables": []}))
    assert read_catalog(str(second), "variables", "name").head == {"catalog": "b"}


@pytest.mark.parametrize("payload", [b"not marshal data", marshal.dumps(["a", "list"]), marshal.dumps(({}, {}, []))],
                         ids=["garbage", "another-shape", "a-list-of-texts"])
def test_a_cache_file_this_code_did_not_write_is_ignored(tmp_path: Path, cache: Path, payload: bytes) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"catalog": "x", "variables": [{"name": "A", "default": "1"}]}))
    read_catalog(str(path), "variables", "name")
    (written,) = cache.glob(catalog_store.PREFIX + "*")
    user_cache.write(cache, written.name, payload, prefix="unused-", keep=1)  # intact, so only its body is wrong
    assert read_catalog(str(path), "variables", "name").entry(0) == {"name": "A", "default": "1"}


def test_without_a_cache_the_json_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(user_cache, "cache_dir", lambda: None)
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"catalog": "x", "variables": [{"name": "Ä", "default": None}]}))
    stored = read_catalog(str(path), "variables", "name")
    assert stored.entry(stored.keys["Ä"]) == {"name": "Ä", "default": None}
