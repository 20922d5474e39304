"""Constrained scalar types of the profile, each with one clear error message (the checks: spec/checks.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, WithJsonSchema

from spark_compile.spec.checks import (
    ArgScalar,
    check_abs_path,
    check_arg_value,
    check_docker_size,
    check_env_name,
    check_iface,
    check_image,
    check_ipv4,
    check_ipv4_net,
    check_name,
    check_overlay_rows,
    check_overlay_size,
    check_rdma,
    check_rel_or_abs_path,
    check_snapshot,
    check_ssh,
    check_text,
)
from spark_compile.spec.overlay_types import SIZE_SCHEMA

Name = Annotated[str, AfterValidator(check_name)]
IPv4 = Annotated[str, AfterValidator(check_ipv4)]
IPv4Net = Annotated[str, AfterValidator(check_ipv4_net)]
AbsPath = Annotated[str, AfterValidator(check_abs_path)]
HomePath = Annotated[str, AfterValidator(check_rel_or_abs_path)]
DockerSize = Annotated[str, AfterValidator(check_docker_size)]
EnvName = Annotated[str, AfterValidator(check_env_name)]
IfName = Annotated[str, AfterValidator(check_iface)]
SshTarget = Annotated[str, AfterValidator(check_ssh)]
ImageRef = Annotated[str, AfterValidator(check_image)]
Text = Annotated[str, AfterValidator(check_text)]
ArgValue = Annotated[ArgScalar | list[ArgScalar], AfterValidator(check_arg_value)]
Snapshot = Annotated[str, AfterValidator(check_snapshot)]
RdmaName = Annotated[str, AfterValidator(check_rdma)]
Port = Annotated[int, Field(ge=1, le=65535)]
Positive = Annotated[int, Field(ge=1)]
# Overlay values: what the container's own parsers accept (spark_compile.overlay.values).
OverlaySize = Annotated[str | int, AfterValidator(check_overlay_size), WithJsonSchema(SIZE_SCHEMA)]
OverlayRows = Annotated[str, AfterValidator(check_overlay_rows)]
