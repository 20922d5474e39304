"""One registry, three readers: the profile's overlay section, the JSON Schema and the container's
runtime parser accept and refuse the same values for every flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from spark_compile.overlay.registry import Flag
from spark_compile.overlay.settings import parse_flag
from spark_compile.overlay.values import FlagValueError
from spark_compile.spec.envfile import env_text
from spark_compile.spec.overlay_section import OverlaySection
from spark_compile.spec.overlay_types import PROFILE_FLAGS

from conftest import REFERENCE_PROFILE, run_cli


def _samples(flag: Flag) -> tuple[list[Any], list[Any]]:
    """(values every reader must accept, values every reader must refuse) for one flag."""
    if flag.kind == "switch":
        return [True, False], ["yes", 2]
    if flag.kind == "enum":
        good: list[Any] = [int(c) if c.isdigit() else c for c in flag.choices]
        return good, ["bogus", 7]
    if flag.kind == "int":
        low = int(flag.minimum or 0)
        return [low, low + 100], [low - 1, "ten", 1.5]
    if flag.kind == "float":
        return [0.02, 4.0, 0], [-1.0, "much"]
    if flag.kind == "size":
        return ["1MB", "16mib", "4096", 1024, "2g"], ["1MQ", "MB", "1.5MB", "-1"]
    raise AssertionError(f"no samples for {flag.kind}")


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.protocols.Validator:
    import json

    schema = json.loads(run_cli("schema").stdout)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return dict(yaml.safe_load(REFERENCE_PROFILE.read_text()))


def _schema_accepts(validator: jsonschema.protocols.Validator, data: dict[str, Any], key: str, value: Any) -> bool:
    profile = {**data, "overlay": {key: value}}
    return not list(validator.iter_errors(profile))


def _model_accepts(key: str, value: Any) -> bool:
    from pydantic import ValidationError

    try:
        OverlaySection.model_validate({key: value})
    except ValidationError:
        return False
    return True


def _runtime_accepts(flag: Flag, text: str) -> bool:
    try:
        parse_flag(flag, text)
    except FlagValueError:
        return False
    return True


def test_every_profile_flag_is_in_the_model_and_the_schema(schema_validator: Any) -> None:
    properties = schema_validator.schema["$defs"]["OverlaySection"]["properties"]
    for flag in PROFILE_FLAGS:
        assert flag.key in OverlaySection.model_fields
        assert flag.name in (OverlaySection.model_fields[flag.key].description or "")
        assert flag.key in properties, flag.name


@pytest.mark.parametrize("flag", PROFILE_FLAGS, ids=lambda f: f.name)
def test_the_three_readers_agree(flag: Flag, schema_validator: Any, reference: dict[str, Any]) -> None:
    good, bad = _samples(flag)
    for value in good:
        assert _model_accepts(flag.key, value), (flag.name, value)
        assert _schema_accepts(schema_validator, reference, flag.key, value), (flag.name, value)
        assert _runtime_accepts(flag, env_text(value)), (flag.name, value)
    for value in bad:
        assert not _model_accepts(flag.key, value), (flag.name, value)
        assert not _schema_accepts(schema_validator, reference, flag.key, value), (flag.name, value)
        if not (flag.kind == "switch" and isinstance(value, str)):  # "yes" never reaches an env file
            assert not _runtime_accepts(flag, env_text(value)), (flag.name, value)


def test_overlay_section_is_what_the_registry_generates() -> None:
    """spec/overlay_section.py is committed; it must equal the generator's output from overlay/registry.py."""
    from spark_compile.spec.generators.make_overlay_section import TARGET, section_source

    assert TARGET.read_text(encoding="utf-8") == section_source(), (
        "stale: run python -m spark_compile.spec.generators.make_overlay_section")


def test_overlay_section_generator_check_mode_fails_when_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile.spec.generators import make_overlay_section

    stale = tmp_path / "overlay_section.py"
    stale.write_text("# edited by hand\n", encoding="utf-8")
    monkeypatch.setattr(make_overlay_section, "TARGET", stale)
    assert make_overlay_section.main(["--check"]) == 1
    assert make_overlay_section.main([]) == 0
    assert make_overlay_section.main(["--check"]) == 0
