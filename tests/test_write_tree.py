"""compiler/stages/write.py on small trees: what write_tree reports and leaves on disk (modes, inodes, foreign
files, emptied folders, a killed compile's staging folder), what it and write_file refuse, each refusal whole."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from spark_compile.common.errors import InputError
from spark_compile.stages.render import Artifact
from spark_compile.stages.write import (
    STAGING_MARK,
    WriteReport,
    check_target,
    previous_manifest,
    previous_profile,
    write_file,
    write_tree,
)


def _manifest(files: list[str], source: str = "spec/profiles/p.yaml") -> Artifact:
    body = {"compiler": "spark-compile 0.2.0", "sources": [{"path": source}], "files": dict.fromkeys(files, "x")}
    return Artifact("MANIFEST.json", json.dumps(body).encode())


def _tree(*files: Artifact) -> list[Artifact]:
    return [*files, _manifest([f.path for f in files])]


A = Artifact("rank0/docker-run.sh", b"#!/bin/sh\nexit 0\n", 0o755)
B = Artifact("rank0/engine.env", b"A=1\n")
C = Artifact("fleet/launch.sh", b"#!/bin/sh\n", 0o755)


def _report(written: list[str] | None = None, unchanged: list[str] | None = None,
            removed: list[str] | None = None, foreign: list[str] | None = None) -> WriteReport:
    return WriteReport(written or [], unchanged or [], removed or [], foreign or [])


def test_a_first_write_creates_every_file_with_its_mode(tmp_path: Path) -> None:
    old_mask = os.umask(0o077)  # the mode is the artifact's, whatever the umask
    try:
        report = write_tree(tmp_path, "p", _tree(A, B))
    finally:
        os.umask(old_mask)
    assert report == _report(written=["rank0/docker-run.sh", "rank0/engine.env", "MANIFEST.json"])
    assert stat.S_IMODE((tmp_path / "p" / A.path).stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "p" / B.path).stat().st_mode) == 0o644
    assert (tmp_path / "p" / B.path).read_bytes() == b"A=1\n"
    assert sorted(os.listdir(tmp_path)) == ["p"]  # no staging folder left beside it


def test_an_unchanged_file_keeps_its_inode_and_a_changed_mode_is_a_change(tmp_path: Path) -> None:
    write_tree(tmp_path, "p", _tree(A, B))
    inode = (tmp_path / "p" / B.path).stat().st_ino
    report = write_tree(tmp_path, "p", _tree(Artifact(A.path, A.content, 0o700), B))
    assert report == _report(written=["rank0/docker-run.sh"], unchanged=["rank0/engine.env", "MANIFEST.json"])
    assert (tmp_path / "p" / B.path).stat().st_ino == inode
    assert stat.S_IMODE((tmp_path / "p" / A.path).stat().st_mode) == 0o700


def test_nothing_changed_means_nothing_touched(tmp_path: Path) -> None:
    write_tree(tmp_path, "p", _tree(A, B))
    before = {p: p.stat().st_ino for p in (tmp_path / "p").rglob("*")}
    assert write_tree(tmp_path, "p", _tree(A, B)) == _report(unchanged=[A.path, B.path, "MANIFEST.json"])
    assert {p: p.stat().st_ino for p in (tmp_path / "p").rglob("*")} == before


def test_files_we_wrote_are_removed_and_foreign_ones_kept_with_their_folders(tmp_path: Path) -> None:
    write_tree(tmp_path, "p", _tree(A, B, C))
    target = tmp_path / "p"
    (target / "rank0" / "notes.txt").write_text("mine\n")
    (target / "extra").mkdir(mode=0o750)
    (target / "extra").chmod(0o750)
    (target / "link").symlink_to("/etc/hostname")
    report = write_tree(tmp_path, "p", _tree(A))
    assert report == _report(written=["MANIFEST.json"], unchanged=[A.path],
                             removed=["fleet/launch.sh", "rank0/engine.env"], foreign=["link", "rank0/notes.txt"])
    assert not (target / "fleet").exists()  # emptied by the removal: gone with it
    assert stat.S_IMODE((target / "extra").stat().st_mode) == 0o750  # a foreign folder keeps its mode
    assert os.readlink(target / "link") == "/etc/hostname"  # a foreign symlink is kept, not followed
    assert (target / "rank0" / "notes.txt").read_text() == "mine\n"


def test_a_killed_compiles_staging_folder_is_cleaned_and_a_users_folder_is_not(tmp_path: Path) -> None:
    stale = tmp_path / f".p.staging-{_dead_pid()}"
    stale.mkdir()
    (stale / STAGING_MARK).touch()
    (stale / "half.sh").write_text("")
    users = tmp_path / f".p.staging-{_dead_pid()}"  # its process is gone too, but it has no mark
    users.mkdir()
    (users / "keep.txt").write_text("")
    write_tree(tmp_path, "p", _tree(A))
    assert not stale.exists()
    assert (users / "keep.txt").exists()


def _dead_pid() -> int:
    """A process id that no running process has (that of a finished child, still unused a moment later)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not Path(f"/proc/{proc.pid}").exists()
    return proc.pid


def test_a_target_we_did_not_write_is_refused(tmp_path: Path) -> None:
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "README").write_text("x\n")
    (tmp_path / "file").write_text("x\n")
    (tmp_path / "link").symlink_to(tmp_path / "theirs")
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "MANIFEST.json").write_text('{"compiler": "other-tool"}')
    expected = {
        "theirs": f"{tmp_path}/theirs holds files spark-compile did not write (it has no spark-compile "
                  "MANIFEST.json): refusing to overwrite them; choose another --out or another profile name",
        "file": f"{tmp_path}/file exists and is not a directory: spark-compile will not replace it; move it away "
                "or choose another --out",
        "link": f"{tmp_path}/link is a symlink: spark-compile does not write through one; remove it or choose "
                "another --out",
        "fake": f"{tmp_path}/fake holds files spark-compile did not write (it has no spark-compile MANIFEST.json): "
                "refusing to overwrite them; choose another --out or another profile name",
    }
    for name, message in expected.items():
        with pytest.raises(InputError) as refused:
            write_tree(tmp_path, name, _tree(A))
        assert str(refused.value) == message
    assert (tmp_path / "theirs" / "README").read_text() == "x\n"
    (tmp_path / "empty").mkdir()
    check_target(tmp_path / "empty")  # an empty folder is adopted
    check_target(tmp_path / "missing")


def test_the_previous_manifest_names_our_files_and_the_profile(tmp_path: Path) -> None:
    write_tree(tmp_path, "p", _tree(A, B))
    assert previous_manifest(tmp_path / "p") == {A.path, B.path, "MANIFEST.json"}
    assert previous_profile(tmp_path / "p") == "spec/profiles/p.yaml"
    for text in ("[]", "not json", '{"compiler": "spark-compile", "files": [1], "sources": "x"}'):
        (tmp_path / "q").mkdir(exist_ok=True)
        (tmp_path / "q" / "MANIFEST.json").write_text(text)
        assert previous_manifest(tmp_path / "q") == set(), text
        assert previous_profile(tmp_path / "q") is None, text
    (tmp_path / "s").mkdir()  # a FIFO in the manifest's place is never opened for a blocking read
    os.mkfifo(tmp_path / "s" / "MANIFEST.json")
    assert previous_manifest(tmp_path / "s") == set()


def test_write_file_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "review.html"
    path.write_text("old")
    path.chmod(0o600)
    write_file(path, b"new")
    assert (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) == (b"new", 0o600)
    assert os.listdir(tmp_path) == ["review.html"]


def test_write_file_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")
    expected = {
        tmp_path / "dir": f"{tmp_path}/dir is a directory: spark-compile only replaces regular files; choose "
                          "another path",
        tmp_path / "link": f"{tmp_path}/link is a symlink: spark-compile only replaces regular files; choose "
                           "another path",
        tmp_path / "fifo": f"{tmp_path}/fifo is a FIFO: spark-compile only replaces regular files; choose "
                           "another path",
        Path("."): "'.' names no file: give the path of a file to write, e.g. review.html",
        tmp_path / "none" / "x.html": f"{tmp_path}/none/x.html: cannot write: No such file or directory",
    }
    for path, message in expected.items():
        with pytest.raises(InputError) as refused:
            write_file(path, b"x")
        assert str(refused.value) == message
    assert not (tmp_path / "target").exists()  # nothing was written through the symlink


def test_write_file_will_not_overwrite_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_text("someone's\n")
    with pytest.raises(InputError) as refused:
        write_file(path, b"x", ours=b"<!-- spark-compile")
    assert str(refused.value) == (f"{path} exists and spark-compile did not write it: refusing to overwrite it "
                                  "(give --force to replace it, or choose another -o)")
    assert path.read_text() == "someone's\n"
