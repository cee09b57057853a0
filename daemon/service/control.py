"""The control socket's server: ``ingestd run`` answers its clients' commands.

While ``ingestd run`` holds the state dir, the CLI, the ``Client`` and ``ingestd eval``
send their commands here instead of opening the state themselves. The protocol (one
JSON line each way), where the socket lives and the state-dir lock are shared with the
clients: :mod:`ingestd.daemon.wire`. What each command runs is
:data:`~ingestd.daemon.commands.routes.ROUTES`.
"""

from __future__ import annotations

import logging
import os
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingestd.chunkers.errors import IngestdError
from ingestd.daemon.client.errors import one_line
from ingestd.daemon.statedir import PRIVATE_FILE_MODE
from ingestd.daemon.wire.errors import DaemonError
from ingestd.daemon.wire.location import POINTER_FILE, socket_path_for
from ingestd.daemon.wire.protocol import (
    MAX_REQUEST,
    error_response,
    ok_response,
    parse_request,
    response_line,
)

__all__ = ["ControlServer"]

logger = logging.getLogger(__name__)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        with self.server.answering:
            self.server.in_flight += 1
        try:
            self._answer()
        finally:
            with self.server.answering:
                self.server.in_flight -= 1
                self.server.answering.notify_all()

    def _answer(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)
        if not line:
            return
        t0 = time.perf_counter()
        try:
            resp = ok_response(self.server.dispatch(*parse_request(line)))
        except DaemonError as exc:
            resp = error_response(exc)
        except IngestdError as exc:  # a known failure: its one line and exit code
            resp = {"ok": False, "error": one_line(exc, self.server.state_dir) or str(exc)}
            resp["exit_code"] = exc.exit_code
        except Exception as exc:
            logger.exception("control command failed")
            resp = error_response(exc)
        try:
            self.wfile.write(response_line(resp, time.perf_counter() - t0))
        except OSError:
            pass


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    dispatch: Callable[[str, dict[str, Any]], Any]
    state_dir: Path
    in_flight = 0  # requests being answered
    answering = threading.Condition()


class ControlServer:
    """Serves the control socket of ``state_dir`` in a background thread.

    Args:
        state_dir: the state dir (the socket path is recorded there).
        dispatch: ``(cmd, args) -> result`` (JSON-serialisable); raise
            :class:`DaemonError` for expected failures.
        mode: permissions of the socket file (``0o660``: owner and group; the folder
            around it decides who reaches it: the private state dir or fallback
            folder, or systemd's runtime dir, mode 0750, for the service's group).

    Each response carries ``elapsed_seconds``: the time the daemon spent on the
    command (a search's query time, without the CLI's start-up).
    """

    def __init__(
        self,
        state_dir: Path,
        dispatch: Callable[[str, dict[str, Any]], Any],
        mode: int = 0o660,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.path = socket_path_for(self.state_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        self._server = _Server(str(self.path), _Handler)
        self._server.state_dir = self.state_dir
        self._server.answering = threading.Condition()
        self._server.dispatch = dispatch
        os.chmod(self.path, mode)
        _write_private(self.state_dir / POINTER_FILE, str(self.path) + "\n")
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ingestd-control", daemon=True
        )

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def close(self, wait_s: float = 5.0) -> None:
        """Stop serving; remove the socket, its pointer file and a ``mkdtemp`` folder.

        Requests being answered get their answer first (for at most ``wait_s``
        seconds): a command the daemon failed as it stopped still says why.
        """
        self._server.shutdown()
        with self._server.answering:
            self._server.answering.wait_for(lambda: self._server.in_flight == 0, wait_s)
        self._server.server_close()
        self._thread.join(timeout=5)
        for p in (self.path, self.state_dir / POINTER_FILE):
            try:
                p.unlink()
            except OSError:
                pass
        if self.path.parent.name.startswith(f"ingestd-{os.getuid()}-"):
            try:
                self.path.parent.rmdir()  # a fallback folder made for this run only
            except OSError:
                pass


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, mode 0600 (readers never see half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
