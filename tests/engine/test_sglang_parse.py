"""The reference deployment's engine arguments, parsed by SGLang 0.5.23's real parser."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from sglang_parse import (
    engine_python,
    expected_values,
    load_flag_catalog,
    parse_engine_argv,
    parse_engine_argvs_full,
)

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT_TXT = ROOT / "tests" / "fixtures" / "reference" / "dsv41-4spark-rank0.txt"


def reference_engine_argv() -> list[str]:
    """Everything after `-m sglang.launch_server` in the reference rank-0 command, as written."""
    lines = DEPLOYMENT_TXT.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "-m sglang.launch_server" in line)
    kept: list[str] = []
    for line in lines[start:]:
        kept.append(line.rstrip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            break
    argv = shlex.split(" ".join(kept))
    return argv[argv.index("sglang.launch_server") + 1 :]


REFUSED = [
    ["--model-path", "/m", "--attention-backend", "no-such-backend"],
    ["--model-path", "/m", "--no-such-flag", "1"],
    ["--model-path", "/m", "--tp-size", "four"],
]


@pytest.fixture(scope="module")
def parsed() -> dict[str, Any]:
    """One engine process parses everything this module needs (importing sglang takes seconds)."""
    written = reference_engine_argv()
    canonical = ["--tp-size" if token == "--tp" else token for token in written]
    full = parse_engine_argvs_full([written, canonical, ["--model-path", "/m"], *REFUSED], engine_python())
    assert "error" not in full[0] and "error" not in full[1], full[:2]
    return {
        "written": full[0],
        "canonical": full[1],
        "minimal": full[2],
        "refused": full[3:],
        "argv": canonical,
    }


def test_reference_engine_argv_parses_with_key_values(parsed: dict[str, Any]) -> None:
    ns = parsed["canonical"]["namespace"]
    assert ns["tp_size"] == 4
    assert ns["ep_size"] == 4
    assert ns["nnodes"] == 4
    assert ns["node_rank"] == 0
    assert ns["port"] == 8210
    assert ns["host"] == "0.0.0.0"
    assert ns["dist_init_addr"] == "<head-fabric-ip>:20100"
    assert ns["served_model_name"] == "deepseek-v4.1-flash"
    assert ns["trust_remote_code"] is True
    assert ns["load_format"] == "safetensors"
    assert ns["attention_backend"] == "dsv4"
    assert ns["moe_runner_backend"] == "flashinfer_mxfp4"
    assert ns["fp8_gemm_runner_backend"] == "flashinfer_cutlass"  # --fp8-gemm-backend's dest
    assert ns["mem_fraction_static"] == 0.80
    assert ns["chunked_prefill_size"] == 2048
    assert ns["context_length"] == 524288
    assert ns["max_running_requests"] == 16
    assert ns["cuda_graph_max_bs_decode"] == 16
    assert ns["random_seed"] == 0
    assert ns["enable_decoder_swa_bounded_replay"] is True
    assert ns["speculative_algorithm"] == "DSPARK"
    assert ns["speculative_dspark_block_size"] == 5
    assert ns["tool_call_parser"] == "deepseekv41"
    assert ns["reasoning_parser"] == "deepseek-v41"
    assert ns["watchdog_timeout"] == 1800
    assert ns["min_free_slots_delay"] == 1
    assert ns["default_chat_template_kwargs"] == {"thinking": True}
    assert parsed["canonical"]["abbreviations"] == {}


def test_every_stated_value_is_what_sglang_parses(parsed: dict[str, Any]) -> None:
    argv = parsed["argv"]
    ns = parsed["canonical"]["namespace"]
    expected = expected_values(argv, load_flag_catalog())
    assert {dest: ns[dest] for dest in expected} == expected


def test_written_tp_is_only_a_prefix_abbreviation(parsed: dict[str, Any]) -> None:
    # The document's `--tp 4` boots only because argparse expands unique prefixes: no `--tp` flag exists.
    assert parsed["written"]["abbreviations"] == {"--tp": "--tp-size"}
    assert parsed["written"]["namespace"] == parsed["canonical"]["namespace"]
    assert "--tp" not in load_flag_catalog()


def test_namespace_covers_exactly_the_catalog_dests(parsed: dict[str, Any]) -> None:
    ns = parsed["canonical"]["namespace"]
    assert set(ns) == {entry["dest"] for entry in load_flag_catalog().values()}


def test_parser_refusals_are_reported(parsed: dict[str, Any]) -> None:
    refused = parsed["refused"]
    assert all("error" in r for r in refused), json.dumps(refused)[:2000]
    assert "no-such-backend" in refused[0]["error"]
    assert "--no-such-flag" in refused[1]["error"]
    assert "four" in refused[2]["error"]
    assert parsed["minimal"]["namespace"]["tp_size"] == 1


def test_single_argv_helper_returns_the_namespace(parsed: dict[str, Any]) -> None:
    assert parse_engine_argv(parsed["argv"], engine_python()) == parsed["canonical"]["namespace"]
