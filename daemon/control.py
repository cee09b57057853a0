"""The control socket: JSON lines over a Unix stream socket.

While ``ingestd run`` holds the state dir, the CLI's ``status``, ``search``,
``resync`` and ``verify`` send one request line ``{"cmd": ..., "args": {...}}`` and
read one response line ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "...", "exit_code": N}``.

Where the socket lives: ``$RUNTIME_DIRECTORY/ingestd.sock`` under systemd, else
``<state dir>/ingestd.sock`` when that path fits a Unix socket address (107 bytes), else
``$XDG_RUNTIME_DIR`` or the temp dir. The chosen path is written to
``<state dir>/control-socket`` so the CLI finds it from the state dir alone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import socket
import socketserver
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "ControlServer",
    "DaemonError",
    "NoDaemon",
    "StateLock",
    "StateLockedError",
    "find_socket",
    "request",
    "socket_path_for",
]

logger = logging.getLogger(__name__)
_MAX_SUN_PATH = 107
_POINTER = "control-socket"


class NoDaemon(Exception):
    """No daemon answers on this state dir's control socket."""


class DaemonError(Exception):
    """The daemon answered with an error."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class StateLockedError(RuntimeError):
    """Another process holds the state dir (two writers never share a store)."""


def socket_path_for(state_dir: Path, env: dict[str, str] | None = None) -> Path:
    """Where the daemon of ``state_dir`` listens (see the module docstring)."""
    e = env if env is not None else os.environ
    runtime = e.get("RUNTIME_DIRECTORY")
    if runtime:
        return Path(runtime.split(":")[0]) / "ingestd.sock"
    p = Path(state_dir) / "ingestd.sock"
    if len(os.fsencode(p)) <= _MAX_SUN_PATH:
        return p
    tag = hashlib.sha256(os.fsencode(Path(state_dir).absolute())).hexdigest()[:16]
    base = Path(e.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    return base / f"ingestd-{tag}.sock"


def find_socket(state_dir: Path) -> Path | None:
    """The socket path recorded in the state dir, or ``None``."""
    try:
        text = (Path(state_dir) / _POINTER).read_text().strip()
    except OSError:
        return None
    return Path(text) if text else None


def request(
    state_dir: Path, cmd: str, args: dict[str, Any] | None = None, timeout: float | None = None
) -> Any:
    """Send one command to the daemon of ``state_dir`` and return its result.

    Raises:
        NoDaemon: no daemon listens (no socket, or connection refused).
        DaemonError: the daemon ran the command and reported an error.
    """
    path = find_socket(state_dir)
    if path is None:
        raise NoDaemon(str(state_dir))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(str(path)) from exc
        sock.settimeout(timeout)
        sock.sendall(json.dumps({"cmd": cmd, "args": args or {}}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            part = sock.recv(1 << 16)
            if not part:
                break
            buf += part
    finally:
        sock.close()
    if not buf:
        raise DaemonError("the daemon closed the connection without an answer")
    resp = json.loads(buf)
    if not resp.get("ok"):
        raise DaemonError(resp.get("error", "unknown error"), int(resp.get("exit_code", 1)))
    return resp.get("result")


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(1 << 20)
        if not line:
            return
        try:
            msg = json.loads(line)
            result = self.server.dispatch(str(msg["cmd"]), dict(msg.get("args") or {}))
            resp: dict[str, Any] = {"ok": True, "result": result}
        except DaemonError as exc:
            resp = {"ok": False, "error": str(exc), "exit_code": exc.exit_code}
        except Exception as exc:
            logger.exception("control command failed")
            resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "exit_code": 3}
        try:
            self.wfile.write(json.dumps(resp, default=str).encode() + b"\n")
        except OSError:
            pass


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    dispatch: Callable[[str, dict[str, Any]], Any]


class ControlServer:
    """Serves the control socket of ``state_dir`` in a background thread.

    Args:
        state_dir: the state dir (the socket path is recorded there).
        dispatch: ``(cmd, args) -> result`` (JSON-serialisable); raise
            :class:`DaemonError` for expected failures.
        mode: permissions of the socket file (``0o660``: owner and group).
    """

    def __init__(
        self,
        state_dir: Path,
        dispatch: Callable[[str, dict[str, Any]], Any],
        mode: int = 0o660,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.path = socket_path_for(self.state_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        self._server = _Server(str(self.path), _Handler)
        self._server.dispatch = dispatch
        os.chmod(self.path, mode)
        (self.state_dir / _POINTER).write_text(str(self.path) + "\n")
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ingestd-control", daemon=True
        )

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def close(self) -> None:
        """Stop serving and remove the socket and its pointer file."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        for p in (self.path, self.state_dir / _POINTER):
            try:
                p.unlink()
            except OSError:
                pass


class StateLock:
    """An exclusive ``flock`` on ``<state dir>/ingestd.lock``, holding the owner's pid.

    Raises:
        StateLockedError: from :meth:`acquire` when another process holds it.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "ingestd.lock"
        self._fd: int | None = None

    def acquire(self, what: str = "ingestd") -> None:
        """Take the lock without waiting."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = os.read(fd, 200).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise StateLockedError(
                f"state dir {self.path.parent} is in use by another ingestd process "
                f"({owner or 'pid unknown'}); stop it or use another --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} ({what})".encode())
        self._fd = fd

    def release(self) -> None:
        """Release the lock."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
