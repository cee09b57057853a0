"""The state-dir locks: one writer, or readers that never keep the writer out for long.

Two writers never share a store (DESIGN.md point 9), and a command that only reads never
writes to the state dir nor keeps the daemon from starting. Three ``flock`` files in
the state dir say who may do what:

* ``ingestd.lock`` (:data:`LOCK_FILE`): held *exclusively* by the one writer (``ingestd
  run``, a ``resync``, a ``verify --repair``, ...), which names itself in it while it
  holds it (``pid 4242 (ingestd run)``; emptied on release); held *shared* by readers
  (``status``, ``search``, ``read``, ``verify`` without ``--repair``), which write nothing.
* ``ingestd.queue.lock`` (:data:`QUEUE_FILE`): held exclusively by a writer from the
  moment it asks until it holds ``ingestd.lock``, naming itself there meanwhile. A
  reader takes it shared for an instant before it takes ``ingestd.lock``, so that no new
  reader comes in while a writer waits: readers cannot starve a writer.
* ``ingestd.reader.lock`` (:data:`READER_FILE`): held exclusively by the one reader that
  has the embedded store open. Both embedded engines let one process at a time open a
  store (Qdrant Edge locks each shard's write-ahead log, qdrant-client's local mode its
  folder), so readers of the store take turns; ``status`` never opens it.

A writer waits for readers to leave, up to the seconds it is given, with one log line
naming them (:func:`lock_readers`), and fails at once when another writer holds the
state dir or waits for it (:class:`StateLockedError`, naming it). A reader never waits
for a writer: it fails at once (:class:`StateLockedError`), and
:class:`~ingestd.daemon.client.runner.Runner` then asks the daemon when the writer is an
``ingestd run`` that is starting (:func:`starting_daemon`). Writers create the three
files; a reader opens them read-only and creates nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from ingestd.chunkers.errors import StateError
from ingestd.daemon.statedir import PRIVATE_FILE_MODE, StatePaths, secure_state_dir

__all__ = [
    "LOCK_FILE",
    "QUEUE_FILE",
    "READER_FILE",
    "READER_WAIT_S",
    "WRITER_WAIT_S",
    "ReadLock",
    "StateLock",
    "StateLockedError",
    "lock_holder",
    "lock_readers",
    "starting_daemon",
]

logger = logging.getLogger(__name__)

#: The state dir's lock file (shared: readers; exclusive: the writer, named in it).
LOCK_FILE = StatePaths.LOCK
#: Held by a writer while it waits for readers to leave (named in it meanwhile).
QUEUE_FILE = StatePaths.QUEUE_LOCK
#: Held by the one reader that has the embedded store open.
READER_FILE = StatePaths.READER_LOCK
#: Seconds a reader waits for another reader to close the embedded store.
READER_WAIT_S = 60.0
#: Seconds a writer (``ingestd run``, ``resync``, ...) waits for readers to leave: a
#: reader holds the state dir for the few seconds of one command at most.
WRITER_WAIT_S = 60.0
#: Seconds between two tries of a lock that is waited for.
_POLL_S = 0.02


class StateLockedError(StateError, RuntimeError):
    """Another process holds the state dir (two writers never share a store)."""


def _holder_text(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        return ""


def _try(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _locked(state_dir: Path, owner: str) -> StateLockedError:
    return StateLockedError(
        f"state dir {state_dir} is in use by another ingestd process "
        f"({owner or 'pid unknown'}); stop it or use another --state-dir"
    )


def _live_holder(text: str) -> tuple[int, str] | None:
    """``(pid, text)`` when ``text`` names a process that runs (``pid N (what)``)."""
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


class StateLock:
    """The writer's lock: ``ingestd.lock`` held exclusively, naming its holder.

    While held, the file reads ``pid N (what)``; it is emptied on release, so
    :func:`starting_daemon` can tell a daemon that is starting from a finished one.
    Taking the lock creates the state dir private (:func:`secure_state_dir`) and the
    lock files readers open.

    Raises:
        StateLockedError: from :meth:`acquire` when another writer holds it or waits for
            it, or when readers still hold it after the wait.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(
        self,
        what: str = "ingestd",
        *,
        wait_s: float = 0.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        """Take the lock; ``what`` names the holder (``ingestd run``).

        Another writer fails it at once. Readers are waited for up to ``wait_s`` seconds
        (meanwhile no new reader comes in); ``on_wait`` is called once, with a line
        naming them, when the wait begins (default: an INFO log line).

        Raises:
            StateLockedError: another writer holds or waits for the state dir (the message
                names it), or readers still hold it after ``wait_s`` seconds.
            ingestd.daemon.statedir.InsecureDirError: the state dir is not private.
        """
        state_dir = self.path.parent
        secure_state_dir(state_dir, inside=False)  # the stores' trees: their opener's
        me = f"pid {os.getpid()} ({what})".encode()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        queue = os.open(state_dir / QUEUE_FILE, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        os.close(os.open(state_dir / READER_FILE, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE))
        try:
            if not _try(queue, fcntl.LOCK_EX):  # another writer waits for it
                raise _locked(state_dir, _holder_text(queue))
            try:
                os.ftruncate(queue, 0)
                os.pwrite(queue, me, 0)
                self._wait_for_readers(fd, wait_s, on_wait or _log_wait)
                os.ftruncate(fd, 0)  # named before the queue lets the next one look
                os.pwrite(fd, me, 0)
            finally:
                os.ftruncate(queue, 0)
                fcntl.flock(queue, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.close(queue)
        self._fd = fd

    def _wait_for_readers(self, fd: int, wait_s: float, on_wait: Callable[[str], None]) -> None:
        """Take ``ingestd.lock`` exclusively once the readers left (``wait_s`` at most)."""
        deadline = time.monotonic() + wait_s
        told = False
        while not _try(fd, fcntl.LOCK_EX):
            holder = _live_holder(_holder_text(fd))
            if holder is not None:  # a writer holds it: never shared, never waited for
                raise _locked(self.path.parent, holder[1])
            readers = lock_readers(self.path.parent)
            if time.monotonic() >= deadline:
                raise _locked(self.path.parent, _describe(readers) or "readers")
            if not told:
                told = True
                on_wait(
                    f"state dir {self.path.parent}: waiting up to {wait_s:.0f} s for "
                    f"{_describe(readers) or 'readers'} to finish"
                )
            time.sleep(_POLL_S)

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


def _log_wait(line: str) -> None:
    logger.info("%s", line)


def _open_existing(path: Path) -> int | None:
    """``path`` opened read-only, or ``None`` when it does not exist (nothing is created)."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


class ReadLock:
    """A reader's lock: ``ingestd.lock`` shared, and with ``store`` the store's turn.

    Writes nothing: the files are opened read-only, and a state dir without them (never
    written by this version) is read without a lock. Usable as a context manager.

    Args:
        state_dir: the state dir.
        store: also take the turn of the readers that open the embedded store
            (:data:`READER_FILE`), waiting up to ``wait_s`` seconds for it.
        wait_s: seconds to wait for another reader to close the store.

    Raises:
        StateLockedError: from :meth:`acquire` when a writer holds the state dir or waits
            for it (the message names it), or when another reader kept the store for
            ``wait_s`` seconds.
    """

    def __init__(self, state_dir: Path, *, store: bool = False, wait_s: float = READER_WAIT_S):
        self.state_dir = Path(state_dir)
        self.store = store
        self.wait_s = wait_s
        self._fds: list[int] = []

    def acquire(self) -> None:
        """Take the locks (see the class docstring)."""
        fd = _open_existing(self.state_dir / LOCK_FILE)
        if fd is None:
            return
        self._fds.append(fd)
        try:
            queue = _open_existing(self.state_dir / QUEUE_FILE)
            if queue is not None:
                try:
                    if not _try(queue, fcntl.LOCK_SH):  # a writer waits: let it in first
                        raise _locked(self.state_dir, _holder_text(queue))
                    if not _try(fd, fcntl.LOCK_SH):
                        raise _locked(self.state_dir, _holder_text(fd))
                finally:
                    os.close(queue)
            elif not _try(fd, fcntl.LOCK_SH):
                raise _locked(self.state_dir, _holder_text(fd))
            if self.store:
                self._take_store_turn()
        except BaseException:
            self.release()
            raise

    def _take_store_turn(self) -> None:
        turn = _open_existing(self.state_dir / READER_FILE)
        if turn is None:
            return
        self._fds.append(turn)
        deadline = time.monotonic() + self.wait_s
        while not _try(turn, fcntl.LOCK_EX):
            if time.monotonic() >= deadline:
                raise StateLockedError(
                    f"state dir {self.state_dir}: another reader kept the vector store open "
                    f"for {self.wait_s:.0f} s"
                )
            time.sleep(_POLL_S)

    @property
    def held(self) -> bool:
        """Whether this object holds ``ingestd.lock`` shared."""
        return bool(self._fds)

    def release(self) -> None:
        """Release every lock taken (closing a file releases its ``flock``)."""
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> ReadLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(state_dir: Path) -> tuple[int, str] | None:
    """``(pid, text)`` of the live writer holding ``state_dir``, or waiting for it.

    Read from the lock file, which names the writer holding it (``pid N (ingestd run)``),
    else from the queue file, which names a writer waiting for readers to leave; a
    writer that no longer runs (killed with -9) does not count. Readers are never named
    there (see :func:`lock_readers`).
    """
    for name in (LOCK_FILE, QUEUE_FILE):
        try:
            text = (Path(state_dir) / name).read_text(errors="replace").strip()
        except OSError:
            continue
        holder = _live_holder(text)
        if holder is not None:
            return holder
    return None


def starting_daemon(state_dir: Path) -> int | None:
    """The pid of an ``ingestd run`` holding ``state_dir``'s lock or waiting for it."""
    holder = lock_holder(state_dir)
    return holder[0] if holder is not None and "(ingestd run)" in holder[1] else None


def lock_readers(state_dir: Path) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the processes holding ``state_dir``'s lock shared.

    Read from ``/proc/locks`` (Linux); an empty list where it cannot be read.
    """
    try:
        st = os.stat(Path(state_dir) / LOCK_FILE)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    out = []
    for line in lines:
        words = line.split()
        # "1: FLOCK  ADVISORY  READ  1234 fd:01:5678 0 EOF"
        if len(words) >= 6 and words[1] == "FLOCK" and words[3] == "READ" and words[5] == want:
            pid = int(words[4])
            out.append((pid, _command(pid)))
    return sorted(set(out))


def _command(pid: int) -> str:
    """``ingestd status`` for an ``ingestd`` process, else its program's name."""
    with contextlib.suppress(OSError):
        words = [
            w.decode(errors="replace")
            for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if w
        ]
        for i, w in enumerate(words):
            if Path(w).name == "ingestd" or w == "ingestd.daemon":
                return " ".join(["ingestd", *words[i + 1 : i + 2]])
        return Path(words[0]).name if words else ""
    return ""


def _describe(readers: list[tuple[int, str]]) -> str:
    """``2 readers (pid 12: ingestd status, pid 13: ...)``, or ``""`` when none is known."""
    if not readers:
        return ""
    named = ", ".join(f"pid {pid}: {cmd}" if cmd else f"pid {pid}" for pid, cmd in readers[:5])
    return f"{len(readers)} reader{'s' if len(readers) > 1 else ''} ({named})"
