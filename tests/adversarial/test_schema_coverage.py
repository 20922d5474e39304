"""The property suite covers every string-typed field of the schema `spark-compile schema` prints."""

from __future__ import annotations

import json

from fields import FIELDS, schema_string_fields
from hostile import run_main


def test_every_string_field_of_the_schema_is_covered() -> None:
    schema = json.loads(run_main("schema").out)
    fields = schema_string_fields(schema)
    assert len(fields) > 60  # the walk found the schema's strings (a broken walk would find none)
    assert fields - set(FIELDS) == set(), "string fields with no hostile-value strategy in tests/adversarial/fields.py"
    assert set(FIELDS) - fields == set(), "FIELDS names paths the schema no longer has"


def test_the_walk_sees_keys_list_items_and_mapping_values() -> None:
    fields = schema_string_fields(json.loads(run_main("schema").out))
    assert {"name", "fleet.nodes.[].ssh", "engine.env.*", "engine.env.<key>", "engine.args.*.[]",
            "secrets.env.*.file"} <= fields
