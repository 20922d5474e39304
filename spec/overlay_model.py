"""The profile's overlay section, derived from the SPARK_* registry in overlay/ (never written twice)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, create_model
from pydantic_core import PydanticCustomError

from ..overlay.registry import FLAGS, Flag
from ..overlay.values import FlagValueError, parse_rows, parse_size


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


def _field_type(flag: Flag) -> Any:
    if flag.kind == "switch":
        return bool
    if flag.kind == "int":
        return Annotated[int, Field(ge=flag.minimum, le=flag.maximum)]
    if flag.kind == "float":
        return Annotated[float, Field(ge=flag.minimum, le=flag.maximum)]
    if flag.kind == "size":
        return Annotated[str | int, AfterValidator(_size), WithJsonSchema(SIZE_SCHEMA)]
    if flag.kind == "enum":
        choices = tuple(int(c) for c in flag.choices) if all(c.isdigit() for c in flag.choices) else flag.choices
        return Literal[choices]
    if flag.kind == "list":
        return list[str]
    if flag.kind == "rows":
        return Annotated[str, AfterValidator(_rows)]
    return str


def _description(flag: Flag) -> str:
    default = "none" if flag.default is None else repr(flag.default)
    pinned = " Derived by the plan; set it only to pin the value." if flag.source == "pinnable" else ""
    return (f"{flag.name}: {flag.doc} Hook default when unset: {default}. Hook {flag.hook}, "
            f"since {flag.since}.{pinned}")


def derived_engram_max_ids(chunked_prefill_size: int, max_running_requests: int) -> int:
    """SPARK_ENGRAM_MAX_IDS as the launcher derives it: max(chunk, 8 x running requests) x 32."""
    return max(chunked_prefill_size, max_running_requests * 8) * 32


PROFILE_FLAGS: tuple[Flag, ...] = tuple(flag for flag in FLAGS if flag.source != "plan")

_fields: dict[str, Any] = {
    flag.key: (_field_type(flag) | None, Field(default=None, description=_description(flag)))
    for flag in PROFILE_FLAGS
}
_fields["b12x_roce_spin_limit"] = (
    Annotated[int, Field(ge=1)] | None,
    Field(default=None, description="B12X_ROCE_SPIN_LIMIT: spins before the b12x RoCE runtime yields."),
)

OverlaySection: type[BaseModel] = create_model(
    "OverlaySection",
    __config__=ConfigDict(extra="forbid", frozen=True, strict=True),
    __doc__="SPARK_* overlay flags by key (name without SPARK_, lower case); unset = the hook's default.",
    **_fields,
)
