"""The per-user cache (spec/user_cache.py): a file is read back only when it is intact and the user's own, in a
directory that is the user's own, and Jinja's compiled templates kept there change no output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_compile.spec import user_cache

from conftest import REFERENCE_PROFILE, run_cli_process

OTHER_UID = 54321
BODY = b"kept body\n"


def _kept(directory: Path, name: str = "k-1") -> Path:
    user_cache.write(directory, name, BODY, prefix="k-", keep=4)
    return directory / name


def test_a_written_file_is_private_and_read_back(tmp_path: Path) -> None:
    directory = tmp_path / "cache" / "spark-compile"
    path = _kept(directory)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    assert user_cache.read(directory, path.name) == BODY


def test_the_cache_directory_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache.cache_dir() == tmp_path / "spark-compile"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache.cache_dir() == tmp_path / "home" / ".cache" / "spark-compile"


def test_a_torn_or_edited_file_reads_as_missing(tmp_path: Path) -> None:
    path = _kept(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])  # torn: the digest no longer matches
    assert user_cache.read(tmp_path, path.name) is None
    path.write_bytes(whole.replace(b"kept", b"kept".upper()))  # same size, another body
    assert user_cache.read(tmp_path, path.name) is None
    path.write_bytes(whole)
    assert user_cache.read(tmp_path, path.name) == BODY


def test_a_directory_others_can_write_is_neither_read_nor_written(tmp_path: Path) -> None:
    path = _kept(tmp_path)
    tmp_path.chmod(0o777)
    assert user_cache.read(tmp_path, path.name) is None
    path.unlink()
    _kept(tmp_path)
    assert not path.exists()


def test_a_file_others_can_write_or_own_is_not_read(tmp_path: Path) -> None:
    path = _kept(tmp_path)
    path.chmod(0o622)
    assert user_cache.read(tmp_path, path.name) is None
    path.chmod(0o600)
    if os.geteuid() == 0:  # only root can give a file away; the suite runs as root on CI
        os.chown(path, OTHER_UID, -1)
        assert user_cache.read(tmp_path, path.name) is None
        os.chown(tmp_path, OTHER_UID, -1)
        os.chown(path, os.geteuid(), -1)
        assert user_cache.read(tmp_path, path.name) is None
        os.chown(tmp_path, os.geteuid(), -1)
    assert user_cache.read(tmp_path, path.name) == BODY


def test_a_symlinked_file_or_directory_is_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    path = _kept(real)
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    (linked / path.name).symlink_to(path)
    assert user_cache.read(linked, path.name) is None
    (tmp_path / "dirlink").symlink_to(real)
    assert user_cache.read(tmp_path / "dirlink", path.name) is None
    assert user_cache.read(real, path.name) == BODY


def test_an_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    user_cache.write(blocker / "spark-compile", "k-1", BODY, prefix="k-", keep=1)
    assert blocker.read_text() == "not a directory"
    user_cache.dump(None, "k-1", ["a"], prefix="k-", keep=1)  # no cache directory: nothing to do
    assert user_cache.load(None, "k-1") is None


def test_marshal_data_comes_back_and_other_bytes_read_as_missing(tmp_path: Path) -> None:
    user_cache.dump(tmp_path, "k-1", {"a": (1, "b")}, prefix="k-", keep=2)
    assert user_cache.load(tmp_path, "k-1") == {"a": (1, "b")}
    user_cache.write(tmp_path, "k-2", b"not marshal data", prefix="k-", keep=2)
    assert user_cache.load(tmp_path, "k-2") is None
    assert user_cache.load(tmp_path, "k-missing") is None


def test_old_files_of_a_kind_are_pruned(tmp_path: Path) -> None:
    user_cache.write(tmp_path, "other-kind", b"{}", prefix="other-", keep=1)
    for index in range(5):
        user_cache.write(tmp_path, f"k-{index}", b"{}", prefix="k-", keep=3)
        os.utime(tmp_path / f"k-{index}", ns=(index * 10**9, index * 10**9))
    user_cache.write(tmp_path, "k-newest", b"{}", prefix="k-", keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k-3", "k-4", "k-newest", "other-kind"]


def test_the_stamp_changes_with_an_edit_that_keeps_size_and_time(tmp_path: Path) -> None:
    path = tmp_path / "fields.py"
    path.write_bytes(b"x = 1\n")
    before, status = user_cache.stamp(str(path)), os.stat(path)
    path.write_bytes(b"x = 2\n")  # one byte other, in place
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert os.stat(path).st_size == status.st_size and os.stat(path).st_mtime_ns == status.st_mtime_ns
    assert user_cache.stamp(str(path)) != before


def test_compiled_templates_are_kept_private_and_change_no_output(tmp_path: Path) -> None:
    """Jinja's compiled templates (code) live in the same private cache; with or without them, and with a
    cache directory others could write (refused), a compile writes the same files."""
    outputs = []
    cache = tmp_path / "cache"
    for run in ("cold", "warm", "refused"):
        if run == "refused":
            (cache / "spark-compile").chmod(0o777)
        out = tmp_path / run
        result = run_cli_process("compile", str(REFERENCE_PROFILE), "--out", str(out),
                                 env={"XDG_CACHE_HOME": str(cache)})
        assert result.returncode == 0, result.stderr
        outputs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outputs[0] == outputs[1] == outputs[2]
    compiled = sorted((cache / "spark-compile").glob("templates-*"))
    assert [p.name.split("-")[1] for p in compiled] == ["text"]  # the artifacts' environment, one file
    assert {p.stat().st_mode & 0o777 for p in compiled} == {0o600}
