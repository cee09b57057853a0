"""``ingestd run``: the long-running service.

Lifecycle after uvicorn's ``server.py``: :meth:`Service.serve` = ``startup()`` ->
``main_loop()`` -> ``shutdown()``. Signal handlers only set flags: the first
SIGINT/SIGTERM asks to exit after the write batch in flight, a second one forces it;
SIGHUP asks to reload the config.

Threads: the main thread owns the engine and the vector store (embedded Qdrant is not
thread-safe) and runs every job from one priority queue; watchdog's observers, the
batcher and the control server only enqueue.

Start-up order (DESIGN.md point 10): take the state-dir lock, open the store, set the
watches, serve the control socket, send ``READY=1``, then reconcile every source with
progress in ``STATUS=``.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from . import systemd
from .config import Config, ConfigError
from .control import ControlServer, DaemonError, StateLock
from .engine import Engine
from .watcher import Batcher, BatcherThread, SourceWatcher

__all__ = ["Service"]

logger = logging.getLogger(__name__)

URGENT, CHANGES, SCAN = 0, 1, 2


@dataclass(order=True)
class _Job:
    priority: int
    seq: int
    run: Callable[[], Any] = field(compare=False)
    future: Future[Any] | None = field(default=None, compare=False)


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
        self._queue: queue.PriorityQueue[_Job] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._watchers: list[SourceWatcher] = []
        self._batcher: BatcherThread | None = None
        self._control: ControlServer | None = None
        self._lock = StateLock(self.state_dir)
        self.engine: Engine | None = None
        self.phase = "starting"
        self.progress: dict[str, str] = {}
        self.started_at = time.time()
        self._last_rescan = time.monotonic()
        self._lag: list[float] = []

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

    def submit(self, fn: Callable[[], Any], priority: int = URGENT) -> Future[Any]:
        """Run ``fn`` on the engine thread; returns its future (thread-safe)."""
        fut: Future[Any] = Future()
        self._queue.put(_Job(priority, next(self._seq), fn, fut))
        return fut

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock, open the store, watch, serve the socket, notify READY, queue reconciles."""
        logger.info("ingestd starting (pid %d), state dir %s", os.getpid(), self.state_dir)
        self._lock.acquire("ingestd run")
        self.engine = self.engine_factory(self.cfg, self.state_dir)
        _ = self.engine.store  # open it now: a locked or unreachable store fails start-up
        self._start_watching()
        self._control = ControlServer(self.state_dir, self._dispatch)
        self._control.start()
        systemd.notify("READY=1")
        self.phase = "reconciling"
        for name in self.engine.sources:
            self._queue.put(_Job(SCAN, next(self._seq), self._scan_job(name, "start-up")))
        self.started.set()
        logger.info(
            "ready: %d source(s), control socket %s", len(self.engine.sources), self._control.path
        )

    def _start_watching(self) -> None:
        assert self.engine is not None
        w = self.cfg.watch
        self._batcher = BatcherThread(
            Batcher(w.debounce_ms / 1000, w.max_delay_ms / 1000), self._on_batch
        )
        self._batcher.start()
        for name, flt in self.engine.filters.items():
            sw = SourceWatcher(flt, self._batcher.put, self._on_lost)
            try:
                sw.start()
            except OSError as exc:
                logger.error(
                    "cannot watch source %s (%s); it is rescanned every %.0f s instead "
                    "(raise fs.inotify.max_user_watches?)",
                    name,
                    exc,
                    w.rescan_interval_s or 60,
                )
                continue
            self._watchers.append(sw)

    def main_loop(self) -> None:
        """Run jobs until :attr:`should_exit`; ping the systemd watchdog."""
        ping = systemd.watchdog_interval()
        next_ping = time.monotonic()
        while not self.should_exit.is_set():
            now = time.monotonic()
            if ping and now >= next_ping:
                systemd.notify("WATCHDOG=1")
                next_ping = now + ping
            if self._reload.is_set():
                self._reload.clear()
                self._do_reload()
            if any(not w.alive() for w in self._watchers):
                logger.error("a file watcher died; exiting so that the service is restarted")
                self.exit_code = 1
                return
            self._maybe_rescan(now)
            try:
                job = self._queue.get(timeout=min(0.5, ping or 0.5))
            except queue.Empty:
                continue
            self._run_job(job)

    def shutdown(self) -> None:
        """Stop watchers, the socket and the engine; release the lock."""
        systemd.notify("STOPPING=1")
        logger.info("ingestd stopping (pid %d)", os.getpid())
        for w in self._watchers:
            w.stop()
        if self._batcher is not None:
            self._batcher.stop()
        if self._control is not None:
            self._control.close()
        while True:  # fail whatever is still queued
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job.future is not None and not job.future.done():
                job.future.set_exception(DaemonError("the daemon is shutting down", 1))
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

    def request_exit(self) -> None:
        """Ask the service to stop after the batch in flight (thread-safe)."""
        self.should_exit.set()
        if self.engine is not None:
            self.engine.stop.set()
        self._queue.put(_Job(URGENT, next(self._seq), lambda: None))

    # -- jobs ------------------------------------------------------------------------------------

    def _run_job(self, job: _Job) -> None:
        try:
            result = job.run()
        except Exception as exc:
            if job.future is not None:
                job.future.set_exception(exc)
            else:
                logger.exception("job failed; the source will be rescanned")
                self._schedule_retry_rescan()
            return
        if job.future is not None:
            job.future.set_result(result)

    def _serve_urgent(self) -> None:
        """Run queued urgent jobs (searches, status) between write batches."""
        held: list[_Job] = []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job.priority == URGENT:
                self._run_job(job)
            else:
                held.append(job)
        for job in held:
            self._queue.put(job)

    def _scan_job(self, source: str, why: str) -> Callable[[], Any]:
        def run() -> Any:
            assert self.engine is not None
            logger.info("scanning source %s (%s)", source, why)

            def progress(done: int, total: int) -> None:
                self.progress[source] = f"{done}/{total}"
                systemd.notify(f"STATUS=indexing {source}: {done}/{total} documents")

            res = self.engine.sync(source, progress=progress, between=self._serve_urgent)
            self.progress.pop(source, None)
            logger.info(
                "source %s in sync: %d indexed, %d deleted, %d failed, %d embedded, %d reused",
                source,
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
        if not self.progress and self.engine is not None:
            self.phase = "watching"
            systemd.notify(
                f"STATUS=watching {len(self.engine.sources)} source(s); "
                f"{self.engine.embedder.stats.embedded} chunks embedded since start"
            )

    def _on_batch(self, source: str, paths: set[str]) -> None:
        queued = time.monotonic()

        def run() -> Any:
            assert self.engine is not None
            res = self.engine.sync(source, paths, between=self._serve_urgent)
            self._lag.append(time.monotonic() - queued)
            del self._lag[:-100]
            if res.indexed or res.deleted or res.failed:
                logger.info(
                    "source %s: %d changed path(s): %d indexed, %d deleted, %d failed",
                    source,
                    len(paths),
                    res.indexed,
                    res.deleted,
                    res.failed,
                )
            if res.retry:
                self._retry_later(source, res.retry)
            return res.as_dict()

        self._queue.put(_Job(CHANGES, next(self._seq), run))

    def _retry_later(self, source: str, paths: list[str]) -> None:
        assert self._batcher is not None
        timer = threading.Timer(1.0, lambda: [self._batcher.put(source, p) for p in paths])  # type: ignore[union-attr]
        timer.daemon = True
        timer.start()

    def _on_lost(self, source: str, why: str) -> None:
        logger.warning("events of source %s may have been lost (%s); rescanning", source, why)
        self._queue.put(_Job(SCAN, next(self._seq), self._scan_job(source, why)))

    def _schedule_retry_rescan(self) -> None:
        assert self.engine is not None
        for name in self.engine.sources:
            self._queue.put(_Job(SCAN, next(self._seq), self._scan_job(name, "after an error")))

    def _maybe_rescan(self, now: float) -> None:
        interval = self.cfg.watch.rescan_interval_s
        if not interval or now - self._last_rescan < interval:
            return
        self._last_rescan = now
        assert self.engine is not None
        for name in self.engine.sources:
            self._queue.put(_Job(SCAN, next(self._seq), self._scan_job(name, "periodic rescan")))

    def _do_reload(self) -> None:
        if self.reload_config is None:
            return
        systemd.notify("RELOADING=1")
        try:
            new = self.reload_config()
        except ConfigError as exc:
            logger.error("reload failed, keeping the running config:\n%s", exc)
            systemd.notify("READY=1")
            return
        logger.info("reloading the configuration")
        assert self.engine is not None
        for w in self._watchers:
            w.stop()
        self._watchers.clear()
        if self._batcher is not None:
            self._batcher.stop()
        self.engine.close()
        self.cfg = new
        self.engine = self.engine_factory(new, self.state_dir)
        _ = self.engine.store
        self._start_watching()
        for name in self.engine.sources:
            self._queue.put(_Job(SCAN, next(self._seq), self._scan_job(name, "reload")))
        systemd.notify("READY=1")

    # -- control commands --------------------------------------------------------------------------

    def _dispatch(self, cmd: str, args: dict[str, Any]) -> Any:
        from . import commands

        if cmd == "status":
            return self.status()
        fn = commands.REMOTE.get(cmd)
        if fn is None:
            raise DaemonError(f"unknown command {cmd!r}", 2)
        prio = URGENT if cmd == "search" else CHANGES
        fut = self.submit(lambda: fn(self.engine, **args), prio)
        return fut.result()

    def status(self) -> dict[str, Any]:
        """The daemon's status (answered off the engine thread: manifest reads only)."""
        from . import commands

        assert self.engine is not None
        st = commands.status_of(self.engine.manifest, self.engine, self.state_dir)
        oldest = self._batcher.oldest() if self._batcher else None
        st["daemon"] = {
            "pid": os.getpid(),
            "phase": self.phase,
            "progress": dict(self.progress),
            "queue_depth": (self._batcher.depth() if self._batcher else 0) + self._queue.qsize(),
            "lag_seconds": round(time.monotonic() - oldest, 3) if oldest else 0.0,
            "watchers_alive": all(w.alive() for w in self._watchers),
            "started_at": self.started_at,
            "healthy": all(w.alive() for w in self._watchers),
        }
        return st
