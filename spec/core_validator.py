"""The profile's validator on the check path: pydantic-core over the model's own core schema.

spec/model.py is the only declaration of the profile. Importing and building its pydantic classes costs nearly
half of a cold `check` (README, Speed), so the check path validates with a pydantic-core SchemaValidator over
``Profile.__pydantic_core_schema__``, frozen to JSON once (spec/core_schema.py) and kept in the user's cache
(spec/user_cache.py) under a key of the pydantic-core version and the stamp of pydantic's version file and of
every module the model is built from (user_cache.stamp; reading and hashing the sources cost 0.3 ms a run):
any change to them is a new key, so a stale schema is never read. On a miss the model is imported and the
schema frozen again, which is also what runs when the cache cannot be used at all. Sections are read-only
records (spec/record.py) with the model's field names; tests/test_core_validator.py holds both validators to
the same profiles and the same errors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pydantic_core
from pydantic_core import SchemaValidator

from spark_compile.spec import user_cache
from spark_compile.spec.core_schema import SchemaFormatError, Thawed, freeze, thaw

if TYPE_CHECKING:
    from spark_compile.spec.model import Profile

PREFIX = "core-schema-"
KEEP = 16  # schema files kept: one per model version and pydantic install in use, the oldest dropped first
# Every module that importing spec/model.py runs (a test holds this list to the real import closure),
# and the freezer, whose output format is part of the cached text.
MODEL_MODULES = (
    "spark_compile",
    "spark_compile.overlay",
    "spark_compile.overlay.registry",
    "spark_compile.overlay.values",
    "spark_compile.spec",
    "spark_compile.spec.checks",
    "spark_compile.spec.container_model",
    "spark_compile.spec.core_schema",
    "spark_compile.spec.engine_model",
    "spark_compile.spec.fields",
    "spark_compile.spec.hardware",
    "spark_compile.spec.model",
    "spark_compile.spec.nccl_presets",
    "spark_compile.spec.operations_model",
    "spark_compile.spec.overlay_section",
    "spark_compile.spec.overlay_types",
    "spark_compile.spec.patterns",
    "spark_compile.spec.secret_patterns",
    "spark_compile.spec.section",
    "spark_compile.spec.suggest",
)


def _origin(name: str) -> str:
    loaded: str | None = getattr(sys.modules.get(name), "__file__", None)
    if loaded:  # no search of sys.path for a module imported already
        return loaded
    package, _, leaf = name.rpartition(".")
    parent: str | None = getattr(sys.modules.get(package), "__file__", None)
    if parent:  # nor for a module of a package imported already: it is beside the package's __init__
        for candidate in (os.path.join(os.path.dirname(parent), f"{leaf}.py"),
                          os.path.join(os.path.dirname(parent), leaf, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(name)
    return spec.origin


def cache_key() -> str:
    """What the frozen schema depends on: pydantic's and pydantic-core's versions, the model's sources."""
    digest = hashlib.sha256(f"pydantic-core {pydantic_core.__version__}\n".encode())
    # pydantic's version module names its version and the pydantic-core it was built for, without
    # importing pydantic (which the check path does not need).
    pydantic_version = os.path.join(os.path.dirname(_origin("pydantic")), "version.py")
    for path in (pydantic_version, *map(_origin, MODEL_MODULES)):
        digest.update(f"{user_cache.stamp(path)}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def file_name(key: str) -> str:
    """The cache file of the schema frozen under ``key``."""
    return f"{PREFIX}{key}.json"


def frozen_model() -> str:
    """The model's core schema, frozen: this imports pydantic's model machinery."""
    from spark_compile.spec.model import Profile as ProfileModel

    schema = ProfileModel.__pydantic_core_schema__
    model = schema["schema"] if schema["type"] == "definitions" else schema
    # The profile model's own config: pydantic gives it to the validator too (the errors' title comes from it).
    return freeze(cast(dict[str, Any], schema), dict(model["config"]))


def load(directory: Path | None) -> Thawed:
    """The frozen schema from the cache in ``directory`` when it holds this key, else built and stored."""
    name = file_name(cache_key())
    data = user_cache.read(directory, name) if directory else None
    if data is not None:
        try:
            return thaw(data.decode("utf-8"))
        except (SchemaFormatError, UnicodeDecodeError):
            pass  # not a schema this code wrote (edited by hand, or damaged): rebuilt below
    text = frozen_model()
    if directory:
        user_cache.write(directory, name, text.encode("utf-8"), prefix=PREFIX, keep=KEEP)
    return thaw(text)


@cache
def _thawed() -> Thawed:
    return load(user_cache.cache_dir())


@cache
def _validator() -> SchemaValidator:
    thawed = _thawed()
    return SchemaValidator(cast(Any, thawed.schema), cast(Any, thawed.config))


def validate_profile(data: object) -> Profile:
    """The profile in ``data``; raises pydantic_core.ValidationError with the pydantic model's own errors.

    Its sections are records that mirror the model's classes field for field, hence the model's type."""
    return cast("Profile", _validator().validate_python(data))


@cache
def section_defaults(name: str) -> Any:
    """The section model ``name`` with every field at its default, as the model's ``Section()`` builds it
    (one read-only record per process)."""
    thawed = _thawed()
    own = thawed.sections[name]
    schema = {**thawed.schema, "schema": own} if thawed.schema["type"] == "definitions" else own
    config = (own["schema"] if own["type"] == "function-after" else own)["config"]
    return SchemaValidator(cast(Any, schema), config).validate_python({})
