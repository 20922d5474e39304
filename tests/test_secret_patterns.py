"""spec/secret_patterns.py skips the token patterns for a text without any format's piece: that is sound only
while every token of every format holds its piece, which hypothesis checks on tokens made from each pattern.
The secret-name pattern is skipped the same way for ASCII text without its pieces, and the audit's own reading
of the nodes' redaction ERE (fleet_data.cut_on_node) is held to that ERE."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.fleet.data import cut_on_node, secret_names
from spark_compile.spec.secret_patterns import (
    BEARER,
    SECRET_NAME,
    TOKEN_FORMATS,
    _reference_at,
    hide_tokens,
    may_hold_token,
    names_secret,
)


@pytest.mark.parametrize(("piece", "pattern"), TOKEN_FORMATS, ids=[piece for piece, _ in TOKEN_FORMATS])
def test_every_token_of_a_format_holds_its_piece(piece: str, pattern: str) -> None:
    @settings(max_examples=60, deadline=None)
    @given(st.from_regex(re.compile(pattern), fullmatch=True))
    def holds(token: str) -> None:
        assert piece in token
        assert may_hold_token(f"x {token} y")
        assert hide_tokens(f"x {token} y") == "x (redacted) y"

    holds()


def test_a_bearer_token_holds_the_bearer_piece() -> None:
    assert BEARER.startswith("Bearer") and may_hold_token("Authorization: Bearer abc")


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=80))
def test_a_text_without_a_piece_is_left_as_it_is(text: str) -> None:
    if not may_hold_token(text):
        assert hide_tokens(text) == text
        assert not any(re.search(pattern, text) for _, pattern in TOKEN_FORMATS)


WORDS = ["TOKEN", "secret", "PassWd", "api-key", "API_KEY", "apikey", "ACCESS_KEY", "auth-header", "Authorization",
         "credential", "KEY", "AUTH", "ſecret", "\u212aEY", "TOK", "EN", "_", "x", "é"]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(WORDS), max_size=4).map("".join))
def test_a_secret_name_is_found_as_the_pattern_finds_it(text: str) -> None:
    assert names_secret(text) == bool(re.search(SECRET_NAME, text, re.IGNORECASE))


class _Secrets:
    def __init__(self, names: list[str]) -> None:
        self.env = dict.fromkeys(names)


class _Profile:
    def __init__(self, names: list[str]) -> None:
        self.secrets = _Secrets(names)


ENV_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["HF_TOKEN", "MY_PASS", "db_url", "X"]), max_size=2),
       st.one_of(ENV_NAMES, st.sampled_from(["HF_TOKEN_X", "my_pass", "XDB_URL", "API_KEY", "TOKENIZER", "PATH"])))
def test_a_variable_is_cut_on_the_node_as_its_grep_cuts_it(secrets: list[str], name: str) -> None:
    profile = _Profile(secrets)
    expected = bool(re.search(secret_names(profile), name, re.IGNORECASE))  # type: ignore[arg-type]
    assert cut_on_node(name, profile) == expected  # type: ignore[arg-type]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["HF", "_", "-", "TOKEN", "PATH", "file", "Dir", "DİR", "\n", "x"]), max_size=5)
       .map("".join))
def test_a_reference_suffix_is_found_where_its_pattern_finds_it(name: str) -> None:
    upper = name.upper().replace("-", "_")
    found = re.search(r"_(PATH|FILE|DIR)$", upper, re.IGNORECASE)
    assert _reference_at(upper) == (found.start() if found else -1)
