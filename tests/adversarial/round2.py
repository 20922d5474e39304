"""Helpers of the issue-25 regression tests: a fake engine interpreter, an SGLang-style source tree that
plants a canary, and the checks every output of the round-2 suite must pass."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from hostile import Outcome

CANARY = Path("/tmp/spark-compile-round2-pwned")
# What no output line may hold raw: C0 (tab and newline aside), DEL, C1, LS/PS, bidi controls.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def assert_terminal_safe(outcome: Outcome) -> None:
    """Nothing printed can move the cursor, recolour the terminal or reorder the text shown."""
    for stream in (outcome.out, outcome.err):
        found = UNSAFE.search(stream)
        assert found is None, (f"U+{ord(found.group()):04X} printed raw", stream[max(0, found.start() - 80):
                                                                                 found.start() + 80])


def fake_engine(tmp: Path, answer: object, name: str = "python") -> Path:
    """An 'engine interpreter' that ignores its request and prints ``answer`` (JSON, or text as is)."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    (tmp / "answer").write_text(text)
    script = tmp / name
    script.write_text(f"#!/bin/sh\ncat >/dev/null\ncat {tmp / 'answer'}\n")
    script.chmod(0o755)
    return script


ENVIRON = '''import os
open({canary!r}, "w").write("environ.py ran")  # what a hostile tree does when it is imported


class EnvField:
    def __init__(self, default, deprecated_name=None):
        self.default = default


class EnvBool(EnvField):
    pass


class EnvInt(EnvField):
    pass


class Envs:
    SGLANG_ROUND2_SWITCH = EnvBool(False)
    SGLANG_ROUND2_SIZE = EnvInt(16 * 1024, deprecated_name="SGLANG_ROUND2_OLD_SIZE")


_DEPRECATED_ENVS = {{}}
'''


def hostile_tree(root: Path) -> Path:
    """An SGLang source tree whose environ.py and server_args.py write CANARY when run."""
    srt = root / "sglang" / "srt"
    srt.mkdir(parents=True)
    flags = "".join(f'        parser.add_argument("--flag-{i}", type=int, default={i}, help="Flag {i}.")\n'
                    for i in range(60))
    (srt / "server_args.py").write_text(
        f"open({str(CANARY)!r}, 'w').write('server_args.py ran')\n\n\nclass ServerArgs:\n"
        f"    @staticmethod\n    def add_cli_args(parser):\n{flags}")
    (srt / "environ.py").write_text(ENVIRON.format(canary=str(CANARY)))
    (root / "sglang" / "_version.py").write_text('__version__ = "9.9.9"\n')
    return root


def clean_env() -> dict[str, str]:
    """This process's environment without ENGINE_PYTHON (the implicit-interpreter tests need it unset)."""
    return {k: v for k, v in os.environ.items() if k != "ENGINE_PYTHON"}
