"""A fake Docker Engine API on a unix socket, so the real docker CLI can be run to completion offline.

No Docker engine runs on the CI machines, only the docker CLI. Pointed at this server (``DOCKER_HOST``),
``docker run -d ...`` / ``docker container create ...`` exit 0 and we keep the exact JSON body the CLI
would have sent to a real daemon: the environment after the ``--env-file`` merge, sizes in bytes, GPU
device requests, mounts, ulimits...

What the docker CLI 28.2 needs, found by experiment (see tests/test_support_tools.py):

* ``HEAD``/``GET /_ping`` with an ``Api-Version`` header. The ``OSType: linux`` header matters: without it
  the CLI cannot validate ``--device`` and fails with "unknown server OS" (what happens offline).
* ``GET /version`` (``docker version``), ``GET /info`` (not needed by create, answered for completeness).
* ``POST /containers/create?name=...`` -> 201 ``{"Id": ..., "Warnings": []}``.
* ``POST /containers/{id}/start`` -> 204, and ``POST /containers/{id}/wait?condition=next-exit`` -> 200
  ``{"StatusCode": 0}``: ``docker run -d`` waits in the background and logs an error if the wait fails.
  ``docker run`` without ``-d`` needs a hijacked ``/attach`` stream, which this server does not do:
  tools.docker_create_request() adds ``--detach``.
* ``POST /images/create`` -> 200 (only ``--pull always`` asks for it).

Paths arrive with a version prefix (``/v1.50/containers/create``); it is stripped before dispatch and kept
in :attr:`RecordedRequest.version`. Anything else is answered 404 with a Docker-style error message and
recorded, so a test can see what an unexpected CLI version asked for.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socketserver
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_VERSION = "1.50"  # what docker CLI 28.2 speaks; it downgrades itself to the server's if lower
MIN_API_VERSION = "1.24"
_VERSION_PREFIX = re.compile(r"^/v(\d+\.\d+)(/.*)$")
_CONTAINER_ACTION = re.compile(r"^/containers/([^/]+)/(start|wait|json|attach|resize|kill)$")


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the CLI made."""

    method: str
    path: str  # without the /v1.xx prefix
    version: str | None  # the API version of the prefix, None if unversioned
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class _State:
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        """The CLI hangs up on its background ``/wait`` as soon as ``run -d`` is done: not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as the Go client expects; every reply has a length

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr logging (it also breaks on AF_UNIX's empty client address)."""

    # -- plumbing -------------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, payload: Any = None, *, text: str | None = None) -> None:
        if text is not None:
            data, ctype = text.encode(), "text/plain; charset=utf-8"
        else:
            data, ctype = (b"" if payload is None else json.dumps(payload).encode()), "application/json"
        self.send_response(status)
        self.send_header("Api-Version", API_VERSION)
        self.send_header("OSType", "linux")
        self.send_header("Docker-Experimental", "false")
        self.send_header("Server", "Docker/28.2.2 (linux) spark-compile fake")
        if status != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and status != 204:
            self.wfile.write(data)

    def _record(self) -> RecordedRequest:
        split = urlsplit(self.path)
        path, version = split.path, None
        m = _VERSION_PREFIX.match(path)
        if m:
            version, path = m.group(1), m.group(2)
        req = RecordedRequest(
            method=self.command,
            path=path,
            version=version,
            query=parse_qs(split.query, keep_blank_values=True),
            headers={k: v for k, v in self.headers.items()},
            body=self._read_body(),
        )
        with self.server.state.lock:
            self.server.state.requests.append(req)
        return req

    # -- dispatch -------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        req = self._record()
        state = self.server.state
        if req.path == "/_ping":
            self._reply(200, text="OK")
        elif req.path == "/version" and req.method == "GET":
            self._reply(200, _version_payload())
        elif req.path == "/info" and req.method == "GET":
            self._reply(
                200,
                {
                    "OSType": "linux",
                    "Architecture": "x86_64",
                    "ServerVersion": "28.2.2",
                    "Name": "fake-dockerd",
                    "ID": "FAKE",
                    "Containers": 0,
                    "Images": 0,
                },
            )
        elif req.path == "/containers/create" and req.method == "POST":
            with state.lock:
                state.counter += 1
                cid = f"{state.counter:064x}"
            self._reply(201, {"Id": cid, "Warnings": []})
        elif (m := _CONTAINER_ACTION.match(req.path)) and m.group(2) == "start" and req.method == "POST":
            self._reply(204)
        elif m and m.group(2) == "wait" and req.method == "POST":
            # `run -d` waits for the exit in the background (to report errors); answer "exited 0" at once.
            self._reply(200, {"StatusCode": 0, "Error": None})
        elif req.path == "/images/create" and req.method == "POST":
            # `--pull always` pulls first: a one-line JSON progress stream is enough.
            self._reply(200, {"status": "fake dockerd: pulled nothing"})
        else:
            self._reply(404, {"message": f"fake dockerd: no handler for {req.method} {req.path}"})

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _dispatch  # noqa: N815 - http.server naming


def _version_payload() -> dict[str, Any]:
    return {
        "Platform": {"Name": "Docker Engine - Community (fake)"},
        "Components": [
            {
                "Name": "Engine",
                "Version": "28.2.2",
                "Details": {
                    "ApiVersion": API_VERSION,
                    "MinAPIVersion": MIN_API_VERSION,
                    "GitCommit": "fake",
                    "GoVersion": "go1.24",
                    "Os": "linux",
                    "Arch": "amd64",
                    "KernelVersion": os.uname().release,
                    "Experimental": "false",
                    "BuildTime": "2025-01-01T00:00:00.000000000+00:00",
                },
            }
        ],
        "Version": "28.2.2",
        "ApiVersion": API_VERSION,
        "MinAPIVersion": MIN_API_VERSION,
        "GitCommit": "fake",
        "GoVersion": "go1.24",
        "Os": "linux",
        "Arch": "amd64",
        "KernelVersion": os.uname().release,
        "BuildTime": "2025-01-01T00:00:00.000000000+00:00",
    }


class FakeDockerd:
    """Context manager running the fake engine in a thread on a fresh unix socket.

    >>> with FakeDockerd() as d:
    ...     subprocess.run(["docker", "run", "-d", "alpine"], env=d.env(), check=True)
    ...     d.creates[-1]["body"]["Image"]
    'alpine'
    """

    def __init__(self) -> None:
        self._tmp: str | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._state = _State()

    # paths ---------------------------------------------------------------------------------------------
    @property
    def socket_path(self) -> str:
        if self._tmp is None:
            raise RuntimeError("FakeDockerd is not running")
        return os.path.join(self._tmp, "docker.sock")

    @property
    def config_dir(self) -> str:
        """An empty DOCKER_CONFIG so no user config, context or credential helper is read."""
        if self._tmp is None:
            raise RuntimeError("FakeDockerd is not running")
        return os.path.join(self._tmp, "config")

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """A complete environment for subprocess: ``base`` (default os.environ) minus DOCKER_*, pointed here.

        The docker CLI fills bare ``-e KEY`` / env-file ``KEY`` lines from its own environment, so pass a
        minimal ``base`` when the result must not depend on the caller's environment.
        """
        source = os.environ if base is None else base
        env = {k: v for k, v in source.items() if not k.startswith("DOCKER_")}
        env.update(
            DOCKER_HOST=f"unix://{self.socket_path}",
            DOCKER_CONFIG=self.config_dir,
            DOCKER_CLI_HINTS="false",  # no "What's next" adverts on stderr
        )
        return env

    # records -------------------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def creates(self) -> list[dict[str, Any]]:
        """Every ``POST /containers/create``: ``{"name": <?name= or None>, "query": {..}, "body": {..}}``."""
        out: list[dict[str, Any]] = []
        for r in self.requests:
            if r.method == "POST" and r.path == "/containers/create":
                names = r.query.get("name")
                out.append({"name": names[0] if names else None, "query": r.query, "body": r.json()})
        return out

    def clear(self) -> None:
        with self._state.lock:
            self._state.requests.clear()

    # lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> FakeDockerd:
        # Unix socket paths are limited to 108 bytes: keep the directory short.
        self._tmp = tempfile.mkdtemp(prefix="fdockerd-", dir="/tmp")
        os.mkdir(self.config_dir)
        server = _Server(self.socket_path, _Handler)
        server.state = self._state
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-dockerd", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> FakeDockerd:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
