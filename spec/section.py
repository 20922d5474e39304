"""The base of every profile section and the value types several sections share."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from spark_compile.spec.fields import ArgText, EnvText, ListArg

Scalar = ArgText | int | float | bool
ListScalar = ListArg | int | float | bool
EnvValue = EnvText | int
# A memory figure in GiB (pins from a boot); ints are accepted as whole GiB.
GiB = Annotated[float, Field(ge=0, le=1 << 20)]


class Section(BaseModel):
    """Base of every profile section: unknown keys are errors, values are checked on assignment."""

    # strict: a quoted "8210" or a `yes` is not silently converted; the JSON Schema refuses them too.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


