"""compile(import(x)) against x, per rank: engine options, environment and docker options, each side read by the
same parser and normalised the same way (every normalisation listed in NORMALISATIONS)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from spark_compile.importer.argv import parse_engine, resolve_flag
from spark_compile.importer.shell import ShellWord
from spark_compile.importer.source import Launch, Origin
from spark_compile.importer.tables import SUPERVISION
from spark_compile.pipeline import Planned, Rejected, run

NORMALISATIONS = (
    "engine flags: SGLang's aliases and argparse abbreviations read as the flag they stand for (--tp: --tp-size)",
    "engine and docker options: `--flag=value` read as `--flag value`",
    "engine and docker options compared as multisets: order is not compared",
    "docker: -i/-t dropped from the source (the systemd unit runs the container without a terminal); "
    "`--restart no`, --entrypoint and the generated --env-file options dropped "
    "from the compiled line (the entrypoint is compared as the launcher, the variables as environment)",
    "docker -v: compared as (host, container, read-only)",
    "values of SGLang's float flags compared as numbers (the plan writes fractions with two decimals: 0.8 as 0.80)",
    "--disable-cuda-graph and SGLang 0.5.23's spelling of it (--cuda-graph-backend-decode disabled "
    "--cuda-graph-backend-prefill disabled) compared as one setting; so are 0.5.10's --cuda-graph-max-bs and "
    "--cuda-graph-bs with 0.5.23's --cuda-graph-max-bs-decode and --cuda-graph-bs-decode",
)
_RENAMED = {"--cuda-graph-max-bs": "--cuda-graph-max-bs-decode", "--cuda-graph-bs": "--cuda-graph-bs-decode"}
_GRAPHS_OFF = (("--cuda-graph-backend-decode", ("disabled",)), ("--cuda-graph-backend-prefill", ("disabled",)))


@dataclass(frozen=True)
class Sides:
    """One rank's three comparisons: what only the source has, what only the compiled profile has."""

    engine: tuple[Counter[tuple[str, tuple[str, ...]]], Counter[tuple[str, tuple[str, ...]]]]
    env: tuple[dict[str, str], dict[str, str]]
    docker: tuple[Counter[tuple[str, str | None]], Counter[tuple[str, str | None]]]


def _value(flag: str, value: str) -> str:
    entry, _ = resolve_flag(flag)
    if entry is not None and entry.kind == "float":
        try:
            return repr(float(value))
        except ValueError:
            return value
    return value


def engine_options(words: list[str]) -> Counter[tuple[str, tuple[str, ...]]]:
    """An engine argv (what follows the launcher) as a multiset of canonical (flag, values)."""
    return _engine(["python3", "-m", "sglang.launch_server", *words])


def _engine(words: list[str]) -> Counter[tuple[str, tuple[str, ...]]]:
    command = parse_engine([ShellWord(w, Origin("-", 0)) for w in words])
    found = Counter((_RENAMED.get(o.flag, o.flag), tuple(_value(o.flag, v) for v in o.values))
                    for o in command.options)
    if all(found[option] for option in _GRAPHS_OFF):
        found.subtract(_GRAPHS_OFF)
        found[("--disable-cuda-graph", ())] += 1
    return +found


def _docker(launch: Launch) -> Counter[tuple[str, str | None]]:
    found: Counter[tuple[str, str | None]] = Counter()
    dropped = set(SUPERVISION)
    for flag, value in launch.options:
        name = {"--volume": "-v", "--net": "--network", "--detach": "-d"}.get(flag.text, flag.text)
        if name in dropped or (name, value.text if value else None) == ("--restart", "no"):
            continue
        text = value.text if value else None
        if name == "-v" and text and text.count(":") == 1:
            text += ":rw"
        found[(name, text)] += 1
    return found


def compiled(profile: Path) -> Planned:
    """The profile through the whole pipeline: planned, with every finding (also when a rule refuses it)."""
    outcome = run(profile)
    if isinstance(outcome, Rejected):
        assert outcome.planned is not None, outcome.findings
        return outcome.planned
    return outcome


def compare(source: Launch, planned: Planned, rank: int) -> Sides:
    """The differences between the source's launch of ``rank`` and the compiled profile's."""
    from spark_compile.importer.docker_run import parse_launch

    ours = planned.plan.ranks[rank]
    words = [ShellWord(w, Origin("plan", 0)) for w in ours.docker_argv]
    mine = parse_launch(words, Path("."), [])
    assert mine is not None
    env = {name: value for env_file in ours.env_files for name, value in env_file.values}
    src_engine = _engine([w.text for w in source.command])
    our_engine = _engine([w.text for w in mine.command])
    src_env = {name: value for name, value, _ in source.env}
    src_docker, our_docker = _docker(source), _docker(mine)
    return Sides(
        (src_engine - our_engine, our_engine - src_engine),
        ({k: v for k, v in src_env.items() if env.get(k) != v}, {k: v for k, v in env.items() if src_env.get(k) != v}),
        (src_docker - our_docker, our_docker - src_docker),
    )
