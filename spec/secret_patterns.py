"""What a literal secret looks like: token formats of the services a fleet talks to, and secret-ish names."""

from __future__ import annotations

import itertools
import re

# One pattern per token format; SECRET_VALUE is their union.
TOKEN_FORMATS = (
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face access token
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",  # OpenAI / Anthropic style API keys
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained tokens
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab personal access tokens
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe keys
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JSON Web Tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key id
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"Bearer[ \t]+[A-Za-z0-9._~+/-]*[0-9][A-Za-z0-9._~+/-]*=*",  # with a digit: not "tokenization"
)
# Its form is a POSIX ERE too (the audit greps with it on the nodes): no lookaround.
SECRET_VALUE = "|".join(TOKEN_FORMATS)
# An HTTP Authorization header's token, stopping before another "Bearer": a token glued to one is matched on
# its own (another pattern could swallow the keyword). Its matches and SECRET_VALUE's are hidden together.
BEARER = r"Bearer[ \t]+(?=[A-Za-z0-9._~+/-]*[0-9])(?:(?!Bearer)[A-Za-z0-9._~+/-]){12,}=*"
_SECRET_VALUE = re.compile(SECRET_VALUE)
_BEARER = re.compile(BEARER)


def token_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a token-shaped substring: the (start, end) of each match of either pattern."""
    return [match.span() for pattern in (_BEARER, _SECRET_VALUE) for match in pattern.finditer(text)]


def masked(text: str, spans: list[tuple[int, int]], mark: str) -> str:
    """``text`` with each run of overlapping ``spans`` replaced by one ``mark``."""
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:  # overlaps the run just masked: extend it
            last = max(last, end)
            continue
        out += [text[last:start], mark]
        last = end
    return "".join(out) + text[last:]


def hide_tokens(text: str, mark: str = "(redacted)") -> str:
    """``text`` with every token-shaped substring replaced by ``mark``."""
    return masked(text, token_spans(text), mark)


_ALWAYS_SECRET = (r"SECRET|PASSWORD|PASSWD|API[_-]?KEY|ACCESS[_-]KEY|PRIVATE[_-]KEY|CREDENTIAL|AUTH[_-]KEY"
                  r"|AUTH[_-]HEADER|AUTHORIZATION")
# A secret's name, searched in any case (re.IGNORECASE), and an ERE as the nodes' grep -Ei reads it too.
SECRET_NAME = rf"(TOKEN|{_ALWAYS_SECRET})"
_SECRET_NAME = re.compile(SECRET_NAME, re.IGNORECASE)


def names_secret(text: str) -> bool:
    """Whether ``text`` holds a secret's name (SECRET_NAME, in any case)."""
    return _SECRET_NAME.search(text) is not None


# Only TOKEN has innocent meanings (a count of tokens, token ids, a tokenizer); the other words always
# mean a secret. A name that refers to where a secret lives (_PATH, _FILE, _DIR) holds none itself.
_TOKEN_COUNT_WORDS = frozenset((
    "MAX", "MIN", "NUM", "NEW", "PER", "RATIO", "IDS", "ID", "USAGE", "BLOCK", "ORACLE", "MODE", "SWAP", "PROB",
    "ASSERT", "ACTIVATION", "THINK", "CHUNK", "QUERY", "INPUT", "RECV", "DISPATCH", "PREFILL", "FLUSH", "LOOKUP",
    "LIMIT", "COUNT", "BUDGET", "LEN", "LENGTH", "SIZE", "TOTAL", "FULL"))  # FULL: SGLang's full_token count
_REFERENCE = re.compile(r"_(PATH|FILE|DIR)$", re.IGNORECASE)  # in any case: the name says where a secret lives


def _reference_at(upper: str) -> int:
    """Where an upper-cased name's _REFERENCE suffix starts, or -1."""
    found = _REFERENCE.search(upper)
    return found.start() if found else -1


_SECRET_WORDS = frozenset(("TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "APIKEY",
                           "CREDENTIAL", "CREDENTIALS", "PASSPHRASE", "AUTHORIZATION"))
_SECRET_PAIRS = frozenset((("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("AUTH", "KEY"),
                           ("API", "KEYS"), ("AUTH", "HEADER"), ("AUTH", "HEADERS")))


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
    if _SECRET_VALUE.search(value):
        return True
    reference = _reference_at(name.upper().replace("-", "_"))
    if reference >= 0 and secret_name(name[:reference]):
        return bool(value) and not value.startswith(("/", "./", "../", "~"))
    return bool(value) and secret_name(name)


# A name holding a secret's word, matched from where the name starts (no name character before it): a search
# that tried again at every character of a long word took time in the square of its length.
_NAME = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*(?:" + SECRET_NAME + r")[A-Za-z0-9_-]*", re.IGNORECASE)
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
# A value: quoted, a flow list or mapping closed on the same line, or a plain word (never the `{` or `[`
# that opens a block: `"api_key": {` in a JSON document is structure, not a value).
_VALUE = r"(" + _QUOTED + r"|\[[^\]\n]*\]|\{[^}\n]*\}|[\w./+~@-][^\s,}\]]*)"
_ASSIGNED = re.compile(r"(\"?\s*[:=]\s*)" + _VALUE)  # HF_TOKEN: x, HF_TOKEN=x, "HF_TOKEN": "x"
_FLAG_VALUE = re.compile(r"(['\"]?(?:,\s*|=|\s+))" + _VALUE)  # --api-key x, --api-key=x, '--api-key', 'x'
_EQUALS = re.compile(r"(=)" + _VALUE)
# A secret reference (`HF_TOKEN: {file: /etc/hf}`) says where the value lives on the node, never the value.
_SECRET_REF = re.compile(r"\{\s*(?:file|env)\s*:\s*[^{}:,\s]+\s*\}")
_GOT = re.compile(r"(\bgot\s+)(" + _QUOTED + r"|[^\s,)]+)")


def _named_value_spans(line: str) -> list[tuple[int, int]]:
    """Where ``line`` holds a value given to a secret's name (NAME=x, NAME: x, --flag x, got 'x')."""
    spans, last = [], 0
    for match in _NAME.finditer(line):
        name = match.group()
        if match.start() < last or not secret_name(name.rsplit(".", 1)[-1].strip("-")):
            continue
        last = match.end()
        # A dotted path (engine.env.HF_TOKEN: expected ...) is a message about the key, not an assignment.
        pattern = _FLAG_VALUE if name.rsplit(".", 1)[-1].startswith("-") else _EQUALS if "." in name else _ASSIGNED
        assigned = pattern.match(line, last)
        value = assigned.group(2) if assigned else ""
        if assigned and not secret_name(value.strip("-")) and not _SECRET_REF.fullmatch(value):
            spans.append(assigned.span(2))
            last = assigned.end()
        got = _GOT.search(line, last)
        if got:
            spans.append(got.span(2))
            last = got.end()
    return spans


def secret_spans(line: str) -> list[tuple[int, int]]:
    """Where one line of prose holds a token-shaped substring or a value given to a secret's name."""
    # Both kinds are found in the text as written, then hidden together: a token's pattern can run on into a
    # name glued to it (a JWT's last part takes '-'), and a name's value can be the first word of a token.
    return token_spans(line) + _named_value_spans(line)


def redact_text(text: str, mark: str = "(redacted)") -> str:
    """``text`` with every secret-shaped substring, and every value given to a secret's name, replaced."""
    return "\n".join(masked(line, secret_spans(line), mark) for line in text.split("\n"))
