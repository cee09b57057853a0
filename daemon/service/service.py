"""``ingestd run``: the long-running service.

Lifecycle after uvicorn's ``server.py``: :meth:`Service.serve` = ``startup()`` ->
``main_loop()`` -> ``shutdown()``. Signal handlers only set flags: the first
SIGINT/SIGTERM asks to exit at the next checkpoint, a second one forces it; SIGHUP
asks to reload the config.

Threads: the main thread owns the engine and the vector store (embedded Qdrant is not
thread-safe) and runs every job from one priority queue
(:mod:`~ingestd.daemon.service.jobs`); the file watchers, the batcher and the
control server only enqueue, and a background thread preloads the embedding model
once the daemon is ready (:mod:`~ingestd.daemon.service.instrument`). Long work never
starves the daemon: at the engine's checkpoints the daemon pings the systemd watchdog
and runs queued searches and other files' change batches.

The service composes its parts: the job queue and back-off
(:mod:`~ingestd.daemon.service.jobs`), what syncs when
(:mod:`~ingestd.daemon.service.policy`), the watches
(:mod:`~ingestd.daemon.service.watches`), ``status``
(:mod:`~ingestd.daemon.service.status`), and the control commands' routes
(:mod:`~ingestd.daemon.commands.routes`). A reload (SIGHUP) is part of the lifecycle
and lives here.

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
from typing import TYPE_CHECKING, Any

from ingestd.daemon.commands.routes import ROUTES, Priority, Thread
from ingestd.daemon.config import Config, ConfigError
from ingestd.daemon.engine import Engine
from ingestd.daemon.service import systemd
from ingestd.daemon.service.control import ControlServer
from ingestd.daemon.service.instrument import ModelPreload, instrument, unload_idle_model
from ingestd.daemon.service.jobs import Backoff, JobQueue
from ingestd.daemon.service.policy import SyncPolicy
from ingestd.daemon.service.status import (
    daemon_status,
    failing_fetches,
    health_problems,
    status_line,
)
from ingestd.daemon.service.watches import Watches
from ingestd.daemon.sources.base import is_watched
from ingestd.daemon.sync.types import SyncResult
from ingestd.daemon.wire.errors import DaemonError
from ingestd.daemon.wire.statelock import WRITER_WAIT_S, StateLock

if TYPE_CHECKING:
    from ingestd.daemon.service.metrics import Metrics

__all__ = ["Service"]

logger = logging.getLogger(__name__)


class Service:
    """The daemon: watches, queue, engine, control socket, systemd integration.

    Args:
        cfg: validated config.
        state_dir: the state dir.
        reload_config: returns a freshly loaded config (SIGHUP); raises
            :class:`ConfigError` when the new file is invalid.
        engine_factory: builds the :class:`Engine` (tests inject fakes).
        config_path: the config file it was started with (``status`` names it in the
            commands it suggests), or ``None``.

    Attributes:
        jobs: the engine thread's job queue.
        backoff: back-off and last error of failed jobs, per source.
        policy: what syncs when (scans, change batches, retries, lag).
        watches: the watches of the sources and the batcher.
        watchdog: the systemd watchdog's pinger.
        metrics: the Prometheus metrics (``metrics.port``), or ``None``.
    """

    def __init__(
        self,
        cfg: Config,
        state_dir: Path,
        *,
        reload_config: Callable[[], Config] | None = None,
        engine_factory: Callable[[Config, Path], Engine] | None = None,
        config_path: Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.state_dir = Path(state_dir)
        self.reload_config = reload_config
        self.engine_factory = engine_factory or (lambda c, d: Engine(c, d))
        self.should_exit = threading.Event()
        self.force_exit = False
        self.started = threading.Event()
        self.exit_code = 0
        self.engine: Engine | None = None
        self.metrics: Metrics | None = None
        self.started_at = time.time()
        self.reloads = 0  # successful reloads
        self.watchdog = systemd.WatchdogPinger(systemd.watchdog_interval())
        self.jobs = JobQueue(
            after_job=lambda: self.policy.after_job(),
            on_unhandled=lambda: self.policy.rescan_after_error(),
            on_fatal=self._fatal,
            before_job=lambda: self.policy.before_job(),
        )
        self.backoff = Backoff(self.jobs, on_failure=self._count_failure)
        self.policy = SyncPolicy(
            self._running_engine,
            self.jobs,
            self.backoff,
            recheck_watches=lambda source, paths: self.watches.recheck(source, paths),
            observe=self._observe,
        )
        self.watches = Watches(
            cfg.watch, on_batch=self.policy.on_batch, on_lost=self.policy.on_lost
        )
        self.preload = ModelPreload(self.watchdog)
        self._reload = threading.Event()
        self._reloading = False
        self._control: ControlServer | None = None
        self._lock = StateLock(self.state_dir)
        self._status = ""  # the last STATUS= sent
        self._status_next = 0.0  # monotonic time from which the next may be sent

    # -- public ------------------------------------------------------------------------------

    def serve(self) -> int:
        """Run until asked to stop; returns the process exit code."""
        self._install_signal_handlers()
        try:
            self.startup()
            self.main_loop()
        finally:
            if self._lock.held:  # refused at the lock, nothing started: nothing to stop
                self.shutdown()
        return self.exit_code

    def submit(self, fn: Callable[[], Any], priority: int = Priority.URGENT) -> Future[Any]:
        """Run ``fn`` on the engine thread; returns its future (thread-safe)."""
        return self.jobs.submit(fn, priority)

    def request_reload(self) -> None:
        """Ask the service to reload its config between jobs (what SIGHUP does)."""
        self._reload.set()
        self.jobs.wake()

    def request_exit(self) -> None:
        """Ask the service to stop after the batch in flight (thread-safe)."""
        self.should_exit.set()
        if self.engine is not None:
            self.engine.checkpoints.stop.set()
        self.jobs.wake()

    def idle(self) -> bool:
        """Whether nothing waits: no changed path, no queued, delayed or running job."""
        return (
            not self._reload.is_set()
            and not self._reloading
            and self.jobs.idle()
            and self.watches.depth() == 0
        )

    def lag(self) -> float:
        """Seconds the oldest change not yet applied has waited (0.0 when none waits).

        Counts changes still coalescing in the batcher and change batches queued,
        deferred or being written.
        """
        return self.policy.lag(self.watches.oldest())

    def status(self) -> dict[str, Any]:
        """The daemon's status (answered off the engine thread: manifest reads only)."""
        st = daemon_status(
            self._running_engine(),
            self.state_dir,
            watches=self.watches,
            policy=self.policy,
            queued=self.jobs.qsize(),
            started_at=self.started_at,
            last_error=self.backoff.last_error,
            max_lag=self.cfg.watch.max_lag_s,
            failing_since=self.backoff.failing_since,
            outages=self.backoff.outage_since,
        )
        st["daemon"]["config"] = str(self.config_path) if self.config_path else None
        return st

    def healthy(self) -> bool:
        """Whether ``status`` would say healthy (see :func:`health_problems`)."""
        engine = self.engine
        refusals = engine.failures.refusals if engine is not None else {}
        failing = failing_fetches(engine) if engine is not None else {}
        return not health_problems(
            self.watches,
            self.backoff.last_error,
            self.lag(),
            self.cfg.watch.max_lag_s,
            refusals,
            self.backoff.outage_since,
            failing,
        )

    def notify_status(self, *, force: bool = False) -> None:
        """Send systemd ``STATUS=`` when the work in flight changed (at most twice a second).

        Called on the engine thread: after each job and at every checkpoint.
        """
        if self.engine is None:
            return
        line = status_line(self.engine, self.policy)
        now = time.monotonic()
        if line != self._status and (force or now >= self._status_next):
            self._status, self._status_next = line, now + 0.5
            systemd.notify(f"STATUS={line}")

    @property
    def batches_done(self) -> int:
        """Live change batches applied since start (tests and status)."""
        return self.policy.batches_done

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock, open the store, watch, serve the socket, notify READY, queue reconciles."""
        logger.info("ingestd starting (pid %d), state dir %s", os.getpid(), self.state_dir)
        # readers (a status poll, a search) are waited for, bounded, with a log line
        self._lock.acquire("ingestd run", wait_s=WRITER_WAIT_S)
        self.engine = self.engine_factory(self.cfg, self.state_dir)
        self.engine.serving = True
        # open the store and every collection now: a locked, unreachable or damaged
        # store fails start-up with its one line, never a retry loop
        self.engine.open_collections()
        self._instrument(self.engine)
        self._start_watching(self.engine)
        self._control = ControlServer(self.state_dir, self._dispatch)
        self._control.start()
        self._start_metrics()
        self.policy.phase = "reconciling"
        systemd.notify("READY=1")
        self.notify_status(force=True)  # what is in flight, from READY=1 on
        self.policy.scan_all("start-up")
        if self.cfg.embedding.preload:  # load the embedding model in the background
            self.preload.start(self.engine)
        self.started.set()
        n = len(self.engine.context.sources)
        logger.info("ready: %d source(s), control socket %s", n, self._control.path)

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
                self.policy.queue_scan(name, "root replaced")
            dead = self.watches.dead()
            if dead:
                logger.error(
                    "file watching stopped (%s); exiting so that the service is restarted",
                    ", ".join(dead),
                )
                self.exit_code = 1
                return
            now = time.monotonic()
            for name in self.watches.rewatch_due(now):
                self.policy.queue_scan(name, "not every folder is watched")
            self.policy.periodic_rescan(now, self.cfg.watch.rescan_interval_s)
            self.policy.poll_due(now)
            self.policy.check_links(now, self.cfg.watch.hard_link_check_s)
            self.policy.queue_due_retries()
            busy = bool(self.jobs.qsize() or self.watches.depth())
            unload_idle_model(self.engine, self.cfg.embedding.keep_alive_s, busy)
            wait = self.jobs.release_delayed(now)
            job = self.jobs.get(timeout=min(0.5, self.watchdog.interval or 0.5, wait))
            if job is not None:
                self.jobs.run(job)
            self.notify_status(force=True)

    def shutdown(self) -> None:
        """Stop the socket, the watchers and the engine; release the lock.

        The socket closes first: a ``status`` asked meanwhile reads the state dir (the
        daemon is going), never a half-stopped daemon whose watchers already stopped
        (which it would report unhealthy: a false alarm for a health check).
        """
        systemd.notify("STOPPING=1")
        logger.info("ingestd stopping (pid %d)", os.getpid())
        if self._control is not None:
            self._control.close()
        self.watches.stop()
        if self.metrics is not None:
            self.metrics.close()
        self.jobs.close(DaemonError("the daemon is shutting down", 1))  # fail what is queued
        if self.engine is not None:
            left = [u.path for u in self.engine.long_writes.units()]
            if left:
                logger.info(
                    "writing of %d long document(s) interrupted (%s); the next start finishes it",
                    len(left),
                    ", ".join(left[:5]),
                )
            self.engine.close()
        self._lock.release()
        logger.info("ingestd stopped")

    def _fatal(self, exc: Exception) -> bool:
        """Stop the daemon on damage that no retry repairs; ``True`` when ``exc`` is such.

        A damaged state file (a vector store page cut short, a segment's config) fails
        every job that touches it: retrying would only log the same traceback forever.
        The one line that names the fix (``ingestd resync --rebuild``) is logged, and
        the daemon exits 1 (systemd's restart limits apply).
        """
        from ingestd.daemon.client.errors import one_line
        from ingestd.store.common.damage import StateDamagedError

        if not isinstance(exc, StateDamagedError):
            return False
        if not self.should_exit.is_set():
            logger.error("%s; the daemon stops", one_line(exc, self.state_dir))
            self.exit_code = 1
            self.request_exit()
        return True

    def _start_watching(self, engine: Engine) -> None:
        self.policy.reset_retries()
        watched = {n: s.filter for n, s in engine.context.handles.items() if is_watched(s)}
        self.watches.start(watched, self.cfg.watch)

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
            engine.serving = True
        except Exception as exc:
            logger.error(
                "reload failed, keeping the running config:\n%s",
                exc if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}",
            )
            systemd.notify("READY=1")
            return
        old = self._running_engine()
        self.watches.stop(forget=True)
        if self.metrics is not None:
            stats = old.profiles.profile.embedder.stats
            self.metrics.embedded_before += stats.embedded
            self.metrics.reused_before += stats.reused
        engine.take_over(old)  # what the old engine proved; its close records nothing
        old.close(record=False)
        self.cfg = new
        self.engine = engine
        _ = engine.resources.store
        self._instrument(engine)
        self._start_watching(engine)
        self.policy.scan_all("reload")
        self.reloads += 1
        systemd.notify("READY=1")
        logger.info("configuration reloaded: %d source(s)", len(engine.context.sources))

    def _running_engine(self) -> Engine:
        assert self.engine is not None, "the service has not started"
        return self.engine

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
            self.engine.checkpoints.stop.set()

    def _on_hup(self, _sig: int, _frame: FrameType | None) -> None:
        self._reload.set()

    # -- engine hooks and metrics ------------------------------------------------------------------

    def _instrument(self, engine: Engine) -> None:
        """Hook the engine: checkpoints, and watchdog pings and counts around model calls."""
        instrument(
            engine,
            checkpoint=self._checkpoint,
            before_call=self._before_model_call,
            ping=self.watchdog.ping,
        )
        engine.long_writes.enabled = True
        engine.long_writes.on_done = self.policy.long_write_done

    def _checkpoint(self, serve_changes: bool) -> None:
        """Called by the engine between slices of long work (on the engine thread).

        Pings the watchdog (the work progressed), runs queued searches and, when
        ``serve_changes`` and not already nested, queued change batches of files
        (their documents in flight wait, see
        :class:`~ingestd.daemon.service.policy.SyncPolicy`) and one step of the long
        documents written in the background.
        """
        self.watchdog.ping()
        self.notify_status()
        self.policy.queue_deferred()
        nest = serve_changes and not self.jobs.nested
        self.jobs.run_nested(serve_changes, self.should_exit, self.watchdog.ping)
        if nest and not self.should_exit.is_set() and self.engine is not None:
            self.jobs.run_nested_step(self.policy.step_long_writes)
            self.watchdog.ping()

    def _before_model_call(self) -> None:
        if self.metrics is not None:
            self.metrics.embedding_calls.inc()
        self.preload.wait()

    def _observe(self, res: SyncResult, first: float | None) -> None:
        if self.metrics is not None:
            self.metrics.observe_sync(res, None if first is None else time.monotonic() - first)

    def _count_failure(self) -> None:
        if self.metrics is not None:
            self.metrics.job_errors.inc()

    def _start_metrics(self) -> None:
        m = self.cfg.metrics
        if m.port is None:
            return
        from ingestd.daemon.service.metrics import Metrics

        self.metrics = Metrics(
            engine=lambda: self.engine,
            queue_depth=lambda: self.watches.depth() + self.jobs.qsize(),
            lag=self.lag,
            healthy=self.healthy,
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
                self.policy.queue_scan(name, cmd)
        return result
