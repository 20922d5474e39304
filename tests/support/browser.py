"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: commands on
fd 3, replies on fd 4, each JSON message ended by a NUL), so a test can set the viewport and the colour
scheme, list every request the page made, measure the layout and take a full-page screenshot, with no
websocket library and no port opened.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from .tools import require_tool

TIMEOUT = 120.0


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are numbered 10 or more, so moving them onto fds 3 and 4 clobbers neither."""
    ends = os.pipe()
    high = tuple(fcntl.fcntl(end, fcntl.F_DUPFD_CLOEXEC, 10) for end in ends)
    for end in ends:
        os.close(end)
    return high[0], high[1]


class Browser:
    """One headless Chromium; :meth:`open` loads a page in a fresh tab with a given viewport and scheme."""

    def __init__(self, profile_dir: Path) -> None:
        chromium = require_tool("chromium")
        commands_r, commands_w = _high_pipe()  # chromium reads commands from fd 3
        replies_r, replies_w = _high_pipe()  # and writes replies to fd 4
        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile_dir}", "about:blank"]
        # bash puts the two pipe ends on fds 3 and 4 for chromium (no preexec_fn: unsafe beside threads)
        plumb = f'exec "$@" 3<&{commands_r} 4>&{replies_w} {commands_r}<&- {replies_w}>&-'
        self.proc = subprocess.Popen(["bash", "-c", plumb, "bash", *argv], pass_fds=(commands_r, replies_w),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands_r)
        os.close(replies_w)
        self._write, self._read = commands_w, replies_r
        self._buffer, self._next = b"", 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with contextlib.suppress(OSError, EOFError, RuntimeError, TimeoutError):
            self.send("Browser.close")
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._write)
        os.close(self._read)

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._read], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise TimeoutError(f"chromium did not answer within {TIMEOUT:.0f} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile are kept in ``events``."""
        self._next += 1
        command: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self._write, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._message(deadline)
            if message.get("id") != self._next:
                self.events.append(message)
                continue
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            return dict(message.get("result", {}))

    def open(self, url: str, width: int, height: int = 900, scheme: str = "light") -> Tab:
        """A fresh tab showing ``url`` at ``width`` CSS px in the ``scheme`` colour scheme, once loaded."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = str(self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"])
        for domain in ("Network", "Page"):
            self.send(f"{domain}.enable", session)
        self.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        self.send("Emulation.setScrollbarsHidden", session, hidden=True)  # the page gets the whole width
        self.send("Emulation.setEmulatedMedia", session, features=[{"name": "prefers-color-scheme", "value": scheme}])
        self.events.clear()
        self.send("Page.navigate", session, url=url)
        deadline = time.monotonic() + TIMEOUT
        while not any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session
                      for e in self.events):
            self.events.append(self._message(deadline))
        return Tab(self, session)


class Tab:
    """A loaded page: evaluate JavaScript in it, list its requests, screenshot it."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page."""
        reply = self.browser.send("Runtime.evaluate", self.session, expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"the page's script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def requests(self) -> list[str]:
        """Every URL the page asked the network stack for (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.browser.events
                if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == self.session]

    def screenshot(self, path: Path, selector: str | None = None, height: int | None = None) -> None:
        """A PNG of the whole page, of the first ``height`` CSS px, or of the element ``selector`` picks."""
        box = None
        if selector is not None:
            box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                                ".getBoundingClientRect(); return {x: r.left + scrollX, y: r.top + scrollY, "
                                "width: r.width, height: r.height}; })()")
        elif height is not None:
            box = {"x": 0, "y": 0, "width": self.evaluate("innerWidth"), "height": height}
        clip = {} if box is None else {"clip": {**box, "scale": 1}}
        shot = self.browser.send("Page.captureScreenshot", self.session, format="png", captureBeyondViewport=True,
                                 **clip)
        path.write_bytes(base64.b64decode(shot["data"]))
