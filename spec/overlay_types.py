"""Overlay facts shared by the model, the plan and the rules (below the model: spec/fields.py reads it)."""

from __future__ import annotations

from pydantic import BaseModel

from spark_compile.overlay.registry import FLAGS, Flag

# The JSON Schema form of values.parse_size, so editors and check-jsonschema refuse what the overlay would.
SIZE_SCHEMA = {"anyOf": [{"type": "string", "pattern": "^[0-9]+([bB]|[kKmMgG]([bB]|[iI][bB])?)?$"},
                         {"type": "integer", "minimum": 0}]}

# The flags a profile may set (the plan writes the others from typed fields).
PROFILE_FLAGS: tuple[Flag, ...] = tuple(flag for flag in FLAGS if flag.source != "plan")


def derived_engram_max_ids(chunked_prefill_size: int, max_running_requests: int) -> int:
    """SPARK_ENGRAM_MAX_IDS as the launcher derives it: max(chunk, 8 x running requests) x 32."""
    return max(chunked_prefill_size, max_running_requests * 8) * 32


def flag_value(section: BaseModel, key: str) -> object:
    """The value of the overlay field ``key`` (a registry flag's key); a key the section lacks is a bug, not None."""
    if key not in type(section).model_fields:
        raise KeyError(f"the overlay section has no field {key!r}")
    return getattr(section, key)
