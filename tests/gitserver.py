"""Real git servers on loopback for tests: ``git daemon`` and ``git http-backend``.

:class:`GitDaemon` runs ``git daemon`` (the ``git://`` protocol) over a folder of bare
repositories; :class:`HttpBackend` serves them over smart HTTP with git's own CGI
program, ``git http-backend``, behind a small threaded HTTP server that asks for a
bearer token (a forge's access token), or for HTTP Basic credentials (a user name and
password, as a URL's user info carries them). Both can be stopped and started again on
the same port (a server that goes away and comes back).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers import wait_for

__all__ = ["GitDaemon", "HttpBackend", "free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, timeout: float = 20.0) -> None:
    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, timeout, f"a server listening on port {port}", interval=0.05)


class GitDaemon:
    """``git daemon`` serving every repository under ``base`` at ``git://127.0.0.1:PORT/``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, name: str) -> str:
        """The ``git://`` URL of repository ``name`` (a folder under ``base``)."""
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitDaemon:
        """Start serving (waits until the port listens)."""
        self.proc = subprocess.Popen(
            [
                "git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1",
                f"--port={self.port}", f"--base-path={self.base}", str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_listening(self.port)
        return self

    def stop(self) -> None:
        """Stop serving (the port refuses connections after)."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def __enter__(self) -> GitDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HttpBackend:
    """Smart HTTP (``git http-backend``) for the repositories under ``base``, with a token.

    Args:
        base: the folder of bare repositories.
        token: the bearer token every request must carry (else 401).
        basic: ``(user, password)``: HTTP Basic credentials every request must carry
            instead of the token (a 401 asks for them, as a forge does).
        on_request: called in the handler before each request is answered, while the
            client waits for the answer (its processes are running).

    Attributes:
        auth_seen: the ``Authorization`` headers received (for the test to check).
    """

    def __init__(
        self,
        base: Path,
        token: str,
        *,
        basic: tuple[str, str] | None = None,
        on_request: Callable[[], None] | None = None,
    ) -> None:
        self.base = base
        self.token = token
        self.port = free_port()
        self.auth_seen: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._on_request = on_request
        if basic is None:
            self._wanted, self._challenge = f"Bearer {token}", 'Bearer realm="git"'
        else:
            pair = base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
            self._wanted, self._challenge = f"Basic {pair}", 'Basic realm="git"'

    def url(self, name: str) -> str:
        """The ``http://`` URL of repository ``name``."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def start(self) -> HttpBackend:
        """Start serving in a thread."""
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._cgi()

            def do_POST(self) -> None:
                self._cgi()

            def _cgi(self) -> None:
                auth = self.headers.get("Authorization", "")
                backend.auth_seen.append(auth)
                if backend._on_request is not None:
                    backend._on_request()
                if auth != backend._wanted:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", backend._challenge)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(backend.base),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "REMOTE_ADDR": "127.0.0.1",
                }
                if self.headers.get("Git-Protocol"):
                    env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
                out = subprocess.run(
                    ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
                ).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status = 200
                headers = []
                for line in head.decode("latin-1").split("\r\n"):
                    k, _, v = line.partition(":")
                    if k.lower() == "status":
                        status = int(v.strip().split()[0])
                    elif k:
                        headers.append((k, v.strip()))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        _wait_listening(self.port)
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> HttpBackend:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
