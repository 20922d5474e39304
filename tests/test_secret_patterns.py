"""spec/secret_patterns.py skips the token patterns for a text without any format's piece: that is sound only
while every token of every format holds its piece, which hypothesis checks on tokens made from each pattern."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.spec.secret_patterns import BEARER, TOKEN_FORMATS, hide_tokens, may_hold_token


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
