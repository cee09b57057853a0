"""The state-dir lock: one process owns a state dir, and the lock file says which.

Two writers never share a store (DESIGN.md point 9): ``ingestd run``, and a command or
``Client`` call that opens the state dir itself, take an exclusive ``flock`` on
``<state dir>/ingestd.lock`` first. While held, the file reads ``pid N (what)``, e.g.
``pid 4242 (ingestd run)``; it is emptied on release. ``ingestd run`` holds the lock
before its control socket serves (it opens the store and sets the watches first), so a
client that finds the lock held by a live ``ingestd run`` (:func:`starting_daemon`)
waits for the socket instead of reporting the state dir as busy.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ingestd.chunkers.errors import StateError
from ingestd.daemon.statedir import PRIVATE_FILE_MODE, secure_state_dir

__all__ = ["LOCK_FILE", "StateLock", "StateLockedError", "lock_holder", "starting_daemon"]

#: The lock file in the state dir.
LOCK_FILE = "ingestd.lock"


class StateLockedError(StateError, RuntimeError):
    """Another process holds the state dir (two writers never share a store)."""


class StateLock:
    """An exclusive ``flock`` on ``<state dir>/ingestd.lock``, naming its holder.

    While held, the file reads ``pid N (what)``; it is emptied on release, so
    :func:`starting_daemon` can tell a daemon that is starting from a finished one.
    Taking the lock creates the state dir private (:func:`secure_state_dir`).

    Raises:
        StateLockedError: from :meth:`acquire` when another process holds it.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, what: str = "ingestd") -> None:
        """Take the lock without waiting; ``what`` names the holder (``ingestd run``).

        Raises:
            StateLockedError: another process holds it (the message names it).
            ingestd.daemon.statedir.InsecureDirError: the state dir is not private.
        """
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


def lock_holder(state_dir: Path) -> tuple[int, str] | None:
    """``(pid, text)`` of the live process holding ``state_dir``'s lock, or ``None``.

    Read from the lock file, which names its holder (``pid N (ingestd run)``) while it
    is held (:class:`StateLock`); a holder that no longer runs (killed with -9) does
    not count.
    """
    try:
        text = (Path(state_dir) / LOCK_FILE).read_text(errors="replace").strip()
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
