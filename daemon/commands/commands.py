"""Command implementations shared by the CLI (local mode) and the control socket.

Each function takes an :class:`~ingestd.daemon.sync.engine.Engine` and JSON-ready
arguments and returns JSON-ready results, so ``ingestd search`` gives the same answer
whether it opens the store itself or asks the running daemon.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ingestd.daemon.statedir import StatePaths, dir_bytes
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.sync.engine import Engine
    from ingestd.daemon.sync.types import SyncProgress
    from ingestd.store.manifest.reader import ManifestReader

__all__ = [
    "evaluate",
    "forget",
    "known_source",
    "local_status",
    "migrate",
    "resync",
    "search",
    "status_of",
    "verify",
]


EXIT_HELD = 3


def _selected(engine: Engine, sources: Sequence[str] | None) -> list[str]:
    if not sources:
        return list(engine.sources)
    unknown = [s for s in sources if s not in engine.sources]
    if unknown:
        raise DaemonError(
            f"unknown source(s): {', '.join(unknown)}; configured: {', '.join(engine.sources)}", 2
        )
    return list(sources)


def search(
    engine: Engine,
    query: str,
    k: int = 5,
    source: str | None = None,
    path: str | None = None,
    expand: bool = False,
    mode: str | None = None,
    ranks: bool = False,
) -> list[dict[str, Any]]:
    """Top ``k`` chunks for ``query`` across the collections of the selected sources.

    Args:
        engine: the engine (its store and model).
        query: the question.
        k: number of hits.
        source: only this source.
        path: only this file, or the files under this folder (relative to the root).
        expand: add each hit's parent section.
        mode: ``hybrid``, ``dense`` or ``sparse`` (default: ``search.mode``); only
            ``dense`` and ``hybrid`` load the embedding model.
        ranks: add each hit's rank and score in the dense and the sparse ranking.

    Returns:
        Hits, best first, equal scores by id: the payload keys plus ``id``, ``score``
        (cosine for dense, BM25 for sparse, the RRF score for hybrid), ``rank``
        (1-based) and ``mode``;
        with ``ranks`` also ``dense_rank``, ``dense_score``, ``sparse_rank`` and
        ``sparse_score`` (``null`` when the hit is not among that ranking's
        ``search.candidates`` best); with ``expand`` also ``parent`` (the enclosing
        section's payload).

    Raises:
        DaemonError: unknown source or mode (exit code 2).
    """
    from ingestd.store.search.query import MODES, Filters
    from ingestd.store.search.sparse import query_vector

    names = _selected(engine, [source] if source else None)
    conf = engine.cfg.search
    mode = mode or conf.mode
    if mode not in MODES:
        raise DaemonError(f"unknown search mode {mode!r}; expected one of: {', '.join(MODES)}", 2)
    collections = sorted({engine.sources[n].collection for n in names})
    sparse = query_vector(query) if mode != "dense" or ranks else None
    filters = Filters(source=source, path=path)
    hits: list[dict[str, Any]] = []
    queries: dict[str, Any] = {}  # profile key -> the query's vector by its model
    for coll in collections:
        physical, dense = _dense_query(engine, coll, query, queries, mode != "sparse" or ranks)
        if physical is None:
            continue
        found = engine.store.search(
            physical,
            dense=dense,
            sparse=sparse,
            limit=k,
            filters=filters,
            mode=mode,
            rrf_k=conf.rrf_k,
            candidates=conf.candidates,
            ranks=ranks,
        )
        used = "dense" if not engine.store.layout(physical).sparse else mode
        for point in found:
            hit: dict[str, Any] = {"id": point.id, "score": point.score, "mode": used}
            hit.update(point.payload)
            if ranks:
                for name, got in (("dense", point.dense), ("sparse", point.sparse)):
                    hit[f"{name}_rank"] = got[0] if got else None
                    hit[f"{name}_score"] = round(got[1], 6) if got else None
            hit["_collection"] = physical
            hits.append(hit)
    hits.sort(key=lambda h: (-h["score"], h["id"]))  # as each collection's store does
    hits = hits[:k]
    for i, h in enumerate(hits, 1):
        h["rank"] = i
        h["score"] = round(h["score"], 6)
    if expand:
        for h in hits:
            pid = h.get("parent_id")
            if pid:
                recs = engine.store.retrieve(h["_collection"], [pid])
                if recs:
                    h["parent"] = recs[0][1]
    for h in hits:
        h.pop("_collection", None)
    return hits


def _dense_query(
    engine: Engine, collection: str, query: str, queries: dict[str, Any], wanted: bool
) -> tuple[str | None, Any]:
    """The version of ``collection`` a search reads now, and the query's vector for it.

    The vector comes from the model that made that version: during a migration two
    versions of two models exist, and a query is never compared with the other's.
    ``queries`` caches the vectors by profile; ``wanted`` false: no vector (sparse).
    """
    physical, profile = engine.query_target(collection)
    if physical is None or not wanted:
        return physical, None
    if profile.key not in queries:
        queries[profile.key] = profile.embed_model()([query])[0]
    return physical, queries[profile.key]


def resync(
    engine: Engine,
    sources: Sequence[str] | None = None,
    full: bool = False,
    dry_run: bool = False,
    allow_mass_delete: bool = False,
    progress: Callable[[SyncProgress], None] | None = None,
) -> dict[str, Any]:
    """Reconcile the selected sources with their files.

    Returns:
        ``{"sources": [...], "exit_code": N}``: per source the plan (``dry_run``) or the
        counts of what was done; ``exit_code`` is 0 when the store matches the files, 3
        when the mass-deletion guard held deletions, 1 when files could not be read or
        a source's root is missing (nothing of it is synced or deleted).
    """
    out = []
    code = 0
    selected = _selected(engine, sources)
    for name in selected:
        plan = engine.plan(
            name, full=full, allow_mass_delete=allow_mass_delete, check_store=not dry_run
        )
        if dry_run:
            summary = plan.summary()
            out.append(summary)
            if plan.held:
                code = max(code, EXIT_HELD)
            elif plan.root_missing:
                code = max(code, 1)
            continue
        res = engine.apply(plan, progress=progress)
        out.append({**res.as_dict(), "skipped": engine.skipped_entries(name)})
        if res.held:
            code = max(code, EXIT_HELD)
        elif res.retry or res.root_missing or res.interrupted or res.deferred:
            code = max(code, 1)
    result: dict[str, Any] = {"sources": out, "exit_code": code}
    if dry_run:
        from ingestd.daemon.migration import migrate

        wanted = {engine.sources[n].collection for n in selected}
        result["migrations"] = [
            c.as_dict()
            for c in migrate.costs(engine.cfg, engine.state_dir, engine.manifest)
            if c.collection in wanted
        ]
    return result


def migrate(
    engine: Engine, abort: bool = False, dry_run: bool = False, start: bool = False
) -> dict[str, Any]:
    """Report, start or abort the migrations of the configured collections.

    Args:
        engine: the engine (its configured profile is the migrations' target).
        abort: drop the versions being built; the current ones stay (see
            :func:`ingestd.daemon.migration.migrate.abort`).
        dry_run: only report what the config would cost.
        start: start a migration again after an abort (the daemon queues a scan of
            the sources named in ``rescan``; in local mode the caller syncs them).

    Returns:
        ``{"migrations": [status...], "costs": [cost...]}``, with ``aborted`` entries
        for ``abort`` and ``rescan`` (source names) for ``start``.
    """
    from ingestd.daemon.migration import migrate as mig
    from ingestd.daemon.migration import status as migration_status

    collections = sorted({s.collection for s in engine.sources.values()})
    out: dict[str, Any] = {}
    if abort:
        out["aborted"] = engine.collections.abort(collections)
    elif start and not dry_run:
        due = engine.collections.restart(collections)
        out["rescan"] = sorted(n for n, s in engine.sources.items() if s.collection in due)
    out["migrations"] = migration_status.status(engine.manifest, engine.collections.running())
    out["costs"] = [c.as_dict() for c in mig.costs(engine.cfg, engine.state_dir, engine.manifest)]
    return out


def verify(
    engine: Engine, sources: Sequence[str] | None = None, repair: bool = False
) -> dict[str, Any]:
    """Compare files, manifest and store for the selected sources (and repair).

    Returns:
        ``{"sources": [report...], "clean": bool}``.
    """
    reports = [engine.verify(n, repair=repair).as_dict() for n in _selected(engine, sources)]
    return {"sources": reports, "clean": all(r["clean"] for r in reports)}


def known_source(manifest: ManifestReader, source: str, root: str | None = None) -> str:
    """The name of a source the manifest records: ``source`` itself, or the one at ``root``.

    Args:
        manifest: the manifest.
        source: a source name as the user typed it.
        root: the canonical absolute path ``source`` names, when it is an existing
            folder on the caller's side (``forget ./docs`` for the source named after
            its root).

    Raises:
        DaemonError: exit code 2, the source is unknown; the message lists the known ones.
    """
    recorded = manifest.sources()
    names = [s["name"] for s in recorded]
    if source in names:
        return source
    for s in recorded:
        if root is not None and s["root"] == root:
            return str(s["name"])
    known = ", ".join(names) if names else "none (nothing indexed yet)"
    raise DaemonError(f"unknown source: {source}; known sources: {known}", 2)


def forget(
    engine: Engine,
    source: str,
    root: str | None = None,
    configured: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Delete every point and manifest row of a known source that is not configured.

    A configured source is refused: the daemon would go on watching it with nothing
    indexed (a later edit would index that one file, a restart all of them), so the
    index would differ from the files until then. It is removed from the config and
    the daemon reloaded first; then nothing watches it, and forgetting it is final.

    Args:
        engine: the engine.
        source: the source's name (or, with ``root``, a path naming it).
        root: see :func:`known_source`.
        configured: names of the configured sources (default: the engine's, as in
            the daemon; the CLI without a daemon passes those of ``--config``).

    Raises:
        DaemonError: exit code 2, the source is unknown or configured.
    """
    name = known_source(engine.manifest, source, root)
    if configured is None and name in engine.sources:
        raise DaemonError(
            f"source {name} is configured in the running daemon, which would go on "
            "watching it with nothing indexed: remove it from the daemon's config and "
            "reload the daemon (`systemctl reload ingestd`, or SIGHUP; one started with "
            "PATH arguments: restart it without that PATH), then forget it",
            2,
        )
    if configured is not None and name in configured:
        raise DaemonError(
            f"source {name} is in the config given with --config, and a daemon started "
            "with it would index it again: remove it from the config first",
            2,
        )
    n = engine.forget(name)
    return {"source": name, "points_deleted": n}


def status_of(manifest: ManifestReader, engine: Engine | None, state_dir: Path) -> dict[str, Any]:
    """Per-source documents, chunks, failures, last sync; counters when ``engine`` runs.

    Returns:
        ``{"state_dir", "sources": [...], "disk": {...}}`` and, with an engine,
        ``rule_warnings`` and ``unused_rules`` (rules the user wrote only),
        ``embedded_since_start``, ``reused_since_start`` and ``model``. Each source has
        ``source``, ``root``, ``root_missing`` (its folder is not there: unmounted,
        moved or deleted), ``collection``, ``documents``, ``chunks``, ``pending``,
        ``failed``, ``last_sync`` (the end of the last complete sync, seconds since
        the epoch, or ``None``), ``last_change_synced`` (when a sync last wrote or
        deleted a document, a watched edit's included), ``held_deletes``,
        ``failed_documents`` (at most 50) and ``warnings`` (likely mistakes: include
        globs that match no file; files indexed by another source too, a source left
        in the state by an older config or ``resync PATH``).
    """
    sources = []
    for s in manifest.sources():
        counts = manifest.counts(s["name"])
        entry: dict[str, Any] = {
            "source": s["name"],
            "root": s["root"],
            "root_missing": not os.path.isdir(s["root"]),
            "collection": s["collection"],
            **counts,
            "last_sync": s["last_sync"],
            "last_change_synced": s.get("last_change_synced"),
            "held_deletes": int(s.get("held_deletes") or 0),
            "failed_documents": [
                {"path": p, "error": e} for p, e in manifest.failed(s["name"])[:50]
            ],
        }
        if engine is not None and s["name"] in engine.sources:
            entry["retrying"] = engine.retrying(s["name"])
            entry["skipped"] = engine.skipped_entries(s["name"])
        entry["warnings"] = _source_warnings(entry, engine)
        sources.append(entry)
    _overlap_warnings(manifest, sources)
    out: dict[str, Any] = {
        "state_dir": str(state_dir),
        "sources": sources,
        "disk": {
            "state_dir_bytes": dir_bytes(state_dir),
            "embedding_cache_bytes": sum(
                p.stat().st_size
                for p in StatePaths.sqlite_files(StatePaths(state_dir).embeddings)[:2]
                if p.exists()
            ),
        },
    }
    if engine is not None:
        out["rule_warnings"] = list(engine.rule_warnings)
        paths = [p for s in engine.sources for p in engine.manifest.documents(s)]
        out["unused_rules"] = engine.rules.unmatched(paths) if paths else []
        out["embedded_since_start"] = engine.embedder.stats.embedded
        out["reused_since_start"] = engine.embedder.stats.reused
        out["model"] = {
            "name": engine.model.name,
            "backend": engine.model.backend,
            "fingerprint": engine.model.fingerprint[:16],
        }
    from ingestd.daemon.migration import status as migration_status

    running = engine.collections.running() if engine is not None else None
    out["migrations"] = migration_status.status(manifest, running)
    return out


def local_status(manifest: ManifestReader | None, state_dir: Path) -> dict[str, Any]:
    """``status`` with no daemon running: :func:`status_of` the manifest, ``daemon`` null.

    Args:
        manifest: the manifest, or ``None`` when nothing was indexed yet.
        state_dir: the state dir.

    Returns:
        :func:`status_of`'s answer (only ``state_dir`` and empty ``sources`` without a
        manifest) with ``daemon`` ``None``, and ``locked_by`` (the lock file's holder)
        when another process holds the state dir.
    """
    from ingestd.daemon.wire.statelock import lock_holder

    if manifest is None:
        st: dict[str, Any] = {"state_dir": str(state_dir), "sources": []}
    else:
        st = status_of(manifest, None, state_dir)
    st["daemon"] = None
    holder = lock_holder(state_dir)
    if holder is not None:
        st["locked_by"] = holder[1]
    return st


def _source_warnings(entry: dict[str, Any], engine: Engine | None) -> list[str]:
    """Likely mistakes in a source's configuration that ``status`` shows.

    A source whose include globs match no file: the running daemon knows from its last
    scan; otherwise a source synced with no document at all is one.
    """
    name = entry["source"]
    if engine is not None and name in engine.sources:
        if name not in engine.planner.matching_nothing:
            return []
        globs = ", ".join(engine.sources[name].include)
        return [f"no file under {entry['root']} matches its include globs ({globs})"]
    if entry["root_missing"] or entry["documents"] or entry["last_sync"] is None:
        return []
    return [f"no file under {entry['root']} matched its include globs at the last sync"]


def _overlap_warnings(manifest: ManifestReader, sources: list[dict[str, Any]]) -> None:
    """Warn, under both sources, about files that two recorded sources index.

    The config check refuses overlapping roots of configured sources, but a source
    recorded by an older config or by ``resync PATH`` stays in the state (and in
    search) until it is forgotten. Two roots overlap when they are the same folder, or
    when one is inside the other and the outer source holds documents below it.
    """
    indexed = [s for s in sources if s["documents"]]
    for i, a in enumerate(indexed):
        for b in indexed[i + 1 :]:
            ra, rb = PurePosixPath(a["root"]), PurePosixPath(b["root"])
            if ra in rb.parents:
                outer, inner = a, b
            elif rb in ra.parents or ra == rb:
                outer, inner = b, a
            else:
                continue
            rel = PurePosixPath(inner["root"]).relative_to(outer["root"]).as_posix()
            if rel != "." and not manifest.documents_under(outer["source"], rel):
                continue  # the outer source excludes the inner root
            shared = inner["root"] if rel == "." else f"{outer['root']}/{rel}"
            fix = (
                "search returns their chunks once per source; `ingestd forget` the source "
                "that is not configured any more"
            )
            for s, other in ((outer, inner), (inner, outer)):
                s["warnings"].append(
                    f"the files under {shared} are indexed by source {other['source']} too: " + fix
                )


def evaluate(engine: Engine, **args: Any) -> dict[str, Any]:
    """``ingestd eval`` in the daemon: see :func:`ingestd.daemon.evaluation.runs.run_in_daemon`."""
    from ingestd.daemon.evaluation.runs import run_in_daemon

    return run_in_daemon(engine, **args)
