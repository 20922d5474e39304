"""README.md as a user reads it: every `console` example run as written (each section's in one bash, from the
repository root, HOME a scratch folder shown as ~) prints what the README shows (a line `…` stands for any
lines), its lists of hardware, model architectures, engine builds and images are the data spec/ ships, and
every relative link of README.md and CONTRIBUTING.md leads to a file or a heading."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spark_compile.capacity.preload import DSV4
from spark_compile.pipeline import planned, run
from spark_compile.spec.catalog import available_engine_catalogs, engine_catalog, env_catalog, image_builds
from spark_compile.spec.hardware import FAMILIES, HARDWARE, ModelFamily

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SUPPORTED = "Supported hardware, models, engine builds and images"
ELIDED = "…"
PROFILES = ROOT / "spec" / "profiles"
SHIPPED = sorted([*PROFILES.glob("*.yaml"), *(PROFILES / "examples").glob("*.yaml")])  # releases: the reference's


def _sections() -> dict[str, str]:
    """README's `## ` sections by title."""
    parts = re.split(r"^## (.+)\n", README, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _examples(section: str) -> list[tuple[str, list[str]]]:
    """Each `$ command` of the section's console blocks with the lines the README shows it printing."""
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append((line[2:], []))
            else:
                examples[-1][1].append(line)
    return examples


def _shown(lines: list[str]) -> re.Pattern[str]:
    """What the README shows, as a pattern of the whole output (`…` matching any lines)."""
    return re.compile("".join("(?:.*\n)*?" if line == ELIDED else re.escape(line + "\n") for line in lines))


def _run(examples: list[tuple[str, list[str]]], home: Path) -> list[str]:
    """Each command's output (stdout and stderr as a terminal interleaves them), in one bash from ROOT."""
    script = "exec 2>&1\n" + "".join(f"echo @@README-{i}\n{command}\n" for i, (command, _) in
                                       enumerate(examples))
    env = {**os.environ, "HOME": str(home), "PYTHONUNBUFFERED": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    return re.split(r"^@@README-\d+\n", out.stdout.replace(str(home), "~"), flags=re.MULTILINE)[1:]


@pytest.mark.parametrize("title", [title for title, text in _sections().items() if _examples(text)])
def test_each_example_prints_what_the_readme_shows(title: str, tmp_path: Path) -> None:
    examples = _examples(_sections()[title])
    (tmp_path / "home").mkdir()
    outputs = _run(examples, tmp_path / "home")
    assert len(outputs) == len(examples)
    for (command, lines), output in zip(examples, outputs, strict=True):
        assert _shown(lines).fullmatch(output), (command, output)


def test_the_quickstart_runs_a_single_spark_profile_that_ships() -> None:
    copied = re.search(r"cp (spec/profiles/examples/\S+\.yaml)", _sections()["Quickstart: one DGX Spark"])
    assert copied is not None
    profile = planned(run(ROOT / copied.group(1))).profile
    assert (len(profile.fleet.nodes), profile.hardware) == (1, "dgx-spark-gb10")


# -- the lists of what ships ------------------------------------------------------------------------------------
def _table(header: str) -> list[list[str]]:
    """The rows of the table under ``header`` in the Supported section, as cells."""
    text = _sections()[SUPPORTED].split(header + "\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip("|").strip().split(" | ") for line in text.splitlines()[1:]]


GENERIC = "the generic rules; SGLang's own checks with `check --engine`"


def _knows(family: ModelFamily | None, architecture: str) -> str:
    """What the rules and the budget know of an architecture, as the README's table says it."""
    if family is None:
        return GENERIC
    known = [f"KV page size {family.page_size}"] if family.page_size else []
    known += [f"speculative {' or '.join(family.speculative)} only"] if family.speculative else []
    known += ["Engram tables"] if family.has_engram else []
    known += [f"attention backend {family.attention_backend} whatever is written"] if family.attention_backend else []
    known += [f"KV cache {' or '.join(family.kv_cache_dtypes)}"] if family.kv_cache_dtypes else []
    known += [f"attention backends {', '.join(family.attention_backends)}"] if family.attention_backends else []
    known += [f"{family.gb10_attention_backend} on GB10 when none is written"] if family.gb10_attention_backend else []
    known += ["the weights' estimate and SGLang's KV pool arithmetic"] if architecture == DSV4 else []
    return "; ".join(known) or GENERIC


def _shipped_by_architecture() -> dict[str, list[str]]:
    by: dict[str, list[str]] = {}
    for path in SHIPPED:
        by.setdefault(planned(run(path)).profile.model.architecture, []).append(f"`{path.name}`")
    return by


def architecture_rows() -> list[list[str]]:
    shipped = _shipped_by_architecture()
    return [[f"`{name}`", ", ".join(shipped.get(name, [])) or "none", _knows(FAMILIES.get(name), name)]
            for name in sorted({*FAMILIES, *shipped})]


def hardware_rows() -> list[list[str]]:
    return [[f"`{hw.name}`", hw.description, hw.cpu_arch, f"{hw.sm[0]}.{hw.sm[1]}", str(hw.gpus_per_node)]
            for hw in HARDWARE.values()]


def build_rows() -> list[list[str]]:
    return [[f"`{name}`", str(len(engine_catalog(name).flags)), str(len(env_catalog(name).variables))]
            for name in available_engine_catalogs()]


def image_rows() -> list[list[str]]:
    by: dict[str, list[str]] = {}
    for path in SHIPPED:
        by.setdefault(str(planned(run(path)).profile.engine.image), []).append(f"`{path.name}`")
    return [[f"`{image}`", ", ".join(names)] for image, names in sorted(by.items())]


def test_the_hardware_table_is_the_hardware_catalog() -> None:
    assert _table("| `hardware:` | node | CPU | compute capability | GPUs per node |") == hardware_rows()


def test_the_architecture_table_is_what_the_rules_know_and_the_profiles_ship() -> None:
    assert _table("| architecture | shipped profiles | what spark-compile knows of it |") == architecture_rows()


def test_the_engine_builds_are_the_catalogs() -> None:
    assert _table("| `engine.catalog` | engine flags | environment variables |") == build_rows()


def test_the_images_are_the_shipped_profiles_and_the_image_table() -> None:
    assert _table("| image | shipped profiles |") == image_rows()
    assert ("lists no digest yet" in _sections()[SUPPORTED]) == (image_builds() == {})


# -- links ------------------------------------------------------------------------------------------------------
def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped but hyphens, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_every_relative_link_leads_somewhere(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    anchors = {_slug(title) for title in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith("#"):
            assert target[1:] in anchors, (page, target)
        elif "://" not in target:
            assert (ROOT / target.split("#", 1)[0]).exists(), (page, target)
