"""The per-user cache (spec/user_cache.py) and what it keeps: the check path's schema (spec/core_validator.py),
used only when it is this model's, this pydantic's, intact and the user's own (otherwise the validator is
built from the model again, with the same answers)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import SchemaValidator

from spark_compile.spec import core_validator, user_cache
from spark_compile.spec.core_schema import SchemaFormatError, Thawed, thaw
from spark_compile.spec.record import as_data
from spark_compile.stages.resolve import resolve

from conftest import REFERENCE_PROFILE, run_cli_process

OTHER_UID = 54321


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the builds from the model (each one imports pydantic's model machinery)."""
    calls: list[int] = []
    real = core_validator.frozen_model

    def counted() -> str:
        calls.append(1)
        return real()

    monkeypatch.setattr(core_validator, "frozen_model", counted)
    return calls


def _answer(thawed: Thawed) -> Any:
    validator = SchemaValidator(thawed.schema, thawed.config)  # type: ignore[arg-type]
    return as_data(validator.validate_python(resolve(REFERENCE_PROFILE).data))


def _cache_file(directory: Path) -> Path:
    return directory / core_validator.file_name(core_validator.cache_key())


def _read(directory: Path) -> bytes | None:
    return user_cache.read(directory, core_validator.file_name(core_validator.cache_key()))


def _rewrite(path: Path, body: str) -> None:
    """A cache file with ``body`` and a correct digest: what a writer of the directory could leave."""
    data = body.encode()
    path.write_bytes(hashlib.sha256(data).hexdigest().encode() + b"\n" + data)


def test_a_cold_cache_is_filled_private_and_then_used(tmp_path: Path, builds: list[int]) -> None:
    directory = tmp_path / "cache" / "spark-compile"
    first = core_validator.load(directory)
    assert builds == [1]
    assert directory.stat().st_mode & 0o777 == 0o700
    assert _cache_file(directory).stat().st_mode & 0o777 == 0o600
    second = core_validator.load(directory)
    assert builds == [1]  # read back, not rebuilt
    expected = as_data(core_validator.validate_profile(resolve(REFERENCE_PROFILE).data))
    assert _answer(second) == _answer(first) == expected


def test_the_cache_directory_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache.cache_dir() == tmp_path / "spark-compile"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache.cache_dir() == tmp_path / "home" / ".cache" / "spark-compile"


def test_a_damaged_file_is_rebuilt(tmp_path: Path, builds: list[int]) -> None:
    core_validator.load(tmp_path)
    path = _cache_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-100])  # torn: the digest no longer matches
    assert _read(tmp_path) is None
    core_validator.load(tmp_path)
    assert builds == [1, 1]
    assert _read(tmp_path) is not None  # written again, whole


@pytest.mark.parametrize("name", ["_err", "_shown", "re", "SECRET_VALUE", "os.system", "__import__",
                                  "PydanticCustomError"])
def test_a_cache_naming_anything_but_a_check_is_refused(tmp_path: Path, builds: list[int], name: str) -> None:
    """Even with a correct digest: a name resolves only to a public function of spec/checks.py."""
    core_validator.load(tmp_path)
    path = _cache_file(tmp_path)
    body = path.read_bytes().partition(b"\n")[2].decode()
    assert '{"$check":"name"}' in body
    _rewrite(path, body.replace('{"$check":"name"}', json.dumps({"$check": name}), 1))
    with pytest.raises(SchemaFormatError, match=r"is not a check of spark_compile\.spec\.checks"):
        thaw((_read(tmp_path) or b"").decode())
    rebuilt = core_validator.load(tmp_path)
    assert builds == [1, 1]
    assert _answer(rebuilt)["name"] == "dsv41-4spark"


def test_a_directory_others_can_write_is_neither_read_nor_written(tmp_path: Path, builds: list[int]) -> None:
    core_validator.load(tmp_path)
    tmp_path.chmod(0o777)
    core_validator.load(tmp_path)
    assert builds == [1, 1]
    _cache_file(tmp_path).unlink()
    core_validator.load(tmp_path)
    assert not _cache_file(tmp_path).exists()


def test_a_file_others_can_write_or_own_is_not_read(tmp_path: Path, builds: list[int]) -> None:
    core_validator.load(tmp_path)
    path = _cache_file(tmp_path)
    path.chmod(0o622)
    assert _read(tmp_path) is None
    path.chmod(0o600)
    if os.geteuid() == 0:  # only root can give a file away; the suite runs as root on CI
        os.chown(path, OTHER_UID, -1)
        assert _read(tmp_path) is None
        os.chown(tmp_path, OTHER_UID, -1)
        os.chown(path, os.geteuid(), -1)
        assert _read(tmp_path) is None
        os.chown(tmp_path, os.geteuid(), -1)
    assert _read(tmp_path) is not None


def test_a_symlinked_file_or_directory_is_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    core_validator.load(real)
    name = core_validator.file_name(core_validator.cache_key())
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    (linked / name).symlink_to(real / name)
    assert _read(linked) is None
    (tmp_path / "dirlink").symlink_to(real)
    assert _read(tmp_path / "dirlink") is None
    assert _read(real) is not None


def test_an_unwritable_cache_still_gives_the_answer(tmp_path: Path, builds: list[int]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert _answer(core_validator.load(blocker / "spark-compile"))["name"] == "dsv41-4spark"
    assert _answer(core_validator.load(None))["name"] == "dsv41-4spark"
    assert builds == [1, 1]


def test_old_files_of_a_kind_are_pruned(tmp_path: Path) -> None:
    user_cache.write(tmp_path, "other-kind", b"{}", prefix="other-", keep=1)
    for index in range(5):
        user_cache.write(tmp_path, f"k-{index}", b"{}", prefix="k-", keep=3)
        os.utime(tmp_path / f"k-{index}", ns=(index * 10**9, index * 10**9))
    user_cache.write(tmp_path, "k-newest", b"{}", prefix="k-", keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k-3", "k-4", "k-newest", "other-kind"]


def test_the_key_covers_every_module_the_model_is_built_from() -> None:
    """MODEL_MODULES is the real import closure of spec/model.py (a module missing from it could change the
    model without changing the key)."""
    probe = ("import sys, spark_compile.spec.model\n"
             "print(*sorted(m for m in sys.modules if m.startswith('spark_compile')))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    closure = set(result.stdout.split())
    assert "spark_compile.spec.model" in closure
    missing = closure - set(core_validator.MODEL_MODULES)
    assert not missing, f"add {sorted(missing)} to MODEL_MODULES in spec/core_validator.py"


def test_the_key_changes_with_any_model_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    before = core_validator.cache_key()
    real = core_validator._origin

    def edited(name: str) -> str:
        if name != "spark_compile.spec.fields":
            return real(name)
        copy = tmp_path / "fields.py"
        copy.write_bytes(Path(real(name)).read_bytes() + b"\n# one more line\n")
        return str(copy)

    monkeypatch.setattr(core_validator, "_origin", edited)
    assert core_validator.cache_key() != before


def test_the_key_changes_with_an_edit_that_keeps_size_and_time(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    real = core_validator._origin
    copy = tmp_path / "fields.py"
    copy.write_bytes(Path(real("spark_compile.spec.fields")).read_bytes())
    monkeypatch.setattr(core_validator, "_origin",
                        lambda name: str(copy) if name == "spark_compile.spec.fields" else real(name))
    before, status = core_validator.cache_key(), os.stat(copy)
    data = copy.read_bytes()
    copy.write_bytes(data[:-2] + (b"#\n" if data[-2:] != b"#\n" else b" \n"))  # one byte other, in place
    os.utime(copy, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert os.stat(copy).st_size == status.st_size and os.stat(copy).st_mtime_ns == status.st_mtime_ns
    assert core_validator.cache_key() != before


def test_a_compile_writes_the_same_files_cold_warm_and_with_a_refused_cache(tmp_path: Path) -> None:
    """With the cache empty, filled, and in a directory others could write (refused), a compile writes the
    same files."""
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
