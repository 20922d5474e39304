"""The fleet scripts' command lines, enumerated from the scripts themselves (the shell scripts' usage tables,
the Python scripts' argparse parsers, audit.py's docstring synopsis), and the hostile values each surface is
run with by test_cli_inputs.py, which fails when a script grows a command or an option FLEET_INPUTS lacks.

Every run happens in an installed fleet folder under the test's tmp_path with ssh, scp, sudo, systemctl,
docker and curl replaced by stand-ins that fail: no node is contacted, no unit touched. A value that names a
file is relative (it lands in the test's folder) or a special file of the test's own (@fifo, @victim-link).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from round2 import CANARY

from spark_compile.fleet.scripts import MODULES, SOURCED, STATIC_SCRIPTS

from conftest import ROOT

STATIC = ROOT / "templates" / "fleet" / "static"
AUDIT = ROOT / "compiler" / "fleet" / "audit.py"  # ships as fleet/audit.py
RUN = {name for name in [*STATIC_SCRIPTS, *MODULES] if name not in SOURCED}  # what an operator runs
PYTHON_SCRIPTS = sorted(name for name in RUN if name.endswith(".py") and name != "audit.py")  # argparse ones
USAGE_LINES = ("verify.sh", "watchdog.sh")  # shell scripts whose usage line is their synopsis
STAND_INS = ("ssh", "scp", "rsync", "sudo", "systemctl", "journalctl", "docker", "curl", "nvidia-smi")

_CODE = (f"$(touch {CANARY})", f"`touch {CANARY}`", f"a[$(touch {CANARY})]")
NUMBERS = ("", "0", "-1", "1e400", "9" * 400, "1" + "0" * 40, "0x10", "\u0663", " 5", "nan", "inf", "a\nb", *_CODE)
TEXTS = ("", "-x", "a\nb", "\x1b[2J", "\u202ex", "x" * 5000, "'", "%n", *_CODE)
EXTRA = ("-x", "--help=x", "a\nb", "x" * 5000, *_CODE)  # an argument where a command takes none (or no more)
# Where a script writes or reads a file: relative names (the test's folder) and the test's own special files.
FILES = ("", "-x", "a\nb", "\x1b[31mred", "x" * 5000, "~", "no/such/dir/x", "@fifo", "@dangling", "@victim-link",
         "@dir", *_CODE)
READS = (*FILES, "/dev/null", "/dev/zero", "/proc/self/mem")


# -- enumeration ------------------------------------------------------------------------------------------------
def _parts(words: list[str], command: str) -> list[str]:
    """Options and positionals of a synopsis's words, up to its description's first word: an option's value
    (S, DIR, text|json, audit.json) is not one."""
    parts: list[str] = []
    value_next = False
    for word in words:
        if word in ("|", command):
            continue
        if re.fullmatch(r"[a-z']+,?", word) and not value_next:
            break  # the description (on the synopsis's line after one space)
        if word.startswith("-"):
            parts.append(word)
            value_next = True
        elif (value_next and word.isupper()) or (value_next and "|" in word) or (value_next and "." in word):
            value_next = False
        else:
            parts.extend(word.split("|"))
            value_next = False
    return parts


def _synopsis_surfaces(script: str, synopses: list[str], commands: bool) -> set[str]:
    found: set[str] = set()
    for synopsis in synopses:
        words = synopsis.replace("[", " ").replace("]", " ").split()
        command = words.pop(0) if commands else ""
        found |= {f"{script} {command}".strip()} if commands else set()
        found |= {" ".join(filter(None, (script, command, part))) for part in _parts(words, command)}
    return found


def shell_surfaces() -> set[str]:
    """launch.sh's commands (its header table) with their options, verify.sh's and watchdog.sh's usage lines,
    and audit.py's synopsis."""
    launch = re.findall(r"^#   launch\.sh (\S.*?)(?: {2,}.*)?$", (STATIC / "launch.sh").read_text(), re.M)
    found = _synopsis_surfaces("launch.sh", launch, commands=True)
    for script in USAGE_LINES:
        found |= _synopsis_surfaces(script, re.findall(r'usage: \$0 ([^"]*)"', (STATIC / script).read_text()),
                                    commands=False)
    audit = re.findall(r"^    audit\.py (\S.*?)(?: {2,}.*)?$", AUDIT.read_text(), re.M)
    return found | _synopsis_surfaces("audit.py", audit, commands=False)


def case_options() -> set[str]:
    """Every long option the shell scripts' command-line `case` branches match (documented or not)."""
    labels = (re.findall(r"^\s*((?:--[a-z][-a-z]*)(?:\s*\|\s*[-a-z]+)*)\)", (STATIC / name).read_text(), re.M)
              for name in ("launch.sh", "verify.sh", "watchdog.sh", "window.sh"))
    return {word.strip() for found in labels for label in found for word in label.split("|")
            if word.strip().startswith("--")}


_INTROSPECT = """
import argparse, importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
class Caught(Exception):
    pass
def caught(self, *args, **kwargs):
    raise Caught(self)
argparse.ArgumentParser.parse_args = caught
found = []
def walk(parser, prefix):
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                walk(sub, prefix + [name])
            continue
        found.append(" ".join(prefix + [action.option_strings[-1] if action.option_strings else action.dest]))
for name in sys.argv[2:]:
    spec = importlib.util.spec_from_file_location(name[:-3], f"{sys.argv[1]}/{name}")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.main([])
    except Caught as exc:
        walk(exc.args[0], [name])
print(json.dumps(found))
"""


def python_surfaces(fleet: Path) -> set[str]:
    """Every argument of the Python fleet scripts' argparse parsers (subcommands walked), as installed."""
    proc = subprocess.run([sys.executable, "-c", _INTROSPECT, str(fleet), *PYTHON_SCRIPTS], capture_output=True,
                          text=True, check=True, timeout=60)
    return set(json.loads(proc.stdout))


# -- the hostile values -------------------------------------------------------------------------------------------
Argv = Callable[[Path, str], list[str]]  # (the installed fleet folder, the value) -> the script and its arguments


@dataclass(frozen=True)
class Surface:
    """A surface's hostile values and the command line around one."""

    values: tuple[str, ...]
    argv: Argv
    usage: bool = False  # every value is a usage error (64) before anything runs


def _at(*words: str) -> Argv:
    """The words with "V" replaced by the value and "CANDIDATE" by the installed profile folder."""
    return lambda fleet, v: [v if w == "V" else str(fleet.parent) if w == "CANDIDATE" else w for w in words]


_SMOKE = ("--host", "127.0.0.1", "--port", "9", "--timeout", "1")  # a closed port on loopback: refused at once
_ROWS = ("--rows", "0:0:1")
_WRITE = {"dir": "verdicts", "candidate": "CANDIDATE", "gate": "gate.txt", "memory": "memory.txt",
          "nodes": "spark-0", "result": "pass", "reason": "r", "restored": "1", "started": "0", "stopped": "1",
          "log": "", "files": ""}


def _verdict(option: str) -> Argv:
    words = [w for name, value in _WRITE.items() for w in (f"--{name}", "V" if name == option else value)]
    return _at("verdict.py", "write", *words)


FLEET_INPUTS: dict[str, Surface] = {
    **{f"launch.sh {command}": Surface(EXTRA, _at("launch.sh", command, "V"), usage=command != "--help")
       for command in ("--help", "--dry-run", "preflight", "start", "arm", "stop", "restart", "rollback", "status",
                       "install", "audit")},
    "launch.sh start --no-wait": Surface(EXTRA, _at("launch.sh", "start", "--no-wait", "V")),
    "launch.sh start --rearm": Surface(EXTRA, _at("launch.sh", "start", "--rearm", "V")),  # the header's prose
    "launch.sh start --health-timeout": Surface(NUMBERS, _at("launch.sh", "start", "--health-timeout", "V")),
    "launch.sh postmortem": Surface(EXTRA, _at("launch.sh", "postmortem", "dir", "V")),
    "launch.sh postmortem DIR": Surface(FILES, _at("launch.sh", "postmortem", "V")),
    "launch.sh audit --format": Surface(TEXTS, _at("launch.sh", "audit", "--format", "V")),
    "launch.sh audit --save": Surface(FILES, _at("launch.sh", "audit", "--save", "V")),
    "launch.sh window": Surface(READS, _at("launch.sh", "window", "V")),
    "launch.sh window CANDIDATE": Surface(READS, _at("launch.sh", "window", "V", "--dry-run")),
    "launch.sh window --verdict-dir": Surface(FILES, _at("launch.sh", "window", "CANDIDATE", "--verdict-dir", "V",
                                                         "--dry-run")),
    "launch.sh window --dry-run": Surface(EXTRA, _at("launch.sh", "window", "CANDIDATE", "--dry-run", "V")),
    "launch.sh window --restore": Surface(EXTRA, _at("launch.sh", "window", "--restore", "V")),
    "verify.sh --timeout": Surface(NUMBERS, _at("verify.sh", "--timeout", "V")),
    "verify.sh --calibrate": Surface(FILES, _at("verify.sh", "--timeout", "1", "--calibrate", "V")),
    # The watchdog's words: check runs once, loop forever (its inputs are fleet.env and SPARK_*: test_fleet_surfaces).
    "watchdog.sh check": Surface(EXTRA, _at("watchdog.sh", "V"), usage=True),
    "watchdog.sh loop": Surface(("check\n", "loop;x", "\u200bcheck"), _at("watchdog.sh", "V"), usage=True),
    "audit.py --format": Surface(TEXTS, _at("audit.py", "--format", "V", ".")),
    "audit.py --plan": Surface(READS, _at("audit.py", "--plan", "V", ".")),
    "audit.py DIR": Surface(READS, _at("audit.py", "V")),
    **{f"{script} {option}": Surface(NUMBERS if option in ("--port", "--timeout") else TEXTS,
                                     _at(script, *_SMOKE, option, "V"))
       for script in ("smoke.py", "gate.py") for option in ("--host", "--port", "--model", "--timeout", "--only")},
    "smoke.py --needle-tokens": Surface((*NUMBERS, "1," + "9" * 400, "1," * 3000), _at("smoke.py", *_SMOKE,
                                                                                     "--needle-tokens", "V")),
    **{f"gate.py {option}": Surface(NUMBERS, _at("gate.py", *_SMOKE, option, "V", "--baseline-" + other, "1"))
       for option, other in (("--baseline-tps", "ttft"), ("--baseline-ttft", "tps"))},
    "gate.py --baseline-from": Surface(TEXTS, _at("gate.py", *_SMOKE, "--baseline-from", "V")),
    "verdict.py baseline dir": Surface(READS, _at("verdict.py", "baseline", "V")),
    **{f"verdict.py write --{name}": Surface(NUMBERS if name in ("started", "stopped") else
                                             READS if name in ("gate", "memory", "candidate") else
                                             FILES if name == "dir" else TEXTS, _verdict(name)) for name in _WRITE},
    "engram.py rows snapshot": Surface(READS, _at("engram.py", "rows", "V")),
    "engram.py rows --tp": Surface(NUMBERS, _at("engram.py", "rows", "snapshot", "--tp", "V")),
    "engram.py copy snapshot": Surface(READS, _at("engram.py", "copy", "V", "copy", *_ROWS)),
    "engram.py copy dest": Surface(FILES, _at("engram.py", "copy", "snapshot", "V", *_ROWS)),
    "engram.py copy --rows": Surface((*TEXTS, *NUMBERS, "0:0:" + "9" * 400, "0:1:0", "0:-1:1", "0:0:1," * 3000),
                                     _at("engram.py", "copy", "snapshot", "copy", "--rows", "V")),
    **{f"engram.py copy {option}": Surface(NUMBERS, _at("engram.py", "copy", "snapshot", "copy", *_ROWS, option,
                                                        "V")) for option in ("--slack", "--samples")},
    "engram.py verify snapshot": Surface(READS, _at("engram.py", "verify", "V", "copy")),
    "engram.py verify dest": Surface(READS, _at("engram.py", "verify", "snapshot", "V")),
    "engram.py verify --samples": Surface(NUMBERS, _at("engram.py", "verify", "snapshot", "copy", "--samples", "V")),
}
