"""Constrained scalar types of the profile, each with one clear error message."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_IFNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$")
_DOCKER_SIZE = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_SSH = re.compile(r"^(?:[a-z_][a-z0-9_.-]{0,31}@)?[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")
_IMAGE = re.compile(
    r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
_SAFE_TEXT = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$")
# Linux RDMA device names (ib_device.name): up to 63 characters, no '/' or whitespace; vendors use
# [A-Za-z0-9_.-] (mlx5_0, rocep1s0f0, roceP2p1s0f0, irdma0).
_RDMA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_SNAPSHOT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _err(kind: str, message: str, **ctx: object) -> PydanticCustomError:
    return PydanticCustomError(kind, message, ctx)


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise _err("name", "{value} is not a valid name: use 1-63 lower-case letters, digits and '-', "
                   "starting and ending with a letter or digit", value=repr(value))
    return value


def _ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise _err("ipv4", "{value} is not an IPv4 address (four numbers 0-255, e.g. 192.0.2.11)",
                   value=repr(value)) from None
    return value


def _ipv4_net(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _err("ipv4_network", "{value} is not an IPv4 subnet in CIDR form ({reason}), e.g. 192.0.2.0/24",
                   value=repr(value), reason=str(exc)) from None
    if "/" not in value:
        raise _err("ipv4_network", "{value} has no prefix length: write it in CIDR form, e.g. {bare}/24",
                   value=repr(value), bare=value)
    return str(net)


def _abs_path(value: str) -> str:
    parts = value.split("/")
    if not value.startswith("/") or ".." in parts or not _SAFE_TEXT.match(value) or " " in value:
        raise _err("abs_path", "{value} is not a clean absolute path: it must start with '/', contain no '..' "
                   "component, no spaces and only printable ASCII", value=repr(value))
    return value.rstrip("/") or "/"


def _rel_or_abs_path(value: str) -> str:
    return _abs_path(value) if value.startswith("/") else _abs_path("/" + value)[1:]


def _docker_size(value: str | int) -> str:
    text = str(value)
    if not _DOCKER_SIZE.match(text):
        raise _err("size", "{value} is not a size: a whole number with an optional unit b, k, m or g "
                   "(e.g. 112g)", value=repr(text))
    return text


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise _err("env_name", "{value} is not an environment variable name: use A-Z, 0-9 and '_', "
                   "not starting with a digit", value=repr(value))
    return value


def _iface(value: str) -> str:
    if not _IFNAME.match(value):
        raise _err("ifname", "{value} is not a network interface name (at most 15 characters: letters, "
                   "digits, '_', '.', ':', '-')", value=repr(value))
    return value


def _ssh(value: str) -> str:
    if not _SSH.match(value):
        raise _err("ssh_target", "{value} is not an ssh target: expected host or user@host", value=repr(value))
    return value


def _image(value: str) -> str:
    _, at, digest = value.partition("@")
    if at and not re.fullmatch(r"sha256:[a-f0-9]{64}", digest):
        raise _err("image_digest", "{value}: a digest is complete only as sha256: followed by 64 lower-case hex "
                   "digits, got {digest} ({count} after sha256:)", value=repr(value), digest=repr(digest),
                   count=len(digest.removeprefix("sha256:")))
    if len(value) > 255 or not _IMAGE.match(value):
        raise _err("image", "{value} is not a docker image reference (e.g. registry/name:tag)", value=repr(value))
    return value


def _text(value: str) -> str:
    if not _SAFE_TEXT.match(value):
        raise _err("text", "{value} must be printable ASCII with no leading or trailing space", value=repr(value))
    return value


_ArgScalar = str | int | float | bool


def _arg_value(value: _ArgScalar | list[_ArgScalar]) -> _ArgScalar | list[_ArgScalar]:
    # An argv element is a C string: bash cannot hold a NUL byte, let alone pass it on.
    if any(isinstance(item, str) and "\0" in item for item in (value if isinstance(value, list) else [value])):
        raise _err("arg_value", "{value} contains a NUL character, which no command-line argument can carry",
                   value=repr(value))
    return value


def _rdma(value: str) -> str:
    if not _RDMA.match(value):
        raise _err("rdma_name", "{value} is not an RDMA device name: expected up to 63 letters, digits, '_', '.', "
                   "'-', starting with a letter or digit, as `ls /sys/class/infiniband` prints it (e.g. mlx5_0)",
                   value=repr(value))
    return value


def _snapshot(value: str) -> str:
    if not _SNAPSHOT.match(value) or value in (".", ".."):
        raise _err("snapshot", "{value} is not a snapshot directory name (letters, digits, '.', '_', '-')",
                   value=repr(value))
    return value


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
RdmaName = Annotated[str, AfterValidator(_rdma)]
Port = Annotated[int, Field(ge=1, le=65535)]
Positive = Annotated[int, Field(ge=1)]
