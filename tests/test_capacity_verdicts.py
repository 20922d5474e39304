"""Every profile under tests/ and spec/profiles has a capacity verdict and a KV token count (issue 34). The only
exceptions are test profiles whose subject is the very input the count needs; each is listed with the reason
its verdict must give."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_compile.capacity.format import verdict
from spark_compile.pipeline import Rejected, run

from conftest import ROOT

# Folders of sparkrun recipes and imported launch lines, not profiles.
NOT_PROFILES = ("tests/fixtures/field", "tests/import/fixtures")
PROFILES = sorted(p for p in [*(ROOT / "tests").rglob("*.yaml"), *(ROOT / "spec" / "profiles").rglob("*.yaml")]
                  if not str(p.relative_to(ROOT)).startswith(NOT_PROFILES))
UNKNOWABLE = {
    # Each names what the test profile takes away on purpose; the verdict must say it.
    "tests/profiles/negative/config-json-unreadable.yaml": "is not a readable JSON file",
    "tests/engine/profiles/no-config-json.yaml": "no config.json",
    "tests/profiles/negative/context-over-config-json.yaml": "the context length is not known here",
    "tests/profiles/negative/context-too-long.yaml": "the context length is not known here",
    "tests/engine/profiles/resolution-fails-graphs-off.yaml": "the context length is not known here",
    "tests/profiles/negative/eagle3-draft-tokens.yaml": "a rank's weights are not known here",
    "tests/engine/profiles/draft-not-here.yaml": "a rank's weights are not known here",
}


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_profile_has_a_verdict_and_a_kv_token_count(path: Path) -> None:
    name = str(path.relative_to(ROOT))
    outcome = run(path, root=ROOT)
    planned = outcome.planned if isinstance(outcome, Rejected) else outcome
    if planned is None or planned.capacity is None:
        # A negative profile refused before a plan exists (its YAML or schema) has nothing to size.
        assert name.startswith("tests/profiles/negative/"), outcome.findings
        return
    said = verdict(planned.capacity)
    if name in UNKNOWABLE:
        assert said.startswith("cannot tell: ") and UNKNOWABLE[name] in said, said
        return
    assert not said.startswith("cannot tell"), said
    for rank in planned.capacity.ranks:
        assert rank.terms["weights"].gib is not None, rank.terms["weights"].source
        assert rank.kv is not None and rank.kv.full_token is not None, rank.kv


def test_the_exceptions_are_profiles_that_exist() -> None:
    assert {name for name in UNKNOWABLE if not (ROOT / name).is_file()} == set()
