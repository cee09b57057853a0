"""The running daemon's ``status``: the manifest's view plus what only the daemon knows.

Answered off the engine thread (manifest reads only), so ``status`` answers while a
long job holds the engine thread. Per source it adds ``root_missing``,
``unwatched_folders`` and what its watcher holds (folders watched and ignored,
overflows); under ``daemon`` the phase, progress of running scans, documents in
flight, queue depth and lag, the watches and their share of
``fs.inotify.max_user_watches``, and ``healthy``: every watcher runs, no job failed
since its source's last success, every root is there and watched in every folder,
no change has waited longer than ``watch.max_lag_s``, and no git source's fetches
have been failing for longer than ``watch.max_lag_s`` (:func:`health_problems`,
which the ``ingestd_up`` metric reads too; :func:`failing_fetches`).

:func:`status_line` is systemd's ``STATUS=``: the work in flight (phase, source,
document, chunks done of total), or what the daemon waits for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ingestd.daemon.commands.status import status_of
from ingestd.daemon.engine import Engine
from ingestd.daemon.service.policy import SyncPolicy
from ingestd.daemon.service.watches import Watches
from ingestd.daemon.sources.base import Fetched
from ingestd.daemon.sync.writing.write_parts import InFlight

__all__ = ["daemon_status", "failing_fetches", "health_problems", "status_line"]


def health_problems(
    watches: Watches,
    last_error: Mapping[str, str],
    lag: float,
    max_lag: float,
    refusals: Mapping[str, Mapping[str, str]] | None = None,
    outages: Mapping[str, float] | None = None,
    failing: Mapping[str, float] | None = None,
    now: float | None = None,
) -> list[str]:
    """Why the daemon is unhealthy, one line each; empty when it is healthy.

    A source whose fetches fail (an unreachable git server) keeps the daemon healthy
    for ``max_lag`` seconds: its indexed versions stay searchable and the fetch is
    retried with back-off; after that its changes may be missing for longer than
    the daemon promises, so it is a problem (with ``max_lag`` 0, never).

    Args:
        watches: the daemon's watches.
        last_error: source -> the last error of a job of it, until one succeeds.
        lag: seconds the oldest change not yet written has waited.
        max_lag: ``watch.max_lag_s`` (0: lag never makes it unhealthy).
        refusals: source -> path -> why the store refused to write it (the index
            lacks those documents until a write of them succeeds).
        outages: source -> when (seconds since the epoch) an outage that passes by
            itself began (:func:`~ingestd.daemon.service.jobs.is_outage`): its error
            makes the daemon unhealthy only once it is older than ``max_lag``, as a
            change waiting that long would (searches of what is indexed still work).
        failing: source -> since when (seconds since the epoch) its fetches fail
            (:func:`failing_fetches`): the same rule as ``outages``.
        now: the clock (seconds since the epoch); ``time.time()`` when not given.
    """
    out = []
    now = time.time() if now is None else now
    limit = f"(watch.max_lag_s {max_lag:g})"

    def past_lag(waited: float) -> bool:  # the one rule for changes and outages
        return bool(max_lag) and waited > max_lag

    for source, refused in sorted((refusals or {}).items()):
        first = sorted(refused.items())[0]
        out.append(
            f"source {source}: the store refused to write {len(refused)} document(s) "
            f"({first[0]}: {first[1]})"
        )
    dead = watches.dead()
    if dead:
        out.append(f"file watching stopped: {', '.join(dead)}")
    for source, error in sorted(last_error.items()):
        since = (outages or {}).get(source)
        if since is None:
            out.append(f"source {source}: {error}")
        elif past_lag(now - since):
            out.append(f"source {source}: failing for {now - since:.0f} s {limit}: {error}")
    for source, root in sorted(watches.missing_roots.items()):
        out.append(f"source {source}: root {root} is missing")
    for source in sorted(set(watches.unwatched) - set(watches.missing_roots)):
        out.append(f"source {source}: not every folder is watched")
    if past_lag(lag):
        out.append(f"a change has waited {lag:.0f} s {limit}")
    for source, since in sorted((failing or {}).items()):
        if past_lag(now - since):
            out.append(f"source {source}: fetches have failed for {now - since:.0f} s {limit}")
    return out


def failing_fetches(engine: Engine) -> dict[str, float]:
    """Polled sources whose fetches fail now: source -> since when (seconds since the epoch).

    Read from each source's ``fetch_state()`` (a git source's mirror state: its
    ``failing_since``); sources without one are left out.
    """
    out: dict[str, float] = {}
    for name, source in list(engine.context.handles.items()):
        since = source.fetch_state().get("failing_since") if isinstance(source, Fetched) else None
        if isinstance(since, int | float):
            out[name] = float(since)
    return out


def status_line(engine: Engine, policy: SyncPolicy) -> str:
    """The ``STATUS=`` line for systemd: the work in flight, else what the daemon does.

    The innermost running sync with its document in flight
    (``indexing docs: guide.md 64/300 chunks; 3/13 documents``), else a long document
    written in the background, the one being chunked or written before those queued
    (``chunking docs: blob.md (2.0 MB)``, ``writing docs: big.md 16/126 chunks``),
    else the policy's phase.
    """
    running = engine.checkpoints.running
    flying = list(engine.writer.in_flight.values())
    if running:
        p = running[-1]
        doc = next(
            (f for f in reversed(flying) if f.source == p.source and f.phase == "writing"), None
        )
        what = f" {_doc(doc)};" if doc else ""
        return f"{p.phase} {p.source}:{what} {p.docs_done}/{p.docs_total} documents"
    if flying:
        f = next((f for f in flying if f.phase != "queued"), flying[0])
        return f"{f.phase} {f.source}: {_doc(f)}"
    if policy.current:
        return policy.current
    n = len(engine.context.sources)
    if policy.phase == "watching":
        embedded = engine.profiles.profile.embedder.stats.embedded
        return f"watching {n} source(s); {embedded} chunks embedded since start"
    return f"{policy.phase} {n} source(s)"


def _doc(f: InFlight) -> str:
    """``path done/total chunks``, or ``path (size)`` before its chunks are known."""
    if f.chunks_total:
        return f"{f.path} {f.chunks_done}/{f.chunks_total} chunks"
    return f"{f.path} ({f.size / 1e6:.1f} MB)" if f.size >= 100_000 else f"{f.path} ({f.size} B)"


def daemon_status(
    engine: Engine,
    state_dir: Path,
    *,
    watches: Watches,
    policy: SyncPolicy,
    queued: int,
    started_at: float,
    last_error: Mapping[str, str],
    max_lag: float = 0.0,
    failing_since: Mapping[str, float] | None = None,
    outages: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The daemon's status (see :func:`~ingestd.daemon.commands.status.status_of`).

    Args:
        engine: the running engine.
        state_dir: the state dir.
        watches: the daemon's watches.
        policy: the daemon's sync policy (phase, progress of scans, lag).
        queued: jobs in the engine thread's queue.
        started_at: when the daemon started, seconds since the epoch.
        last_error: source -> the last error of a job of it, until one succeeds.
        max_lag: ``watch.max_lag_s``: a change waiting longer makes it unhealthy.
        failing_since: source -> when its failures began, until a job of it succeeds.
        outages: source -> when its outage began (see :func:`health_problems`).

    Returns:
        :func:`~ingestd.daemon.commands.status.status_of`'s answer, each source with
        ``root_missing``, ``unwatched_folders`` and the keys of
        :meth:`~ingestd.daemon.service.watches.Watches.source_status`
        (``watch_backend``, ``watched_folders``, ``ignored_folders``,
        ``watch_events``, ``overflows``),
        plus ``daemon``: ``pid``, ``phase``, ``progress``, ``in_flight``,
        ``queue_depth`` (changed paths and jobs waiting), ``scan_documents_left``,
        ``documents_waiting`` (source -> documents a failed job left, retried after a
        back-off),
        ``lag_seconds``, ``watchers_alive``, ``unwatched_sources``,
        ``degraded_sources``, ``missing_roots``, ``batches_done`` (change batches
        synced since start), ``watches`` (see
        :meth:`~ingestd.daemon.service.watches.Watches.budget`), ``overflows`` (since
        start, every source), ``model_loaded``, ``started_at``, ``last_error``,
        ``failing_since`` (source -> seconds since the epoch), ``healthy`` and
        ``problems`` (why it is not healthy, one line each).
    """
    st = status_of(engine.resources.manifest, engine, state_dir)
    missing = dict(watches.missing_roots)
    for s in st["sources"]:
        s["root_missing"] = s["source"] in missing
        s["refused"] = [
            {"path": p, "error": e}
            for p, e in sorted(engine.failures.refusals.get(s["source"], {}).items())
        ]
        s["unwatched_folders"] = watches.coverage.folders(s["source"])
        s.update(watches.source_status(s["source"]))
    watched = {w.source for w in watches.watchers}
    progress = {name: p.as_dict() for name, p in list(policy.progress.items())}
    lag = policy.lag(watches.oldest())
    refusals = {k: dict(v) for k, v in list(engine.failures.refusals.items())}
    failing = failing_fetches(engine)
    problems = health_problems(watches, last_error, lag, max_lag, refusals, outages, failing)
    st["daemon"] = {
        "pid": os.getpid(),
        "phase": policy.phase,
        "progress": progress,
        "in_flight": [f.as_dict() for f in list(engine.writer.in_flight.values())],
        "queue_depth": watches.depth() + queued,
        # documents a running scan still has to write (the first ingest, rescans)
        "scan_documents_left": sum(p["docs_total"] - p["docs_done"] for p in progress.values()),
        # documents a failed job left (an embedding server down): retried after a back-off
        "documents_waiting": {
            name: n for name, work in list(policy.failed_work.items()) if (n := sum(work.values()))
        },
        "lag_seconds": round(lag, 3),
        "watchers_alive": all(w.alive() for w in watches.watchers),
        # sources without any watch, and sources with folders that are not watched:
        # both are rescanned every watch.unwatched_rescan_s
        "unwatched_sources": sorted(n for n in watches.unwatched if n not in watched),
        "degraded_sources": watches.coverage.degraded(),
        "missing_roots": sorted(missing.values()),
        "batches_done": policy.batches_done,
        "watches": watches.budget(),
        "overflows": sum(watches.overflows.values()),
        "model_loaded": engine.profiles.model_loaded,
        "started_at": started_at,
        "last_error": dict(last_error),
        "failing_since": dict(failing_since or {}),
        "healthy": not problems,
        "problems": problems,
    }
    return st
