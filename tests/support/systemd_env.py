"""systemd's own parse of an ``EnvironmentFile=``, obtained offline from a real systemd binary.

How. Without systemd as PID 1 nothing executes a unit, so nothing loads an EnvironmentFile= for real:
``systemd-run`` needs the manager; ``systemd-analyze verify`` loads units but reads EnvironmentFile= only
at exec time (a missing file is not even reported); ``systemd-analyze dump`` asks the manager;
``systemd-executor`` does not exist before v255. One real binary does run the very same parser:
``/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator`` reads
``$XDG_CONFIG_HOME/environment.d/*.conf`` with ``merge_env_file()``, which drives the same
``parse_env_file_internal()`` (src/basic/env-file.c) as EnvironmentFile='s ``load_env_file()`` — same
quoting, escapes, comments, continuation lines and whitespace trimming — then prints the result.

The two readers differ only in what they do with each parsed (key, value):

1. environment.d expands ``$X``/``${X}``/``${X:-y}`` in values; EnvironmentFile= keeps ``$`` literal.
   We double every ``$`` of the input. ``$`` means nothing to the parser except after ``\\`` inside double
   quotes, where ``\\$$`` gives ``$$`` just as ``\\$`` gives ``$``; so the parsed value is exactly the true
   value with each ``$`` doubled, and the expansion turns each ``$$`` back into one ``$``.
2. A key with no value (``A=``, ``A=""``, ``A=''``) reaches the callback as NULL: environment.d logs
   "invalid syntax (around "A"), ignoring." and drops it; EnvironmentFile= sets ``A`` to "". We run the
   generator with debug logging, which logs every assignment in order ("FILE:N: setting K=V"), replay
   those events, and give "" to a key whose last event was such an empty assignment.
3. Invalid names (``export A``, ``A-B``): environment.d logs and drops them; EnvironmentFile= keeps them in
   the parse and its loader then drops them (``strv_env_clean_with_callback`` in exec_context_load_
   environment, logging "Ignoring invalid environment assignment"). Same result: dropped, with a warning.

The generator's stdout (``KEY=VALUE``, VALUE through ``shell_maybe_quote()``: bare, or ``"..."`` with
``\\`` before ``"``, ``\\``, backquote and ``$`` and C escapes for control characters) gives the final
values; the machine's other environment.d files (/etc/environment.d ...) are read too, but our file sorts
last (``~`` name) and only keys our file assigned are reported.

The parser is this machine's systemd 252. A v254 change: a comment line ending in ``\\`` no longer
continues the comment onto the next line; the fleet's systemd may be newer, so the compiler should refuse
such text rather than rely on either reading.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

GENERATOR_PATHS = (
    "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator",
    "/lib/systemd/user-environment-generators/30-systemd-environment-d-generator",
)
PROBE_NAME = "~~~spark-compile-probe.conf"  # '~' sorts after every ASCII name: our file is read last
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # env_name_is_valid()


def _generator() -> str:
    for path in GENERATOR_PATHS:
        if os.access(path, os.X_OK):
            return path
    from .tools import require_tool

    return require_tool("30-systemd-environment-d-generator")  # not on PATH: fails in CI / skips


def _parse_generator_stdout(out: str) -> dict[str, str]:
    """Inverse of the generator's ``printf("%s=%s\\n", key, shell_maybe_quote(value, 0))``: a value with
    whitespace, control or shell-special characters is put in double quotes, ``\\`` goes before ``"``,
    ``\\``, backquote and ``$``, and control characters are C-escaped (``\\n``, ``\\t``, ``\\033``)."""
    env: dict[str, str] = {}
    i = 0
    while i < len(out):
        eq = out.index("=", i)
        key = out[i:eq]
        i = eq + 1
        if out.startswith('"', i):
            buf: list[str] = []
            i += 1
            while out[i] != '"':
                if out[i] != "\\":
                    buf.append(out[i])
                    i += 1
                elif out[i + 1] in "01234567":  # cescape_char(): other control bytes as \ooo
                    buf.append(chr(int(out[i + 1 : i + 4], 8)))
                    i += 4
                else:
                    buf.append(_C_ESCAPES.get(out[i + 1], out[i + 1]))
                    i += 2
            value = "".join(buf)
            i += 1
        else:
            end = out.find("\n", i)
            end = len(out) if end < 0 else end
            value, i = out[i:end], end
        if out.startswith("\n", i):
            i += 1
        env[key] = value
    return env


def _replay_log(stderr: str, probe_path: str, warnings: list[str] | None) -> dict[str, str]:
    """Our file's assignments from the generator's debug log, in order: key -> "set" | "empty"."""
    prefix = re.escape(probe_path) + r":(\d+): "
    set_re = re.compile(prefix + r"setting ([^=\n]*)=")
    empty_re = re.compile(prefix + r'invalid syntax \(around "(.*)"\), ignoring\.$')
    other_re = re.compile(prefix + r"(.*)$")
    last: dict[str, str] = {}
    reading_ours = False
    for line in stderr.splitlines():
        if line.startswith("Reading "):
            if reading_ours:
                raise RuntimeError(f"an environment.d file sorts after our probe: {line}")
            reading_ours = line.startswith(f"Reading {probe_path}")
        elif m := set_re.match(line):
            last[m.group(2)] = "set"
        elif m := empty_re.match(line):
            key = m.group(2).replace("$$", "$")
            if _NAME.fullmatch(key):
                last[key] = "empty"
            elif warnings is not None:
                warnings.append(f"{m.group(1)}: invalid variable name {key!r}, ignoring")
        elif (m := other_re.match(line)) and warnings is not None:
            warnings.append(f"{m.group(1)}: {m.group(2).replace('$$', '$')}")
    return last


def systemd_environment(env_file_text: str, *, warnings: list[str] | None = None) -> dict[str, str]:
    """What systemd's ``EnvironmentFile=`` makes of ``env_file_text`` (see the module docstring).

    Returns the variables in order of first assignment. Lines systemd ignores with a message (invalid
    names, ...) are appended to ``warnings`` when given, as ``"LINE: message"`` (systemd's LINE: it counts
    the newline that ends the assignment, so it is often one past the line).
    Raises ValueError for text that cannot be a file systemd reads (NUL bytes).
    """
    if "\0" in env_file_text:
        raise ValueError("env file text contains NUL")
    generator = _generator()
    with tempfile.TemporaryDirectory(prefix="sdenv-") as tmp:
        conf_dir = Path(tmp, "environment.d")
        conf_dir.mkdir()
        probe = conf_dir / PROBE_NAME
        probe.write_text(env_file_text.replace("$", "$$"), encoding="utf-8")
        proc = subprocess.run(
            [generator],
            env={
                "XDG_CONFIG_HOME": tmp,
                "HOME": tmp,
                "SYSTEMD_LOG_LEVEL": "debug",
                "SYSTEMD_LOG_TARGET": "console",
                "SYSTEMD_LOG_COLOR": "0",
                "SYSTEMD_LOG_TIME": "0",
                "SYSTEMD_LOG_LOCATION": "0",
            },
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        probe_path = str(probe)
    if proc.returncode != 0:
        raise RuntimeError(f"{generator} failed ({proc.returncode}):\n{proc.stderr}")
    final = _parse_generator_stdout(proc.stdout)

    last = _replay_log(proc.stderr, probe_path, warnings)
    result: dict[str, str] = {}
    for key, kind in last.items():
        if kind == "empty":
            result[key] = ""
        elif key in final:
            result[key] = final[key]
        else:
            raise RuntimeError(f"generator logged {key} but did not print it:\n{proc.stdout}")
    return result
