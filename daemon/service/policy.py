"""What the daemon syncs when: scans, change batches, retries, deferred paths, lag.

* A *scan* reconciles a whole source with its files: at start-up, after a reload, when
  events may have been lost, periodically (``watch.rescan_interval_s``), while a source
  is not watched in every folder, and after a job failed without a job to retry.
* A *change batch* syncs the paths the batcher coalesced; it counts in ``lag_seconds``
  from its first change until it is written. Run at a checkpoint of another job, it
  leaves the documents that job has in flight to a batch queued once their group
  commits (at the next checkpoint, or when the job ends), with their first change.
* Scans and batches hand long documents to background writing
  (:mod:`~ingestd.daemon.sync.writing.long_writes`); a long document waiting for its turn
  counts in ``lag_seconds`` from its first change until its write begins.
* The other names (hard links) of a batch's files go with it, and documents with hard
  links are stat-checked every ``watch.hard_link_check_s``
  (:mod:`~ingestd.daemon.sync.planning.links`).
* A *retry* tries again the files that could not be read, once the engine's back-off
  for them is due; ``status`` lists them under ``retrying`` (not in ``lag_seconds``).

A scan asked for while one of the same source waits in the queue (not yet started)
is that scan: an inotify overflow, a periodic rescan and a re-watch arriving together
cost one walk. A scan asked for while one runs is queued: changes lost during the
running one may be in folders it has already walked.

A failed scan or batch is queued again after a back-off
(:class:`~ingestd.daemon.service.jobs.Backoff`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ingestd.daemon.commands.routes import Priority
from ingestd.daemon.engine import Engine
from ingestd.daemon.service.jobs import Backoff, Job, JobQueue
from ingestd.daemon.sources.base import Fetched
from ingestd.daemon.sync.types import SyncInterrupted, SyncProgress, SyncResult

__all__ = ["SyncPolicy"]

logger = logging.getLogger(__name__)


class SyncPolicy:
    """Queues the scans, change batches and retries of the sources (see the module docstring).

    Args:
        engine: returns the running engine (a reload replaces it).
        jobs: the engine thread's queue.
        backoff: failures and back-off per source.
        recheck_watches: ``(source, paths)`` after a sync that was not interrupted:
            checks that the folders among ``paths`` (``None``: every folder of the
            source) are watched.
        observe: ``(result, lag)`` of every sync (the metrics); ``lag``: seconds since
            the first change of a change batch, ``None`` for a scan.
    """

    def __init__(
        self,
        engine: Callable[[], Engine],
        jobs: JobQueue,
        backoff: Backoff,
        *,
        recheck_watches: Callable[[str, Iterable[str] | None], None],
        observe: Callable[[SyncResult, float | None], None],
    ) -> None:
        self.engine = engine
        self.jobs = jobs
        self.backoff = backoff
        self.recheck_watches = recheck_watches
        self.observe = observe
        #: ``starting``, ``reconciling`` (start-up scans), then ``watching``
        self.phase = "starting"
        #: what the engine thread does when no sync reports progress (``STATUS=``)
        self.current = ""
        self.progress: dict[str, SyncProgress] = {}  # source -> progress of its running scan
        #: source -> documents a failed job left to write, until a job of it succeeds:
        #: the changed paths of batches waiting for their retry, the rest of a failed scan
        self.failed_work: dict[str, dict[str, int]] = {}
        self.batches_done = 0  # live batches applied (tests and status)
        self._last_rescan = time.monotonic()
        self._last_link_check = time.monotonic()
        self._last_poll: dict[str, float] = {}  # polled source -> last poll (monotonic)
        self._fetching: set[str] = set()  # sources whose fetch runs now
        self._fetched: set[str] = set()  # sources fetched once since the start
        self._lag: list[float] = []
        self._waiting: dict[int, float] = {}  # change batches queued or running -> first change
        # deferred by a nested batch: source -> path -> its first change
        self._after_in_flight: dict[str, dict[str, float]] = {}
        self._retrying: set[tuple[str, str]] = set()  # unreadable files queued for a try
        self._long_queued = False  # a step of the long documents is queued or delayed
        self._scan_queued: set[str] = set()  # sources with a scan queued, not yet started
        self._scan_lock = threading.Lock()

    # -- scans ---------------------------------------------------------------------------------

    def queue_scan(self, source: str, why: str, delay: float = 0.0) -> bool:
        """Queue a scan of ``source``, after ``delay`` seconds (thread-safe without one).

        Without a delay, a scan of ``source`` already waiting in the queue is the one
        asked for: nothing more is queued.

        Returns:
            Whether a scan was queued (``False``: one was waiting already).
        """
        if not delay:
            with self._scan_lock:
                if source in self._scan_queued:
                    logger.debug("a scan of source %s is queued already (%s)", source, why)
                    return False
                self._scan_queued.add(source)
        job = Job(Priority.SCAN, self.jobs.next_seq(), self._scan_job(source, why))
        job.on_error = lambda exc: self.backoff.failed(
            source,
            "scan",
            exc,
            Job(Priority.SCAN, self.jobs.next_seq(), job.run, on_error=job.on_error),
        )
        if delay:
            self.jobs.defer(delay, job)
        else:
            self.jobs.put(job)
        return True

    def scan_all(self, why: str) -> None:
        """Queue a scan of every source."""
        for name in self.engine().context.sources:
            self.queue_scan(name, why)

    def rescan_after_error(self) -> None:
        """Queue a scan of every source, each after its back-off."""
        for name in self.engine().context.sources:
            self.queue_scan(name, "after an error", self.backoff.delay(name))

    def periodic_rescan(self, now: float, interval: float) -> None:
        """Queue a scan of every source when ``interval`` seconds passed (0: never)."""
        if not interval or now - self._last_rescan < interval:
            return
        self._last_rescan = now
        self.scan_all("periodic rescan")

    def poll_due(self, now: float) -> None:
        """Queue a scan of each ``polled`` source whose ``poll_s`` seconds have passed.

        A polled source's changes do not arrive by themselves (see
        :data:`~ingestd.daemon.sources.base.ChangeMode`): it is scanned at its interval
        (its first scan is the start-up reconcile).
        """
        engine = self.engine()
        for name, source in engine.context.handles.items():
            if source.changes != "polled" or source.poll_s <= 0:
                continue
            if isinstance(source, Fetched):  # fetched at start-up, then at its interval
                last = self._last_poll.setdefault(name, now - source.poll_s)
                if now - last >= source.poll_s and name not in self._fetching:
                    self._last_poll[name] = now
                    self._fetch(name, source.refresh)
                continue
            last = self._last_poll.setdefault(name, now)
            if now - last >= source.poll_s:
                self._last_poll[name] = now
                self.queue_scan(name, "poll")

    def _fetch(self, name: str, refresh: Callable[[], bool]) -> None:
        """Fetch source ``name`` in a thread of its own, then queue its scan if it moved.

        A fetch is network work: it never runs on the engine thread, so one slow
        repository holds up neither another source nor a search. A failed fetch is
        logged by the source (and shown by ``status``); its next try comes after the
        source's back-off (its ``poll_s`` while failing).
        """
        self._fetching.add(name)

        def run() -> None:
            try:
                if refresh() or name not in self._fetched:
                    self.queue_scan(name, "fetched")
                self._fetched.add(name)
            except Exception:  # the source logged it; status shows it
                logger.debug("fetch of source %s failed", name, exc_info=True)
            finally:
                self._fetching.discard(name)

        threading.Thread(target=run, name=f"ingestd-fetch-{name}", daemon=True).start()

    def check_links(self, now: float, interval: float) -> None:
        """Every ``interval`` seconds (0: never), sync the hard links whose stat changed.

        A document with another hard link (outside the root too) changes when that
        other name is written, with no event for this one (see
        :mod:`~ingestd.daemon.sync.planning.links`). Called on the engine thread.
        """
        if not interval or now - self._last_link_check < interval:
            return
        self._last_link_check = now
        for source, rels in self.engine().context.links.changed().items():
            self.on_batch(source, rels)

    def on_lost(self, source: str, why: str) -> None:
        """Events may have been lost: rescan the source once (thread-safe).

        Logged once per call (a watcher calls once per overflow); a scan already
        waiting in the queue is that rescan.
        """
        if self.queue_scan(source, why):
            logger.warning("events of source %s may have been lost (%s); rescanning", source, why)
        else:
            logger.warning(
                "events of source %s may have been lost (%s); a rescan is queued already",
                source,
                why,
            )

    def _scan_job(self, source: str, why: str) -> Callable[[], Any]:
        def run() -> Any:
            with self._scan_lock:  # from now on a lost event needs another scan
                self._scan_queued.discard(source)
            engine = self.engine()
            if source not in engine.context.sources:
                return None  # removed by a reload
            logger.info("scanning source %s (%s)", source, why)
            self.current = f"scanning {source}"

            def progress(p: SyncProgress) -> None:
                self.progress[source] = p

            try:
                res = engine.sync(source, progress=progress, background=True)
            except Exception:
                p = self.progress.get(source)
                if p is not None:  # its rescan comes after the back-off
                    self.failed_work.setdefault(source, {})["scan"] = p.docs_total - p.docs_done
                raise
            finally:
                self.progress.pop(source, None)
                self.current = ""
            self.failed_work.get(source, {}).pop("scan", None)
            self.backoff.succeeded(source)
            self.observe(res, None)
            if not res.interrupted:
                self.recheck_watches(source, None)
            if res.interrupted:
                logger.info(
                    "scan of source %s interrupted: %d indexed, %d deleted, %d failed "
                    "(the next start finishes it)",
                    source,
                    res.indexed,
                    res.deleted,
                    res.failed,
                )
                return res.as_dict()
            if res.root_missing:  # logged when it went missing; rescanned until it is back
                return res.as_dict()
            state = "in sync" if res.complete else "synced, not complete"
            if res.background and not res.incomplete_otherwise:
                state = f"synced, {len(res.background)} long document(s) written in the background"
            logger.info(
                "source %s %s: %d indexed, %d deleted, %d failed, %d embedded, %d reused",
                source,
                state,
                res.indexed,
                res.deleted,
                res.failed,
                res.embedded,
                res.reused,
            )
            self._idle_status()
            return res.as_dict()

        return run

    def _idle_status(self) -> None:
        if not self.progress:
            self.phase = "watching"

    # -- change batches --------------------------------------------------------------------------

    def on_batch(self, source: str, paths: set[str], first: float | None = None) -> None:
        """Queue a batch of changed paths (called on the batcher thread)."""
        self.jobs.put(self._batch_job(source, set(paths), first or time.monotonic()))

    def _batch_job(self, source: str, paths: set[str], first: float, *, retry: bool = False) -> Job:
        """A job syncing changed ``paths``; it counts in ``lag_seconds`` until it is done.

        Run nested in another job's checkpoint, it leaves the documents that job has in
        flight to a batch queued once that job ends (``deferred``). A ``retry`` of
        files that could not be read does not count in ``lag_seconds`` (``status``
        lists those files under ``retrying``).
        """
        seq = self.jobs.next_seq()
        if not retry:
            self._waiting[seq] = first

        def run() -> Any:
            engine = self.engine()
            if retry:
                self._retrying.difference_update((source, p) for p in paths)
            if source not in engine.context.sources:
                self._waiting.pop(seq, None)
                return None  # removed by a reload
            self._add_links(engine, source, paths, first)
            res = engine.sync(source, paths, background=True)
            self.failed_work.get(source, {}).pop(f"batch {seq}", None)
            engine.long_writes.note_first(source, res.background, first)
            self.batches_done += 1
            self.backoff.succeeded(source)
            if seq in self._waiting:
                self._waiting.pop(seq, None)
                self._lag.append(time.monotonic() - first)
                del self._lag[:-100]
            self.observe(res, first)
            if not res.interrupted:  # new or moved-in folders: did they get their watches?
                self.recheck_watches(source, paths)
            if res.indexed or res.deleted or res.failed:
                logger.info(
                    "source %s: %d changed path(s): %d indexed, %d deleted, %d failed",
                    source,
                    len(paths),
                    res.indexed,
                    res.deleted,
                    res.failed,
                )
            if res.deferred:
                later = self._after_in_flight.setdefault(source, {})
                for p in res.deferred:
                    later[p] = min(later.get(p, first), first)
            # files that vanished or could not be read mid-way are tried again when
            # their back-off is due (see queue_due_retries)
            if res.interrupted:  # stopping: the next start's scan finds these changes
                logger.info("source %s: a batch of changes was interrupted", source)
            return res.as_dict()

        def on_error(exc: Exception) -> None:
            self._waiting.pop(seq, None)
            again = self._batch_job(source, paths, first, retry=retry)
            work = self.failed_work.setdefault(source, {})
            work.pop(f"batch {seq}", None)
            work[f"batch {again.seq}"] = len(paths)
            if retry:
                self._retrying.update((source, p) for p in paths)
            self.backoff.failed(source, f"a batch of {len(paths)} change(s)", exc, again)

        return Job(Priority.CHANGES, seq, run, on_error=on_error, nestable=True)

    def _add_links(self, engine: Engine, source: str, paths: set[str], first: float) -> None:
        """Add to ``paths`` the other hard links of their files; queue those of other sources."""
        for other, rels in engine.context.links.siblings(source, paths).items():
            if other == source:
                paths.update(rels)
            elif other in engine.context.sources:
                self.on_batch(other, rels, first)

    def queue_deferred(self) -> None:
        """Queue the changes a nested batch deferred whose documents are no longer in flight.

        Called after each job and at every checkpoint: a change waits for the group
        that had its document in flight, not for the job that wrote the group.
        """
        engine = self.engine()
        for source in list(self._after_in_flight):
            later = self._after_in_flight[source]
            busy = engine.applier.busy(source) if source in engine.context.sources else set()
            ready = {p: t for p, t in later.items() if p not in busy}
            if not ready:
                continue
            for p in ready:
                del later[p]
            if not later:
                del self._after_in_flight[source]
            self.jobs.put(self._batch_job(source, set(ready), min(ready.values())))

    # -- long documents ----------------------------------------------------------------------

    def before_job(self) -> None:
        """A file the Edge store maps, cut, stops the daemon with its line (not by SIGBUS)."""
        self.engine().resources.check_mapped_files()

    def after_job(self) -> None:
        """After each job outside a checkpoint: queue deferred changes and long documents."""
        self.queue_deferred()
        engine = self.engine()
        if self._long_queued or not engine.long_writes.pending():
            return
        self._long_queued = True
        self.jobs.put(self._long_write_job())

    def _long_write_job(self) -> Job:
        """A job that writes one step of the long documents; the next is queued after it."""

        def run() -> None:
            self._long_queued = False
            try:
                delay = self.step_long_writes()
            except SyncInterrupted:  # stopping: the next start writes it again
                return
            if delay:  # a document is being chunked: poll it later
                self._long_queued = True
                self.jobs.defer(delay, self._long_write_job())

        def on_error(exc: Exception) -> None:
            units = self.engine().long_writes.units()
            source = units[0].source if units else "?"
            self._long_queued = True
            self.backoff.failed(source, "writing a long document", exc, self._long_write_job())

        return Job(Priority.SCAN, self.jobs.next_seq(), run, on_error=on_error)

    def step_long_writes(self) -> float | None:
        """One step of the long documents (``LongWrites.step``); seconds to the next."""
        return self.engine().long_writes.step()

    def long_write_done(self, res: SyncResult, first: float | None) -> None:
        """A long document is written: count it like a sync (``first``: its first change)."""
        self.backoff.succeeded(res.source)
        self.observe(res, first)

    # -- retries of unreadable files -------------------------------------------------------------

    def queue_due_retries(self) -> None:
        """Queue a try of each file whose read failed and whose back-off is due."""
        engine = self.engine()
        due: dict[str, set[str]] = {}
        for source, rel in engine.failures.retry.due(engine.context.now()):
            if (source, rel) not in self._retrying:
                due.setdefault(source, set()).add(rel)
        for source, rels in due.items():
            self._retrying.update((source, p) for p in rels)
            self.jobs.put(self._batch_job(source, rels, time.monotonic(), retry=True))

    def reset_retries(self) -> None:
        """Forget which files are queued for a try (a new engine has its own back-off)."""
        self._retrying.clear()

    # -- lag ---------------------------------------------------------------------------------------

    def lag(self, oldest_pending: float | None) -> float:
        """Seconds the oldest change not yet applied has waited (0.0 when none waits).

        Counts change batches queued, deferred or being written, long documents waiting
        for their turn, and ``oldest_pending``: the monotonic time of the oldest change
        still coalescing in the batcher, if any.
        """
        firsts = list(self._waiting.values())
        for later in list(self._after_in_flight.values()):  # read off the engine thread too
            firsts += list(later.values())
        firsts += self.engine().long_writes.waiting()
        if oldest_pending is not None:
            firsts.append(oldest_pending)
        return max(0.0, time.monotonic() - min(firsts)) if firsts else 0.0
