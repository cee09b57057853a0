"""Checkpoints of long work, and the progress of the syncs that run.

Long work reaches a *checkpoint* after every write slice and every half second of
planning (DESIGN.md, "Long work is sliced"). There the owner of the engine (the daemon)
pings the systemd watchdog and serves other jobs, and a stop request ends the work
with :class:`~ingestd.daemon.sync.types.SyncInterrupted`.

Syncs nest: a change batch may run inside a checkpoint of a long scan. Their progress
records form a stack, outermost first; the innermost is the one a model load or a
write slice reports to.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ingestd.daemon.sync.types import ProgressFn, SyncInterrupted, SyncProgress

__all__ = ["HEARTBEAT_S", "Checkpoints"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds between checkpoints of a long planning, verify or chunking loop.
HEARTBEAT_S = 0.5


class Checkpoints:
    """Where long work may pause, and the progress of the syncs running now.

    Attributes:
        stop: set to end long work at its next checkpoint (``SyncInterrupted``).
        on_checkpoint: called at every checkpoint with ``serve_changes``: ``True``
            between write slices (other files' changes may be written there),
            ``False`` inside planning and verify loops (searches only).
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.on_checkpoint: Callable[[bool], None] | None = None
        self._last = time.monotonic()
        self._progress: list[tuple[SyncProgress, ProgressFn | None]] = []

    def checkpoint(self, *, serve_changes: bool = True) -> None:
        """A point where long work may pause: the owner serves jobs, a stop ends the work.

        Raises:
            SyncInterrupted: :attr:`stop` is set.
        """
        self._last = time.monotonic()
        if self.on_checkpoint is not None:
            self.on_checkpoint(serve_changes)
        if self.stop.is_set():
            raise SyncInterrupted("stop requested")

    def heartbeat(self) -> None:
        """A :meth:`checkpoint` (searches only) when the last one is over 0.5 s old.

        Raises:
            SyncInterrupted: :attr:`stop` is set.
        """
        if self.stop.is_set() or time.monotonic() - self._last >= HEARTBEAT_S:
            self.checkpoint(serve_changes=False)

    def wait_for(self, work: Callable[[], T], grace_s: float, what: str) -> T:
        """``work()`` in a worker thread, with checkpoints on this thread meanwhile.

        For work that cannot be sliced and that this (the engine) thread can only wait
        for: chunking a big file, an embedding server's requests. Every
        :data:`HEARTBEAT_S` seconds a checkpoint (searches only; the owner pings the
        watchdog); a stop request raises at once, and the worker finishes on its own
        (its result unused). Past ``grace_s`` seconds the checkpoints stop, with one
        warning, so that work that hangs trips the systemd watchdog.

        Args:
            work: the work.
            grace_s: seconds of checkpoints at most.
            what: the work in words, for the warning (``chunking docs/a.md``).

        Raises:
            SyncInterrupted: a stop was requested.
            Exception: what ``work`` raised.
        """
        box: list[Any] = []
        done = threading.Event()

        def run() -> None:
            try:
                box.append(work())
            except BaseException as exc:  # re-raised on the waiting thread
                box.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="ingestd-wait", daemon=True).start()
        deadline = time.monotonic() + grace_s
        overdue = False
        while not done.wait(HEARTBEAT_S):
            if self.stop.is_set():
                raise SyncInterrupted("stop requested")
            if time.monotonic() < deadline:
                self.checkpoint(serve_changes=False)
            elif not overdue:
                overdue = True
                logger.warning("%s takes over %.0f s", what, grace_s)
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]

    def raise_if_stopped(self) -> None:
        """Raise ``SyncInterrupted`` when a stop was requested (no checkpoint call)."""
        if self.stop.is_set():
            raise SyncInterrupted("stop requested")

    # -- progress of the running syncs ---------------------------------------------------

    def begin(self, prog: SyncProgress, report: ProgressFn | None) -> None:
        """A sync starts: ``prog`` is reported to ``report`` as it goes."""
        self._progress.append((prog, report))

    def end(self) -> None:
        """The innermost sync ended."""
        self._progress.pop()

    @property
    def running(self) -> list[SyncProgress]:
        """The running syncs, outermost first (a nested one serves a change mid-way)."""
        return [p for p, _ in self._progress]

    def set_phase(self, phase: str) -> None:
        """Set the innermost sync's phase (e.g. while the model loads) and report it."""
        if not self._progress:
            return
        prog, report = self._progress[-1]
        if prog.phase != phase:
            prog.phase = phase
            if report is not None:
                report(prog)

    def report(self, prog: SyncProgress) -> None:
        """Report ``prog`` to its sync's progress callback."""
        for p, fn in self._progress:
            if p is prog and fn is not None:
                fn(prog)
