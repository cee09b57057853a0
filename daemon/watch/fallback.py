"""The fallback watcher where ingestd's inotify watcher cannot run: watchdog's observers.

macOS (FSEvents), Windows (``ReadDirectoryChangesW``) and BSD (kqueue) have no
inotify; there watchdog's platform observer watches the root recursively. Where
watchdog has nothing better (or ``INGESTD_WATCH_BACKEND=polling``), its polling
observer lists the tree every second, skipping the folders a scan skips (ignored
names, excludes, ``.gitignore``, the state dir). In both cases only created, deleted,
modified, moved and closed-after-writing events are asked for (watchdog's
``event_filter``; on inotify that keeps ``IN_OPEN`` and ``IN_CLOSE_NOWRITE`` out of the
kernel mask), and each is reduced to the relative paths it names, as uvicorn's
``supervisors/watchdogreload.py`` forwards events to a callback.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.walk import walk_folders
from ingestd.daemon.watch import watched
from ingestd.daemon.watch.coverage import WatchStats
from ingestd.daemon.watch.folders import OVERFLOW, prunes

__all__ = ["POLL_INTERVAL_S", "WatchdogEmitter"]

logger = logging.getLogger(__name__)

#: How often the polling observer lists the tree, in seconds (watchdog's default).
POLL_INTERVAL_S = 1.0


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep) or root.startswith(path + os.sep)


class _OverflowHook(logging.Handler):
    """Turns watchdog's "Inotify queue overflowed" log record into ``on_lost`` calls.

    watchdog rebuilds its watches after an ``IN_Q_OVERFLOW`` but emits no event for
    it; the events the kernel dropped are only found again by a rescan.
    """

    _emitters: set[WatchdogEmitter] = set()
    _lock = threading.Lock()
    _installed: _OverflowHook | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" not in record.getMessage().lower():
            return
        with self._lock:
            emitters = list(self._emitters)
        args = record.args if isinstance(record.args, tuple) else ()
        where = [os.path.realpath(os.fsdecode(a)) for a in args if isinstance(a, str | bytes)]
        mine = [e for e in emitters if any(_under(p, e.root) for p in where)]
        for e in mine or emitters:
            try:
                e.lost(OVERFLOW)
            except Exception:  # pragma: no cover - a logging handler must not raise
                logger.debug("overflow callback failed", exc_info=True)

    @classmethod
    def register(cls, e: WatchdogEmitter) -> None:
        with cls._lock:
            cls._emitters.add(e)
            if cls._installed is None:
                cls._installed = cls(logging.WARNING)
                logging.getLogger("watchdog.observers.inotify").addHandler(cls._installed)

    @classmethod
    def unregister(cls, e: WatchdogEmitter) -> None:
        with cls._lock:
            cls._emitters.discard(e)


class WatchdogEmitter:
    """A watchdog observer on one source, forwarding relevant paths to ``put``.

    Every event is reduced to the relative paths it names (both ends of a move); the
    filter drops ignored paths (``.git``, editor temporaries, excludes, the state
    dir). An exception while handling an event is logged and never ends the
    observer thread; :meth:`alive` tells whether the observer and its emitter
    threads still run.

    Args:
        flt: the source's filter; ignored paths never reach ``put``.
        put: ``(source, relative path)`` callback (must be quick and thread-safe).
        on_lost: called with a reason when events may have been lost (the caller
            rescans the source).
        polling: use watchdog's polling observer (pruned like a scan) instead of the
            platform's.
    """

    def __init__(
        self,
        flt: SourceFilter,
        put: Callable[[str, str], None],
        on_lost: Callable[[str, str], None],
        *,
        polling: bool = False,
    ) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler

        self.flt = flt
        self.source = flt.source.name
        self.root = os.path.realpath(flt.root)
        self.backend = "polling" if polling else "watchdog"
        emitter = self

        class Handler(FileSystemEventHandler):
            def dispatch(self, event: FileSystemEvent) -> None:
                try:
                    emitter.on_event(event)
                except Exception:
                    logger.exception("error handling %r; rescanning", event)
                    try:
                        emitter.lost("an event could not be handled")
                    except Exception:
                        logger.exception("cannot schedule a rescan")

        self._observer: Any = self._make_observer(polling)
        self._handler = Handler()
        self._put = put
        self._on_lost = on_lost
        self._started = False

    def _make_observer(self, polling: bool) -> Any:
        if not polling:
            from watchdog.observers import Observer

            return Observer()
        from watchdog.observers.polling import PollingObserverVFS

        return PollingObserverVFS(os.lstat, self._listdir, polling_interval=POLL_INTERVAL_S)

    def _listdir(self, path: str | None) -> Iterator[os.DirEntry[str]]:
        """``os.scandir`` without the folders a scan skips (the polling observer's walk)."""
        base = self.rel(path or self.root) or ""
        with os.scandir(path) as it:
            entries = list(it)
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False) and prunes(
                    self.flt, f"{base}/{e.name}" if base else e.name
                ):
                    continue
            except OSError:
                continue
            yield e

    def rel(self, path: str | bytes) -> str | None:
        """``path`` relative to the root (POSIX), ``""`` for the root, ``None`` outside."""
        p = os.fsdecode(path)
        if p == self.root:
            return ""
        if not p.startswith(self.root + os.sep):
            return None
        return Path(p[len(self.root) + 1 :]).as_posix()

    def lost(self, why: str) -> None:
        """Report that events of this source may have been lost."""
        self._on_lost(self.source, why)

    def on_event(self, event: Any) -> None:
        """Forward the relative paths of one watchdog event (on the observer thread)."""
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(dest)
        for raw in paths:
            rel = self.rel(raw)
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
                    self.lost("the source root was deleted")
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
        from watchdog.events import (
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
            FileClosedEvent,
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
        )

        wanted: list[type[Any]] = [
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileClosedEvent,
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
        ]
        self._observer.schedule(self._handler, self.root, recursive=True, event_filter=wanted)
        self._observer.start()
        self._started = True
        _OverflowHook.register(self)

    def stats(self) -> WatchStats:
        """The backend's name (watchdog does not say which folders it watches)."""
        return WatchStats(self.backend)

    def unwatched_folders(self, under: Iterable[str] = ("",)) -> dict[str, str] | None:
        """Folders the kernel does not watch, when watchdog runs on inotify.

        watchdog 7 skips a folder it cannot watch in silence (see
        :mod:`~ingestd.daemon.watch.watched`), so the kernel is asked.

        Returns:
            Relative folder path -> why it is not watched, or ``None`` when the
            kernel cannot tell (FSEvents, ``ReadDirectoryChangesW``, polling).
        """
        inodes = watched.watched_inodes() if self.backend == "watchdog" else None
        if inodes is None:
            return None
        out: dict[str, str] = {}
        for top in sorted(set(under)):
            for rel, ino in walk_folders(self.flt, top):
                if ino not in inodes:
                    out[rel] = watched.probe(Path(self.root) / rel)
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
