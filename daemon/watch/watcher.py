"""Watching: watchdog events -> per-path changes -> debounced batches.

The observer thread only translates an event into relative paths and enqueues them
(as uvicorn's ``supervisors/watchdogreload.py`` forwards events to a callback). What a
path *means* (created, modified, deleted, moved) is decided later by the planner from
the disk and the manifest, so an editor's atomic save, a delete followed by a
re-create, or a ``git checkout`` all become "look at these paths again".

Coalescing is pure: :class:`Batcher` takes the clock as an argument (after watchdog's
``EventDebouncer``, split into state and a thread wrapper).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ingestd.daemon.sync.scanner import SourceFilter, walk_folders
from ingestd.daemon.watch import inotify

__all__ = ["Batch", "Batcher", "BatcherThread", "SourceWatcher"]

logger = logging.getLogger(__name__)

#: Longest a folder that could be watched but is not is waited for (its watch may be
#: on its way: watchdog adds the watch of a new folder on its own thread), in seconds.
SETTLE_S = 1.0


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


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep) or root.startswith(path + os.sep)


class _OverflowHook(logging.Handler):
    """Turns watchdog's "Inotify queue overflowed" log record into ``on_lost`` calls.

    watchdog rebuilds its watches after an ``IN_Q_OVERFLOW`` but emits no event for
    it; the events the kernel dropped are only found again by a rescan.
    """

    _watchers: set[SourceWatcher] = set()
    _lock = threading.Lock()
    _installed: _OverflowHook | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" not in record.getMessage().lower():
            return
        with self._lock:
            watchers = list(self._watchers)
        args = record.args if isinstance(record.args, tuple) else ()
        where = [os.path.realpath(os.fsdecode(a)) for a in args if isinstance(a, str | bytes)]
        mine = [w for w in watchers if any(_under(p, w.root) for p in where)]
        for w in mine or watchers:
            try:
                w._on_lost(w.source, "the inotify event queue overflowed")
            except Exception:  # pragma: no cover - a logging handler must not raise
                logger.debug("overflow callback failed", exc_info=True)

    @classmethod
    def register(cls, w: SourceWatcher) -> None:
        with cls._lock:
            cls._watchers.add(w)
            if cls._installed is None:
                cls._installed = cls(logging.WARNING)
                logging.getLogger("watchdog.observers.inotify").addHandler(cls._installed)

    @classmethod
    def unregister(cls, w: SourceWatcher) -> None:
        with cls._lock:
            cls._watchers.discard(w)


class SourceWatcher:
    """A watchdog observer on one source, forwarding relevant paths to ``put``.

    Every event is reduced to the relative paths it names (both ends of a move); the
    filter drops ignored paths (``.git``, editor temporaries, excludes, the state
    dir). An exception while handling an event is logged and never ends the
    observer thread; :meth:`alive` tells whether the observer and its emitter
    threads still run (the service exits non-zero when they do not).

    Args:
        flt: the source's filter; ignored paths never reach ``put``.
        put: ``(source, relative path)`` callback (must be quick and thread-safe).
        on_lost: called with a reason when events may have been lost (the caller
            rescans the source).
    """

    def __init__(
        self,
        flt: SourceFilter,
        put: Callable[[str, str], None],
        on_lost: Callable[[str, str], None],
    ) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        self.flt = flt
        self.source = flt.source.name
        self.root = os.path.realpath(flt.root)
        watcher = self

        class Handler(FileSystemEventHandler):
            def dispatch(self, event: FileSystemEvent) -> None:
                try:
                    watcher._on_event(event)
                except Exception:
                    logger.exception("error handling %r; rescanning", event)
                    try:
                        watcher._on_lost(watcher.source, "an event could not be handled")
                    except Exception:
                        logger.exception("cannot schedule a rescan")

        self._observer: Any = Observer()
        self._handler = Handler()
        self._put = put
        self._on_lost = on_lost
        self._started = False

    def _rel(self, path: str | bytes) -> str | None:
        p = os.fsdecode(path)
        if p == self.root:
            return ""
        if not p.startswith(self.root + os.sep):
            return None
        return Path(p[len(self.root) + 1 :]).as_posix()

    def _on_event(self, event: Any) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(dest)
        for raw in paths:
            rel = self._rel(raw)
            if rel is None:
                continue
            name = rel.rsplit("/", 1)[-1]
            if name == ".gitignore":
                # re-plan the whole folder in the same batch as the other changes (a
                # checkout that adds a .gitignore is still one batch)
                folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
                self.flt.forget_gitignore(folder)
                if folder == "" or not self.flt.ignores_dir(folder):
                    self._put(self.source, folder)
                continue
            if rel == "":
                if event.event_type == "deleted":
                    self._on_lost(self.source, "the source root was deleted")
                continue
            if event.is_directory:
                if not self.flt.ignores_dir(rel) and event.event_type != "modified":
                    self._put(self.source, rel)
            elif self.flt.accepts(rel):
                self._put(self.source, rel)

    def start(self) -> None:
        """Schedule the recursive watch and start the observer thread.

        Raises:
            OSError: the watch could not be set (e.g. inotify watch limit).
        """
        self._observer.schedule(self._handler, self.root, recursive=True)
        self._observer.start()
        self._started = True
        _OverflowHook.register(self)

    def unwatched_folders(self, under: Iterable[str] = ("",)) -> dict[str, str] | None:
        """Folders of the source (or below ``under``) that the kernel does not watch.

        watchdog may skip a folder silently (see :mod:`~ingestd.daemon.watch.inotify`); this
        asks the kernel. A folder found unwatched that could be watched now (it was
        created a moment ago, its watch is on its way) is looked at again for up to
        :data:`SETTLE_S` seconds before it counts.

        Returns:
            Relative folder path (``""``: the root) -> why it is not watched, or
            ``None`` when the kernel cannot tell (not inotify).
        """
        inodes = inotify.watched_inodes()
        if inodes is None:
            return None
        candidates: dict[str, int] = {}
        for top in sorted(set(under)):
            for rel, ino in walk_folders(self.flt, top):
                if ino not in inodes:
                    candidates[rel] = ino
        out: dict[str, str] = {}
        late: dict[str, int] = {}
        for rel, ino in candidates.items():
            reason = inotify.probe(Path(self.root) / rel)
            if reason.startswith("not watched"):
                late[rel] = ino
            else:
                out[rel] = reason
        deadline = time.monotonic() + SETTLE_S
        while late and time.monotonic() < deadline:
            time.sleep(0.05)
            inodes = inotify.watched_inodes() or set()
            late = {rel: ino for rel, ino in late.items() if ino not in inodes}
        for rel in late:
            out[rel] = "not watched (watchdog set no watch on it)"
        return out

    def alive(self) -> bool:
        """Whether the observer thread and every emitter thread still run."""
        if not self._observer.is_alive():
            return False
        return all(e.is_alive() for e in list(getattr(self._observer, "emitters", ())))

    def stop(self) -> None:
        """Stop and join the observer thread."""
        _OverflowHook.unregister(self)
        self._observer.stop()
        if self._started and self._observer.is_alive():
            self._observer.join(timeout=5)
