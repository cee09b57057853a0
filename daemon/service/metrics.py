"""Prometheus metrics of a running daemon (``metrics.port``; loopback by default).

Served by prometheus-client's own HTTP server thread, from a registry of its own (so
several services in one process, as in tests, never clash). Counters are updated by
the engine thread; gauges that need the manifest (documents, chunks) are read at
scrape time, like ``status`` does.

Exposed:

* ``ingestd_documents{source}``, ``ingestd_chunks{source}``, ``ingestd_failed_documents{source}``
* ``ingestd_queue_depth``: changed paths waiting plus queued jobs
* ``ingestd_oldest_pending_change_seconds``: lag of the oldest waiting change
* ``ingestd_chunks_embedded_total``, ``ingestd_vectors_reused_total``,
  ``ingestd_reused_vector_ratio`` (reused / (reused + embedded), since start)
* ``ingestd_embedding_calls_total``: calls of the embedding model
* ``ingestd_vectors_rejected_total``: vectors a model or server answered with NaN,
  infinity or no length (asked again, never cached or written)
* ``ingestd_documents_indexed_total``, ``ingestd_documents_deleted_total``,
  ``ingestd_job_errors_total``
* ``ingestd_edit_to_searchable_seconds``: histogram of the time from a file event to
  its batch being written (searchable)
* ``ingestd_up``: 1 while the daemon is healthy (as ``status`` says: every watcher
  runs, no change has waited longer than ``watch.max_lag_s``, ...)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["Metrics"]

logger = logging.getLogger(__name__)

LAG_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class _Live(Collector):
    """Gauges computed at scrape time from the service (see :class:`Metrics`)."""

    def __init__(
        self,
        metrics: Metrics,
        engine: Callable[[], Engine | None],
        queue_depth: Callable[[], int],
        lag: Callable[[], float],
        healthy: Callable[[], bool],
    ) -> None:
        self.metrics = metrics
        self.engine = engine
        self.queue_depth = queue_depth
        self.lag = lag
        self.healthy = healthy

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        docs = GaugeMetricFamily(
            "ingestd_documents", "Documents in the manifest", labels=["source"]
        )
        chunks = GaugeMetricFamily("ingestd_chunks", "Chunks (points) committed", labels=["source"])
        failed = GaugeMetricFamily(
            "ingestd_failed_documents", "Documents that failed to read or chunk", labels=["source"]
        )
        engine = self.engine()
        if engine is not None:
            for name in list(engine.context.sources):
                try:
                    c = engine.resources.manifest.counts(name)
                except Exception:  # the manifest may be closed during a reload
                    logger.debug("metrics: counts of %s failed", name, exc_info=True)
                    continue
                docs.add_metric([name], c["documents"])
                chunks.add_metric([name], c["chunks"])
                failed.add_metric([name], c["failed"])
        yield docs
        yield chunks
        yield failed
        yield GaugeMetricFamily(
            "ingestd_queue_depth", "Changed paths and jobs waiting", value=self.queue_depth()
        )
        yield GaugeMetricFamily(
            "ingestd_oldest_pending_change_seconds",
            "Age of the oldest change not yet written (status lag_seconds)",
            value=self.lag(),
        )
        emb = engine.profiles.profile.embedder.stats.embedded if engine else 0
        reused = engine.profiles.profile.embedder.stats.reused if engine else 0
        emb += self.metrics.embedded_before
        reused += self.metrics.reused_before
        yield GaugeMetricFamily(
            "ingestd_reused_vector_ratio",
            "Share of written vectors taken from the cache or store, since start",
            value=reused / (reused + emb) if reused + emb else 0.0,
        )
        from ingestd.store.embedding.finite import rejected_total

        yield CounterMetricFamily(
            "ingestd_vectors_rejected",
            "Vectors an embedding model or server answered with NaN, infinity or no length "
            "(asked again, never cached or written)",
            value=rejected_total(),
        )
        yield GaugeMetricFamily(
            "ingestd_up",
            "1 while the daemon is healthy (status healthy: watching, no change waiting too long)",
            value=1 if self.healthy() else 0,
        )


class Metrics:
    """The daemon's metrics registry and HTTP endpoint.

    The service counts into the counters; the gauges are read at scrape time (on the
    HTTP server's thread) from the callables given.

    Args:
        engine: the running engine, or ``None`` before start-up.
        queue_depth: changed paths waiting in the batcher plus queued jobs.
        lag: seconds the oldest change not yet written has waited.
        healthy: whether ``status`` says healthy (watchers, errors, roots, lag).
    """

    def __init__(
        self,
        *,
        engine: Callable[[], Engine | None],
        queue_depth: Callable[[], int],
        lag: Callable[[], float],
        healthy: Callable[[], bool],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.embedded = Counter(
            "ingestd_chunks_embedded", "Chunk texts embedded by the model", registry=r
        )
        self.reused = Counter(
            "ingestd_vectors_reused", "Vectors reused from the cache or the store", registry=r
        )
        self.embedding_calls = Counter(
            "ingestd_embedding_calls", "Calls of the embedding model", registry=r
        )
        self.indexed = Counter("ingestd_documents_indexed", "Documents (re)indexed", registry=r)
        self.deleted = Counter("ingestd_documents_deleted", "Documents deleted", registry=r)
        self.job_errors = Counter(
            "ingestd_job_errors", "Batches or scans that failed and were queued again", registry=r
        )
        self.lag = Histogram(
            "ingestd_edit_to_searchable_seconds",
            "Time from a file event to its change being written to the store",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.embedded_before = 0  # counts of engines replaced by a reload
        self.reused_before = 0
        r.register(_Live(self, engine, queue_depth, lag, healthy))  # collects once
        self._server: Any = None
        self._thread: Any = None
        self.port: int | None = None

    def observe_sync(self, res: Any, lag: float | None) -> None:
        """Count one applied sync; ``lag``: seconds since its oldest event (live batches)."""
        self.embedded.inc(res.embedded)
        self.reused.inc(res.reused)
        self.indexed.inc(res.indexed)
        self.deleted.inc(res.deleted)
        if lag is not None:
            self.lag.observe(lag)

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` (port 0: any free port, see :attr:`port`)."""
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self._server.server_address[1])

    def close(self) -> None:
        """Stop the HTTP server."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = None
