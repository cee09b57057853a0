"""The running daemon's ``status``: the manifest's view plus what only the daemon knows.

Answered off the engine thread (manifest reads only), so ``status`` answers while a
long job holds the engine thread. Per source it adds ``root_missing``,
``unwatched_folders`` and what its watcher holds (folders watched and ignored,
overflows); under ``daemon`` the phase, progress of running scans, documents in
flight, queue depth and lag, the watches and their share of
``fs.inotify.max_user_watches``, and ``healthy``: every watcher
runs, no job failed since its source's last success, and every root is there and
watched in every folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ingestd.daemon.commands.commands import status_of
from ingestd.daemon.service.policy import SyncPolicy
from ingestd.daemon.service.watches import Watches
from ingestd.daemon.sync.engine import Engine

__all__ = ["daemon_status"]


def daemon_status(
    engine: Engine,
    state_dir: Path,
    *,
    watches: Watches,
    policy: SyncPolicy,
    queued: int,
    started_at: float,
    last_error: Mapping[str, str],
) -> dict[str, Any]:
    """The daemon's status (see :func:`~ingestd.daemon.commands.commands.status_of`).

    Args:
        engine: the running engine.
        state_dir: the state dir.
        watches: the daemon's watches.
        policy: the daemon's sync policy (phase, progress of scans, lag).
        queued: jobs in the engine thread's queue.
        started_at: when the daemon started, seconds since the epoch.
        last_error: source -> the last error of a job of it, until one succeeds.

    Returns:
        :func:`~ingestd.daemon.commands.commands.status_of`'s answer, each source with
        ``root_missing``, ``unwatched_folders`` and the keys of
        :meth:`~ingestd.daemon.service.watches.Watches.source_status`
        (``watch_backend``, ``watched_folders``, ``ignored_folders``,
        ``watch_events``, ``overflows``),
        plus ``daemon``: ``pid``, ``phase``, ``progress``, ``in_flight``,
        ``queue_depth`` (changed paths and jobs waiting), ``scan_documents_left``,
        ``lag_seconds``, ``watchers_alive``, ``unwatched_sources``,
        ``degraded_sources``, ``missing_roots``, ``batches_done`` (change batches
        synced since start), ``watches`` (see
        :meth:`~ingestd.daemon.service.watches.Watches.budget`), ``overflows`` (since
        start, every source), ``model_loaded``, ``started_at``, ``last_error`` and
        ``healthy``.
    """
    st = status_of(engine.manifest, engine, state_dir)
    missing = dict(watches.missing_roots)
    for s in st["sources"]:
        s["root_missing"] = s["source"] in missing
        s["unwatched_folders"] = watches.coverage.folders(s["source"])
        s.update(watches.source_status(s["source"]))
    watched = {w.source for w in watches.watchers}
    progress = {name: p.as_dict() for name, p in list(policy.progress.items())}
    st["daemon"] = {
        "pid": os.getpid(),
        "phase": policy.phase,
        "progress": progress,
        "in_flight": [f.as_dict() for f in engine.in_flight],
        "queue_depth": watches.depth() + queued,
        # documents a running scan still has to write (the first ingest, rescans)
        "scan_documents_left": sum(p["docs_total"] - p["docs_done"] for p in progress.values()),
        "lag_seconds": round(policy.lag(watches.oldest()), 3),
        "watchers_alive": all(w.alive() for w in watches.watchers),
        # sources without any watch, and sources with folders that are not watched:
        # both are rescanned every watch.unwatched_rescan_s
        "unwatched_sources": sorted(n for n in watches.unwatched if n not in watched),
        "degraded_sources": watches.coverage.degraded(),
        "missing_roots": sorted(missing.values()),
        "batches_done": policy.batches_done,
        "watches": watches.budget(),
        "overflows": sum(watches.overflows.values()),
        "model_loaded": engine.model_loaded,
        "started_at": started_at,
        "last_error": dict(last_error),
        "healthy": not (watches.dead() or last_error or missing or watches.unwatched),
    }
    return st
