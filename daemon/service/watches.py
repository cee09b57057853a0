"""The daemon's watches: a watcher per source, the batcher, and the sources waited for.

A source is watched by a :class:`~ingestd.daemon.watch.watcher.SourceWatcher`, whose
changed paths the batcher coalesces into batches. A source that cannot be watched in
full is *unwatched* and rescanned every ``watch.unwatched_rescan_s`` seconds, its
watches set up again each time:

* its root is missing (unmounted, moved or deleted): nothing is deleted, and watching
  resumes when it is back;
* its root cannot be watched (the inotify watch limit, a permission error);
* some of its folders cannot be watched: the source is *degraded* (see
  :mod:`~ingestd.daemon.watch.coverage`).

After an inotify queue overflow the source is rescanned once (the watcher refreshes
its watches itself); the overflows are counted per source (:attr:`Watches.overflows`),
across watchers (a reload or a re-watch replaces them).

A root that is replaced while watched (deleted, moved or unmounted: its
``(st_dev, st_ino)`` changed) drops its watcher; that is not a crash. A watcher or a
batcher thread that died is (:meth:`Watches.dead`): the daemon never runs on without
its watches.
"""

from __future__ import annotations

import logging
import os
import stat as stat_mod
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ingestd.daemon.config import WatchConfig
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.watch.coverage import WatchCoverage
from ingestd.daemon.watch.folders import OVERFLOW
from ingestd.daemon.watch.watched import reason_for, watch_limit
from ingestd.daemon.watch.watcher import Batcher, BatcherThread, SourceWatcher

__all__ = ["Watches"]

logger = logging.getLogger(__name__)


class Watches:
    """The watches of every source (see the module docstring).

    Args:
        cfg: the ``watch`` settings (:meth:`start` takes new ones on a reload).
        on_batch: ``(source, paths, first)`` for each batch of changed paths, called
            on the batcher thread (``first``: monotonic time of its oldest change).
        on_lost: ``(source, why)`` when events may have been lost, called on a
            watcher thread (the caller rescans the source).
    """

    def __init__(
        self,
        cfg: WatchConfig,
        *,
        on_batch: Callable[[str, set[str], float], None],
        on_lost: Callable[[str, str], None],
    ) -> None:
        self.cfg = cfg
        self.on_batch = on_batch
        self.on_lost = on_lost
        self.watchers: list[SourceWatcher] = []
        self.batcher: BatcherThread | None = None
        self.coverage = WatchCoverage(cfg.unwatched_rescan_s)
        self.missing_roots: dict[str, str] = {}  # source -> root, missing at the last look
        #: sources not watched at all or not in every folder -> last re-watch (monotonic);
        #: each is watched again and rescanned every ``watch.unwatched_rescan_s``
        self.unwatched: dict[str, float] = {}
        #: source -> inotify queue overflows since the daemon started
        self.overflows: dict[str, int] = {}
        self._filters: Mapping[str, SourceFilter] = {}
        self._root_ids: dict[str, tuple[int, int] | None] = {}  # (st_dev, st_ino) watched

    def start(self, filters: Mapping[str, SourceFilter], cfg: WatchConfig) -> None:
        """Start the batcher and watch every source of ``filters`` (start-up, reload)."""
        self.cfg = cfg
        self._filters = filters
        self.batcher = BatcherThread(
            Batcher(cfg.debounce_ms / 1000, cfg.max_delay_ms / 1000), self.on_batch
        )
        self.batcher.start()
        self.unwatched.clear()
        self.coverage = WatchCoverage(cfg.unwatched_rescan_s)
        for name in filters:
            self.watch(name)

    def stop(self, *, forget: bool = False) -> None:
        """Stop every watcher and the batcher.

        Args:
            forget: also drop the watchers from :attr:`watchers` (a reload, before
                :meth:`start` sets new ones).
        """
        for w in self.watchers:
            w.stop()
        if forget:
            self.watchers.clear()
        if self.batcher is not None:
            self.batcher.stop()

    def watch(self, name: str) -> bool:
        """Start watching source ``name`` and check that every folder is watched.

        A source whose root is missing, whose root cannot be watched, or with folders
        that cannot be watched (see :mod:`~ingestd.daemon.watch.coverage`) is watched again
        and rescanned every ``watch.unwatched_rescan_s`` seconds instead.

        Returns:
            Whether a watcher runs (possibly degraded).
        """
        assert self.batcher is not None
        flt = self._filters[name]
        period = self.cfg.unwatched_rescan_s
        if not Path(flt.root).is_dir():
            if name not in self.missing_roots:
                logger.error(
                    "source %s: root %s is missing (unmounted?); nothing is deleted, and "
                    "watching resumes when it is back (checked every %.0f s)",
                    name,
                    flt.root,
                    period,
                )
            self.missing_roots[name] = str(flt.root)
            self.coverage.forget(name)
            self.unwatched[name] = time.monotonic()
            return False
        self.missing_roots.pop(name, None)
        sw = SourceWatcher(flt, self.batcher.put, self._lost)
        try:
            sw.start()
        except OSError as exc:
            sw.stop()
            self.coverage.unwatched_source(name, reason_for(exc.errno) if exc.errno else str(exc))
            self.unwatched[name] = time.monotonic()
            return False
        self.watchers.append(sw)
        self._root_ids[name] = _root_id(flt.root)
        self.check(sw)
        return True

    def check(self, sw: SourceWatcher, under: tuple[str, ...] = ("",)) -> None:
        """Ask the kernel whether the folders of ``sw`` (below ``under``) are watched."""
        found = sw.unwatched_folders(under)
        if found is None:  # the kernel cannot tell (not inotify)
            self.unwatched.pop(sw.source, None)
            return
        self.coverage.update(sw.source, found, under)
        if self.coverage.is_degraded(sw.source):
            self.unwatched.setdefault(sw.source, time.monotonic())
        else:
            self.unwatched.pop(sw.source, None)

    def recheck(self, source: str, paths: Iterable[str] | None) -> None:
        """After a sync of ``source``: are its folders among ``paths`` watched?

        ``paths``: relative paths of a change batch (only the folders among them, new
        or moved in, are checked), or ``None`` to check every folder (after a scan).
        """
        watcher = self.watcher_of(source)
        if watcher is None:
            return
        if paths is None:
            self.check(watcher)
            return
        folders = tuple(sorted(p for p in paths if (watcher.flt.root / p).is_dir()))
        if folders:
            self.check(watcher, folders)

    def watcher_of(self, name: str) -> SourceWatcher | None:
        """The running watcher of source ``name``, if any."""
        return next((w for w in self.watchers if w.source == name), None)

    def drop_rootless(self) -> list[str]:
        """A root that was deleted, moved or unmounted is waited for: that is not a crash.

        Its watch is dropped (an inotify watch follows a moved folder, and ends with a
        deleted one) and the source joins the unwatched ones, retried every 60 s.

        Returns:
            The sources watched again at once (a remount: the root is back already);
            the caller rescans them.
        """
        back = []
        for w in list(self.watchers):
            if _root_id(w.flt.root) != self._root_ids.get(w.source):
                w.stop()
                self.watchers.remove(w)
                if self.watch(w.source):
                    back.append(w.source)
        return back

    def rewatch_due(self, now: float) -> list[str]:
        """Watch again the unwatched sources whose period is over (``now``: monotonic).

        A degraded source has every watch set again (the limit may have been raised).

        Returns:
            Those sources: the caller rescans them.
        """
        due = []
        for name, last in list(self.unwatched.items()):
            if now - last >= self.cfg.unwatched_rescan_s:
                self.unwatched[name] = now
                old = self.watcher_of(name)
                if old is not None:
                    old.stop()
                    self.watchers.remove(old)
                was_missing = name in self.missing_roots
                if self.watch(name) and was_missing:
                    logger.info("source %s: its root is back; watching again", name)
                due.append(name)
        return due

    def dead(self) -> list[str]:
        """The watcher and batcher threads that died (``watcher of SOURCE``, ``batcher thread``)."""
        dead = [f"watcher of {w.source}" for w in self.watchers if not w.alive()]
        if self.batcher is not None and not self.batcher.alive():
            dead.append("batcher thread")
        return dead

    def _lost(self, source: str, why: str) -> None:
        """A watcher lost events: count an overflow, then pass it on (watcher thread)."""
        if why == OVERFLOW:
            self.overflows[source] = self.overflows.get(source, 0) + 1
        self.on_lost(source, why)

    def source_status(self, name: str) -> dict[str, Any]:
        """What ``status`` shows of the watches of source ``name``.

        Returns:
            ``watch_backend`` (``None`` while not watched), ``watched_folders`` and
            ``ignored_folders`` (``None`` when the backend does not say; an ignored
            folder counts once, nothing below it is entered), ``watch_events``
            (inotify events its watcher read since it started, ``None`` when not
            inotify) and ``overflows`` since the daemon started.
        """
        w = self.watcher_of(name)
        stats = w.stats() if w is not None else None
        return {
            "watch_backend": stats.backend if stats else None,
            "watched_folders": stats.watched if stats else None,
            "ignored_folders": stats.ignored if stats else None,
            "watch_events": stats.events if stats else None,
            "overflows": self.overflows.get(name, 0),
        }

    def budget(self) -> dict[str, Any]:
        """The inotify watches this daemon holds, beside the watch limit that binds.

        Returns:
            ``in_use`` (watches of every source), ``limit`` (``None`` when it cannot be
            read), ``share`` of the limit in use (0-1, ``None`` without a limit), and
            ``limit_key`` (``fs.inotify.max_user_watches``, or a user namespace's lower
            ``user.max_inotify_watches``). The limit is per user: other processes of
            the same user (editors, IDEs, other daemons) use it too.
        """
        used = sum(w.stats().watched or 0 for w in list(self.watchers))
        key, limit = watch_limit()
        return {
            "in_use": used,
            "limit": limit,
            "share": round(used / limit, 6) if limit else None,
            "limit_key": key,
        }

    def depth(self) -> int:
        """Changed paths waiting in the batcher."""
        return self.batcher.depth() if self.batcher is not None else 0

    def oldest(self) -> float | None:
        """Monotonic time of the oldest change waiting in the batcher, if any."""
        return self.batcher.oldest() if self.batcher is not None else None


def _root_id(root: Path | str) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of a source root, or ``None`` when it is not a folder."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat_mod.S_ISDIR(st.st_mode) else None
