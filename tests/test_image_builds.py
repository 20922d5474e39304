"""The image and the build it is checked against: spec/catalogs/image-builds.json (the operator's digest ->
catalog table) ties them; SC318 refuses a catalog the table contradicts, SC319 warns of a digest the table does
not know for a repository it tracks, SC312 says which build a tag-only image was assumed to be."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_fixes import findings

from spark_compile.spec import catalog

from conftest import ROOT

PROFILE = ROOT / "tests" / "profiles" / "negative" / "image-tag-only.yaml"
DIGEST = "sha256:" + "0123456789abcdef" * 4
OTHER = "sha256:" + "fedcba9876543210" * 4
TABLE_FILE = f"spec/catalogs/{catalog.IMAGE_BUILDS}"


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An operator's table in front of the shipped catalogs; the test fills it in."""
    entries: dict[str, str] = {}
    shipped = catalog._directories()

    def directories() -> tuple[Path, ...]:
        (tmp_path / catalog.IMAGE_BUILDS).write_text(json.dumps({"format": 1, "images": entries}))
        return (tmp_path, *shipped)

    monkeypatch.setattr(catalog, "_directories", directories)
    catalog.image_builds.cache_clear()
    yield entries
    catalog.image_builds.cache_clear()


def found(image: str, more: str = "") -> list[tuple[str, int, str, str]]:
    """The image rules' findings of a profile with ``image`` (and the lines ``more`` under engine:)."""
    return sorted((f.position.file, f.position.line, f.rule, f.message) for f in _all(image, more)
                  if f.rule in ("SC312", "SC318", "SC319"))


def _all(image: str, more: str = "") -> list[Any]:
    return findings(PROFILE, f"extends: ../../../spec/profiles/dsv41-4spark.yaml\nengine:\n  image: {image}\n{more}")


def test_a_digest_listed_as_another_build_is_refused_at_the_catalog(table: dict[str, str]) -> None:
    table[f"lmsysorg/sglang@{DIGEST}"] = "sglang-0.5.10.post1"
    assert found(f"lmsysorg/sglang:dev-dsv41@{DIGEST}") == [
        ("spec/profiles/dsv41-4spark.yaml", 48, "SC318",
         f"spec/catalogs/image-builds.json lists lmsysorg/sglang@{DIGEST} as sglang-0.5.10.post1, but engine.catalog "
         "selects sglang-0.5.23")]


def test_a_digest_listed_as_the_catalogs_build_passes(table: dict[str, str]) -> None:
    table[f"lmsysorg/sglang@{DIGEST}"] = "sglang-0.5.23"
    assert found(f"lmsysorg/sglang:dev-dsv41@{DIGEST}") == []


def test_an_unknown_digest_of_a_tracked_repository_says_what_was_assumed(table: dict[str, str]) -> None:
    table[f"lmsysorg/sglang@{OTHER}"] = "sglang-0.5.23"
    assert found(f"lmsysorg/sglang:dev-dsv41@{DIGEST}") == [
        ("tests/profiles/negative/image-tag-only.yaml", 3, "SC319",
         "spec/catalogs/image-builds.json lists 1 build(s) of lmsysorg/sglang but not this digest; checked as "
         "sglang-0.5.23 (engine.catalog)")]
    assert found(f"registry.example:5000/other/sglang@{DIGEST}") == []  # a repository the table does not track


def test_the_unknown_digests_hint_is_an_edit_of_the_profile_that_clears_it(table: dict[str, str]) -> None:
    """A pip user cannot edit the table inside the installed package: the hint names a key of the profile."""
    table[f"lmsysorg/sglang@{OTHER}"] = "sglang-0.5.23"
    (hint,) = [f.hint for f in _all(f"lmsysorg/sglang@{DIGEST}") if f.rule == "SC319"]
    first = hint.split(", or ")[0]
    assert first.startswith("set engine.image_build: sglang-0.5.23 ") and TABLE_FILE not in first
    edited = _all(f"lmsysorg/sglang@{DIGEST}", "  image_build: sglang-0.5.23\n")  # the hint, applied literally
    assert [f.rule for f in edited if f.rule == "SC319" or f.severity == "error"] == []


def test_a_build_the_profile_names_other_than_the_catalog_is_refused(table: dict[str, str]) -> None:
    table[f"lmsysorg/sglang@{OTHER}"] = "sglang-0.5.23"
    assert found(f"lmsysorg/sglang@{DIGEST}", "  image_build: sglang-0.5.10.post1\n") == [
        ("tests/profiles/negative/image-tag-only.yaml", 4, "SC318",
         f"engine.image_build says lmsysorg/sglang@{DIGEST} holds sglang-0.5.10.post1, but engine.catalog selects "
         "sglang-0.5.23")]


def test_a_tag_says_which_build_was_assumed(table: dict[str, str]) -> None:
    table[f"lmsysorg/sglang@{DIGEST}"] = "sglang-0.5.23"
    assert found("lmsysorg/sglang:spark") == [
        ("tests/profiles/negative/image-tag-only.yaml", 3, "SC312",
         "lmsysorg/sglang:spark is pinned by tag only; the tag can move to another build (checked as sglang-0.5.23, "
         "engine.catalog)")]


def test_the_shipped_table_is_well_formed() -> None:
    data = json.loads((ROOT / "spec" / "catalogs" / catalog.IMAGE_BUILDS).read_text(encoding="utf-8"))
    assert data["format"] == 1 and isinstance(data["images"], dict)
    for image, build in data["images"].items():
        assert "@sha256:" in image and build in catalog.available_engine_catalogs(), (image, build)
