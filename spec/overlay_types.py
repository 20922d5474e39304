"""Value types of the profile's overlay section, shared by the generated model and the rules."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, WithJsonSchema
from pydantic_core import PydanticCustomError

from spark_compile.overlay.registry import FLAGS, Flag
from spark_compile.overlay.values import FlagValueError, parse_rows, parse_size


def _size(value: str | int) -> str:
    text = str(value)
    try:
        parse_size(text)
    except FlagValueError as exc:
        raise PydanticCustomError("overlay_size", str(exc)) from None
    return text


def _rows(value: str) -> str:
    try:
        parse_rows(value)
    except FlagValueError as exc:
        raise PydanticCustomError("overlay_rows", str(exc)) from None
    return value


# The JSON Schema form of values.parse_size, so editors and check-jsonschema refuse what the overlay would.
SIZE_SCHEMA = {"anyOf": [{"type": "string", "pattern": "^[0-9]+([bB]|[kKmMgG]([bB]|[iI][bB])?)?$"},
                         {"type": "integer", "minimum": 0}]}

OverlaySize = Annotated[str | int, AfterValidator(_size), WithJsonSchema(SIZE_SCHEMA)]
OverlayRows = Annotated[str, AfterValidator(_rows)]

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
