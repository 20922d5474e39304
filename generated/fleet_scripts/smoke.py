#!/usr/bin/env python3
"""Smoke checks: questions with known answers, asked of the head's OpenAI-compatible API.

A static file of spark-compile; its defaults come from fleet.json beside it. Standard library only.

    smoke.py [--host H] [--port P] [--model M] [--timeout S] [--only NAME,...] [--needle-tokens N,...]

An API key, if the API has one, is read from the SPARK_API_KEY environment variable. When the API listens
on the head's loopback only, smoke.py runs itself on the head over ssh (SPARK_SSH_OPTS as for launch.sh;
the key travels on ssh's stdin, never in a command line).

Checks (each prints PASS, FAIL or SKIP with what it got; the exit status is the number of failures):
  count             "Count from 1 to 20": the answer must be exactly 1, 2, ..., 20.
  needle-N          a code word hidden halfway through about N tokens of filler must come back (sizes
                    above the context length are skipped; the prompt's real size is read from usage).
  image             a PNG drawn here (digits in a bitmap font) must be read back.
  tool-call         a get_weather call with JSON arguments holding the required keys.
  thinking          thinking on gives reasoning content, thinking off gives none.
  reasoning-effort  the same question at effort low (25) and max (100), temperature 0: both must be
                    accepted with reasoning and max must reason strictly longer. An ignored knob gives
                    identical output at temperature 0, so a tie fails.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import random
import re
import shlex
import struct
import subprocess
import sys
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_io import decimal, host, whole, wholes

CONFIG: dict[str, Any] = json.loads(Path(__file__).with_name("fleet.json").read_text())
SSH_BASE = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]
CHARS_PER_TOKEN_GUESS = 4.0
NEEDLE_ANSWER_TOKENS = 64
MAX_NEEDLE = 10_000_000  # tokens: past any context length
IMAGE_NUMBER = "7351"
EFFORT_LOW, EFFORT_MAX = 25, 100
FILLER_WORDS = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor", "ivory", "juniper",
                "kelp", "lumen", "meadow", "nickel", "orchard", "pewter", "quartz", "river", "saffron", "timber"]
NEEDLE_WORDS = ["COPPER", "LANTERN", "KESTREL", "MARBLE", "HARBOR", "SILVER", "FALCON", "CINDER", "QUARRY"]
# 5x7 bitmap digits: big enough when scaled that any vision model reads them.
FONT = {
    "0": ("01110", "10001", "10011", "10101", "11001", "10001", "01110"),
    "1": ("00100", "01100", "00100", "00100", "00100", "00100", "01110"),
    "2": ("01110", "10001", "00001", "00010", "00100", "01000", "11111"),
    "3": ("11111", "00010", "00100", "00010", "00001", "10001", "01110"),
    "4": ("00010", "00110", "01010", "10010", "11111", "00010", "00010"),
    "5": ("11111", "10000", "11110", "00001", "00001", "10001", "01110"),
    "6": ("00110", "01000", "10000", "11110", "10001", "10001", "01110"),
    "7": ("11111", "00001", "00010", "00100", "01000", "01000", "01000"),
    "8": ("01110", "10001", "10001", "01110", "10001", "10001", "01110"),
    "9": ("01110", "10001", "10001", "01111", "00001", "00010", "01100"),
}
SCALE, MARGIN = 12, 24
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}

Result = tuple[bool | None, str]  # (passed, what was got); None = skipped


class ApiError(Exception):
    """The API did not answer, or answered with an error."""


class Api:
    """The head's chat endpoint; proxies are bypassed, the head is always a direct neighbour."""

    def __init__(self, host: str, port: int, model: str, timeout: float) -> None:
        self.url = f"http://{host}:{port}/v1/chat/completions"
        self.model, self.timeout = model, timeout
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def chat(self, content: str | list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        body = {"model": self.model, "temperature": 0, "messages": [{"role": "user", "content": content}], **extra}
        headers = {"Content-Type": "application/json"}
        if os.environ.get("SPARK_API_KEY"):
            headers["Authorization"] = f"Bearer {os.environ['SPARK_API_KEY']}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers)
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                answer: dict[str, Any] = json.load(response)
        except urllib.error.HTTPError as err:
            raise ApiError(f"HTTP {err.code}: {err.read()[:300].decode(errors='replace')}") from err
        except (OSError, ValueError) as err:
            raise ApiError(f"{type(err).__name__}: {err}") from err
        if not answer.get("choices"):
            raise ApiError(f"no choices in {json.dumps(answer)[:300]}")
        return answer


def message(answer: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = answer["choices"][0].get("message") or {}
    return msg


def text(answer: dict[str, Any]) -> str:
    return str(message(answer).get("content") or "")


def reasoning(answer: dict[str, Any]) -> str:
    msg = message(answer)
    return str(msg.get("reasoning_content") or msg.get("reasoning") or "")


def thinking(on: bool, **more: Any) -> dict[str, Any]:
    return {"chat_template_kwargs": {"thinking": on, **more}}


def check_count(api: Api) -> Result:
    want = ", ".join(str(n) for n in range(1, 21))
    got = text(api.chat("Count from 1 to 20, comma separated, nothing else.", max_tokens=80, **thinking(False)))
    normal = re.sub(r"\s*,\s*", ", ", got.strip()).rstrip(".").strip()
    return normal == want, repr(got[:200])


def filler(tokens: int, chars_per_token: float, seed: int) -> list[str]:
    """Salted sentences (numbers vary) of about ``tokens`` tokens, so no prefix cache or repetition helps."""
    rng = random.Random(seed)
    sentences: list[str] = []
    chars = 0
    while chars < tokens * chars_per_token:
        words = rng.sample(FILLER_WORDS, 3)
        sentence = (f"The {words[0]} survey logged {rng.randint(10, 9999)} {words[1]} samples near marker "
                    f"{rng.randint(1, 999)} beside the {words[2]} ridge.")
        sentences.append(sentence)
        chars += len(sentence) + 1
    return sentences


def calibrate(api: Api) -> float:
    """Characters per token of the filler, measured once from the server's own prompt count."""
    sample = " ".join(filler(500, CHARS_PER_TOKEN_GUESS, 0))
    usage = api.chat(sample + "\nReply with OK.", max_tokens=1, **thinking(False)).get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or 0)
    return len(sample) / tokens if tokens > 100 else CHARS_PER_TOKEN_GUESS


def check_needle(api: Api, size: int, chars_per_token: Callable[[], float]) -> Result:
    context = int(CONFIG["context_length"])
    if size > context:
        return None, f"{size} tokens is above the context length {context}"
    rng = random.Random(size)
    needle = f"{rng.choice(NEEDLE_WORDS)}-{rng.choice(NEEDLE_WORDS)}-{rng.randint(1000, 9999)}"
    budget = min(size, context - 4 * NEEDLE_ANSWER_TOKENS) - NEEDLE_ANSWER_TOKENS
    sentences = filler(budget, chars_per_token(), size)
    sentences.insert(len(sentences) // 2, f"Remember this: the secret code word is {needle}.")
    question = ("\n\nSomewhere in the text above is a secret code word of the form WORD-WORD-NUMBER. "
                "What is it? Reply with the code word only.")
    answer = api.chat(" ".join(sentences) + question, max_tokens=NEEDLE_ANSWER_TOKENS, **thinking(False))
    got = text(answer)
    prompt = (answer.get("usage") or {}).get("prompt_tokens", "?")
    return needle in got.upper().replace(" ", ""), f"{got.strip()[:120]!r} (wanted {needle}, prompt {prompt} tokens)"


def png(width: int, height: int, rows: list[bytes]) -> bytes:
    """An 8-bit grayscale PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + row for row in rows), 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def digits_png(digits: str) -> bytes:
    """``digits`` drawn black on white, each font pixel a SCALE x SCALE square, one blank column apart."""
    cell = 6 * SCALE
    width, height = 2 * MARGIN + cell * len(digits) - SCALE, 2 * MARGIN + 7 * SCALE
    rows = []
    for y in range(height):
        row = bytearray(b"\xff" * width)
        glyph_y = (y - MARGIN) // SCALE
        if 0 <= y - MARGIN < 7 * SCALE:
            for i, digit in enumerate(digits):
                for gx, bit in enumerate(FONT[digit][glyph_y]):
                    if bit == "1":
                        start = MARGIN + i * cell + gx * SCALE
                        row[start:start + SCALE] = b"\x00" * SCALE
        rows.append(bytes(row))
    return png(width, height, rows)


def check_image(api: Api) -> Result:
    if not CONFIG["image"]:
        return None, "the profile says the model takes no images (operations.smoke.image: false)"
    url = "data:image/png;base64," + base64.b64encode(digits_png(IMAGE_NUMBER)).decode()
    question = "What number is written in this image? Reply with the digits only."
    content: list[dict[str, Any]] = [{"type": "text", "text": question},
                                     {"type": "image_url", "image_url": {"url": url}}]
    got = text(api.chat(content, max_tokens=32, **thinking(False)))
    return IMAGE_NUMBER in re.sub(r"\D", "", got), f"{got.strip()[:120]!r} (wanted {IMAGE_NUMBER})"


def check_tool_call(api: Api) -> Result:
    if not CONFIG["tools"]:
        return None, "the profile turns tool calls off (operations.smoke.tools: false)"
    answer = api.chat("What is the weather in Paris right now, in celsius? Use the get_weather tool.",
                      tools=[WEATHER_TOOL], tool_choice="auto", max_tokens=256, **thinking(False))
    calls = message(answer).get("tool_calls") or []
    if not calls:
        return False, f"no tool call; content {text(answer)[:120]!r}"
    function = calls[0].get("function") or {}
    try:
        args = json.loads(function.get("arguments") or "")
    except ValueError:
        return False, f"arguments are not JSON: {function.get('arguments')!r}"
    got = f"{function.get('name')}({json.dumps(args)})"
    ok = (function.get("name") == "get_weather" and isinstance(args, dict) and {"city", "unit"} <= set(args)
          and "paris" in str(args["city"]).lower() and args["unit"] == "celsius")
    return ok, got


def check_thinking(api: Api) -> Result:
    if not CONFIG["reasoning"]:
        return None, "the profile sets no reasoning parser: reasoning is not separated from the answer"
    question = "Is 91 a prime number? Answer briefly."
    on = api.chat(question, max_tokens=1024, **thinking(True))
    off = api.chat(question, max_tokens=256, **thinking(False))
    got = f"thinking on: {len(reasoning(on))} chars of reasoning; off: {len(reasoning(off))}"
    return bool(reasoning(on).strip()) and not reasoning(off).strip(), got


def check_reasoning_effort(api: Api) -> Result:
    if not CONFIG["reasoning"]:
        return None, "the profile sets no reasoning parser: reasoning is not separated from the answer"
    question = "How many positive divisors does 360 have? Answer with the number."
    low = reasoning(api.chat(question, max_tokens=4096, **thinking(True, reasoning_effort=EFFORT_LOW)))
    high = reasoning(api.chat(question, max_tokens=4096, **thinking(True, reasoning_effort=EFFORT_MAX)))
    got = f"effort {EFFORT_LOW}: {len(low)} chars of reasoning; effort {EFFORT_MAX}: {len(high)}"
    if low == high:
        return False, got + " (identical: the effort was ignored)"
    return bool(low.strip()) and len(high) > len(low), got


def smoke_checks(api: Api, sizes: list[int]) -> dict[str, Callable[[], Result]]:
    """Every smoke check by name, in order (the release gate runs the same ones)."""
    ratio = functools.cache(lambda: calibrate(api))
    needles = {f"needle-{size}": functools.partial(check_needle, api, size, ratio) for size in sizes}
    return {
        "count": lambda: check_count(api), **needles,
        "image": lambda: check_image(api),
        "tool-call": lambda: check_tool_call(api),
        "thinking": lambda: check_thinking(api),
        "reasoning-effort": lambda: check_reasoning_effort(api),
    }


def run(name: str, check: Callable[[], Result]) -> str:
    try:
        passed, got = check()
    except ApiError as err:
        passed, got = False, f"request failed: {err}"
    verdict = "SKIP" if passed is None else "PASS" if passed else "FAIL"
    print(f"{verdict} {name}: {got}", flush=True)
    return verdict


def on_head(argv: list[str], script: str = "smoke.py") -> int:
    """Run this script (or another of the folder's) on the head, where a loopback API is reachable."""
    remote = f"{CONFIG['fleet_install_dir']}/{script}"
    command = ("IFS= read -r SPARK_API_KEY; export SPARK_API_KEY SPARK_ON_HEAD=1; exec python3 "
               + shlex.join([remote, *argv]))
    ssh = ["ssh", *SSH_BASE, *os.environ.get("SPARK_SSH_OPTS", "").split(), CONFIG["head_ssh"], command]
    key = os.environ.get("SPARK_API_KEY", "") + "\n"
    return subprocess.run(ssh, input=key, text=True, check=False).returncode


def add_api_options(parser: argparse.ArgumentParser) -> None:
    """--host, --port, --model and --timeout, bounded: smoke.py's and gate.py's."""
    parser.add_argument("--host", type=host,
                        help="the API's address (default: the fleet's, from the head when it is loopback)")
    parser.add_argument("--port", type=whole(1, 65535), default=CONFIG["port"])
    parser.add_argument("--model", default=CONFIG["model"])
    parser.add_argument("--timeout", type=decimal(0.001, 86400), default=CONFIG["timeout"], help="seconds per request")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_api_options(parser)
    parser.add_argument("--only", default="", help="comma-separated check names; needle means every size")
    parser.add_argument("--needle-tokens", type=wholes(1, MAX_NEEDLE, 64),
                        default=",".join(map(str, CONFIG["needle_tokens"])))
    args = parser.parse_args(argv)
    # Parsed here first: --help and a bad option are answered locally, never sent (with the key) to the head.
    if CONFIG["via_head"] and os.environ.get("SPARK_ON_HEAD") != "1" and args.host is None:
        return on_head(argv)
    api = Api(args.host or CONFIG["host"], args.port, args.model, args.timeout)
    checks = smoke_checks(api, args.needle_tokens)
    only = {name for name in args.only.split(",") if name}
    unknown = {name for name in only if name != "needle" and name not in checks}
    if unknown:
        parser.error(f"unknown checks {sorted(unknown)}; known: needle, {', '.join(checks)}")
    verdicts = [run(name, check) for name, check in checks.items()
                if not only or name in only or (name.startswith("needle-") and "needle" in only)]
    failures = verdicts.count("FAIL")
    print(f"smoke: {verdicts.count('PASS')} PASS, {failures} FAIL, {verdicts.count('SKIP')} SKIP")
    return min(failures, 125)


if __name__ == "__main__":
    sys.exit(main())
