"""Constrained scalar types of the profile, each with one clear error message."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from .secret_patterns import SECRET_VALUE

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
# A path component: letters, digits and . _ + @ = - only. No quote, '$', '%', '\\', ':' or ',' can reach
# bash, systemd (specifiers, variables), docker -v (':' separates fields) or an env file.
_PATH_PART = r"[A-Za-z0-9._+@=-]{1,255}"
_CLEAN_PATH = re.compile(rf"^/(?:{_PATH_PART}(?:/{_PATH_PART})*)?/?$")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:-]{0,127}$")
_GPUS = re.compile(r"^(?:all|[1-9][0-9]{0,2}|device=[A-Za-z0-9-]{1,64}(?:,[A-Za-z0-9-]{1,64}){0,63})$")
_FREE_TEXT = re.compile(r"^[^\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]*$")
_ARG_TEXT = re.compile(r"^[^\x00-\x1f\x7f\x85\u2028\u2029]*$")
MAX_PATH = 4096
MAX_TEXT = 1024
MAX_ARG = 8192  # an argv element (Linux allows 128 KiB) and an env-file line (docker: 64 KiB) stay far below
MAX_DESCRIPTION = 4096
ULIMIT_NAMES = ("core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc",
                "rss", "rtprio", "rttime", "sigpending", "stack")
INT64_MAX = (1 << 63) - 1
MAX_SECONDS = 7 * 24 * 3600  # a week: past any boot, stop or probe, and inside what systemd accepts
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
    if len(value) > MAX_PATH or not _CLEAN_PATH.match(value) or ".." in value.split("/"):
        raise _err("abs_path", "{value} is not a clean absolute path: it must start with '/', have no '..' "
                   "component, and use only letters, digits and . _ + @ = - between the slashes (at most "
                   "{limit} characters)", value=_shown(value), limit=MAX_PATH)
    return value.rstrip("/") or "/"


def _rel_or_abs_path(value: str) -> str:
    return _abs_path(value) if value.startswith("/") else _abs_path("/" + value)[1:]


def _shown(value: str) -> str:
    """A value as a message shows it: repr, cut to a bounded excerpt (secrets hidden before the cut, which
    would otherwise leave a token too short to recognise)."""
    size = len(value)
    value = SECRET_VALUE.sub("(redacted)", value)
    return repr(value) if len(value) <= 80 else repr(value[:80]) + f"... ({size} characters)"


def _word(value: str) -> str:
    if not _WORD.match(value):
        raise _err("word", "{value} is not a single word: 1-128 letters, digits and _ . + : -, starting with "
                   "a letter or digit", value=_shown(value))
    return value


def _gpus(value: str) -> str:
    if not _GPUS.match(value):
        raise _err("gpus", "{value} is not a docker --gpus value: all, a count, or device=ID[,ID...]",
                   value=_shown(value))
    return value


def _device(value: str) -> str:
    parts = value.split(":")
    perms = parts.pop() if len(parts) == 3 or (len(parts) == 2 and not parts[1].startswith("/")) else "rwm"
    if not 1 <= len(parts) <= 2 or not perms or set(perms) - set("rwm"):
        raise _err("device", "{value} is not a --device value: /dev/HOST[:/dev/CONTAINER][:rwm]",
                   value=_shown(value))
    for part in parts:
        _abs_path(part)
    return value


def _free_text(value: str) -> str:
    if len(value) > MAX_DESCRIPTION or not _FREE_TEXT.match(value):
        raise _err("free_text", "free text takes at most {limit} characters and no control characters "
                   "other than line breaks and tabs", limit=MAX_DESCRIPTION)
    return value


def _arg_text(value: str) -> str:
    if "\0" in value:
        raise _err("arg_text", "{value} contains a NUL character, which no command-line argument can carry",
                   value=_shown(value))
    if len(value) > MAX_ARG or not _ARG_TEXT.match(value):
        raise _err("arg_text", "{value} cannot be an argument: at most {limit} characters, no line break or "
                   "other control character", value=_shown(value), limit=MAX_ARG)
    return value


def _list_arg(value: str) -> str:
    _arg_text(value)
    if value.startswith("-"):
        raise _err("list_arg", "{value} starts with '-': in a list it would be read as another flag; give "
                   "flags their own key under engine.args", value=_shown(value))
    return value


def _launcher_word(value: str) -> str:
    _text(value)
    if value.startswith("--"):
        raise _err("launcher_word", "{value} is a long option: engine flags belong under engine.args (where "
                   "they are checked), not in the launcher", value=_shown(value))
    return value


def _ulimit_value(value: str | int) -> str | int:
    parts = str(value).split(":")
    try:
        numbers = [int(part, 10) for part in parts]
    except ValueError:
        numbers = []
    if not 1 <= len(parts) <= 2 or len(numbers) != len(parts) or any(not -1 <= n <= INT64_MAX for n in numbers):
        raise _err("ulimit", "{value} is not a ulimit: soft[:hard], each -1 (unlimited) or 0..2^63-1",
                   value=_shown(str(value)))
    return value


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
    if len(value) > MAX_TEXT:
        raise _err("text", "{value} is longer than {limit} characters", value=_shown(value), limit=MAX_TEXT)
    if not _SAFE_TEXT.match(value):
        raise _err("text", "{value} must be printable ASCII with no leading or trailing space", value=_shown(value))
    return value


_ArgScalar = str | int | float | bool


def _arg_value(value: _ArgScalar | list[_ArgScalar]) -> _ArgScalar | list[_ArgScalar]:
    # An argv element is a C string: bash cannot hold a NUL byte, let alone pass it on.
    if any(isinstance(item, str) and "\0" in item for item in (value if isinstance(value, list) else [value])):
        raise _err("arg_value", "{value} contains a NUL character, which no command-line argument can carry",
                   value=repr(value))
    # The same grammar as engine.args: bounded, no control characters, no list item that reads as a flag.
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            _list_arg(item)
    if isinstance(value, str):
        _arg_text(value)
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
