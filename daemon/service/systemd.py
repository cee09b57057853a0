"""sd_notify without libsystemd: READY, STATUS, WATCHDOG, RELOADING, STOPPING.

After gunicorn's ``gunicorn/systemd.py``: a no-op when ``$NOTIFY_SOCKET`` is unset, an
``@`` prefix names an abstract socket, and it never raises (failures are logged at
debug level). Unlike gunicorn, the socket is created before the ``try`` so ``finally``
never closes an unbound name, and it never blocks: when the receiver's queue is full the
message is dropped (a blocked send would stall the engine thread that pings).
"""

from __future__ import annotations

import logging
import os
import socket
import time

__all__ = ["WatchdogPinger", "notify", "watchdog_interval"]

logger = logging.getLogger(__name__)


def notify(state: str, env: dict[str, str] | None = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``, ``"STATUS=indexing 10/200"``) to systemd.

    Returns:
        ``True`` when the message was sent, ``False`` when there is no notify socket or
        sending failed.
    """
    addr = (env if env is not None else os.environ).get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        # never block the daemon on a full notify queue: a message is dropped instead
        sock.setblocking(False)
        sock.connect(addr)
        sock.sendall(state.encode("utf-8"))
        return True
    except OSError:
        logger.debug("sd_notify(%r) failed", state, exc_info=True)
        return False
    finally:
        sock.close()


def watchdog_interval(env: dict[str, str] | None = None) -> float | None:
    """Least seconds between ``WATCHDOG=1`` pings, or ``None`` without a watchdog.

    A quarter of ``$WATCHDOG_USEC``, at most one second. systemd kills a service whose
    pings are ``$WATCHDOG_USEC`` apart and suggests pinging at half of it. The daemon
    pings from progress (after each embedding call and write slice, and from its idle
    loop), at most this often, so the longest gap between two pings is this plus the
    longest step of progress (about a second), well under half of ``$WATCHDOG_USEC``.
    ``$WATCHDOG_PID``, when set, must be this process's pid.
    """
    e = env if env is not None else os.environ
    usec = e.get("WATCHDOG_USEC")
    pid = e.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return max(0.05, min(1.0, int(usec) / 4_000_000))
    except ValueError:
        return None


class WatchdogPinger:
    """Sends ``WATCHDOG=1`` when pinged, at most every ``interval`` seconds.

    The daemon pings from progress: its idle loop, the checkpoints of long work, and
    around each call of the embedding model.

    Args:
        interval: least seconds between two pings (:func:`watchdog_interval`), or
            ``None`` without a watchdog (:meth:`ping` does nothing).
    """

    def __init__(self, interval: float | None) -> None:
        self.interval = interval
        self._next = 0.0

    def ping(self) -> None:
        """``WATCHDOG=1``, at most every quarter of systemd's interval (idle loop, checkpoints)."""
        if self.interval is None:
            return
        now = time.monotonic()
        if now >= self._next:
            notify("WATCHDOG=1")
            self._next = now + self.interval
