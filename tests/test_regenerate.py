"""`python -m spark_compile.commands.regenerate`: its refusals, and the --check modes of the generators it runs (the
whole command on an edited copy of the project: tests/test_add_a_field.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spark_compile.commands import regenerate
from spark_compile.spec.generators import make_nccl_catalog

from conftest import ROOT


def test_usage_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert regenerate.main(["--chek"]) == 2
    assert capsys.readouterr().err == ("usage: python -m spark_compile.commands.regenerate [-h] [--check]\n"
                                       "python -m spark_compile.commands.regenerate: error: unrecognized arguments: "
                                       "--chek\n")


def test_an_installed_package_is_not_a_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(regenerate, "ROOT", tmp_path)
    assert regenerate.main(["--check"]) == 2
    assert capsys.readouterr().err == (
        f"regenerate: {tmp_path} is not a source checkout of spark-compile: run it from an editable install "
        "(tests/run.sh makes one)\n")


def test_the_shipped_profiles_are_the_ones_generated_commits() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in regenerate.shipped_profiles(ROOT)}
    examples = ("eight-node-roce", "single-node", "two-node-tcp", "gpt-oss-120b-1spark", "glm-4.5-air-fp8-2spark-tcp",
                "qwen3-235b-nvfp4-2spark-roce", "qwen3-235b-nvfp4-4spark-roce")
    assert names == {"spec/profiles/dsv41-4spark.yaml", *(f"spec/profiles/examples/{e}.yaml" for e in examples)}
    # One folder per profile, and the fleet scripts every compile writes beside them.
    folders = {p.name for p in (ROOT / "generated").iterdir() if p.is_dir()}
    assert "fleet_scripts" in folders and len(folders - {"fleet_scripts"}) == len(names)


def test_the_nccl_catalog_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    committed = ROOT / "spec" / "catalogs" / "nccl-2.30.7.json"
    copy = tmp_path / committed.name
    shutil.copy(committed, copy)
    assert make_nccl_catalog.main(["make_nccl_catalog", "--out", str(copy), "--check"]) == 0
    copy.write_text(committed.read_text(encoding="utf-8").replace('"NCCL_DEBUG"', '"NCCL_DEBUGX"', 1),
                    encoding="utf-8")
    assert make_nccl_catalog.main(["make_nccl_catalog", "--out", str(copy), "--check"]) == 1
    assert capsys.readouterr().err == f"{copy}: stale; it differs from the catalog nccl-env-2.30.7.md gives\n"
    assert make_nccl_catalog.main(["make_nccl_catalog", "--out", str(copy)]) == 0
    assert copy.read_bytes() == committed.read_bytes()


@pytest.mark.parametrize("where", ["generated/profile.schema.json", "spec/catalogs/nccl-2.30.7.json",
                                   "spec/profiles/releases/x.config.json"])
def test_regenerate_refuses_a_symlink_committed_in_generated_or_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     where: str) -> None:
    root = tmp_path / "checkout"
    (root / "generated").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    link = root / where
    link.parent.mkdir(parents=True, exist_ok=True)
    victim = tmp_path / "victim"  # outside the checkout
    victim.write_text("keep\n")
    link.symlink_to(victim)
    ran: list[str] = []

    def run(what: str, *_: object) -> bool:
        ran.append(what)
        return True

    monkeypatch.setattr(regenerate, "ROOT", root)
    monkeypatch.setattr(regenerate, "_run", run)
    assert regenerate.main([]) == 2
    assert ran == [] and victim.read_text() == "keep\n"
    assert capsys.readouterr().err == (
        f"regenerate: refusing to run: {where}: not a regular file or folder (a symlink, a FIFO, a device); "
        "regenerate writes only regular files: remove it from the checkout\n")


def test_regenerate_finds_no_symlink_in_this_checkout() -> None:
    assert regenerate.planted(ROOT) == []
