"""``ingestd run``: the long-running service.

Lifecycle after uvicorn's ``server.py``: :meth:`Service.serve` = ``startup()`` ->
``main_loop()`` -> ``shutdown()``. Signal handlers only set flags: the first
SIGINT/SIGTERM asks to exit at the next checkpoint, a second one forces it; SIGHUP
asks to reload the config.

Threads: the main thread owns the engine and the vector store (embedded Qdrant is not
thread-safe) and runs every job from one priority queue
(:mod:`~ingestd.daemon.service.jobs`); watchdog's observers, the batcher and the
control server only enqueue, and a background thread preloads the embedding model
once the daemon is ready. Long work never starves the daemon: at the engine's
checkpoints the daemon pings the systemd watchdog and runs queued searches and other
files' change batches.

Start-up order (DESIGN.md point 10): take the state-dir lock, open the store, set the
watches, serve the control socket, send ``READY=1``, then reconcile every source with
progress in ``STATUS=``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import Any

from ingestd.daemon.commands.routes import ROUTES, Thread
from ingestd.daemon.config import Config, ConfigError
from ingestd.daemon.service import systemd
from ingestd.daemon.service.control import ControlServer, DaemonError, StateLock
from ingestd.daemon.service.jobs import Backoff, Job, JobQueue, Priority
from ingestd.daemon.service.watches import Watches
from ingestd.daemon.sync.engine import Engine, SyncProgress, SyncResult

__all__ = ["Service"]

logger = logging.getLogger(__name__)

MODEL_LOAD_GRACE_S = 600.0  # longest the watchdog is fed while the model preloads


class Service:
    """The daemon: watches, queue, engine, control socket, systemd integration.

    Args:
        cfg: validated config.
        state_dir: the state dir.
        reload_config: returns a freshly loaded config (SIGHUP); raises
            :class:`ConfigError` when the new file is invalid.
        engine_factory: builds the :class:`Engine` (tests inject fakes).
    """

    def __init__(
        self,
        cfg: Config,
        state_dir: Path,
        *,
        reload_config: Callable[[], Config] | None = None,
        engine_factory: Callable[[Config, Path], Engine] | None = None,
    ) -> None:
        self.cfg = cfg
        self.state_dir = Path(state_dir)
        self.reload_config = reload_config
        self.engine_factory = engine_factory or (lambda c, d: Engine(c, d))
        self.should_exit = threading.Event()
        self.force_exit = False
        self.started = threading.Event()
        self.exit_code = 0
        self._reload = threading.Event()
        self.jobs = JobQueue(
            after_job=self._queue_deferred, on_unhandled=self._schedule_retry_rescan
        )
        self.backoff = Backoff(self.jobs, on_failure=self._count_failure)
        self._control: ControlServer | None = None
        self._lock = StateLock(self.state_dir)
        self.engine: Engine | None = None
        self.phase = "starting"
        self.progress: dict[str, Any] = {}  # source -> SyncProgress of its running scan
        self.started_at = time.time()
        self._last_rescan = time.monotonic()
        self._lag: list[float] = []
        self._waiting: dict[int, float] = {}  # change batches queued or running -> first change
        self._after_in_flight: dict[str, set[str]] = {}  # deferred by a nested batch
        self._preload: threading.Thread | None = None
        self._retrying: set[tuple[str, str]] = set()  # unreadable files queued for a try
        self.watches = Watches(cfg.watch, on_batch=self._on_batch, on_lost=self._on_lost)
        self.watchdog = systemd.WatchdogPinger(systemd.watchdog_interval())
        self.metrics: Any = None
        self.batches_done = 0  # live batches applied (tests and status)
        self.reloads = 0  # successful reloads
        self._reloading = False

    # -- public ------------------------------------------------------------------------------

    def serve(self) -> int:
        """Run until asked to stop; returns the process exit code."""
        self._install_signal_handlers()
        try:
            self.startup()
            self.main_loop()
        finally:
            self.shutdown()
        return self.exit_code

    def submit(self, fn: Callable[[], Any], priority: int = Priority.URGENT) -> Future[Any]:
        """Run ``fn`` on the engine thread; returns its future (thread-safe)."""
        return self.jobs.submit(fn, priority)

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock, open the store, watch, serve the socket, notify READY, queue reconciles."""
        logger.info("ingestd starting (pid %d), state dir %s", os.getpid(), self.state_dir)
        self._lock.acquire("ingestd run")
        self.engine = self.engine_factory(self.cfg, self.state_dir)
        _ = self.engine.store  # open it now: a locked or unreachable store fails start-up
        self._instrument(self.engine)
        self._start_watching()
        self._control = ControlServer(self.state_dir, self._dispatch)
        self._control.start()
        self._start_metrics()
        systemd.notify("READY=1")
        self.phase = "reconciling"
        for name in self.engine.sources:
            self._queue_scan(name, "start-up")
        self._start_preload()
        self.started.set()
        logger.info(
            "ready: %d source(s), control socket %s", len(self.engine.sources), self._control.path
        )

    def _start_watching(self) -> None:
        assert self.engine is not None
        self._retrying.clear()
        self.watches.start(self.engine.filters, self.cfg.watch)

    def _start_preload(self) -> None:
        """Load the embedding model in the background (``embedding.preload``)."""
        assert self.engine is not None
        if not self.cfg.embedding.preload:
            return
        engine = self.engine

        def load() -> None:
            try:
                if engine.load_model():
                    logger.debug("embedding model preloaded")
            except Exception:  # the engine thread reports it when it needs the model
                logger.debug("preloading the embedding model failed", exc_info=True)

        self._preload = threading.Thread(target=load, name="ingestd-preload", daemon=True)
        self._preload.start()

    def main_loop(self) -> None:
        """Run jobs until :attr:`should_exit`; ping the systemd watchdog.

        Exits with :attr:`exit_code` 1 when a file watcher or the batcher died: the
        daemon never runs on without its watches (systemd restarts it).
        """
        while not self.should_exit.is_set():
            self.watchdog.ping()
            if self._reload.is_set():
                self._reloading = True
                self._reload.clear()
                try:
                    self._do_reload()
                finally:
                    self._reloading = False
            for name in self.watches.drop_rootless():  # the root is back already (a remount)
                self._queue_scan(name, "root replaced")
            dead = self.watches.dead()
            if dead:
                logger.error(
                    "file watching stopped (%s); exiting so that the service is restarted",
                    ", ".join(dead),
                )
                self.exit_code = 1
                return
            now = time.monotonic()
            self._maybe_rescan(now)
            self._queue_due_retries()
            wait = self.jobs.release_delayed(now)
            job = self.jobs.get(timeout=min(0.5, self.watchdog.interval or 0.5, wait))
            if job is not None:
                self.jobs.run(job)

    def shutdown(self) -> None:
        """Stop watchers, the socket and the engine; release the lock."""
        systemd.notify("STOPPING=1")
        logger.info("ingestd stopping (pid %d)", os.getpid())
        self.watches.stop()
        if self._control is not None:
            self._control.close()
        if self.metrics is not None:
            self.metrics.close()
        self.jobs.close(DaemonError("the daemon is shutting down", 1))  # fail what is queued
        if self.engine is not None:
            self.engine.close()
        self._lock.release()
        logger.info("ingestd stopped")

    # -- signals -------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGTERM, self._on_exit_signal)
        signal.signal(signal.SIGINT, self._on_exit_signal)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_exit_signal(self, sig: int, _frame: FrameType | None) -> None:
        if self.should_exit.is_set():
            self.force_exit = True
            raise SystemExit(1)
        self.should_exit.set()
        if self.engine is not None:
            self.engine.stop.set()

    def _on_hup(self, _sig: int, _frame: FrameType | None) -> None:
        self._reload.set()

    def request_reload(self) -> None:
        """Ask the service to reload its config between jobs (what SIGHUP does)."""
        self._reload.set()
        self.jobs.wake()

    def request_exit(self) -> None:
        """Ask the service to stop after the batch in flight (thread-safe)."""
        self.should_exit.set()
        if self.engine is not None:
            self.engine.stop.set()
        self.jobs.wake()

    # -- jobs ------------------------------------------------------------------------------------

    def idle(self) -> bool:
        """Whether nothing waits: no changed path, no queued, delayed or running job."""
        return (
            not self._reload.is_set()
            and not self._reloading
            and self.jobs.idle()
            and self.watches.depth() == 0
        )

    def _checkpoint(self, serve_changes: bool) -> None:
        """Called by the engine between slices of long work (on the engine thread).

        Pings the watchdog (the work progressed), runs queued searches and, when
        ``serve_changes`` and not already nested, queued change batches of files:
        their documents in flight wait (see :meth:`_batch_job`).
        """
        self.watchdog.ping()
        self.jobs.run_nested(serve_changes, self.should_exit, self.watchdog.ping)

    def _scan_job(self, source: str, why: str) -> Callable[[], Any]:
        def run() -> Any:
            assert self.engine is not None
            if source not in self.engine.sources:
                return None  # removed by a reload
            logger.info("scanning source %s (%s)", source, why)

            def progress(p: SyncProgress) -> None:
                self.progress[source] = p
                systemd.notify(
                    f"STATUS={p.phase} {source}: {p.docs_done}/{p.docs_total} documents, "
                    f"{p.chunks_written} chunks"
                )

            try:
                res = self.engine.sync(source, progress=progress)
            finally:
                self.progress.pop(source, None)
            self.backoff.succeeded(source)
            self._observe(res, None)
            if not res.interrupted:
                self.watches.recheck(source, None)
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
            logger.info(
                "source %s %s: %d indexed, %d deleted, %d failed, %d embedded, %d reused",
                source,
                "in sync" if paths_complete_result(res) else "synced, not complete",
                res.indexed,
                res.deleted,
                res.failed,
                res.embedded,
                res.reused,
            )
            self._idle_status()
            return res.as_dict()

        return run

    def _queue_scan(self, source: str, why: str, delay: float = 0.0) -> None:
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

    def _count_failure(self) -> None:
        if self.metrics is not None:
            self.metrics.job_errors.inc()

    def _observe(self, res: Any, first: float | None) -> None:
        if self.metrics is not None:
            self.metrics.observe_sync(res, None if first is None else time.monotonic() - first)

    def _idle_status(self) -> None:
        if not self.progress and self.engine is not None:
            self.phase = "watching"
            systemd.notify(
                f"STATUS=watching {len(self.engine.sources)} source(s); "
                f"{self.engine.embedder.stats.embedded} chunks embedded since start"
            )

    def _on_batch(self, source: str, paths: set[str], first: float | None = None) -> None:
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
            assert self.engine is not None
            if retry:
                self._retrying.difference_update((source, p) for p in paths)
            if source not in self.engine.sources:
                self._waiting.pop(seq, None)
                return None  # removed by a reload
            res = self.engine.sync(source, paths)
            self.batches_done += 1
            self.backoff.succeeded(source)
            if seq in self._waiting:
                self._waiting.pop(seq, None)
                self._lag.append(time.monotonic() - first)
                del self._lag[:-100]
            self._observe(res, first)
            if not res.interrupted:  # new or moved-in folders: did they get their watches?
                self.watches.recheck(source, paths)
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
                self._after_in_flight.setdefault(source, set()).update(res.deferred)
            # files that vanished or could not be read mid-way are tried again when
            # their back-off is due (see _queue_due_retries)
            if res.interrupted:  # stopping: the next start's scan finds these changes
                logger.info("source %s: a batch of changes was interrupted", source)
            return res.as_dict()

        def on_error(exc: Exception) -> None:
            self._waiting.pop(seq, None)
            again = self._batch_job(source, paths, first, retry=retry)
            if retry:
                self._retrying.update((source, p) for p in paths)
            self.backoff.failed(source, f"a batch of {len(paths)} change(s)", exc, again)

        return Job(Priority.CHANGES, seq, run, on_error=on_error, nestable=True)

    def _queue_deferred(self) -> None:
        """Queue the changes a nested batch left to the job that had them in flight."""
        for source, paths in self._after_in_flight.items():
            self.jobs.put(self._batch_job(source, paths, time.monotonic()))
        self._after_in_flight.clear()

    def _on_lost(self, source: str, why: str) -> None:
        """Events may have been lost: rescan the source (thread-safe)."""
        logger.warning("events of source %s may have been lost (%s); rescanning", source, why)
        self._queue_scan(source, why)

    def _queue_due_retries(self) -> None:
        """Queue a try of each file whose read failed and whose back-off is due."""
        assert self.engine is not None
        due: dict[str, set[str]] = {}
        for source, rel in self.engine.retry.due(self.engine.now()):
            if (source, rel) not in self._retrying:
                due.setdefault(source, set()).add(rel)
        for source, rels in due.items():
            self._retrying.update((source, p) for p in rels)
            self.jobs.put(self._batch_job(source, rels, time.monotonic(), retry=True))

    def _schedule_retry_rescan(self) -> None:
        assert self.engine is not None
        for name in self.engine.sources:
            self._queue_scan(name, "after an error", self.backoff.delay(name))

    def _maybe_rescan(self, now: float) -> None:
        assert self.engine is not None
        for name in self.watches.rewatch_due(now):
            self._queue_scan(name, "not every folder is watched")
        interval = self.cfg.watch.rescan_interval_s
        if not interval or now - self._last_rescan < interval:
            return
        self._last_rescan = now
        for name in self.engine.sources:
            self._queue_scan(name, "periodic rescan")

    def _do_reload(self) -> None:
        """Apply a new config (SIGHUP); an invalid one keeps the running config.

        The new engine is built before the old one is closed, so a config whose rules,
        tokenizer or model cannot be loaded is rejected with the old engine intact. A
        scan of every source follows: only documents whose rule fingerprint changed
        are re-chunked.
        """
        if self.reload_config is None:
            logger.warning("SIGHUP ignored: no config file to reload")
            return
        systemd.notify("RELOADING=1")
        logger.info("reloading the configuration")
        try:
            new = self.reload_config()
            if not new.sources:
                raise ConfigError(["sources: the new config has no source to watch"])
            engine = self.engine_factory(new, self.state_dir)
        except Exception as exc:
            logger.error(
                "reload failed, keeping the running config:\n%s",
                exc if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}",
            )
            systemd.notify("READY=1")
            return
        assert self.engine is not None
        self.watches.stop(forget=True)
        if self.metrics is not None:
            self.metrics.embedded_before += self.engine.embedder.stats.embedded
            self.metrics.reused_before += self.engine.embedder.stats.reused
        self.engine.close()
        self.cfg = new
        self.engine = engine
        _ = self.engine.store
        self._instrument(self.engine)
        self._start_watching()
        for name in self.engine.sources:
            self._queue_scan(name, "reload")
        self.reloads += 1
        systemd.notify("READY=1")
        logger.info("configuration reloaded: %d source(s)", len(self.engine.sources))

    # -- metrics ---------------------------------------------------------------------------------

    def _instrument(self, engine: Engine) -> None:
        """Hook the engine: checkpoints, and watchdog pings and counts around model calls.

        A call of the model is at most ``embedding.batch_size`` texts (a second or so):
        the ping after it comes from progress. A call that finds the model still
        preloading waits for the load with pings (loading is bounded work in another
        thread), for at most :data:`MODEL_LOAD_GRACE_S`.
        """
        engine.on_checkpoint = self._checkpoint

        def wrap(model: Callable[..., Any]) -> Callable[..., Any]:
            def counted(texts: Any) -> Any:
                if self.metrics is not None:
                    self.metrics.embedding_calls.inc()
                self._wait_for_preload()
                self.watchdog.ping()
                out = model(texts)
                self.watchdog.ping()
                return out

            return counted

        engine.instrument_models(wrap)

    def _wait_for_preload(self) -> None:
        t = self._preload
        if t is None or not t.is_alive() or t is threading.current_thread():
            return
        deadline = time.monotonic() + MODEL_LOAD_GRACE_S
        while t.is_alive() and time.monotonic() < deadline:
            self.watchdog.ping()
            t.join(timeout=min(0.5, self.watchdog.interval or 0.5))

    def _start_metrics(self) -> None:
        m = self.cfg.metrics
        if m.port is None:
            return
        from ingestd.daemon.service.metrics import Metrics

        self.metrics = Metrics(
            engine=lambda: self.engine,
            queue_depth=lambda: self.watches.depth() + self.jobs.qsize(),
            oldest_change=self.watches.oldest,
            watching=lambda: not self.watches.dead(),
        )
        self.metrics.serve(m.host, m.port)
        logger.info("metrics on http://%s:%d/metrics", m.host, self.metrics.port)

    # -- control commands --------------------------------------------------------------------------

    def _dispatch(self, cmd: str, args: dict[str, Any]) -> Any:
        """Run control command ``cmd`` as :data:`~ingestd.daemon.commands.routes.ROUTES` says.

        Called on the control server's threads.

        Raises:
            DaemonError: unknown command (exit code 2), or the command's own error.
        """
        route = ROUTES.get(cmd)
        if route is None:
            raise DaemonError(f"unknown command {cmd!r}", 2)
        if route.thread is Thread.CONTROL:
            return route.fn(self, **args)
        fut = self.submit(lambda: route.fn(self.engine, **args), route.priority)
        result = fut.result()
        if route.rescans and isinstance(result, dict):
            for name in result.get("rescan", []):
                self._queue_scan(name, cmd)
        return result

    def status(self) -> dict[str, Any]:
        """The daemon's status (answered off the engine thread: manifest reads only)."""
        from ingestd.daemon.commands import commands

        assert self.engine is not None
        engine = self.engine
        st = commands.status_of(engine.manifest, engine, self.state_dir)
        watches = self.watches
        missing = dict(watches.missing_roots)
        for s in st["sources"]:
            s["root_missing"] = s["source"] in missing
            s["unwatched_folders"] = watches.coverage.folders(s["source"])
        watched = {w.source for w in watches.watchers}
        progress = {name: p.as_dict() for name, p in list(self.progress.items())}
        st["daemon"] = {
            "pid": os.getpid(),
            "phase": self.phase,
            "progress": progress,
            "in_flight": [f.as_dict() for f in engine.in_flight],
            "queue_depth": watches.depth() + self.jobs.qsize(),
            # documents a running scan still has to write (the first ingest, rescans)
            "scan_documents_left": sum(p["docs_total"] - p["docs_done"] for p in progress.values()),
            "lag_seconds": round(self.lag(), 3),
            "watchers_alive": all(w.alive() for w in watches.watchers),
            # sources without any watch, and sources with folders that are not watched:
            # both are rescanned every watch.unwatched_rescan_s
            "unwatched_sources": sorted(n for n in watches.unwatched if n not in watched),
            "degraded_sources": watches.coverage.degraded(),
            "missing_roots": sorted(missing.values()),
            "model_loaded": engine.model_loaded,
            "started_at": self.started_at,
            "last_error": dict(self.backoff.last_error),
            "healthy": not (
                watches.dead() or self.backoff.last_error or missing or watches.unwatched
            ),
        }
        return st

    def lag(self) -> float:
        """Seconds the oldest change not yet applied has waited (0.0 when none waits).

        Counts changes still coalescing in the batcher and change batches queued,
        deferred or being written.
        """
        firsts = list(self._waiting.values())
        oldest = self.watches.oldest()
        if oldest is not None:
            firsts.append(oldest)
        return max(0.0, time.monotonic() - min(firsts)) if firsts else 0.0


def paths_complete_result(res: SyncResult) -> bool:
    """Whether a sync left nothing behind (to retry, deferred, held or missing)."""
    return not (res.retry or res.deferred or res.held or res.root_missing or res.interrupted)
