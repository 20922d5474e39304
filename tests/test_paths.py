"""One printer of profile paths (common/findings.dotted): `fleet.nodes[0].env.X`, in every message that names a
key, whichever module prints it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_compile.common.findings import dotted
from spark_compile.stages import model_keys

from conftest import REFERENCE_PROFILE, ROOT, run_cli


@pytest.mark.parametrize(("path", "text"), [
    (("fleet", "nodes", 0, "env", "X"), "fleet.nodes[0].env.X"),
    (("operations", "previous_stack", "stop", 3), "operations.previous_stack.stop[3]"),
    (("model",), "model"),
    ((), "(top level)"),
])
def test_a_path_is_keys_joined_by_dots_and_indices_in_brackets(path: tuple[str | int, ...], text: str) -> None:
    assert dotted(path) == text


def test_a_literal_secret_in_a_list_is_named_by_its_index(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\noperations:\n  previous_stack:\n"
                       "    stop: [/usr/bin/old, stop, --password, hunter2]\n    relaunch: [/usr/bin/old, start]\n")
    result = run_cli("check", str(profile), "--root", str(ROOT))
    # The whole finding; the reference's own warning comes before or after it as the two paths sort.
    assert (
        f"{profile}:4:44: SC230 error: operations.previous_stack.stop[3] holds a literal secret\n"
        "    4 |     stop: [/usr/bin/old, stop, --password, (redacted)]\n"
        "      |                                            ^\n"
        "  hint: let the command read it from a root-only file on the node (a --password-file option): launch.sh "
        "logs every command it runs\n") in result.stdout


def test_the_importer_names_a_key_the_same_way() -> None:
    assert model_keys.problem(("fleet", "nodes", 0, "nosuch"), 1) == "the profile has no key fleet.nodes[0].nosuch"
