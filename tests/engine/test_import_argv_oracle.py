"""compiler/importer/argv.py reads an SGLang command line as SGLang's own argparse does: generated command lines
in every spelling a user writes (aliases, unique prefixes, `--x=v`, switches, lists, negative numbers) are
parsed by the importer, written back in its canonical spelling, and both lines are parsed by SGLang 0.5.23's
real parser (the engine venv) — the two namespaces must be equal. Every re-spelling is recorded, word for word."""

from __future__ import annotations

import random

import pytest

from spark_compile.importer.argv import parse_engine
from spark_compile.importer.source import Origin, Word

from sglang_parse import parse_engine_argvs_full

pytestmark = pytest.mark.engine

# (spellings a user may write, the values) for each flag: the first spelling is the one the plan writes.
FLAGS: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("--tp-size", "--tp", "--tensor-parallel-size"), ("4",)),
    (("--mem-fraction-static", "--mem-frac"), ("0.8",)),
    (("--kv-cache-dtype", "--kv-cache"), ("fp8_e4m3",)),
    (("--chunked-prefill-size",), ("-1",)),  # a value that starts with '-'
    (("--json-model-override-args", "--json-model"), ('{"a": [1, 2]}',)),
    (("--served-model-name", "--served"), ("m",)),
    (("--dist-init-addr", "--nccl-init-addr"), ("192.0.2.1:5000",)),
    (("--ep-size", "--ep", "--expert-parallel-size"), ("4",)),
    (("--trust-remote-code", "--trust-rem"), ()),
    (("--enable-metrics",), ()),
    (("--cuda-graph-bs-decode",), ("1", "2", "8")),  # nargs '+'
    (("--numa-node",), ("0", "1")),
    (("--model-checksum",), ()),  # nargs '?', given no value
]
MODEL = (("--model-path", "--model"), ("/models/m",))  # SGLang requires it: in every generated line
LAUNCHER = ["python3", "-m", "sglang.launch_server"]


def _words(texts: list[str]) -> list[Word]:
    return [Word(text, Origin("run.sh", 1)) for text in texts]


def _generated(seed: int) -> tuple[list[str], int]:
    """A command line of a random subset of FLAGS in random spellings and order, and how many re-spellings the
    importer must record for it."""
    rng = random.Random(seed)
    argv: list[str] = []
    changes = 0
    chosen = [MODEL, *rng.sample(FLAGS, rng.randint(0, len(FLAGS)))]
    rng.shuffle(chosen)
    for spellings, values in chosen:
        written = rng.choice(spellings)
        changes += written != spellings[0]
        if len(values) == 1 and rng.random() < 0.5:
            argv.append(f"{written}={values[0]}")
            changes += 1
        else:
            argv += [written, *values]
    return argv, changes


def _canonical(argv: list[str]) -> list[str]:
    cmd = parse_engine(_words([*LAUNCHER, *argv]))
    assert cmd.stray == [] and all(option.known for option in cmd.options), argv
    return [word for option in cmd.options for word in (option.flag, *option.values)]


def test_the_canonical_spelling_means_to_sglang_what_the_source_meant() -> None:
    lines = [_generated(seed)[0] for seed in range(40)]
    canonical = [_canonical(argv) for argv in lines]
    results = parse_engine_argvs_full(lines + canonical)
    for argv, original, rewritten in zip(lines, results[:40], results[40:], strict=True):
        assert "error" not in original, (argv, original)
        assert rewritten == {"namespace": original["namespace"], "abbreviations": {}}, argv


def test_every_respelling_is_recorded() -> None:
    for seed in range(40):
        argv, changes = _generated(seed)
        assert len(parse_engine(_words([*LAUNCHER, *argv])).normalised) == changes, argv


def test_the_notes_name_the_place_and_the_reason() -> None:
    cmd = parse_engine(_words([*LAUNCHER, "--tp", "2", "--tensor-parallel-size=4", "--kv-cache", "auto",
                               "--model", "/m"]))
    assert cmd.normalised == [
        "run.sh:1: --tp is argparse's abbreviation of --tp-size",
        "run.sh:1: --tensor-parallel-size is SGLang's alias of --tp-size",
        "run.sh:1: --tensor-parallel-size=VALUE read as --tensor-parallel-size VALUE",
        "run.sh:1: --kv-cache is argparse's abbreviation of --kv-cache-dtype",
        "run.sh:1: --model is SGLang's alias of --model-path"]
    assert [(o.flag, o.values, o.written) for o in cmd.options] == [
        ("--tp-size", ("2",), "--tp"), ("--tp-size", ("4",), "--tensor-parallel-size"),
        ("--kv-cache-dtype", ("auto",), "--kv-cache"), ("--model-path", ("/m",), "--model")]


def test_a_flag_no_build_knows_keeps_its_spelling_and_at_most_one_value() -> None:
    cmd = parse_engine(_words([*LAUNCHER, "--no-such-flag", "a", "b", "--enable-metrics", "stray"]))
    assert [(o.flag, o.values, o.known) for o in cmd.options] == [
        ("--no-such-flag", ("a",), False), ("--enable-metrics", (), True)]
    assert [w.text for w in cmd.stray] == ["b", "stray"]  # positional words SGLang would refuse


def test_sglang_refuses_the_words_the_importer_calls_stray() -> None:
    """The stray words are not the importer's invention: SGLang's parser refuses the same line."""
    (result,) = parse_engine_argvs_full([["--model-path", "/m", "--enable-metrics", "stray"]])
    assert result == {"error": "unrecognized arguments: stray"}


@pytest.mark.parametrize(("words", "launcher"), [
    (["python3", "-m", "sglang.launch_server", "--port", "1"], ["python3", "-m", "sglang.launch_server"]),
    (["/opt/venv/bin/sglang", "serve", "--port", "1"], ["/opt/venv/bin/sglang", "serve"]),
    (["env", "A=1", "sglang", "serve", "--port", "1"], ["env", "A=1", "sglang", "serve"]),
])
def test_the_launcher_words_end_where_sglang_starts(words: list[str], launcher: list[str]) -> None:
    cmd = parse_engine(_words(words))
    assert ([w.text for w in cmd.launcher], [(o.flag, o.values) for o in cmd.options]) == (
        launcher, [("--port", ("1",))])


def test_a_command_that_starts_no_sglang_server_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^not an SGLang server command$"):
        parse_engine(_words(["serve", "--port", "1"]))  # `serve` of no sglang program
