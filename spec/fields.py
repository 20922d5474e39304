"""Constrained scalar types of the profile, each with one clear error message (the checks: spec/checks.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema

from spark_compile.spec.checks import (
    MAX_SECONDS,
    ULIMIT_NAMES,
    _abs_path,
    _arg_text,
    _arg_value,
    _ArgScalar,
    _container_name,
    _cpuset,
    _device,
    _docker_size,
    _env_name,
    _free_text,
    _gpus,
    _hub_id,
    _iface,
    _image,
    _ipv4,
    _ipv4_net,
    _kwarg,
    _launcher_word,
    _list_arg,
    _name,
    _rdma,
    _rel_or_abs_path,
    _security_opt,
    _snapshot,
    _ssh,
    _text,
    _ulimit_value,
    _user,
    _word,
    check_overlay_rows,
    check_overlay_size,
)
from spark_compile.spec.overlay_types import SIZE_SCHEMA

Name = Annotated[str, AfterValidator(_name)]
IPv4 = Annotated[str, AfterValidator(_ipv4)]
IPv4Net = Annotated[str, AfterValidator(_ipv4_net)]
AbsPath = Annotated[str, AfterValidator(_abs_path)]
HomePath = Annotated[str, AfterValidator(_rel_or_abs_path)]
DockerSize = Annotated[str, AfterValidator(_docker_size)]
EnvName = Annotated[str, AfterValidator(_env_name)]
IfName = Annotated[str, AfterValidator(_iface)]
SshTarget = Annotated[str, AfterValidator(_ssh)]
ImageRef = Annotated[str, AfterValidator(_image)]
Text = Annotated[str, AfterValidator(_text)]
ArgValue = Annotated[_ArgScalar | list[_ArgScalar], AfterValidator(_arg_value)]
Snapshot = Annotated[str, AfterValidator(_snapshot)]
Word = Annotated[str, AfterValidator(_word)]
GpuSpec = Annotated[str, AfterValidator(_gpus)]
DeviceSpec = Annotated[str, AfterValidator(_device)]
FreeText = Annotated[str, AfterValidator(_free_text)]
ArgText = Annotated[str, AfterValidator(_arg_text)]
ListArg = Annotated[str, AfterValidator(_list_arg)]
LauncherWord = Annotated[str, AfterValidator(_launcher_word)]
UlimitName = Literal[ULIMIT_NAMES]  # type: ignore[valid-type]
UlimitValue = Annotated[str | int, AfterValidator(_ulimit_value)]
EnvText = Annotated[str, AfterValidator(_arg_text)]
Seconds = Annotated[int, Field(ge=1, le=MAX_SECONDS)]
RdmaName = Annotated[str, AfterValidator(_rdma)]
Port = Annotated[int, Field(ge=1, le=65535)]
Positive = Annotated[int, Field(ge=1)]
# Overlay values: what the container's own parsers accept (spark_compile.overlay.values).
ContainerName = Annotated[str, AfterValidator(_container_name)]
HubId = Annotated[str, AfterValidator(_hub_id)]
DockerUser = Annotated[str, AfterValidator(_user)]
SecurityOpt = Annotated[str, AfterValidator(_security_opt)]
CpuSet = Annotated[str, AfterValidator(_cpuset)]
KwargName = Annotated[str, AfterValidator(_kwarg)]
OverlaySize = Annotated[str | int, AfterValidator(check_overlay_size), WithJsonSchema(SIZE_SCHEMA)]
OverlayRows = Annotated[str, AfterValidator(check_overlay_rows)]
