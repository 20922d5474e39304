"""`spark-compile export --sparkrun`: sparkrun 0.4.2's own loader accepts the recipe, and the serve command sparkrun
would run on each node is the profile's engine argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roundtrip import compiled
from sparkrun_oracle import dry_run, load_errors, node_commands

from spark_compile.cli import main
from spark_compile.common.errors import UnquotableError
from spark_compile.common.quoting import sparkrun_word
from spark_compile.stages.launch_plan import LaunchPlan

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted((REPO / "spec" / "profiles" / "examples").glob("*.yaml"))
TWO_NODE_TCP = REPO / "spec" / "profiles" / "examples" / "two-node-tcp.yaml"


def _export(capsys: pytest.CaptureFixture[str], profile: Path, out: Path) -> str:
    assert main(["export", "--sparkrun", str(profile), "-o", str(out)]) == 0
    return capsys.readouterr().err


def _plan(profile: Path) -> LaunchPlan:
    return compiled(profile).plan


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_sparkrun_runs_the_profiles_argv(capsys: pytest.CaptureFixture[str], tmp_path: Path, profile: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    _export(capsys, profile, recipe)
    assert load_errors(recipe) == ""
    ranks = _plan(profile).ranks
    hosts = [rank.fabric_ip for rank in ranks]
    commands = node_commands(recipe, hosts)
    for rank, words in zip(ranks, commands, strict=True):
        launcher = len(rank.launcher)
        assert words[:launcher] == list(rank.launcher)
        ours = list(rank.engine_argv)
        if len(ranks) > 1:  # sparkrun's rendezvous: its own port, the first host
            at = ours.index("--dist-init-addr")
            ours[at + 1] = f"{hosts[0]}:25000"
        assert sorted(_options(words[launcher:])) == sorted(_options(ours))
    served = dry_run(recipe, hosts)
    head = [w for option in _options(list(ranks[0].engine_argv)) for w in option
            if option[0] not in ("--dist-init-addr", "--nnodes", "--node-rank")]
    assert served[len(ranks[0].launcher):] == head


def _options(words: list[str]) -> list[tuple[str, ...]]:
    """Words grouped into options (a flag and the values after it)."""
    out: list[list[str]] = []
    for word in words:
        if word.startswith("--") or not out:
            out.append([word])
        else:
            out[-1].append(word)
    return [tuple(o) for o in out]


def test_export_lists_what_sparkrun_does_its_own_way(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = _export(capsys, TWO_NODE_TCP, tmp_path / "recipe.yaml")
    notes = [line for line in err.splitlines() if line.startswith("spark-compile export:")]
    assert notes == [
        "spark-compile export: not carried: engine.dist_init_port 20000: sparkrun rendezvouses on port 25000",
        "spark-compile export: not carried: HOST_IP: differs between ranks; a sparkrun recipe's env is the same on "
        "every node",
        "spark-compile export: not carried: docker --network host: sparkrun runs its container with its own options",
        "spark-compile export: not carried: docker --ipc host: sparkrun runs its container with its own options",
        "spark-compile export: not carried: docker --gpus all: sparkrun runs its container with its own options",
        "spark-compile export: not carried: docker --shm-size 16g: sparkrun runs its container with its own options",
        "spark-compile export: not carried: docker -v /srv/models/qwen3-next-80b-a3b:/models/repo:ro: sparkrun runs "
        "its container with its own options",
        "spark-compile export: not carried: docker -v /home/ops/.cache:/root/.cache: sparkrun runs its container "
        "with its own options",
    ]


def test_export_never_overwrites_a_foreign_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "recipe.yaml"
    out.write_text("model: mine\n")
    assert main(["export", "--sparkrun", str(TWO_NODE_TCP), "-o", str(out)]) == 2
    assert "did not write it: refusing to overwrite it" in capsys.readouterr().err
    assert out.read_text() == "model: mine\n"


def _hostile_profile(tmp_path: Path, served: str, download_dir: str) -> Path:
    """two-node-tcp.yaml with a served name and an engine.args value that pass `check` and are shell code."""
    text = TWO_NODE_TCP.read_text().replace("served_name: qwen3-next-80b", f"served_name: {json.dumps(served)}")
    text = text.replace("  env:\n", f"  args: {{download-dir: {json.dumps(download_dir)}}}\n  env:\n", 1)
    profile = tmp_path / "two-node-tcp.yaml"
    profile.write_text(text)
    config = TWO_NODE_TCP.with_name("qwen3-next-80b-a3b.config.json")
    (tmp_path / config.name).write_bytes(config.read_bytes())
    return profile


def test_export_sparkrun_quotes_served_name_and_engine_args_for_bash(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    served, download_dir = f"x`touch {tmp_path}/served`", f"/m/a b;touch {tmp_path}/args"
    profile = _hostile_profile(tmp_path, served, download_dir)
    assert main(["check", str(profile)]) == 0
    recipe = tmp_path / "recipe.yaml"
    _export(capsys, profile, recipe)
    assert load_errors(recipe) == ""
    hosts = [rank.fabric_ip for rank in _plan(profile).ranks]
    for words in [dry_run(recipe, hosts), *node_commands(recipe, hosts)]:
        assert words[words.index("--served-model-name") + 1] == served
        assert words[words.index("--download-dir") + 1] == download_dir
    assert "served_model_name" not in recipe.read_text()  # a placeholder would paste it raw


def test_sparkrun_word_refuses_a_yaml_line_break() -> None:
    # The profile's grammars refuse these already; the quoting function refuses them on its own too.
    with pytest.raises(UnquotableError) as raised:
        sparkrun_word("/m/a\u2028b")
    assert str(raised.value) == ("'/m/a\\u2028b' cannot be written for a sparkrun recipe's command: YAML reads "
                                 "NEL, U+2028 and U+2029 as line breaks")
    assert sparkrun_word("a{b}") == "'a{b}'" and sparkrun_word("qwen3-8b") == "qwen3-8b"
