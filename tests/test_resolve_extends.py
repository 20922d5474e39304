"""compiler/stages/resolve.py: `extends:` chains merged child over parent, keyed lists merged by name, and
every broken chain refused with its whole SC112 finding placed on the line at fault. Each test works in its
own git-like work tree (a `.git` folder), which is where `extends:` may lead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_compile.common.findings import Finding, Position
from spark_compile.stages.load import Document, LoadError, parse_text
from spark_compile.stages.resolve import Resolved, extends_roots, resolve

BASE = ("name: base\nengine:\n  port: 1\n  env: {A: '1'}\nfleet:\n  nodes:\n    - {name: n0, ip: a}\n"
        "    - {name: n1, ip: b}\ncontainer:\n  mounts:\n    - {target: /m, source: /s}\n")
RELATIVE = "write the parent's path relative to this file, e.g. extends: base.yaml"
NOT_FOUND = "fix the path; it is relative to the file that extends it"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "base.yaml").write_text(BASE)
    monkeypatch.chdir(tmp_path)  # relative names in findings, and no other work tree among the roots
    return tmp_path


def _refused(repo: Path, name: str, text: str) -> Finding:
    (repo / name).write_text(text)
    with pytest.raises(LoadError) as refused:
        resolve(Path(name))
    return refused.value.finding


def _sc112(file: str, line: int, column: int, message: str, hint: str) -> Finding:
    return Finding("SC112", "error", Position(file, line, column), message, hint)


@pytest.mark.parametrize(("text", "line", "column", "message", "hint"), [
    ("extends: base.yaml\nengine:\n  nope: !delete\n", 3, 9, "!delete of 'nope': no profile it extends sets it",
     "remove the !delete line, or fix the name"),
    ("extends: base.yaml\nnew: !replace {a: 1}\n", 2, 6, "!replace of 'new': no profile it extends sets it",
     "remove the !replace tag (a new key needs none)"),
    ("extends: base.yaml\nfleet:\n  nodes:\n    - !delete n9\n", 4, 7,
     "!delete n9: no inherited item has name 'n9'", "remove the !delete line, or fix the name"),
    ("extends: base.yaml\nfleet:\n  nodes:\n    - !replace {name: n9}\n", 4, 7,
     "!replace: no inherited item has name 'n9'", "remove the !replace tag to add the item, or fix its name"),
    ("extends: base.yaml\ncontainer:\n  mounts:\n    - !delete /x\n", 4, 7,
     "!delete /x: no inherited item has target '/x'", "remove the !delete line, or fix the name"),
    ("extends: [a.yaml]\n", 1, 10, "extends must be a relative path to a parent profile, got 'list'", RELATIVE),
    ("extends: 3\n", 1, 10, "extends must be a relative path to a parent profile, got 3", RELATIVE),
    ("extends: ''\n", 1, 10, "extends must be a relative path to a parent profile, got ''", RELATIVE),
    ("extends: /etc/base.yaml\n", 1, 10, "extends must be a relative path to a parent profile, got "
     "'/etc/base.yaml'", RELATIVE),
    ("extends: base.json\n", 1, 10, "extends names 'base.json', which is not a profile (.yaml or .yml)",
     "extends names a parent profile file ending in .yaml or .yml"),
    ("name: c\nextends: nope.yaml\n", 2, 10, "extends names nope.yaml, which does not exist (looked for nope.yaml)",
     NOT_FOUND),
    ("extends: sub/../nope.yml\n", 1, 10, "extends names sub/../nope.yml, which does not exist (looked for "
     "nope.yml)", NOT_FOUND),
    ("extends: child.yaml\n", 1, 10, "extends cycle: child.yaml leads back to a profile already in the chain",
     "remove the extends: line that closes the loop"),
    ("name: x\nengine:\n  port: !delete\n", 3, 9, "!delete in a profile that extends nothing: there is nothing "
     "to delete", "remove the !delete tag"),
    ("name: x\nlist:\n  - !replace {a: 1}\n", 3, 5, "!replace in a profile that extends nothing: there is "
     "nothing to replace", "remove the !replace tag"),
])
def test_a_broken_chain_gets_its_whole_finding(repo: Path, text: str, line: int, column: int, message: str,
                                               hint: str) -> None:
    finding = _refused(repo, "child.yaml", text)
    assert finding == _sc112("child.yaml", line, column, message, hint)
    assert finding.source_line == text.split("\n")[line - 1]


def test_a_cycle_is_placed_in_the_file_that_closes_it(repo: Path) -> None:
    (repo / "b.yaml").write_text("name: b\nextends: a.yaml\n")
    finding = _refused(repo, "a.yaml", "extends: b.yaml\n")
    assert finding == _sc112("b.yaml", 2, 10, "extends cycle: a.yaml leads back to a profile already in the chain",
                             "remove the extends: line that closes the loop")


def test_a_dangling_symlink_is_named_as_one(repo: Path) -> None:
    (repo / "gone.yaml").symlink_to("nowhere.yaml")
    assert _refused(repo, "child.yaml", "extends: gone.yaml\n") == _sc112(
        "child.yaml", 1, 10, "extends names gone.yaml, which is a symlink that leads nowhere (a loop or a missing "
        "target) (looked for gone.yaml)", NOT_FOUND)


def test_extends_may_not_leave_the_work_tree_even_through_a_symlink(repo: Path, tmp_path_factory:
                                                                    pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "base.yaml"
    outside.write_text(BASE)
    (repo / "inside.yaml").symlink_to(outside)
    where = os.path.realpath(repo)
    hint = "a parent profile must be in the same repository (or pass --root to name another root)"
    assert _refused(repo, "child.yaml", "extends: inside.yaml\n") == _sc112(
        "child.yaml", 1, 10, f"extends names inside.yaml, which lies outside the repository ({where})", hint)
    relative = os.path.relpath(outside, repo)
    assert _refused(repo, "child.yaml", f"extends: {relative}\n") == _sc112(
        "child.yaml", 1, 10, f"extends names {relative}, which lies outside the repository ({where})", hint)
    assert resolve(Path("child.yaml"), root=outside.parent).data["name"] == "base"  # --root names another root


def test_a_secret_in_a_parent_name_is_not_echoed(repo: Path) -> None:
    token = "hf_" + "Q" * 34
    finding = _refused(repo, "child.yaml", f"extends: {token}.yaml\n")
    assert finding.message == ("extends names (redacted).yaml, which does not exist (looked for "
                               "(redacted).yaml)")


def test_sixteen_extends_are_followed_and_a_seventeenth_is_refused(repo: Path) -> None:
    for i in range(17):
        (repo / f"p{i}.yaml").write_text(f"extends: p{i + 1}.yaml\nlevel{i}: {i}\n")
    (repo / "p17.yaml").write_text("name: top\n")
    assert resolve(Path("p1.yaml")).chain == tuple(f"p{i}.yaml" for i in range(1, 18))
    with pytest.raises(LoadError) as refused:
        resolve(Path("p0.yaml"))
    assert refused.value.finding == _sc112("p16.yaml", 1, 10, "extends chain deeper than 16 profiles",
                                           "flatten the chain")


def test_keyed_lists_merge_replace_and_delete_by_name(repo: Path) -> None:
    (repo / "child.yaml").write_text(
        "extends: base.yaml\nengine: !replace {port: 2}\nfleet:\n  nodes:\n    - !replace {name: n1, ip: c}\n"
        "    - {name: n2, ip: d}\n    - !delete n0\n")
    resolved = resolve(Path("child.yaml"))
    assert resolved.data == {"name": "base", "engine": {"port": 2},
                             "fleet": {"nodes": [{"name": "n1", "ip": "c"}, {"name": "n2", "ip": "d"}]},
                             "container": {"mounts": [{"target": "/m", "source": "/s"}]}}
    assert type(resolved.data["engine"]) is dict  # no !replace marker reaches the validator
    assert _where(resolved, ("fleet", "nodes", 0, "ip")) == ("child.yaml", 5, ())
    assert _where(resolved, ("fleet", "nodes", 1, "name")) == ("child.yaml", 6, ())
    assert _where(resolved, ("container", "mounts", 0, "source")) == ("base.yaml", 11, ("child.yaml",))
    assert _where(resolved, ("engine", "port")) == ("child.yaml", 2, ())
    assert _where(resolved, ("engine", "port", "deeper")) == ("child.yaml", 2, ())  # the nearest ancestor


def test_a_name_given_twice_stays_twice_for_the_validator(repo: Path) -> None:
    (repo / "child.yaml").write_text("extends: base.yaml\nfleet:\n  nodes:\n    - {name: n1, ip: x}\n"
                                     "    - {name: n1, ip: y}\n    - plain\n")
    nodes = resolve(Path("child.yaml")).data["fleet"]["nodes"]
    assert nodes == [{"name": "n0", "ip": "a"}, {"name": "n1", "ip": "x"}, {"name": "n1", "ip": "y"}, "plain"]


def test_a_three_level_chain_records_the_route_of_every_value(repo: Path) -> None:
    (repo / "mid.yaml").write_text("extends: base.yaml\nengine:\n  env: {B: '2'}\n")
    (repo / "leaf.yaml").write_text("extends: mid.yaml\nengine:\n  port: 3\n")
    resolved = resolve(Path("leaf.yaml"))
    assert resolved.data["engine"] == {"port": 3, "env": {"A": "1", "B": "2"}}
    assert resolved.chain == ("leaf.yaml", "mid.yaml", "base.yaml")
    assert _where(resolved, ("engine", "env", "A")) == ("base.yaml", 4, ("mid.yaml", "leaf.yaml"))
    assert _where(resolved, ("engine", "env", "B")) == ("mid.yaml", 3, ("leaf.yaml",))
    assert sorted(resolved.documents) == ["base.yaml", "leaf.yaml", "mid.yaml"]
    assert resolved.source_line(Position("mid.yaml", 3, 8)) == "  env: {B: '2'}"
    assert resolved.source_line(Position("other.yaml", 1, 1)) == ""


def test_another_source_than_the_working_tree_is_read_through_the_hooks() -> None:
    """What diff does for a git revision: the files come from a reader, never from the disk."""
    files = {"/r/profiles/child.yaml": "extends: ../base.yaml\nengine:\n  port: 9\n", "/r/base.yaml": BASE}

    def reader(path: Path, display: str) -> Document:
        return parse_text(files[os.path.normpath(path)], display)

    resolved = resolve(Path("/r/profiles/child.yaml"), "HEAD:profiles/child.yaml", reader=reader,
                       exists=lambda path: os.path.normpath(path) in files, root=Path("/r"))
    assert resolved.data["engine"] == {"port": 9, "env": {"A": "1"}}
    assert resolved.chain == ("HEAD:profiles/child.yaml", "base.yaml")  # the display, normalised: HEAD:profiles/..


def test_the_roots_are_the_work_trees_of_the_file_and_of_the_current_directory(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a" / ".git").mkdir(parents=True)
    (tmp_path / "a" / "deep" / "er").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "b")  # not in any work tree under tmp_path
    here = os.path.realpath(tmp_path)
    roots = extends_roots(tmp_path / "a" / "deep" / "er" / "p.yaml", tmp_path / "b")
    assert roots == (f"{here}/a", f"{here}/b")
    assert extends_roots(tmp_path / "b" / "p.yaml") == (f"{here}/b",)  # no work tree: the file's folder


def _where(resolved: Resolved, path: tuple[str | int, ...]) -> tuple[str, int, tuple[str, ...]]:
    origin = resolved.origin(path)
    return origin.spot.value.file, origin.spot.value.line, origin.via
