"""The control socket: JSON lines over a Unix stream socket.

While ``ingestd run`` holds the state dir, the CLI's ``status``, ``search``,
``resync`` and ``verify`` send one request line ``{"cmd": ..., "args": {...}}`` and
read one response line ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "...", "exit_code": N}``.

Where the socket lives: ``$RUNTIME_DIRECTORY/ingestd.sock`` under systemd, else
``<state dir>/ingestd.sock`` when that path fits a Unix socket address (107 bytes), else
a private folder of the user (:func:`~ingestd.daemon.statedir.private_runtime_dir`),
never a shared world-writable one. The chosen path is written to
``<state dir>/control-socket`` so the CLI finds it from the state dir alone; a CLI that
cannot read the state dir (an operator in the service's group) is given the socket
with ``--socket`` / ``$INGESTD_SOCKET``.

While ``ingestd run`` starts it holds the state-dir lock before its socket serves: the
lock file names the holder (``pid N (ingestd run)``), so a CLI command waits for the
socket (:func:`starting_daemon`) instead of reporting the state dir as busy.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingestd.daemon.statedir import PRIVATE_FILE_MODE, private_runtime_dir, secure_state_dir

__all__ = [
    "ControlServer",
    "DaemonError",
    "NoDaemon",
    "StateLock",
    "StateLockedError",
    "find_socket",
    "lock_holder",
    "request",
    "request_when_ready",
    "socket_path_for",
    "starting_daemon",
]

logger = logging.getLogger(__name__)
_MAX_SUN_PATH = 107
_POINTER = "control-socket"
_LOCK = "ingestd.lock"


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
    """Where the daemon of ``state_dir`` listens (see the module docstring).

    The private fallback folder is created when it is chosen.
    """
    e = env if env is not None else os.environ
    runtime = e.get("RUNTIME_DIRECTORY")
    if runtime:
        return Path(runtime.split(":")[0]) / "ingestd.sock"
    p = Path(state_dir) / "ingestd.sock"
    if len(os.fsencode(p)) <= _MAX_SUN_PATH:
        return p
    tag = hashlib.sha256(os.fsencode(Path(state_dir).absolute())).hexdigest()[:16]
    return private_runtime_dir(e) / f"ingestd-{tag}.sock"


def find_socket(state_dir: Path) -> Path | None:
    """The socket path recorded in the state dir, or ``None``.

    Raises:
        DaemonError: the state dir cannot be read (exit code 1); the message says to
            pass the socket with ``--socket``.
    """
    pointer = Path(state_dir) / _POINTER
    try:
        text = pointer.read_text().strip()
    except PermissionError:
        raise DaemonError(
            f"cannot read {pointer} (permission denied): give the daemon's control socket "
            "with --socket or $INGESTD_SOCKET (under systemd: /run/ingestd/ingestd.sock)"
        ) from None
    except OSError:
        return None
    return Path(text) if text else None


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
        NoDaemon: no daemon listens (no socket, or connection refused).
        DaemonError: the daemon ran the command and reported an error, or the state
            dir cannot be read.
    """
    path = socket_path or find_socket(state_dir)
    if path is None:
        raise NoDaemon(str(state_dir))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
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
    if "elapsed_seconds" in resp:
        logger.debug("%s: the daemon took %.3f s", cmd, resp["elapsed_seconds"])
    if not resp.get("ok"):
        raise DaemonError(resp.get("error", "unknown error"), int(resp.get("exit_code", 1)))
    return resp.get("result")


def lock_holder(state_dir: Path) -> tuple[int, str] | None:
    """``(pid, text)`` of the live process holding ``state_dir``'s lock, or ``None``.

    Read from the lock file, which names its holder (``pid N (ingestd run)``) while it
    is held (:class:`StateLock`); a holder that no longer runs (killed with -9) does
    not count.
    """
    try:
        text = (Path(state_dir) / _LOCK).read_text(errors="replace").strip()
    except OSError:
        return None
    words = text.split()
    if len(words) < 2 or words[0] != "pid":
        return None
    try:
        pid = int(words[1])
        os.kill(pid, 0)
    except ValueError:
        return None
    except PermissionError:
        return pid, text  # alive, another user's process
    except ProcessLookupError:
        return None
    return pid, text


def starting_daemon(state_dir: Path) -> int | None:
    """The pid of an ``ingestd run`` holding ``state_dir``'s lock (see :func:`lock_holder`)."""
    holder = lock_holder(state_dir)
    return holder[0] if holder is not None and "(ingestd run)" in holder[1] else None


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
    limit); the daemon goes on with the command when it passes.

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


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(1 << 20)
        if not line:
            return
        t0 = time.perf_counter()
        try:
            msg = json.loads(line)
            result = self.server.dispatch(str(msg["cmd"]), dict(msg.get("args") or {}))
            resp: dict[str, Any] = {"ok": True, "result": result}
        except DaemonError as exc:
            resp = {"ok": False, "error": str(exc), "exit_code": exc.exit_code}
        except Exception as exc:
            logger.exception("control command failed")
            resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "exit_code": 3}
        resp["elapsed_seconds"] = round(time.perf_counter() - t0, 6)
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
        self._server.dispatch = dispatch
        os.chmod(self.path, mode)
        _write_private(self.state_dir / _POINTER, str(self.path) + "\n")
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ingestd-control", daemon=True
        )

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def close(self) -> None:
        """Stop serving; remove the socket, its pointer file and a ``mkdtemp`` folder."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        for p in (self.path, self.state_dir / _POINTER):
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


class StateLock:
    """An exclusive ``flock`` on ``<state dir>/ingestd.lock``, naming its holder.

    While held, the file reads ``pid N (what)``; it is emptied on release, so
    :func:`starting_daemon` can tell a daemon that is starting from a finished one.
    Taking the lock creates the state dir private (:func:`secure_state_dir`).

    Raises:
        StateLockedError: from :meth:`acquire` when another process holds it.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / _LOCK
        self._fd: int | None = None

    def acquire(self, what: str = "ingestd") -> None:
        """Take the lock without waiting."""
        secure_state_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
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
        os.pwrite(fd, f"pid {os.getpid()} ({what})".encode(), 0)
        self._fd = fd

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Empty the lock file and release the lock."""
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
