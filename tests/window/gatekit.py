"""A gate folder for tests: the package's static gate.py, gate_scoring.py and smoke.py beside a fleet.json
taken from the committed reference build (so the keys are the compiler's), with the API and window
settings a test asks for; and the fake OpenAI server of the fleet test, started on loopback."""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "templates" / "fleet" / "static"
REFERENCE_FLEET_JSON = ROOT / "generated" / "dsv41-4spark" / "fleet" / "fleet.json"
FAKE = ROOT / "tests" / "fleet" / "fake_openai.py"
GATE_FILES = ("gate.py", "gate_scoring.py", "smoke.py", "fleet_io.py")
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def gate_folder(folder: Path, **config: Any) -> Path:
    """folder/ with the gate's files and a fleet.json: the reference one updated with ``config``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in GATE_FILES:
        shutil.copy(STATIC / name, folder / name)
    data = json.loads(REFERENCE_FLEET_JSON.read_text())
    window = {**data["window"], **config.pop("window", {})}
    data.update(config, window=window)
    (folder / "fleet.json").write_text(json.dumps(data))
    return folder


def import_gate(folder: Path) -> tuple[ModuleType, ModuleType]:
    """(gate, smoke) imported from a gate folder (fresh modules each time)."""
    for name in ("gate", "smoke", "gate_scoring"):
        sys.modules.pop(name, None)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("gate"), importlib.import_module("smoke")
    finally:
        sys.path.remove(str(folder))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def fake_api(folder: Path, control: dict[str, Any]) -> Iterator[tuple[int, Path]]:
    """The fake OpenAI server on 127.0.0.1: (port, control file); faults change by rewriting the file."""
    port = free_port()
    control_file = folder / "control.json"
    control_file.write_text(json.dumps(control))
    proc = subprocess.Popen([sys.executable, str(FAKE), "--host", "127.0.0.1", "--port", str(port),
                             "--control", str(control_file), "--log", str(folder / "requests.jsonl"),
                             "--smoke", str(folder / "smoke.py")], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with NO_PROXY.open(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the fake API did not start") from None
                time.sleep(0.1)
        yield port, control_file
    finally:
        proc.kill()
        proc.wait(timeout=10)


def run_gate(folder: Path, port: int, *args: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """gate.py against 127.0.0.1:port: (exit status, its GATE-RESULT records by check, its output)."""
    proc = subprocess.run([sys.executable, str(folder / "gate.py"), "--host", "127.0.0.1", "--port", str(port),
                           *args], capture_output=True, text=True, timeout=300, check=False)
    records = {}
    for line in proc.stdout.splitlines():
        if line.startswith("GATE-RESULT "):
            record = json.loads(line.removeprefix("GATE-RESULT "))
            records[record["name"]] = record
    return proc.returncode, records, proc.stdout + proc.stderr
