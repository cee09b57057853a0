"""The control socket's protocol: JSON lines over a Unix stream socket.

A client sends one request line ``{"cmd": ..., "args": {...}}`` and reads one response
line: ``{"ok": true, "result": ...}``, or ``{"ok": false, "error": "...",
"exit_code": N}`` (a :class:`~ingestd.daemon.wire.errors.DaemonError`'s message and
exit code; anything unexpected is ``"Type: message"``, exit code 3). Each response
also carries ``elapsed_seconds``, the time the daemon spent on the command.

The server side is :class:`~ingestd.daemon.service.control.ControlServer`; the lines are
built and read here, for both sides. :func:`request` sends one command;
:func:`request_when_ready` waits for a daemon that is starting first (it holds the
state-dir lock before its socket serves: :mod:`~ingestd.daemon.wire.statelock`).
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingestd.daemon.wire.errors import DaemonError, NoDaemon
from ingestd.daemon.wire.location import find_socket
from ingestd.daemon.wire.statelock import starting_daemon

__all__ = [
    "MAX_REQUEST",
    "error_response",
    "ok_response",
    "parse_request",
    "request",
    "request_line",
    "request_when_ready",
    "response_line",
]

logger = logging.getLogger(__name__)
#: Seconds to wait for the connection to a socket.
_CONNECT_S = 5
#: Bytes of the longest request line a server reads.
MAX_REQUEST = 1 << 20


def request_line(cmd: str, args: dict[str, Any] | None = None) -> bytes:
    """The request line of command ``cmd`` with JSON ``args``, newline included."""
    return json.dumps({"cmd": cmd, "args": args or {}}).encode() + b"\n"


def parse_request(line: bytes) -> tuple[str, dict[str, Any]]:
    """``(cmd, args)`` of a request line.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``).
        KeyError: no ``cmd``.
    """
    msg = json.loads(line)
    return str(msg["cmd"]), dict(msg.get("args") or {})


def ok_response(result: Any) -> dict[str, Any]:
    """The response of a command that returned ``result`` (JSON-serialisable)."""
    return {"ok": True, "result": result}


def error_response(exc: BaseException) -> dict[str, Any]:
    """The response of a command that raised ``exc``.

    A :class:`DaemonError` carries its message and exit code; anything else is
    ``"Type: message"`` with exit code 3 (unexpected).
    """
    if isinstance(exc, DaemonError):
        return {"ok": False, "error": str(exc), "exit_code": exc.exit_code}
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "exit_code": 3}


def response_line(response: dict[str, Any], elapsed_s: float) -> bytes:
    """The response line: ``response`` with ``elapsed_seconds`` (µs precision), newline included.

    Values JSON cannot hold are written as their ``str``.
    """
    response = {**response, "elapsed_seconds": round(elapsed_s, 6)}
    return json.dumps(response, default=str).encode() + b"\n"


def _parse_response(buf: bytes, cmd: str) -> Any:
    """The result a response line carries (see the module docstring).

    Raises:
        DaemonError: the response is an error.
        NoDaemon: there is none (the daemon closed the connection: it is stopping).
    """
    if not buf:
        raise NoDaemon("the daemon closed the connection without an answer (it is stopping)")
    resp = json.loads(buf)
    if "elapsed_seconds" in resp:
        logger.debug("%s: the daemon took %.3f s", cmd, resp["elapsed_seconds"])
    if not resp.get("ok"):
        raise DaemonError(resp.get("error", "unknown error"), int(resp.get("exit_code", 1)))
    return resp.get("result")


def request(
    state_dir: Path,
    cmd: str,
    args: dict[str, Any] | None = None,
    timeout: float | None = None,
    *,
    socket_path: Path | None = None,
) -> Any:
    """Send one command to the daemon of ``state_dir`` and return its result.

    Args:
        state_dir: the daemon's state dir (its ``control-socket`` pointer is read).
        cmd: command name (``status``, ``search``, ...).
        args: its JSON arguments.
        timeout: seconds to wait for the answer (``None``: no limit).
        socket_path: the socket itself, instead of the state dir's pointer.

    The time the daemon spent on the command is logged at DEBUG level (``ingestd
    search --log-level DEBUG`` shows it).

    Raises:
        NoDaemon: no daemon listens (no socket, or connection refused), or it closed the
            connection without an answer (a daemon that is stopping: a ``status`` poll
            then reads the state dir instead).
        DaemonError: the daemon ran the command and reported an error, or the state
            dir cannot be read.
        TimeoutError: no answer within ``timeout`` seconds.
    """
    path = socket_path or find_socket(state_dir)
    if path is None:
        raise NoDaemon(str(state_dir))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_CONNECT_S)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(str(path)) from exc
        except PermissionError:
            raise DaemonError(
                f"no permission to use the control socket {path}: join the daemon's group "
                "(e.g. usermod -aG ingestd $USER, then log in again)"
            ) from None
        sock.settimeout(timeout)
        buf = b""
        try:
            sock.sendall(request_line(cmd, args))
            while not buf.endswith(b"\n"):
                part = sock.recv(1 << 16)
                if not part:
                    break
                buf += part
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise NoDaemon(f"{path}: the daemon closed the connection (it is stopping)") from exc
    finally:
        sock.close()
    return _parse_response(buf, cmd)


def request_when_ready(
    state_dir: Path,
    cmd: str,
    args: dict[str, Any] | None = None,
    *,
    socket_path: Path | None = None,
    wait: float = 60.0,
    on_wait: Callable[[int], None] | None = None,
    timeout: float | None = None,
) -> Any:
    """:func:`request`, waiting up to ``wait`` seconds for a daemon that is starting.

    ``ingestd run`` takes the state-dir lock before its control socket serves (it
    opens the store and sets the watches first). A command sent meanwhile waits for
    the socket instead of failing; ``on_wait(pid)`` is called once when it starts
    waiting. ``timeout``: seconds to wait for the answer once sent (``None``: no
    limit); the daemon goes on with the command when it passes. With ``socket_path``
    nothing is waited for.

    Raises:
        NoDaemon: no daemon runs (or the starting one exited).
        DaemonError: the daemon reported an error, or its socket did not answer within
            ``wait`` seconds.
        TimeoutError: no answer within ``timeout`` seconds.
    """
    try:
        return request(state_dir, cmd, args, timeout, socket_path=socket_path)
    except NoDaemon:
        if socket_path is not None:
            raise
        pid = starting_daemon(state_dir)
        if pid is None:
            raise
    if on_wait is not None:
        on_wait(pid)
    deadline = time.monotonic() + wait
    while True:
        try:
            return request(state_dir, cmd, args, timeout)
        except NoDaemon:
            if starting_daemon(state_dir) is None:
                raise
            if time.monotonic() >= deadline:
                raise DaemonError(
                    f"ingestd run (pid {pid}) holds {state_dir} but its control socket did not "
                    f"answer within {wait:.0f} s; see its log"
                ) from None
            time.sleep(0.1)
