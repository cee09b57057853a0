"""The engine thread's jobs: one priority queue, delayed jobs, nested jobs, back-off.

Every job runs on the engine thread, which owns the engine and the vector store
(embedded Qdrant is not thread-safe). Other threads only enqueue: the batcher, the
watchers, the control server (:meth:`JobQueue.submit`).

Long work never starves the daemon (DESIGN.md, "Long work is sliced"): the engine
reaches a checkpoint after every write slice (at most 32 chunks) and every half second
of planning. There the daemon pings the systemd watchdog (so pings come from progress:
a real hang still trips the watchdog), runs queued searches, and, between write slices,
other files' change batches (never one touching a document in flight: that waits for
its group) and a step of the long documents written in the background; a stop request
ends the work there (:meth:`JobQueue.run_nested`). Long documents are never written
inside a job: each step is a job of its own, queued again until they are written.

A background job that fails is queued again after a back-off that doubles with each
consecutive failure of its source (:class:`Backoff`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ingestd.chunkers.errors import UnavailableError
from ingestd.daemon.commands.routes import Priority

__all__ = ["is_outage", "RETRY_MAX_S", "RETRY_MIN_S", "Backoff", "Job", "JobQueue"]

logger = logging.getLogger(__name__)

RETRY_MIN_S, RETRY_MAX_S = 1.0, 60.0  # back-off of a failed batch or scan


@dataclass(order=True)
class Job:
    """A unit of work for the engine thread; jobs sort by ``(priority, seq)``."""

    priority: int
    seq: int
    run: Callable[[], Any] = field(compare=False)
    #: receives the result or the exception (jobs submitted by other threads)
    future: Future[Any] | None = field(default=None, compare=False)
    #: called instead of the default rescan when a background job fails
    on_error: Callable[[Exception], None] | None = field(default=None, compare=False)
    #: may run at a checkpoint of another job (a change batch of other files)
    nestable: bool = field(default=False, compare=False)


class JobQueue:
    """The queue of the engine thread, its delayed jobs, and jobs nested at checkpoints.

    Any thread may :meth:`put` and :meth:`submit`; only the engine thread takes and
    runs jobs (:meth:`get`, :meth:`run`, :meth:`run_nested`) and delays them
    (:meth:`defer`, :meth:`release_delayed`).

    Args:
        after_job: called on the engine thread after each job run outside a
            checkpoint, before that job counts as done (so :meth:`idle` never sees a
            gap between a job and the work it leaves behind).
        on_unhandled: called after a failed job with neither a future nor an
            ``on_error`` was logged (the service rescans every source).
        on_fatal: called first with every error of a job; returns whether the error
            ends the daemon (damage no retry can repair): then the job's own handling
            is skipped, but its future still gets the error.
        before_job: called before each job; an error it raises is the job's (a check
            that the store's files are whole, so that damage ends the daemon with its
            line before the job reads past a cut file's end).
    """

    def __init__(
        self,
        *,
        after_job: Callable[[], None],
        on_unhandled: Callable[[], None],
        on_fatal: Callable[[Exception], bool] = lambda exc: False,
        before_job: Callable[[], None] = lambda: None,
    ) -> None:
        self.before_job = before_job
        self.after_job = after_job
        self.on_unhandled = on_unhandled
        self.on_fatal = on_fatal
        self._queue: queue.PriorityQueue[Job] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._delayed: list[tuple[float, int, Job]] = []  # heap of (due, seq, job)
        self._depth = 0  # jobs running inside a checkpoint of another job

    def next_seq(self) -> int:
        """A new sequence number: jobs of one priority run in this order (thread-safe)."""
        return next(self._seq)

    def put(self, job: Job) -> None:
        """Queue ``job`` (thread-safe)."""
        self._queue.put(job)

    def submit(self, fn: Callable[[], Any], priority: int = Priority.URGENT) -> Future[Any]:
        """Run ``fn`` on the engine thread; returns its future (thread-safe)."""
        fut: Future[Any] = Future()
        self._queue.put(Job(priority, self.next_seq(), fn, fut))
        return fut

    def wake(self) -> None:
        """Queue an urgent job that does nothing: the engine thread looks at its flags."""
        self._queue.put(Job(Priority.URGENT, self.next_seq(), lambda: None))

    def defer(self, delay: float, job: Job) -> None:
        """Queue ``job`` after ``delay`` seconds (engine thread only)."""
        heapq.heappush(self._delayed, (time.monotonic() + delay, job.seq, job))

    def release_delayed(self, now: float) -> float:
        """Queue the delayed jobs that are due; returns seconds until the next one."""
        while self._delayed and self._delayed[0][0] <= now:
            self._queue.put(self._delayed[0][2])  # queued before it leaves the heap: idle()
            heapq.heappop(self._delayed)
        return max(0.01, self._delayed[0][0] - now) if self._delayed else 0.5

    def get(self, timeout: float) -> Job | None:
        """The next job, or ``None`` when none came within ``timeout`` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def qsize(self) -> int:
        """Jobs queued (not the delayed ones, nor the running one)."""
        return self._queue.qsize()

    def idle(self) -> bool:
        """Whether no job is queued, delayed or running."""
        return self._queue.unfinished_tasks == 0 and not self._delayed

    def run(self, job: Job) -> None:
        """Run a job taken from the queue (and mark it done)."""
        try:
            self._run(job)
        finally:
            if self._depth == 0:
                self.after_job()
            self._queue.task_done()

    def _run(self, job: Job) -> None:
        try:
            self.before_job()
            result = job.run()
        except Exception as exc:
            fatal = self.on_fatal(exc)
            if job.future is not None:
                job.future.set_exception(exc)
            elif fatal:
                pass
            elif job.on_error is not None:
                job.on_error(exc)
            else:
                logger.exception("job failed; the sources will be rescanned")
                self.on_unhandled()
            return
        if job.future is not None:
            job.future.set_result(result)

    @property
    def nested(self) -> bool:
        """Whether a job runs inside a checkpoint of another one right now."""
        return self._depth > 0

    def run_nested_step(self, step: Callable[[], Any]) -> None:
        """Run ``step`` at a checkpoint as a nested job would run (errors are logged)."""
        self._depth += 1
        from ingestd.daemon.sync.types import SyncInterrupted

        try:
            step()
        except SyncInterrupted:
            raise
        except Exception:  # the step's own job retries it
            logger.warning("a background step failed at a checkpoint", exc_info=True)
        finally:
            self._depth -= 1

    def run_nested(
        self, serve_changes: bool, stop: threading.Event, ping: Callable[[], None]
    ) -> None:
        """Run queued jobs at a checkpoint of the running job (on the engine thread).

        Runs the urgent jobs (searches) and, when ``serve_changes`` and not already
        nested, the nestable ones (change batches of files); the others wait for the
        running job to end.

        Args:
            serve_changes: the running job is between write slices.
            stop: once set, nothing more runs here.
            ping: called after each job run (the systemd watchdog).
        """
        nest = serve_changes and self._depth == 0
        held: list[Job] = []
        self._depth += 1
        try:
            while not stop.is_set():
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job.priority == Priority.URGENT or (nest and job.nestable):
                    self.run(job)
                    ping()
                else:
                    held.append(job)
        finally:
            self._depth -= 1
            for job in held:
                self._queue.put(job)
                self._queue.task_done()  # the get above

    def close(self, error: Exception) -> None:
        """Drop the delayed jobs and fail the futures of the queued ones with ``error``."""
        self._delayed.clear()
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job.future is not None and not job.future.done():
                job.future.set_exception(error)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is an outage that passes by itself and leaves searches working.

    A transient :class:`~ingestd.chunkers.errors.UnavailableError` (an embedding server
    or a git server down) other than the vector store's: what is indexed is still
    searched, so the daemon stays healthy for up to ``watch.max_lag_s``. The vector
    store down fails searches too, and a refused key or a missing model needs a person:
    both make the daemon unhealthy at once.
    """
    from ingestd.store.vectors.base import StoreUnavailableError

    return (
        isinstance(exc, UnavailableError)
        and exc.transient
        and not isinstance(exc, StoreUnavailableError)
    )


class Backoff:
    """Failed background jobs, queued again after a back-off per source.

    The delay doubles with each consecutive failure of a source, from
    :data:`RETRY_MIN_S` to :data:`RETRY_MAX_S` seconds; a success resets it.

    Args:
        jobs: where a failed job is queued again.
        on_failure: called once per failure (the ``ingestd_job_errors_total`` counter).
    """

    def __init__(self, jobs: JobQueue, on_failure: Callable[[], None]) -> None:
        self.jobs = jobs
        self.on_failure = on_failure
        #: source -> ``"Type: message"`` of its last failure, until a job of it succeeds
        self.last_error: dict[str, str] = {}
        #: source -> when (seconds since the epoch) its failures began, until a success
        self.failing_since: dict[str, float] = {}
        #: source -> when its outage began, while its last failure is one that passes by
        #: itself (:func:`is_outage`): health then follows ``watch.max_lag_s``
        self.outage_since: dict[str, float] = {}
        self._failures: dict[str, int] = {}  # consecutive failures per source

    def delay(self, source: str) -> float:
        """Count a failure of ``source``; returns the seconds to wait before the retry."""
        n = self._failures.get(source, 0) + 1
        self._failures[source] = n
        return float(min(RETRY_MAX_S, RETRY_MIN_S * 2 ** (n - 1)))

    def succeeded(self, source: str) -> None:
        """A job of ``source`` succeeded: its back-off and last error are reset."""
        self._failures.pop(source, None)
        self.last_error.pop(source, None)
        self.failing_since.pop(source, None)
        self.outage_since.pop(source, None)

    def failed(self, source: str, what: str, exc: Exception, retry: Job) -> None:
        """Log a failed background job and queue ``retry`` after a back-off.

        An expected failure (the store unavailable, a connection error or timeout, an
        error of the Qdrant client) is logged without a traceback.
        """
        from ingestd.store.vectors.base import StoreUnavailableError

        delay = self.delay(source)
        self.last_error[source] = f"{type(exc).__name__}: {exc}"
        since = self.failing_since.setdefault(source, time.time())
        if is_outage(exc):
            self.outage_since.setdefault(source, since)
        else:
            self.outage_since.pop(source, None)
        self.on_failure()
        expected = isinstance(exc, StoreUnavailableError | ConnectionError | TimeoutError) or (
            type(exc).__module__.startswith("qdrant_client")
        )
        logger.log(
            logging.ERROR,
            "%s of source %s failed (%s: %s); retrying in %.0f s",
            what,
            source,
            type(exc).__name__,
            exc,
            delay,
            exc_info=not expected,
        )
        self.jobs.defer(delay, retry)
