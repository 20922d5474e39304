"""spec/secret_patterns.py: every token of every format is hidden, whatever text is around it, and the audit's own
reading of the nodes' redaction ERE (fleet_data.cut_on_node) is held to that ERE."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.fleet.data import cut_on_node, secret_names
from spark_compile.spec.secret_patterns import SECRET_NAME, TOKEN_FORMATS, hide_tokens, looks_secret, names_secret


@pytest.mark.parametrize("pattern", TOKEN_FORMATS)
def test_every_token_of_a_format_is_hidden(pattern: str) -> None:
    @settings(max_examples=60, deadline=None)
    @given(st.from_regex(re.compile(pattern), fullmatch=True))
    def hidden(token: str) -> None:
        assert hide_tokens(f"x {token} y") == "x (redacted) y"
        assert looks_secret("NOTE", token)

    hidden()


def test_a_bearer_token_glued_to_another_is_hidden_whole() -> None:
    """The first token's pattern stops before the second "Bearer" and another's runs on into it: the matches
    overlap, and the run they cover is hidden as one, leaving no piece of either token."""
    assert hide_tokens("Authorization: Bearer abcdef1234567890Bearer xyz123456789abc") == "Authorization: (redacted)"


@pytest.mark.parametrize(("text", "expected"), [
    ("HF_TOKEN", True), ("my-Api_Key", True), ("passwd", True), ("AUTHORIZATION:", True), ("\u212aEY", False),
    ("tokenizer", True), ("KEYBOARD", False), ("auth", False), ("secre", False), ("", False),
])
def test_a_secret_name_is_found_in_any_case(text: str, expected: bool) -> None:
    assert names_secret(text) == expected == bool(re.search(SECRET_NAME, text, re.IGNORECASE))


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


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("HF_TOKEN_PATH", "/run/secrets/hf", False), ("HF_TOKEN_PATH", "hf_x", True), ("HF_TOKEN_FILE", "", False),
    ("HF_TOKEN", "x", True), ("MAX_NEW_TOKENS", "8", False), ("DATA_DIR", "x", False),
])
def test_a_name_that_says_where_a_secret_lives_holds_a_path(name: str, value: str, expected: bool) -> None:
    assert looks_secret(name, value) == expected
