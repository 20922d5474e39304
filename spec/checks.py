"""The profile's value checks: plain functions that the model's field types and model validators use
(spec/fields.py, spec/model.py); each raises pydantic-core's error with one clear message."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, TypeVar

from pydantic_core import PydanticCustomError

from spark_compile.overlay.values import FlagValueError, parse_rows, parse_size
from spark_compile.spec.hardware import HARDWARE
from spark_compile.spec.patterns import pattern_problem
from spark_compile.spec.secret_patterns import redact_text
from spark_compile.spec.suggest import unknown_choice

if TYPE_CHECKING:  # the model modules import these checks: their types only, or an import cycle
    from spark_compile.spec.container_model import KubernetesRdma
    from spark_compile.spec.engine_model import Draft
    from spark_compile.spec.model import Model, SecretRef
    from spark_compile.spec.operations_model import OperatorCheck, PreviousStack, Window

    _Source = TypeVar("_Source", Model, Draft)

# Each grammar is matched whole (fullmatch): `^...$` with re.match lets a value end in a line break.
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_IFNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}")
# docker reads sizes with go-units RAMInBytes: a number, an optional k/m/g/t/p unit, then optional i and b.
_DOCKER_SIZE = re.compile(r"[1-9][0-9]*(?:[kKmMgGtTpP][iI]?[bB]?|[bB])?")
# What docker --env-file and bash accept; lower case is the field's own (OMPI_MCA_btl_tcp_if_include).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SSH = re.compile(r"(?:[a-z_][a-z0-9_.-]{0,31}@)?[A-Za-z0-9][A-Za-z0-9.-]{0,252}")
_IMAGE = re.compile(
    r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
_SAFE_TEXT = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
# A path component: letters, digits and . _ + @ = - only. No quote, '$', '%', '\\', ':' or ',' can reach
# bash, systemd (specifiers, variables), docker -v (':' separates fields) or an env file.
_PATH_PART = r"[A-Za-z0-9._+@=-]{1,255}"
_CLEAN_PATH = re.compile(rf"/(?:{_PATH_PART}(?:/{_PATH_PART})*)?/?")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+:-]{0,127}")
_GPUS = re.compile(r"(?:all|[1-9][0-9]{0,2}|device=[A-Za-z0-9-]{1,64}(?:,[A-Za-z0-9-]{1,64}){0,63})")
# What free text and an argument may not hold: control characters (free text keeps tab and line feed) and
# the line and paragraph separators U+2028 and U+2029.
_FREE_TEXT_REFUSED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
_ARG_TEXT_REFUSED = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
MAX_PATH = 4096
MAX_TEXT = 1024
MAX_ARG = 8192  # an argv element (Linux allows 128 KiB) and an env-file line (docker: 64 KiB) stay far below
MAX_DESCRIPTION = 4096
ULIMIT_NAMES = ("core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc",
                "rss", "rtprio", "rttime", "sigpending", "stack")
INT64_MAX = (1 << 63) - 1
# A fleet and its parallel sizes: far past any GB10 cluster (the largest example is 8 nodes), and small enough
# that every per-rank output and every divisor search the rules run stays a finite, small amount of work.
MAX_FLEET_NODES = 1024
MAX_PARALLEL = 65_536
MAX_SECONDS = 7 * 24 * 3600  # a week: past any boot, stop or probe, and inside what systemd accepts
# Linux RDMA device names (ib_device.name): up to 63 characters, no '/' or whitespace; vendors use
# [A-Za-z0-9_.-] (mlx5_0, rocep1s0f0, roceP2p1s0f0, irdma0).
_RDMA = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_SNAPSHOT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# docker's container name grammar (daemon/names: [a-zA-Z0-9][a-zA-Z0-9_.-]+), bounded.
_CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,127}")
# A Hugging Face hub repo id: owner/name, each 1-96 letters, digits and . _ - (no '--' or '..').
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
# A GGUF quantization type as the file names of a GGUF repo end in it (-Q6_K.gguf, -UD-Q4_K_XL.gguf).
_GGUF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# docker --user: a name or uid, optionally :group or :gid.
_USER_PART = r"(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]{1,10})"
_USER = re.compile(rf"{_USER_PART}(?::{_USER_PART})?")
# docker --security-opt: a key (seccomp, apparmor, label, no-new-privileges, ...) and an optional value.
_SECURITY_OPT = re.compile(r"[a-z][a-z-]{0,63}(?:[=:][A-Za-z0-9_.,/:=+@-]{1,4096})?")
_CPUSET = re.compile(r"[0-9]{1,4}(?:-[0-9]{1,4})?(?:,[0-9]{1,4}(?:-[0-9]{1,4})?){0,255}")
_KWARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _err(kind: str, message: str, **ctx: object) -> PydanticCustomError:
    return PydanticCustomError(kind, message, ctx)


def name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise _err("name", "{value} is not a valid name: use 1-63 lower-case letters, digits and '-', "
                   "starting and ending with a letter or digit", value=repr(value))
    return value


def ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise _err("ipv4", "{value} is not an IPv4 address (four numbers 0-255, e.g. 192.0.2.11)",
                   value=repr(value)) from None
    return value


def ipv4_net(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _err("ipv4_network", "{value} is not an IPv4 subnet in CIDR form ({reason}), e.g. 192.0.2.0/24",
                   value=repr(value), reason=str(exc)) from None
    if "/" not in value:
        raise _err("ipv4_network", "{value} has no prefix length: write it in CIDR form, e.g. {bare}/24",
                   value=repr(value), bare=value)
    return str(net)


def abs_path(value: str) -> str:
    if len(value) > MAX_PATH or not _CLEAN_PATH.fullmatch(value) or ".." in value.split("/"):
        raise _err("abs_path", "{value} is not a clean absolute path: it must start with '/', have no '..' "
                   "component, and use only letters, digits and . _ + @ = - between the slashes (at most "
                   "{limit} characters)", value=_shown(value), limit=MAX_PATH)
    return value.rstrip("/") or "/"


def rel_or_abs_path(value: str) -> str:
    return abs_path(value) if value.startswith("/") else abs_path("/" + value)[1:]


def _shown(value: str) -> str:
    """A value as a message shows it: repr, cut to a bounded excerpt (tokens and named values hidden before
    the cut, which would otherwise leave a token too short to recognise)."""
    size = len(value)
    value = redact_text(value)
    return repr(value) if len(value) <= 80 else repr(value[:80]) + f"... ({size} characters)"


def word(value: str) -> str:
    if not _WORD.fullmatch(value):
        raise _err("word", "{value} is not a single word: 1-128 letters, digits and _ . + : -, starting with "
                   "a letter or digit", value=_shown(value))
    return value


def gpus(value: str) -> str:
    if not _GPUS.fullmatch(value):
        raise _err("gpus", "{value} is not a docker --gpus value: all, a count, or device=ID[,ID...]",
                   value=_shown(value))
    return value


def device(value: str) -> str:
    parts = value.split(":")
    perms = parts.pop() if len(parts) == 3 or (len(parts) == 2 and not parts[1].startswith("/")) else "rwm"
    if not 1 <= len(parts) <= 2 or not perms or set(perms) - set("rwm"):
        raise _err("device", "{value} is not a --device value: /dev/HOST[:/dev/CONTAINER][:rwm]",
                   value=_shown(value))
    for part in parts:
        abs_path(part)
    return value


def free_text(value: str) -> str:
    if len(value) > MAX_DESCRIPTION or _FREE_TEXT_REFUSED.search(value):
        raise _err("free_text", "free text takes at most {limit} characters and no control characters "
                   "other than line breaks and tabs", limit=MAX_DESCRIPTION)
    return value


def arg_text(value: str) -> str:
    if "\0" in value:
        raise _err("arg_text", "{value} contains a NUL character, which no command-line argument can carry",
                   value=_shown(value))
    if len(value) > MAX_ARG or _ARG_TEXT_REFUSED.search(value):
        raise _err("arg_text", "{value} cannot be an argument: at most {limit} characters, no line break or "
                   "other control character", value=_shown(value), limit=MAX_ARG)
    return value


def list_arg(value: str) -> str:
    arg_text(value)
    if value.startswith("-"):
        raise _err("list_arg", "{value} starts with '-': in a list it would be read as another flag; give "
                   "flags their own key under engine.args", value=_shown(value))
    return value


def launcher_word(value: str) -> str:
    text(value)
    if value.startswith("--"):
        raise _err("launcher_word", "{value} is a long option: engine flags belong under engine.args (where "
                   "they are checked), not in the launcher", value=_shown(value))
    return value


def launcher_program(words: list[str]) -> list[str]:
    """The launcher's first word is the program docker starts (the plan's --entrypoint), never an option."""
    if words and words[0].startswith("-"):
        raise _err("launcher_program", "{value} is an option, but the launcher's first word is the program the "
                   "container starts (docker run --entrypoint {value} would try to execute it)", value=_shown(words[0]))
    return words


def ulimit_value(value: str | int) -> str | int:
    parts = str(value).split(":")
    try:
        numbers = [int(part, 10) for part in parts]
    except ValueError:
        numbers = []
    if not 1 <= len(parts) <= 2 or len(numbers) != len(parts) or any(not -1 <= n <= INT64_MAX for n in numbers):
        raise _err("ulimit", "{value} is not a ulimit: soft[:hard], each -1 (unlimited) or 0..2^63-1",
                   value=_shown(str(value)))
    return value


def docker_size(value: str | int) -> str:
    text = str(value)
    if not _DOCKER_SIZE.fullmatch(text):
        raise _err("size", "{value} is not a size: a whole number with an optional unit b, k, m or g "
                   "(e.g. 112g)", value=repr(text))
    return text


_SIZE_SHIFT = {"": 0, "b": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}


def docker_size_bytes(text: str) -> int:
    """Bytes of a docker size as docker reads it (go-units RAMInBytes: binary units, i and b optional)."""
    digits = text.rstrip("bBiI")
    unit = digits[-1].lower() if digits and not digits[-1].isdigit() else ""
    return int(digits[:-1] if unit else digits) << _SIZE_SHIFT[unit]


def env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise _err("env_name", "{value} is not an environment variable name: use A-Z, 0-9 and '_', "
                   "not starting with a digit", value=repr(value))
    return value


def iface(value: str) -> str:
    if not _IFNAME.fullmatch(value):
        raise _err("ifname", "{value} is not a network interface name (at most 15 characters: letters, "
                   "digits, '_', '.', ':', '-')", value=repr(value))
    return value


def ssh(value: str) -> str:
    if not _SSH.fullmatch(value):
        raise _err("ssh_target", "{value} is not an ssh target: expected host or user@host", value=repr(value))
    return value


def image(value: str) -> str:
    _, at, digest = value.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        raise _err("image_digest", "{value}: a digest is complete only as sha256: followed by 64 lower-case hex "
                   "digits, got {digest} ({count} after sha256:)", value=repr(value), digest=repr(digest),
                   count=len(digest.removeprefix("sha256:")))
    if len(value) > 255 or not _IMAGE.fullmatch(value):
        raise _err("image", "{value} is not a docker image reference (e.g. registry/name:tag)", value=repr(value))
    return value


def text(value: str) -> str:
    if len(value) > MAX_TEXT:
        raise _err("text", "{value} is longer than {limit} characters", value=_shown(value), limit=MAX_TEXT)
    if not _SAFE_TEXT.fullmatch(value):
        raise _err("text", "{value} must be printable ASCII with no leading or trailing space", value=_shown(value))
    return value


ArgScalar = str | int | float | bool


def arg_value(value: ArgScalar | list[ArgScalar]) -> ArgScalar | list[ArgScalar]:
    # An argv element is a C string: bash cannot hold a NUL byte, let alone pass it on.
    if any(isinstance(item, str) and "\0" in item for item in (value if isinstance(value, list) else [value])):
        raise _err("arg_value", "{value} contains a NUL character, which no command-line argument can carry",
                   value=repr(value))
    # The same grammar as engine.args: bounded, no control characters, no list item that reads as a flag.
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            list_arg(item)
    if isinstance(value, str):
        arg_text(value)
    return value


def rdma(value: str) -> str:
    if not _RDMA.fullmatch(value):
        raise _err("rdma_name", "{value} is not an RDMA device name: expected up to 63 letters, digits, '_', '.', "
                   "'-', starting with a letter or digit, as `ls /sys/class/infiniband` prints it (e.g. mlx5_0)",
                   value=repr(value))
    return value


def snapshot(value: str) -> str:
    if not _SNAPSHOT.fullmatch(value) or value in (".", ".."):
        raise _err("snapshot", "{value} is not a snapshot directory name (letters, digits, '.', '_', '-'); a model "
                   "path takes one of three forms: an HF cache (repo + snapshot: <repo>/snapshots/<snapshot>), a "
                   "plain directory (repo alone, no snapshot) or a hub id (hub_id, no repo or snapshot)",
                   value=repr(value))
    return value


def container_name(value: str) -> str:
    if not _CONTAINER_NAME.fullmatch(value):
        raise _err("container_name", "{value} is not a docker container name: 2-128 letters, digits and _ . -, "
                   "starting with a letter or digit", value=_shown(value))
    return value


def hub_id(value: str) -> str:
    if not _HUB_ID.fullmatch(value) or "--" in value or ".." in value:
        raise _err("hub_id", "{value} is not a Hugging Face hub id: owner/name, each letters, digits and . _ - "
                   "(no '--' or '..')", value=_shown(value))
    return value


def gguf(value: str) -> str:
    if not _GGUF.fullmatch(value):
        raise _err("gguf", "{value} is not a GGUF quantization type: the end of a .gguf file name in the repo "
                   "(e.g. Q6_K, Q4_K_M, UD-Q4_K_XL), 1-64 letters, digits, '_' and '-'", value=_shown(value))
    return value


def docker_user(value: str) -> str:
    if not _USER.fullmatch(value):
        raise _err("docker_user", "{value} is not a docker --user value: name or uid, optionally :group or :gid",
                   value=_shown(value))
    return value


def security_opt(value: str) -> str:
    if not _SECURITY_OPT.fullmatch(value):
        raise _err("security_opt", "{value} is not a docker --security-opt value: key[=value] such as "
                   "seccomp=unconfined or no-new-privileges", value=_shown(value))
    return value


def cpuset(value: str) -> str:
    if not _CPUSET.fullmatch(value):
        raise _err("cpuset", "{value} is not a CPU list: numbers and ranges joined by commas, e.g. 0-9,12",
                   value=_shown(value))
    return value


def kwarg_name(value: str) -> str:
    if not _KWARG.fullmatch(value):
        raise _err("kwarg_name", "{value} is not a chat-template keyword: a Python identifier such as "
                   "enable_thinking", value=_shown(value))
    return value


def check_hardware(value: str) -> str:
    """A hardware catalog entry that exists."""
    if value not in HARDWARE:
        raise unknown_choice("hardware", value, sorted(HARDWARE))
    return value


def check_secret_ref(ref: SecretRef) -> SecretRef:
    """A secret reference names exactly one place: a file or a variable."""
    if (ref.file is None) == (ref.env is None):
        raise PydanticCustomError("secret_ref", "a secret reference takes exactly one of file or env")
    return ref


def check_rdma_resource(rdma: KubernetesRdma) -> KubernetesRdma:
    """kubernetes.rdma: a device plugin's resource is named with mode device-plugin, and only then."""
    if (rdma.mode == "device-plugin") != (rdma.resource is not None):
        raise PydanticCustomError("rdma_resource", "rdma.resource is needed with mode device-plugin, and only then")
    return rdma


def check_previous_stack(stack: PreviousStack) -> PreviousStack:
    """operations.previous_stack: a unit, or both a stop and a relaunch command, never both ways."""
    if stack.unit is not None and (stack.stop or stack.relaunch):
        raise ValueError("give either unit or stop/relaunch commands, not both")
    if stack.unit is None and not (stack.stop and stack.relaunch):
        raise ValueError("give a unit, or both a stop and a relaunch command")
    return stack


def check_overlay_size(value: str | int) -> str:
    """An overlay size as the container's parser reads it (spark_compile.overlay.values.parse_size)."""
    text = str(value)
    try:
        parse_size(text)
    except FlagValueError as exc:
        raise PydanticCustomError("overlay_size", str(exc)) from None
    return text


def check_overlay_rows(value: str) -> str:
    """An overlay row list as the container's parser reads it (spark_compile.overlay.values.parse_rows)."""
    try:
        parse_rows(value)
    except FlagValueError as exc:
        raise PydanticCustomError("overlay_rows", str(exc)) from None
    return value


def check_aliases_overlay(model: Model) -> Model:
    """model.aliases are answered by the overlay, which runs only with model.engram."""
    if model.aliases and model.engram is None:
        raise PydanticCustomError(
            "aliases_without_overlay", "model.aliases are answered by the Spark overlay, which runs only with "
            "model.engram: without it they would be dropped silently; remove them or add model.engram")
    return model


def check_model_source(source: _Source) -> _Source:
    """A model (or draft model) is a host directory (repo, with snapshot for an HF cache) or a hub id."""
    if (source.repo is None) == (source.hub_id is None):
        raise PydanticCustomError(
            "model_source", "a model path takes one of three forms: an HF cache (repo + snapshot), a plain "
            "directory (repo alone) or a hub id (hub_id alone, resolved in the container's HF cache); give "
            "exactly one of repo or hub_id")
    if source.hub_id is not None and source.snapshot is not None:
        raise PydanticCustomError(
            "model_source", "snapshot names a directory under <repo>/snapshots/ of an HF cache; a hub id "
            "(hub_id) has no repo: remove snapshot, or give repo + snapshot instead of hub_id")
    if source.gguf is not None and source.hub_id is None:
        raise PydanticCustomError(
            "model_source", "gguf picks the .gguf file of a hub repo (--model-path <hub_id>:<gguf>, which SGLang "
            "downloads); a directory (repo) has no such form: give hub_id instead of repo, or remove gguf")
    return source


def check_operator_check(check: OperatorCheck) -> OperatorCheck:
    """A window gate check takes exactly one of expect or pattern, and a pattern compiles."""
    if (check.expect is None) == (check.pattern is None):
        raise PydanticCustomError("window_expectation", "check '{name}' needs exactly one of expect (an exact "
                                  "answer) or pattern (a regular expression)", {"name": check.name})
    if check.pattern is not None:
        problem = pattern_problem(check.pattern)
        if problem:
            raise PydanticCustomError("window_pattern", "check '{name}': pattern '{pattern}' is {why}",
                                      {"name": check.name, "pattern": check.pattern[:80], "why": problem})
    return check


def check_window_names(window: Window) -> Window:
    """The window's operator checks have distinct names."""
    names = [check.name for check in window.checks]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise PydanticCustomError("window_names", "operator check names must be distinct: {names} repeated",
                                  {"names": ", ".join(repeated)})
    return window
