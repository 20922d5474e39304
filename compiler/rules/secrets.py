"""SC23x: secrets by reference — a profile never holds a token or password literally."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spark_compile.rules import Context, Hit, rule
from spark_compile.spec.record import as_data
from spark_compile.spec.secret_patterns import looks_secret


def _leaves(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _leaves(value, (*path, index))
    else:
        yield path, data


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


@rule("SC230", "error", "literal secret in a profile",
      "Profiles are committed, diffed and reviewed: a token, password or API key must not be in one. Name "
      "where the value lives on the node instead; the unit reads it at start into a root-only runtime file.",
      "engine:\n  env: {HF_TOKEN: hf_abc...}", "secrets:\n  env:\n    HF_TOKEN: {file: /etc/spark-compile/hf-token}")
def literal_secrets(ctx: Context) -> Iterator[Hit]:
    data = {key: value for key, value in as_data(ctx.profile).items() if key != "secrets"}
    for path, value in _leaves(data):
        if not isinstance(value, str) or not ctx.present(path):
            continue
        name = str(path[-1]).upper().replace("-", "_")
        if looks_secret(name, value):
            hint = (f"move it to secrets.env.{path[-1]}: {{file: /path/on/node}}" if path[:2] == ("engine", "env")
                    else "reference it from the secrets section instead")
            yield Hit(path, f"{_dotted(path)} holds a literal secret", hint, redact=value)


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
