"""Property-based: hostile values in every string field of the schema (and every string key), through
the CLI; the first accepted hostile values of each field through every real consumer.

Budget: MAX_EXAMPLES inputs per field, derandomized (the same inputs on every run), no deadline. Every
input must end in exit 0, 1 or 2 without a traceback; no output may echo a token-shaped value; output
stays bounded. Run with ``-p no:randomly``-free pytest; about two minutes on two cores.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from consumers import check_all
from fields import FIELDS
from hostile import CORPUS, assert_handled, child_profile, plan_of, run_main, workspace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from round2 import UNSAFE

from conftest import REFERENCE_PROFILE
from support.fleet_install import SCRIPTS

MAX_EXAMPLES = 40
CONSUMER_RUNS_PER_FIELD = 2
TOKEN_SHAPED = re.compile(r"hf_a{30}|ghp_b{30}|github_pat_c{22}|sk_live_d{16}|AIza|eyJhbGci|hunter2"
                          r"|abcdef0123456789xyz")
_PLAIN = re.compile(r"[A-Za-z0-9._/-]*")

_FRAGMENTS = st.sampled_from([c for c in CORPUS if len(c) < 100] + ["a", "b", "/", ".", "-", "@", "=", "+"])
HOSTILE = st.one_of(
    st.sampled_from(CORPUS),
    st.lists(_FRAGMENTS, min_size=1, max_size=4).map("".join),
    st.lists(_FRAGMENTS, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts)),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=24),
)
FORMATS = ("text", "json", "github")
consumer_runs: dict[str, int] = {}


def _check_output(value: str, text: str, fmt: str) -> None:
    assert len(text) < 200_000, "output must stay proportional to the findings, not to the input"
    assert UNSAFE.search(text) is None, "a control or bidi character was printed raw"
    if TOKEN_SHAPED.search(value):
        assert TOKEN_SHAPED.search(text) is None, "a token-shaped value was echoed"
    if fmt == "github":
        for line in text.splitlines():
            assert line.startswith(("::error ", "::warning ")), line


@pytest.mark.parametrize("field", sorted(FIELDS))
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(value=HOSTILE)
def test_hostile_value_in_every_string_field(field: str, value: str) -> None:
    fmt = FORMATS[len(value) % 3]
    with workspace() as tmp:
        profile = child_profile(tmp, FIELDS[field](value))
        checked = run_main("check", "--format", fmt, str(profile))
        assert_handled(checked)
        _check_output(value, checked.out + checked.err, fmt)
        if checked.code != 0:
            return
        if len(value) % 4 == 0:  # a share of the accepted inputs also through diff and plan
            for argv in (("diff", str(REFERENCE_PROFILE), str(profile)), ("plan", str(profile))):
                outcome = run_main(*argv)
                assert_handled(outcome)
                _check_output(value, outcome.out + outcome.err, "text")
        out = tmp / "out"
        compiled = run_main("compile", str(profile), "--out", str(out))
        assert_handled(compiled)
        assert compiled.code == 0, compiled.err  # what check accepts, compile writes
        if _PLAIN.fullmatch(value) or consumer_runs.get(field, 0) >= CONSUMER_RUNS_PER_FIELD:
            return
        consumer_runs[field] = consumer_runs.get(field, 0) + 1
        target = next(p for p in out.iterdir() if p.is_dir() and p.name != SCRIPTS)  # the profile's folder
        plan = plan_of(out, target.name)
        runtime = Path(f"{tmp}/run") / target.name / "runtime.env" if plan["ranks"][0]["runtime_env"] else None
        check_all(target, plan, tmp, runtime)
