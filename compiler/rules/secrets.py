"""SC23x: secrets by reference — a profile never holds a token or password literally."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spark_compile.common.findings import dotted
from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.spec.secret_patterns import looks_secret


def _named(path: tuple[str | int, ...], value: str, siblings: Any) -> tuple[str, str]:
    """The name a value is given and the value: a key's, the flag's before it in a command (`--password`,
    `x`), or the left side of `--password=x` / `PASSWORD=x` in one word."""
    name = str(path[-1])
    if isinstance(path[-1], int) and isinstance(siblings, list):
        before = siblings[path[-1] - 1] if path[-1] else None
        if isinstance(before, str) and before.startswith("-") and "=" not in before:
            name = before.lstrip("-")
    left, equals, right = value.partition("=")
    if equals and left.lstrip("-").replace("-", "_").replace(".", "_").isidentifier():
        return left.lstrip("-"), right
    return name, value


@rule("SC230", "error", "literal secret in a profile",
      "Profiles are committed, diffed and reviewed: a token, password or API key must not be in one. Name "
      "where the value lives on the node instead; the unit reads it at start into a root-only runtime file.",
      "engine:\n  env: {HF_TOKEN: hf_abc...}", "secrets:\n  env:\n    HF_TOKEN: {file: /etc/spark-compile/hf-token}")
def literal_secrets(ctx: Context) -> Iterator[Hit]:
    for path, value, parent in ctx.written:
        if not isinstance(value, str) or path[0] == "secrets":
            continue
        name, shown = _named(path, value, parent)
        if looks_secret(name.upper().replace("-", "_"), shown):
            hint = (f"move it to secrets.env.{path[-1]}: {{file: /path/on/node}}" if path[:2] == ("engine", "env")
                    else "move it to secrets.api_key: {file: /path/on/node} (written at start to a root-only "
                    "engine config file, never into argv)" if name.lower().replace("-", "_") == "api_key"
                    else "let the command read it from a root-only file on the node (a --password-file option): "
                    "launch.sh logs every command it runs" if path[:2] == ("operations", "previous_stack")
                    else "reference it from the secrets section instead")
            yield Hit(path, f"{dotted(path)} holds a literal secret", hint, redact=value)


@rule("SC231", "error", "secret also set as a literal",
      "A variable listed under secrets.env is written at start from its reference; setting it in engine.env "
      "too would put two values in the container's environment.",
      "engine: {env: {HF_TOKEN: x}}\nsecrets: {env: {HF_TOKEN: {file: /etc/hf}}}",
      "secrets: {env: {HF_TOKEN: {file: /etc/hf}}}")
def secret_twice(ctx: Context) -> Iterator[Hit]:
    for name in ctx.profile.secrets.env:
        if name in ctx.profile.engine.env or name in ctx.profile.nccl.extra:
            section = ("engine", "env") if name in ctx.profile.engine.env else ("nccl", "extra")
            # At the literal: that is the line to remove.
            yield Hit((*section, name), f"{name} is a secret and also set literally",
                      f"remove {name} from {'.'.join(section)}", at_key=True)
