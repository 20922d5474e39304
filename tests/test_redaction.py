"""compiler/common/secrets.py: the one redaction step. A token of every known format is hidden wherever it
stands (property, tokens drawn from the formats' own patterns); a value given to a secret's name is hidden
in each spelling an output uses; what only looks like a secret's name (a token count, a path to a secret,
a reference) is left readable; JSON is redacted value by value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_compile.common.secrets import REDACTED, Redacted, redact, redact_value, redacted_json
from spark_compile.spec.secret_patterns import TOKEN_FORMATS

FORMATS = list(TOKEN_FORMATS)
# Text around a token: pieces of other formats and the characters their patterns stop or go on at.
AROUND = st.lists(st.sampled_from(["", " ", "a", "1", ".", "-", "_", "=", ":", "'", '"', "sk-", "hf_", "eyJ",
                                   "Bearer ", "\n", "HF_TOKEN=", "--api-key "]), max_size=4).map("".join)


@pytest.mark.parametrize("pattern", FORMATS)
@settings(deadline=None)
@given(before=AROUND, after=AROUND, data=st.data())
def test_a_token_of_every_format_is_hidden_wherever_it_stands(pattern: str, before: str, after: str,
                                                              data: st.DataObject) -> None:
    token = data.draw(st.from_regex(pattern, fullmatch=True))
    text = before + token + after
    assert token not in redact(text)
    assert REDACTED in redact(text)
    assert token not in json.dumps(redact_value({"note": text, "list": [text]}))


@pytest.mark.parametrize("pattern", FORMATS)
@settings(deadline=None)
@given(before=AROUND, data=st.data())
def test_redaction_is_idempotent(pattern: str, before: str, data: st.DataObject) -> None:
    once = redact(before + data.draw(st.from_regex(pattern, fullmatch=True)))
    assert redact(once) == once


@pytest.mark.parametrize(("text", "shown"), [
    ("HF_TOKEN: hunter2", "HF_TOKEN: (redacted)"),
    ("  hf_token: 'hunter 2'", "  hf_token: (redacted)"),  # any case, a quoted value whole
    ("HF_TOKEN=hunter2 other", "HF_TOKEN=(redacted) other"),
    ("--api-key hunter2 --port 1", "--api-key (redacted) --port 1"),
    ("--api-key=hunter2", "--api-key=(redacted)"),
    ("'--api-key', 'k1'", "'--api-key', (redacted)"),  # an argv list printed by Python
    ('"HF_TOKEN": "hunter2"', '"HF_TOKEN": (redacted)'),
    ("db_password: [a, b]", "db_password: (redacted)"),  # a flow list, closed on the line
    ("AUTHORIZATION: Bearer abc123def456ghi", "AUTHORIZATION: (redacted)"),
    ("engine.env.HF_TOKEN: expected a string, got 'hunter2'", "engine.env.HF_TOKEN: expected a string, got "
     "(redacted)"),  # a message about the key: its `got` value
    ("token: x\nport: 1\nsecret: y", "token: (redacted)\nport: 1\nsecret: (redacted)"),
])
def test_a_value_given_to_a_secrets_name_is_hidden(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize("text", [
    "HF_TOKEN: {file: /etc/hf}",  # a reference says where the secret lives, never the value
    "HF_TOKEN: {env: HF_TOKEN}",
    "HF_TOKEN_PATH: /etc/x",  # a path to a secret
    "max_new_tokens: 512",  # token counts
    "num_tokens: 5",
    "tokenizer_path: /m",
    "api_key: HF_TOKEN",  # a name as the value: no secret of its own
    "my secret is out",  # the word in prose assigns nothing
    "x HF_TOKEN y",
    "engine:\n  port: 8210",
])
def test_what_only_looks_like_a_secret_is_left_readable(text: str) -> None:
    assert redact(text) == text


def test_json_values_are_redacted_by_key_by_flag_and_by_shape() -> None:
    token = "ghp_" + "a" * 36
    data = {"HF_TOKEN": "x", "HF_TOKEN_EMPTY": "", "args": ["--api-key", "k", "--port", "1", "--api-key=z"],
            "s": token, "cmd": "run --env HF_TOKEN=abc -v /a:/b", "n": 3, "nested": {"password": ["p"]}}
    assert redact_value(data) == {
        "HF_TOKEN": REDACTED, "HF_TOKEN_EMPTY": "", "args": ["--api-key", REDACTED, "--port", "1",
                                                            f"--api-key={REDACTED}"],
        "s": REDACTED, "cmd": f"run --env HF_TOKEN={REDACTED} -v /a:/b", "n": 3, "nested": {"password": ["p"]}}


def test_a_list_under_a_secret_key_is_not_a_secret_value_itself() -> None:
    """Only strings are values: a list under `password` is walked, its items judged on their own."""
    assert redact_value({"password": ["p", {"token": "t"}]}) == {"password": ["p", {"token": REDACTED}]}


def test_prose_redaction_also_reads_messages_inside_json() -> None:
    message = "engine.env.HF_TOKEN: got 'hunter2'"
    assert redact_value({"message": message}) == {"message": message}  # a value: only token shapes
    assert redact_value({"message": message}, prose=True) == {"message": "engine.env.HF_TOKEN: got (redacted)"}


def test_redacted_json_is_marked_and_keeps_its_syntax() -> None:
    out = redacted_json({"api_key": 'x"y', "path": "/a:/b:ro", "argv": ["--token", "t,}"]}, indent=2,
                        sort_keys=True)
    assert isinstance(out, Redacted)
    assert json.loads(out) == {"api_key": REDACTED, "path": "/a:/b:ro", "argv": ["--token", REDACTED]}
    assert out.endswith("}\n")


def test_an_assignment_inside_a_value_is_hidden_but_a_mount_stays_whole() -> None:
    assert redact_value("-e A=1 -e MY_SECRET=s3 --mount /etc/passwd:/etc/passwd:ro") == (
        f"-e A=1 -e MY_SECRET={REDACTED} --mount /etc/passwd:/etc/passwd:ro")


def test_a_token_glued_to_a_secret_assignment_inside_a_value_hides_both() -> None:
    """The spans are found in the value as written: hiding the token first left `=hunter2` with no name."""
    glued = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk--api-key=hunter2"
    assert redact_value(glued) == f"{REDACTED}={REDACTED}"
    assert redact_value(["-e", glued]) == ["-e", f"{REDACTED}={REDACTED}"]
    assert redact_value({"note": glued}, prose=True) == {"note": f"{REDACTED}={REDACTED}"}
