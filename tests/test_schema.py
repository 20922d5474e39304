"""The exported JSON Schema validates real profiles, with jsonschema and with check-jsonschema."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from conftest import REFERENCE_PROFILE, ROOT, run_cli
from support.tools import require_tool


def _schema() -> dict[str, object]:
    result = run_cli("schema")
    assert result.returncode == 0
    schema: dict[str, object] = json.loads(result.stdout)
    return schema


def test_committed_schema_is_current() -> None:
    assert (ROOT / "generated" / "profile.schema.json").read_text() == run_cli("schema").stdout


def test_jsonschema_accepts_the_reference_and_refuses_a_typo() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(_schema())
    data = yaml.safe_load(REFERENCE_PROFILE.read_text())
    assert list(validator.iter_errors(data)) == []
    data["engine"]["prot"] = 8210
    messages = [e.message for e in validator.iter_errors(data)]
    assert messages == ["Additional properties are not allowed ('prot' was unexpected)"]


def test_check_jsonschema_cli_accepts_the_reference(tmp_path: Path) -> None:
    tool = require_tool("check-jsonschema")
    schema = tmp_path / "profile.schema.json"
    schema.write_text(json.dumps(_schema()))
    ok = subprocess.run([tool, "--schemafile", str(schema), str(REFERENCE_PROFILE),
                         str(ROOT / "tests/profiles/positive/llama-2node-h100.yaml")],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(REFERENCE_PROFILE.read_text().replace("port: 8210", "port: 70000"))
    refused = subprocess.run([tool, "--schemafile", str(schema), str(bad)], capture_output=True, text=True,
                             check=False)
    assert refused.returncode == 1
    assert "70000 is greater than the maximum of 65535" in refused.stdout



def test_profiles_point_at_the_schema() -> None:
    first = REFERENCE_PROFILE.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../generated/profile.schema.json"
    assert (REFERENCE_PROFILE.parent / "../../generated/profile.schema.json").resolve().is_file()
