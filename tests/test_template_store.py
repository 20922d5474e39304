"""The templates' own cache (compiler/stages/template_store.py): a kept template renders as a fresh compile does, an
edited one is compiled again however its file's size and time are kept, and a damaged cache file or a name
outside the templates changes nothing but speed, or is refused."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from spark_compile.spec import user_cache
from spark_compile.stages.template_store import PREFIX, CompiledTemplates


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.j2").write_text("a={{ x }}\n")
    (tmp_path / "t" / "b.j2").write_text("{% include 'a.j2' %}b\n")
    return tmp_path / "t"


def _render(root: Path, name: str) -> str:
    environment = jinja2.Environment(loader=CompiledTemplates(str(root), "test"), undefined=jinja2.StrictUndefined,
                                     keep_trailing_newline=True, auto_reload=False)
    return environment.get_template(name).render(x=1)


def _cache_files(root: Path) -> list[Path]:
    return sorted((root.parent / "xdg" / "spark-compile").glob(PREFIX + "*"))


def test_kept_templates_render_as_compiled_ones(root: Path) -> None:
    assert _render(root, "b.j2") == "a=1\nb\n"
    (kept,) = _cache_files(root)
    assert kept.stat().st_mode & 0o777 == 0o600
    before = kept.read_bytes()
    assert _render(root, "b.j2") == "a=1\nb\n"
    assert kept.read_bytes() == before  # nothing compiled, nothing written


def test_an_edited_template_is_compiled_again_at_its_old_size_and_time(root: Path) -> None:
    assert _render(root, "a.j2") == "a=1\n"
    path = root / "a.j2"
    before = os.stat(path)
    path.write_text("A={{ x }}\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _render(root, "a.j2") == "A=1\n"


def test_a_damaged_cache_file_only_costs_a_compile(root: Path) -> None:
    assert _render(root, "a.j2") == "a=1\n"
    (kept,) = _cache_files(root)
    user_cache.write(kept.parent, kept.name, b"not marshal data", prefix="unused-", keep=1)
    assert _render(root, "a.j2") == "a=1\n"
    user_cache.write(kept.parent, kept.name, b"\xe9" + kept.read_bytes()[66:], prefix="unused-", keep=1)
    assert _render(root, "a.j2") == "a=1\n"


@pytest.mark.parametrize("name", ["missing.j2", "../t/a.j2", "/etc/passwd"])
def test_a_name_outside_the_templates_is_not_found(root: Path, name: str) -> None:
    with pytest.raises(jinja2.TemplateNotFound):
        _render(root, name)
