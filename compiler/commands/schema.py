"""The profile's JSON Schema, as `spark-compile schema` prints it and generated/ commits it."""

from __future__ import annotations

import json

from spark_compile.spec.model import Profile

SCHEMA_ID = "https://spark-compile.invalid/profile.schema.json"


def profile_schema() -> dict[str, object]:
    """The JSON Schema of a profile, from the pydantic model."""
    schema = Profile.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def schema_text() -> str:
    """The schema as stable, indented JSON text."""
    return json.dumps(profile_schema(), indent=2, ensure_ascii=False) + "\n"
