"""Watching: a watcher per source -> changed relative paths -> debounced batches.

A watcher only translates events into relative paths and hands them over (as
uvicorn's ``supervisors/watchdogreload.py`` forwards events to a callback). What a
path *means* (created, modified, deleted, moved) is decided later by the planner from
the disk and the manifest, so an editor's atomic save, a delete followed by a
re-create, or a ``git checkout`` all become "look at these paths again".

:class:`SourceWatcher` picks the backend: ingestd's own inotify watcher
(:mod:`~ingestd.daemon.watch.emitter`; only folders that can hold documents are
watched) where the kernel has inotify, else watchdog's observers
(:mod:`~ingestd.daemon.watch.fallback`). ``INGESTD_WATCH_BACKEND`` (``inotify``,
``watchdog`` or ``polling``) chooses one explicitly.

Coalescing is pure: :class:`Batcher` takes the clock as an argument (after watchdog's
``EventDebouncer``, split into state and a thread wrapper).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.watch import inotify
from ingestd.daemon.watch.coverage import WatchStats
from ingestd.daemon.watch.emitter import InotifyEmitter
from ingestd.daemon.watch.fallback import WatchdogEmitter

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "Batch",
    "Batcher",
    "BatcherThread",
    "Emitter",
    "SourceWatcher",
    "default_backend",
]

logger = logging.getLogger(__name__)

#: The environment variable that chooses the watching backend (see :func:`default_backend`).
BACKEND_ENV = "INGESTD_WATCH_BACKEND"
#: The backends: ingestd's inotify watcher, watchdog's platform observer, its polling one.
BACKENDS = ("inotify", "watchdog", "polling")


class Batch(NamedTuple):
    """A due batch: the source, its changed relative paths, and when the first came in."""

    source: str
    paths: set[str]
    first: float


@dataclass
class _Pending:
    paths: set[str] = field(default_factory=set)
    first: float = 0.0
    last: float = 0.0


class Batcher:
    """Coalesces changed paths per source until a quiet period passes.

    Args:
        debounce: quiet period that closes a batch, in seconds.
        max_delay: longest a path waits during continuous events, in seconds.
    """

    def __init__(self, debounce: float, max_delay: float) -> None:
        self.debounce = debounce
        self.max_delay = max(max_delay, debounce)
        self._pending: dict[str, _Pending] = {}

    def add(self, source: str, path: str, now: float) -> None:
        """Record that ``path`` of ``source`` changed at time ``now`` (seconds)."""
        p = self._pending.get(source)
        if p is None:
            p = self._pending[source] = _Pending(first=now)
        p.paths.add(path)
        p.last = now

    def due(self, now: float) -> list[Batch]:
        """Batches ready at ``now``: quiet for ``debounce`` or waiting ``max_delay``."""
        ready = []
        for source, p in list(self._pending.items()):
            if now - p.last >= self.debounce or now - p.first >= self.max_delay:
                ready.append(Batch(source, p.paths, p.first))
                del self._pending[source]
        return ready

    def next_due(self) -> float | None:
        """When the next batch becomes due (monotonic seconds), or ``None`` if idle."""
        times = [
            min(p.last + self.debounce, p.first + self.max_delay) for p in self._pending.values()
        ]
        return min(times) if times else None

    def depth(self) -> int:
        """Number of paths waiting."""
        return sum(len(p.paths) for p in self._pending.values())

    def oldest(self) -> float | None:
        """Monotonic time of the oldest waiting change, or ``None``."""
        firsts = [p.first for p in self._pending.values()]
        return min(firsts) if firsts else None


class BatcherThread:
    """Runs a :class:`Batcher`: ``put`` from any thread, batches go to ``emit``.

    An exception from ``emit`` is logged and never ends the thread.

    Args:
        batcher: the coalescing state.
        emit: called on this thread with ``(source, paths, first)`` for each due
            batch (``first``: clock time of its oldest change).
        clock: monotonic clock in seconds.
    """

    def __init__(
        self,
        batcher: Batcher,
        emit: Callable[[str, set[str], float], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batcher = batcher
        self.emit = emit
        self.clock = clock
        self._cond = threading.Condition()
        self._stopped = False
        self._emitting = 0  # paths taken from the batcher, not yet handed to ``emit``
        self._thread = threading.Thread(target=self._run, name="ingestd-batcher", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def put(self, source: str, path: str) -> None:
        """Record a changed path (thread-safe)."""
        with self._cond:
            self.batcher.add(source, path, self.clock())
            self._cond.notify()

    def depth(self) -> int:
        """Paths waiting for their quiet period or being handed over."""
        with self._cond:
            return self.batcher.depth() + self._emitting

    def oldest(self) -> float | None:
        """Monotonic time of the oldest waiting change."""
        with self._cond:
            return self.batcher.oldest()

    def alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                nxt = self.batcher.next_due()
                timeout = None if nxt is None else max(0.0, nxt - self.clock())
                if timeout is None or timeout > 0:
                    self._cond.wait(timeout)
                ready = self.batcher.due(self.clock())
                self._emitting += sum(len(b.paths) for b in ready)
            for batch in ready:
                try:
                    self.emit(*batch)
                except Exception:
                    logger.exception("cannot hand over a batch of source %s", batch.source)
                finally:
                    with self._cond:
                        self._emitting -= len(batch.paths)

    def stop(self) -> None:
        """Stop the thread (pending paths are dropped: the next scan finds them)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)


@functools.cache
def _inotify_available() -> bool:
    return inotify.available()


def default_backend() -> str:
    """``$INGESTD_WATCH_BACKEND`` when set, else ``inotify`` where the kernel has it.

    Without inotify: watchdog's platform observer (FSEvents, ``ReadDirectoryChangesW``,
    kqueue), or on Linux its polling observer.

    Raises:
        ValueError: the variable names no backend of :data:`BACKENDS`.
    """
    chosen = os.environ.get(BACKEND_ENV, "").strip().lower()
    if chosen:
        if chosen not in BACKENDS:
            raise ValueError(f"{BACKEND_ENV}={chosen!r}: use one of {', '.join(BACKENDS)}")
        return chosen
    if _inotify_available():
        return "inotify"
    return "polling" if sys.platform.startswith("linux") else "watchdog"


class Emitter(Protocol):
    """What a backend offers (:class:`InotifyEmitter`, :class:`WatchdogEmitter`)."""

    backend: str

    def start(self) -> None:
        """Set the watches and start the thread; raises ``OSError`` if the root fails."""
        ...

    def stop(self) -> None:
        """Stop the thread and drop the watches."""
        ...

    def alive(self) -> bool:
        """Whether its threads run."""
        ...

    def stats(self) -> WatchStats:
        """What it watches."""
        ...

    def unwatched_folders(self, under: Iterable[str] = ("",)) -> dict[str, str] | None:
        """Folders that can hold documents and have no watch, and why (``None``: unknown)."""
        ...


class SourceWatcher:
    """Watches one source, forwarding relevant changed paths to ``put``.

    Ignored paths never reach ``put``: folders a scan skips are not watched at all
    (inotify) or their events are dropped (watchdog), and so are files the filter
    refuses (editor temporaries, excludes). An exception while handling an event is
    logged and never ends the watcher's thread; :meth:`alive` tells whether its
    threads still run (the service exits non-zero when they do not).

    Args:
        flt: the source's filter.
        put: ``(source, relative path)`` callback (must be quick and thread-safe).
        on_lost: ``(source, reason)`` when events may have been lost (the caller
            rescans the source).
        backend: one of :data:`BACKENDS`; default :func:`default_backend`.
    """

    def __init__(
        self,
        flt: SourceFilter,
        put: Callable[[str, str], None],
        on_lost: Callable[[str, str], None],
        backend: str | None = None,
    ) -> None:
        self.flt = flt
        self.source = flt.source.name
        self.root = os.path.realpath(flt.root)
        self.backend = backend or default_backend()
        self.emitter: Emitter
        if self.backend == "inotify":
            self.emitter = InotifyEmitter(flt, put, on_lost)
        else:
            self.emitter = WatchdogEmitter(flt, put, on_lost, polling=self.backend == "polling")

    def start(self) -> None:
        """Set the watches (before returning) and start watching.

        Raises:
            OSError: the root could not be watched (the inotify watch or instance
                limit, permission denied).
        """
        self.emitter.start()

    def stop(self) -> None:
        """Stop watching and join the watcher's threads."""
        self.emitter.stop()

    def alive(self) -> bool:
        """Whether the watcher's threads still run."""
        return self.emitter.alive()

    def stats(self) -> WatchStats:
        """Folders watched and deliberately not watched (see :class:`WatchStats`)."""
        return self.emitter.stats()

    def unwatched_folders(self, under: Iterable[str] = ("",)) -> dict[str, str] | None:
        """Folders of the source (or below ``under``) that can hold documents and are not watched.

        Returns:
            Relative folder path (``""``: the root) -> why it is not watched, or
            ``None`` when the backend cannot tell (watchdog's observers).
        """
        return self.emitter.unwatched_folders(under)
