"""The profile's value checks: plain functions over pydantic-core only, shared by the pydantic model
(spec/fields.py) and the generated core validator (spec/core_model.py), so both raise the same errors."""

from __future__ import annotations

import ipaddress
import re
from typing import Protocol, TypeVar

from pydantic_core import PydanticCustomError


class _Reference(Protocol):
    @property
    def file(self) -> str | None: ...

    @property
    def env(self) -> str | None: ...


_Ref = TypeVar("_Ref", bound=_Reference)


class _RdmaAccess(Protocol):
    @property
    def mode(self) -> str: ...

    @property
    def resource(self) -> str | None: ...


_Rdma = TypeVar("_Rdma", bound=_RdmaAccess)


class _StackAccess(Protocol):
    @property
    def unit(self) -> str | None: ...

    @property
    def stop(self) -> list[str]: ...

    @property
    def relaunch(self) -> list[str]: ...


_Stack = TypeVar("_Stack", bound=_StackAccess)

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


def check_name(value: str) -> str:
    if not _NAME.match(value):
        raise _err("name", "{value} is not a valid name: use 1-63 lower-case letters, digits and '-', "
                   "starting and ending with a letter or digit", value=repr(value))
    return value


def check_ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise _err("ipv4", "{value} is not an IPv4 address (four numbers 0-255, e.g. 192.0.2.11)",
                   value=repr(value)) from None
    return value


def check_ipv4_net(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _err("ipv4_network", "{value} is not an IPv4 subnet in CIDR form ({reason}), e.g. 192.0.2.0/24",
                   value=repr(value), reason=str(exc)) from None
    if "/" not in value:
        raise _err("ipv4_network", "{value} has no prefix length: write it in CIDR form, e.g. {bare}/24",
                   value=repr(value), bare=value)
    return str(net)


def check_abs_path(value: str) -> str:
    parts = value.split("/")
    if not value.startswith("/") or ".." in parts or not _SAFE_TEXT.match(value) or " " in value:
        raise _err("abs_path", "{value} is not a clean absolute path: it must start with '/', contain no '..' "
                   "component, no spaces and only printable ASCII", value=repr(value))
    return value.rstrip("/") or "/"


def check_rel_or_abs_path(value: str) -> str:
    return check_abs_path(value) if value.startswith("/") else check_abs_path("/" + value)[1:]


def check_docker_size(value: str | int) -> str:
    text = str(value)
    if not _DOCKER_SIZE.match(text):
        raise _err("size", "{value} is not a size: a whole number with an optional unit b, k, m or g "
                   "(e.g. 112g)", value=repr(text))
    return text


def check_env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise _err("env_name", "{value} is not an environment variable name: use A-Z, 0-9 and '_', "
                   "not starting with a digit", value=repr(value))
    return value


def check_iface(value: str) -> str:
    if not _IFNAME.match(value):
        raise _err("ifname", "{value} is not a network interface name (at most 15 characters: letters, "
                   "digits, '_', '.', ':', '-')", value=repr(value))
    return value


def check_ssh(value: str) -> str:
    if not _SSH.match(value):
        raise _err("ssh_target", "{value} is not an ssh target: expected host or user@host", value=repr(value))
    return value


def check_image(value: str) -> str:
    _, at, digest = value.partition("@")
    if at and not re.fullmatch(r"sha256:[a-f0-9]{64}", digest):
        raise _err("image_digest", "{value}: a digest is complete only as sha256: followed by 64 lower-case hex "
                   "digits, got {digest} ({count} after sha256:)", value=repr(value), digest=repr(digest),
                   count=len(digest.removeprefix("sha256:")))
    if len(value) > 255 or not _IMAGE.match(value):
        raise _err("image", "{value} is not a docker image reference (e.g. registry/name:tag)", value=repr(value))
    return value


def check_text(value: str) -> str:
    if not _SAFE_TEXT.match(value):
        raise _err("text", "{value} must be printable ASCII with no leading or trailing space", value=repr(value))
    return value


ArgScalar = str | int | float | bool


def check_arg_value(value: ArgScalar | list[ArgScalar]) -> ArgScalar | list[ArgScalar]:
    # An argv element is a C string: bash cannot hold a NUL byte, let alone pass it on.
    if any(isinstance(item, str) and "\0" in item for item in (value if isinstance(value, list) else [value])):
        raise _err("arg_value", "{value} contains a NUL character, which no command-line argument can carry",
                   value=repr(value))
    return value


def check_rdma(value: str) -> str:
    if not _RDMA.match(value):
        raise _err("rdma_name", "{value} is not an RDMA device name: expected up to 63 letters, digits, '_', '.', "
                   "'-', starting with a letter or digit, as `ls /sys/class/infiniband` prints it (e.g. mlx5_0)",
                   value=repr(value))
    return value


def check_snapshot(value: str) -> str:
    if not _SNAPSHOT.match(value) or value in (".", ".."):
        raise _err("snapshot", "{value} is not a snapshot directory name (letters, digits, '.', '_', '-')",
                   value=repr(value))
    return value


def check_hardware(value: str) -> str:
    """A hardware catalog entry that exists."""
    from spark_compile.spec.hardware import HARDWARE
    from spark_compile.spec.suggest import unknown_choice

    if value not in HARDWARE:
        raise unknown_choice("hardware", value, sorted(HARDWARE))
    return value


def check_secret_ref(ref: _Ref) -> _Ref:
    """A secret reference names exactly one place: a file or a variable."""
    if (ref.file is None) == (ref.env is None):
        raise PydanticCustomError("secret_ref", "a secret reference takes exactly one of file or env")
    return ref


def check_rdma_resource(rdma: _Rdma) -> _Rdma:
    """kubernetes.rdma: a device plugin's resource is named with mode device-plugin, and only then."""
    if (rdma.mode == "device-plugin") != (rdma.resource is not None):
        raise PydanticCustomError("rdma_resource", "rdma.resource is needed with mode device-plugin, and only then")
    return rdma


def check_previous_stack(stack: _Stack) -> _Stack:
    """operations.previous_stack: a unit, or both a stop and a relaunch command, never both ways."""
    if stack.unit is not None and (stack.stop or stack.relaunch):
        raise ValueError("give either unit or stop/relaunch commands, not both")
    if stack.unit is None and not (stack.stop and stack.relaunch):
        raise ValueError("give a unit, or both a stop and a relaunch command")
    return stack


def check_overlay_size(value: str | int) -> str:
    """An overlay size as the container's parser reads it (spark_compile.overlay.values.parse_size)."""
    from spark_compile.overlay.values import FlagValueError, parse_size

    text = str(value)
    try:
        parse_size(text)
    except FlagValueError as exc:
        raise PydanticCustomError("overlay_size", str(exc)) from None
    return text


def check_overlay_rows(value: str) -> str:
    """An overlay row list as the container's parser reads it (spark_compile.overlay.values.parse_rows)."""
    from spark_compile.overlay.values import FlagValueError, parse_rows

    try:
        parse_rows(value)
    except FlagValueError as exc:
        raise PydanticCustomError("overlay_rows", str(exc)) from None
    return value
