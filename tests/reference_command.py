"""The reference rank-0 `docker run` (tests/fixtures/reference), parsed as an operator would type it."""

from __future__ import annotations

import shlex

from conftest import DEPLOYMENT_TXT

# The document's <placeholders>, filled from the example site the reference profile describes.
FILL = {
    "<hf-repo-dir>": "/mnt/dsv41",
    "<writable-cache-dir>": "/home/spark/.cache/sgldsv41",
    "<engram-local-dir>": "/srv/engram-local/dsv41",
    "<snapshot>": "0f3c9a1d5e7b2468ace13579bdf02468ace13579",
    "<other-model-ids,comma-separated>": "deepseek-v4-flash,dsv41-flash",
    "<rdma-devices>": "rocep1s0f0,roceP2p1s0f0",
    "<this-node-fabric-ip>": "192.0.2.11",
    "<head-fabric-ip>": "192.0.2.11",
    "<fabric-iface>": "enp1s0f0np0",
    "<fabric-subnet>": "192.0.2.0",
    # Probed on the node at start: the plan leaves these to runtime.env (a documented difference).
    "<this-node-roce-v2-gid-index>": "<probed>",
    "<gid-index>": "<probed>",
}


def reference_argv() -> list[str]:
    """The rank-0 command as argv. Its continuation holds two comment lines that bash would cut the
    command at; they annotate the holder's variant, so they are dropped and the command read whole."""
    lines = DEPLOYMENT_TXT.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("docker run"))
    kept: list[str] = []
    for line in lines[start:]:
        if line.lstrip().startswith("#"):
            continue
        kept.append(line.rstrip())
        if not line.rstrip().endswith("\\"):
            break
    text = " ".join(line.removesuffix("\\") for line in kept)
    for placeholder, value in FILL.items():
        text = text.replace(placeholder, value)
    assert "<" not in text.replace("<probed>", ""), text
    return shlex.split(text)


def split_docker(argv: list[str]) -> tuple[list[tuple[str, str | None]], str, list[str]]:
    """(docker options as (flag, value) pairs, image, command after the image)."""
    takes_value = {"--name", "--restart", "--network", "--ipc", "--cap-add", "--gpus", "--shm-size",
                   "--memory", "--memory-swap", "--ulimit", "--device", "--oom-score-adj", "-v", "-e",
                   "--env-file", "--entrypoint"}
    assert argv[:2] == ["docker", "run"]
    options: list[tuple[str, str | None]] = []
    i = 2
    while argv[i].startswith("-"):
        if argv[i] in takes_value:
            options.append((argv[i], argv[i + 1]))
            i += 2
        else:
            options.append((argv[i], None))
            i += 1
    return options, argv[i], argv[i + 1:]


def engine_pairs(command: list[str]) -> dict[str, str | None]:
    """The engine flags after `-m sglang.launch_server` as {flag: value or None}."""
    assert command[:2] == ["-m", "sglang.launch_server"], command[:2]
    pairs: dict[str, str | None] = {}
    args = command[2:]
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            pairs[arg] = None if nxt is None or nxt.startswith("--") else nxt
    return pairs
