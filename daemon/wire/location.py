"""Where the control socket of a state dir is.

``$RUNTIME_DIRECTORY/ingestd.sock`` under systemd, else ``<state dir>/ingestd.sock``
when that path fits a Unix socket address (107 bytes), else a private folder of the
user (:func:`~ingestd.daemon.statedir.private_runtime_dir`), never a shared
world-writable one. The daemon writes the chosen path to ``<state dir>/control-socket``
(:data:`POINTER_FILE`) so that a client finds it from the state dir alone; a client
that cannot read the state dir (an operator in the service's group) is given the
socket with ``--socket`` / ``$INGESTD_SOCKET``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ingestd.daemon.statedir import private_runtime_dir
from ingestd.daemon.wire.errors import DaemonError

__all__ = ["MAX_SOCKET_PATH", "POINTER_FILE", "find_socket", "socket_path_for"]

#: Bytes of the longest path a Unix socket address holds (``sun_path`` less its NUL).
MAX_SOCKET_PATH = 107
#: The file in the state dir that holds the socket's path while a daemon serves.
POINTER_FILE = "control-socket"


def socket_path_for(state_dir: Path, env: dict[str, str] | None = None) -> Path:
    """Where the daemon of ``state_dir`` listens (see the module docstring).

    Args:
        state_dir: the state dir.
        env: the environment (default: ``os.environ``).

    The private fallback folder is created when it is chosen.
    """
    e = env if env is not None else os.environ
    runtime = e.get("RUNTIME_DIRECTORY")
    if runtime:
        return Path(runtime.split(":")[0]) / "ingestd.sock"
    p = Path(state_dir) / "ingestd.sock"
    if len(os.fsencode(p)) <= MAX_SOCKET_PATH:
        return p
    tag = hashlib.sha256(os.fsencode(Path(state_dir).absolute())).hexdigest()[:16]
    return private_runtime_dir(e) / f"ingestd-{tag}.sock"


def find_socket(state_dir: Path) -> Path | None:
    """The socket path recorded in the state dir, or ``None``.

    Raises:
        DaemonError: the state dir cannot be read (exit code 1); the message says to
            pass the socket with ``--socket``.
    """
    pointer = Path(state_dir) / POINTER_FILE
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
