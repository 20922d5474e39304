"""What a literal secret looks like: token formats of the services a fleet talks to, and secret-ish names."""

from __future__ import annotations

import re

SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{30,}"  # Hugging Face access token
    r"|sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"  # OpenAI / Anthropic style API keys
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)",
                         re.IGNORECASE)
# Names that contain a secret-ish word but carry no secret.
NOT_SECRET_NAMES = re.compile(r"(MAX_|_TOKENS|TOKENIZER|NUM_|_TOKEN_(RATIO|IDS|USAGE|BLOCK|ORACLE)|_(PATH|FILE|DIR)$)",
                              re.IGNORECASE)


def looks_secret(name: str, value: str) -> bool:
    """True when ``value`` has a token's shape, or ``name`` says it holds a secret and it is not empty."""
    if SECRET_VALUE.search(value):
        return True
    return bool(value) and bool(SECRET_NAME.search(name)) and not NOT_SECRET_NAMES.search(name)
