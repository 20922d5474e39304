"""What a literal secret looks like: token formats of the services a fleet talks to, and secret-ish names."""

from __future__ import annotations

import functools
import itertools
import re

# The token formats, each with a piece of text every token of that format holds. A text holding none of
# the pieces holds no token, so most texts skip the patterns, and a run that meets none never compiles them
# (their first compile cost 0.4 ms of every run). tests/test_secret_patterns.py holds every format to its piece.
TOKEN_FORMATS = (
    ("hf_", r"hf_[A-Za-z0-9]{30,}"),  # Hugging Face access token
    ("sk-", r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),  # OpenAI / Anthropic style API keys
    ("gh", r"gh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    ("github_pat_", r"github_pat_[A-Za-z0-9_]{22,}"),  # GitHub fine-grained tokens
    ("glpat-", r"glpat-[A-Za-z0-9_-]{20,}"),  # GitLab personal access tokens
    ("k_", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe keys
    ("AIza", r"AIza[0-9A-Za-z_-]{35}"),  # Google API keys
    ("eyJ", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JSON Web Tokens
    ("AKIA", r"AKIA[0-9A-Z]{16}"),  # AWS access key id
    ("xox", r"xox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    ("-----BEGIN ", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    ("Bearer", r"Bearer[ \t]+[A-Za-z0-9._~+/-]*[0-9][A-Za-z0-9._~+/-]*=*"),  # with a digit: not "tokenization"
)
# Its form is a POSIX ERE too (the audit greps with it on the nodes): no lookaround.
SECRET_VALUE = "|".join(pattern for _, pattern in TOKEN_FORMATS)
# An HTTP Authorization header's token. The redaction applies BEARER first: it stops before another
# "Bearer", so a token glued to one is matched on its own (another pattern could swallow the keyword).
BEARER = r"Bearer[ \t]+(?=[A-Za-z0-9._~+/-]*[0-9])(?:(?!Bearer)[A-Za-z0-9._~+/-]){12,}=*"
_PIECES = tuple(piece for piece, _ in TOKEN_FORMATS)


def may_hold_token(text: str) -> bool:
    """False when ``text`` cannot hold a token of any format (it has none of their pieces)."""
    # A loop, not any() over a generator: half the cost, paid for every value of every profile.
    for piece in _PIECES:  # noqa: SIM110
        if piece in text:
            return True
    return False


def hide_tokens(text: str, mark: str = "(redacted)") -> str:
    """``text`` with every token-shaped substring replaced by ``mark`` (Bearer tokens first)."""
    if not may_hold_token(text):
        return text
    return re.sub(SECRET_VALUE, mark, re.sub(BEARER, mark, text))


_ALWAYS_SECRET = (r"SECRET|PASSWORD|PASSWD|API[_-]?KEY|ACCESS[_-]KEY|PRIVATE[_-]KEY|CREDENTIAL|AUTH[_-]KEY"
                  r"|AUTH[_-]HEADER|AUTHORIZATION")
# A secret's name, searched in any case (re.IGNORECASE), and an ERE as the nodes' grep -Ei reads it too.
SECRET_NAME = rf"(TOKEN|{_ALWAYS_SECRET})"
_SECRET_NAME_PIECES = ("TOKEN", "SECRET", "PASSW", "KEY", "CREDENTIAL", "AUTH")  # each match holds one


def names_secret(text: str) -> bool:
    """Whether ``text`` holds a secret's name (SECRET_NAME, in any case). ASCII text without one of its
    pieces is answered without the pattern: compiled ignoring case, it cost a quarter millisecond a run."""
    if text.isascii():
        upper = text.upper()  # once, not per piece: every line a run prints comes through here
        if not any(piece in upper for piece in _SECRET_NAME_PIECES):
            return False
    return re.search(SECRET_NAME, text, re.IGNORECASE) is not None


# Only TOKEN has innocent meanings (a count of tokens, token ids, a tokenizer); the other words always
# mean a secret. A name that refers to where a secret lives (_PATH, _FILE, _DIR) holds none itself.
_TOKEN_COUNT_WORDS = frozenset((
    "MAX", "MIN", "NUM", "NEW", "PER", "RATIO", "IDS", "ID", "USAGE", "BLOCK", "ORACLE", "MODE", "SWAP", "PROB",
    "ASSERT", "ACTIVATION", "THINK", "CHUNK", "QUERY", "INPUT", "RECV", "DISPATCH", "PREFILL", "FLUSH", "LOOKUP",
    "LIMIT", "COUNT", "BUDGET", "LEN", "LENGTH", "SIZE", "TOTAL", "FULL"))  # FULL: SGLang's full_token count
_REFERENCE = r"_(PATH|FILE|DIR)$"  # in any case: the name says where a secret lives


def _reference_at(upper: str) -> int:
    """Where an upper-cased name's _REFERENCE suffix starts, or -1; an ASCII name is read without the pattern,
    whose compile ignoring case cost 0.06 ms a run."""
    if not upper.isascii():
        found = re.search(_REFERENCE, upper, re.IGNORECASE)
        return found.start() if found else -1
    name = upper.removesuffix("\n")  # where `$` matches too
    return next((len(name) - len(end) for end in ("_PATH", "_FILE", "_DIR") if name.endswith(end)), -1)


_SECRET_WORDS = frozenset(("TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "APIKEY",
                           "CREDENTIAL", "CREDENTIALS", "PASSPHRASE", "AUTHORIZATION"))
_SECRET_PAIRS = frozenset((("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("AUTH", "KEY"),
                           ("API", "KEYS"), ("AUTH", "HEADER"), ("AUTH", "HEADERS")))


@functools.lru_cache(maxsize=4096)  # the keys and flags of a repository's profiles are mostly the same
def secret_name(name: str) -> bool:
    """True when a variable, key or flag called ``name`` holds a secret by its name: one of its words
    (split at '_' and '-') is a secret's word (SecretRef, TOKENIZER or MAX_NEW_TOKENS are not)."""
    upper = name.upper().replace("-", "_").strip("_")
    if _reference_at(upper) >= 0:
        return False
    words = upper.split("_")
    pairs = set(itertools.pairwise(words))
    if pairs & _SECRET_PAIRS or (set(words) & _SECRET_WORDS) - {"TOKEN", "TOKENS"}:
        return True
    return bool({"TOKEN", "TOKENS"} & set(words)) and not set(words) & _TOKEN_COUNT_WORDS


def looks_secret(name: str, value: str) -> bool:
    """True when ``value`` has a token's shape, or ``name`` says it holds a secret and it is not empty, or
    ``name`` says where a secret lives (HF_TOKEN_PATH) but the value is no path: the secret itself."""
    if may_hold_token(value) and re.search(SECRET_VALUE, value):
        return True
    reference = _reference_at(name.upper().replace("-", "_"))
    if reference >= 0 and secret_name(name[:reference]):
        return bool(value) and not value.startswith(("/", "./", "../", "~"))
    return bool(value) and secret_name(name)
