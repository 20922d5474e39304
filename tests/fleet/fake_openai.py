"""A small OpenAI-compatible server for the fleet test: the head's API, served in the head's namespace.

It answers what the generated smoke.py, gate.py, verify.sh and watchdog ask, correctly by default. The
control file (re-read on every request) injects faults: ``health`` (status of /health), ``wrong`` (every
smoke answer wrong), ``chat_delay`` (seconds before a chat answer: a busy engine), and one per gate check:
``truncate`` and ``repeat`` (batched answers cut to a word, or looping), ``wrong_fact`` (a buried fact
answered wrong), ``crash_long`` (a long prompt arriving while another is in prefill loses its connection,
as the 1.3 rank crash did), ``slow_bench`` (a factor on the streamed answer's pacing). ``canned`` maps a
prompt to its answer (an operator's check). Every request is logged as one JSON line. The image check
really decodes the PNG and reads its digits with smoke.py's own bitmap font.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import re
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FONT: dict[str, tuple[str, ...]] = {}
# Prompts above this many tokens (4 characters each, as usage counts) spend PREFILL_SECONDS in prefill.
LONG_PROMPT_TOKENS, PREFILL_SECONDS = 16_000, 0.2
DECODE_SECONDS = 0.1  # a decoder's paragraph
BENCH_TTFT, BENCH_STEP, BENCH_CHUNK = 0.05, 0.008, 4  # seconds to the first chunk, between chunks; tokens a chunk
FACT = re.compile(r"For the record, (.+?) is (.+?)\.")
IN_PREFILL = {"count": 0}
PREFILL_LOCK = threading.Lock()


def load_font(smoke: Path) -> None:
    spec = importlib.util.spec_from_file_location("smoke_font", smoke)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    FONT.update(module.FONT)


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and pixels of an 8-bit grayscale, unfiltered PNG (what smoke.py draws)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, "bad CRC"
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 0), "not 8-bit grayscale"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    rows = [raw[y * (width + 1):(y + 1) * (width + 1)] for y in range(height)]
    assert all(row[0] == 0 for row in rows), "filtered rows"
    return width, height, b"".join(row[1:] for row in rows)


def read_digits(png: bytes) -> str:
    """Segment dark columns into glyphs, sample each on the font grid, match trimmed bitmaps."""
    width, height, pixels = decode_png(png)
    dark = [[pixels[y * width + x] < 128 for x in range(width)] for y in range(height)]
    ys = [y for y in range(height) if any(dark[y])]
    top, scale = ys[0], (ys[-1] - ys[0] + 1) // 7
    columns = [any(dark[y][x] for y in ys) for x in range(width)]
    runs, x = [], 0
    while x < width:
        if columns[x]:
            start = x
            while x < width and columns[x]:
                x += 1
            runs.append((start, x))
        x += 1
    trimmed = {}
    for digit, rows in FONT.items():
        used = [c for c in range(5) if any(r[c] == "1" for r in rows)]
        trimmed[tuple(r[used[0]:used[-1] + 1] for r in rows)] = digit
    text = ""
    for start, end in runs:
        cols = (end - start) // scale
        half = scale // 2
        glyph = tuple("".join("1" if dark[top + r * scale + half][start + c * scale + half] else "0"
                              for c in range(cols)) for r in range(7))
        text += trimmed.get(glyph, "?")
    return text


class Handler(BaseHTTPRequestHandler):
    control: Path
    log: Path

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def faults(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.control.read_text())
        except (OSError, ValueError):
            return {}
        return data

    def reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, body: dict[str, Any] | None) -> None:
        with self.log.open("a") as out:
            out.write(json.dumps({"t": time.time(), "path": self.path, "body": body}) + "\n")

    def do_GET(self) -> None:
        self.record(None)
        if self.path == "/health":
            status = int(self.faults().get("health", 200))
            self.reply(status, {} if status == 200 else {"error": "unhealthy"})
        elif self.path == "/v1/models":
            self.reply(200, {"data": [{"id": "deepseek-v4.1-flash", "object": "model"}]})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.record({k: v for k, v in body.items() if k != "messages"})
        if self.path != "/v1/chat/completions":
            self.reply(404, {"error": "not found"})
            return
        faults = self.faults()
        time.sleep(float(faults.get("chat_delay", 0)))
        if prompt_tokens(body) > LONG_PROMPT_TOKENS and not self.prefill(faults):
            self.close_connection = True  # the rank died mid-request: no answer at all
            return
        if body.get("stream"):
            self.stream(body, float(faults.get("slow_bench", 1)))
            return
        self.reply(200, answer(body, faults))

    def prefill(self, faults: dict[str, Any]) -> bool:
        """A long prompt's prefill; False when it crashes (crash_long and another long prompt in prefill)."""
        with PREFILL_LOCK:
            crowded = IN_PREFILL["count"] > 0
            IN_PREFILL["count"] += 1
        try:
            time.sleep(PREFILL_SECONDS)
        finally:
            with PREFILL_LOCK:
                IN_PREFILL["count"] -= 1
        return not (crowded and faults.get("crash_long"))

    def stream(self, body: dict[str, Any], slow: float) -> None:
        """Server-sent events as SGLang sends them: content deltas, then usage, then [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        tokens = int(body.get("max_tokens") or 16)
        time.sleep(BENCH_TTFT * slow)
        sent = 0
        while sent < tokens:
            step = min(BENCH_CHUNK, tokens - sent)
            event = {"choices": [{"index": 0, "delta": {"content": "word " * step}}]}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            sent += step
            time.sleep(BENCH_STEP * slow)
        usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": tokens}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def prompt_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    return " ".join(p.get("text", "") for p in parts if p.get("type") == "text")


def prompt_tokens(body: dict[str, Any]) -> int:
    return len(prompt_text(body)) // 4


def gate_answer(prompt: str, faults: dict[str, Any]) -> str | None:
    """The answers of the gate's own checks (None: not one of them)."""
    canned = faults.get("canned") or {}
    if prompt in canned:
        return str(canned[prompt])
    if prompt.startswith("In one or two sentences, "):
        if faults.get("truncate"):
            return "Because"
        if faults.get("repeat"):
            return "It is because " + "the water " * 12
        return f"A short honest answer about {prompt.split(',', 1)[1].strip().rstrip('?')}, in plain words."
    if "According to the text above, what is " in prompt:
        subject = prompt.split("According to the text above, what is ", 1)[1].split("?", 1)[0]
        facts = dict(FACT.findall(prompt))
        if subject not in facts:
            return "The text does not say."
        return "I could not tell." if faults.get("wrong_fact") else facts[subject]
    if prompt.endswith("Reply with the word DONE."):
        return "DONE"
    if prompt.startswith("Write a short paragraph about"):
        time.sleep(DECODE_SECONDS)
        return "Bridges began as fallen logs and grew into stone arches, iron trusses and steel cables."
    return None


def answer(body: dict[str, Any], faults: dict[str, Any]) -> dict[str, Any]:
    wrong = bool(faults.get("wrong"))
    content = body["messages"][-1]["content"]
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    prompt = prompt_text(body)
    gate = gate_answer(prompt, faults)
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    kwargs = body.get("chat_template_kwargs") or {}
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if gate is not None:
        message["content"] = gate
    elif body.get("tools"):
        args = {"city": "Paris", "unit": "celsius"} if not wrong else {"city": "Paris"}
        message["tool_calls"] = [{"id": "call_0", "type": "function",
                                  "function": {"name": "get_weather", "arguments": json.dumps(args)}}]
    elif images:
        png = base64.b64decode(images[0].split(",", 1)[1])
        digits = read_digits(png)
        message["content"] = f"The number is {digits[::-1] if wrong else digits}."
    elif "Count from 1 to 20" in prompt:
        numbers = list(range(1, 21)) if not wrong else [*range(1, 13), *range(14, 22)]
        message["content"] = ", ".join(map(str, numbers))
    elif "secret code word" in prompt:
        found = re.search(r"\b[A-Z]+-[A-Z]+-\d{4}\b", prompt)
        message["content"] = "I did not find one." if wrong or not found else found.group(0)
    else:
        message["content"] = "OK" if "Reply with the word OK." in prompt else "91 = 7 x 13, so no."
    if kwargs.get("thinking", True) and not body.get("tools") and gate is None:
        effort = int(kwargs.get("reasoning_effort", 100))
        message["reasoning_content"] = "Let me think this through. " * (1 if wrong else max(1, effort // 10))
    usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": 3, "total_tokens": len(prompt) // 4 + 3}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if body.get("tools") else "stop"}],
            "usage": usage}


class Server(ThreadingHTTPServer):
    # The gate opens 16 connections at once (a batch); the default backlog of 5 would reset some.
    request_queue_size = 128
    daemon_threads = True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--smoke", type=Path, default=None)
    args = parser.parse_args()
    smoke = args.smoke or Path(args.control.parent, "smoke.py")
    if smoke.exists():
        load_font(smoke)
    Handler.control, Handler.log = args.control, args.log
    server = Server((args.host, args.port), Handler)
    print(f"fake OpenAI API on {args.host}:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
