"""Constrained scalar types of the profile, each with one clear error message (the checks: spec/checks.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema

from spark_compile.spec import checks
from spark_compile.spec.checks import (
    INT64_MAX,
    MAX_PARALLEL,
    MAX_SECONDS,
    ULIMIT_NAMES,
    ArgScalar,
    check_overlay_rows,
    check_overlay_size,
)
from spark_compile.spec.overlay_types import SIZE_SCHEMA

Name = Annotated[str, AfterValidator(checks.name)]
IPv4 = Annotated[str, AfterValidator(checks.ipv4)]
IPv4Net = Annotated[str, AfterValidator(checks.ipv4_net)]
AbsPath = Annotated[str, AfterValidator(checks.abs_path)]
HomePath = Annotated[str, AfterValidator(checks.rel_or_abs_path)]
DockerSize = Annotated[str, AfterValidator(checks.docker_size)]
EnvName = Annotated[str, AfterValidator(checks.env_name)]
IfName = Annotated[str, AfterValidator(checks.iface)]
SshTarget = Annotated[str, AfterValidator(checks.ssh)]
ImageRef = Annotated[str, AfterValidator(checks.image)]
Text = Annotated[str, AfterValidator(checks.text)]
ArgValue = Annotated[ArgScalar | list[ArgScalar], AfterValidator(checks.arg_value)]
Snapshot = Annotated[str, AfterValidator(checks.snapshot)]
Word = Annotated[str, AfterValidator(checks.word)]
GpuSpec = Annotated[str, AfterValidator(checks.gpus)]
DeviceSpec = Annotated[str, AfterValidator(checks.device)]
FreeText = Annotated[str, AfterValidator(checks.free_text)]
ArgText = Annotated[str, AfterValidator(checks.arg_text)]
ListArg = Annotated[str, AfterValidator(checks.list_arg)]
LauncherWord = Annotated[str, AfterValidator(checks.launcher_word)]
UlimitName = Literal[ULIMIT_NAMES]  # type: ignore[valid-type]
UlimitValue = Annotated[str | int, AfterValidator(checks.ulimit_value)]
EnvText = Annotated[str, AfterValidator(checks.arg_text)]
Seconds = Annotated[int, Field(ge=1, le=MAX_SECONDS)]
RdmaName = Annotated[str, AfterValidator(checks.rdma)]
Port = Annotated[int, Field(ge=1, le=65535)]
# Every count reaches bash arithmetic or a C program somewhere: past int64 it would wrap there.
Positive = Annotated[int, Field(ge=1, le=INT64_MAX)]
ParallelSize = Annotated[int, Field(ge=1, le=MAX_PARALLEL)]
ContainerName = Annotated[str, AfterValidator(checks.container_name)]
HubId = Annotated[str, AfterValidator(checks.hub_id)]
GgufType = Annotated[str, AfterValidator(checks.gguf)]
DockerUser = Annotated[str, AfterValidator(checks.docker_user)]
SecurityOpt = Annotated[str, AfterValidator(checks.security_opt)]
CpuSet = Annotated[str, AfterValidator(checks.cpuset)]
KwargName = Annotated[str, AfterValidator(checks.kwarg_name)]
# Overlay values: what the container's own parsers accept (spark_compile.overlay.values).
OverlaySize = Annotated[str | int, AfterValidator(check_overlay_size), WithJsonSchema(SIZE_SCHEMA)]
OverlayRows = Annotated[str, AfterValidator(check_overlay_rows)]
