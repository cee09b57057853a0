"""Command implementations shared by the CLI (local mode) and the control socket.

Each function takes an :class:`~ingestd.daemon.engine.Engine` and JSON-ready
arguments and returns JSON-ready results, so ``ingestd search`` gives the same answer
whether it opens the store itself or asks the running daemon.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ingestd.store.manifest import Manifest

from .control import DaemonError
from .engine import Engine, SyncProgress

__all__ = ["REMOTE", "resync", "search", "status_of", "verify"]

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
        Hits, best first: the payload keys plus ``id``, ``score`` (cosine for dense,
        BM25 for sparse, the RRF score for hybrid), ``rank`` (1-based) and ``mode``;
        with ``ranks`` also ``dense_rank``, ``dense_score``, ``sparse_rank`` and
        ``sparse_score`` (``null`` when the hit is not among that ranking's
        ``search.candidates`` best); with ``expand`` also ``parent`` (the enclosing
        section's payload).

    Raises:
        DaemonError: unknown source or mode (exit code 2).
    """
    from ingestd.store.search import MODES, Filters
    from ingestd.store.sparse import query_vector

    names = _selected(engine, [source] if source else None)
    conf = engine.cfg.search
    mode = mode or conf.mode
    if mode not in MODES:
        raise DaemonError(f"unknown search mode {mode!r}; expected one of: {', '.join(MODES)}", 2)
    collections = sorted({engine.sources[n].collection for n in names})
    dense = engine.embed_query(query) if mode != "sparse" or ranks else None
    sparse = query_vector(query) if mode != "dense" or ranks else None
    filters = Filters(source=source, path=path)
    hits: list[dict[str, Any]] = []
    for coll in collections:
        if not engine.store.has_collection(coll):
            continue
        found = engine.store.search(
            coll,
            dense=dense,
            sparse=sparse,
            limit=k,
            filters=filters,
            mode=mode,
            rrf_k=conf.rrf_k,
            candidates=conf.candidates,
            ranks=ranks,
        )
        used = "dense" if not engine.store.layout(coll).sparse else mode
        for h in found:
            hit: dict[str, Any] = {"id": h.id, "score": round(h.score, 6), "mode": used}
            hit.update(h.payload)
            if ranks:
                for name, got in (("dense", h.dense), ("sparse", h.sparse)):
                    hit[f"{name}_rank"] = got[0] if got else None
                    hit[f"{name}_score"] = round(got[1], 6) if got else None
            hit["_collection"] = coll
            hits.append(hit)
    hits.sort(key=lambda h: -h["score"])
    hits = hits[:k]
    for i, h in enumerate(hits, 1):
        h["rank"] = i
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
        when the mass-deletion guard held deletions, 1 when files could not be read.
    """
    out = []
    code = 0
    for name in _selected(engine, sources):
        plan = engine.plan(name, full=full, allow_mass_delete=allow_mass_delete)
        if dry_run:
            summary = plan.summary()
            out.append(summary)
            if plan.held:
                code = max(code, EXIT_HELD)
            continue
        res = engine.apply(plan, progress=progress)
        out.append({**res.as_dict(), "skipped": engine.skipped_entries(name)})
        if res.held:
            code = max(code, EXIT_HELD)
        elif res.retry or res.root_missing or res.interrupted or res.deferred:
            code = max(code, 1)
    return {"sources": out, "exit_code": code}


def verify(
    engine: Engine, sources: Sequence[str] | None = None, repair: bool = False
) -> dict[str, Any]:
    """Compare files, manifest and store for the selected sources (and repair).

    Returns:
        ``{"sources": [report...], "clean": bool}``.
    """
    reports = [engine.verify(n, repair=repair).as_dict() for n in _selected(engine, sources)]
    return {"sources": reports, "clean": all(r["clean"] for r in reports)}


def forget(engine: Engine, source: str) -> dict[str, Any]:
    """Delete every point and manifest row of ``source``."""
    n = engine.forget(source)
    return {"source": source, "points_deleted": n}


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def status_of(manifest: Manifest, engine: Engine | None, state_dir: Path) -> dict[str, Any]:
    """Per-source documents, chunks, failures, last sync; counters when ``engine`` runs."""
    sources = []
    for s in manifest.sources():
        counts = manifest.counts(s["name"])
        entry: dict[str, Any] = {
            "source": s["name"],
            "root": s["root"],
            "collection": s["collection"],
            **counts,
            "last_sync": s["last_sync"],
            "held_deletes": int(s.get("held_deletes") or 0),
            "failed_documents": [
                {"path": p, "error": e} for p, e in manifest.failed(s["name"])[:50]
            ],
        }
        if engine is not None and s["name"] in engine.sources:
            entry["retrying"] = engine.retrying(s["name"])
            entry["skipped"] = engine.skipped_entries(s["name"])
        sources.append(entry)
    out: dict[str, Any] = {
        "state_dir": str(state_dir),
        "sources": sources,
        "disk": {
            "state_dir_bytes": _du(state_dir),
            "embedding_cache_bytes": sum(
                (state_dir / n).stat().st_size
                for n in ("embeddings.db", "embeddings.db-wal")
                if (state_dir / n).exists()
            ),
        },
    }
    if engine is not None:
        out["rule_warnings"] = list(engine.rule_warnings)
        paths = [p for s in engine.sources for p in engine.manifest.documents(s)]
        out["unused_rules"] = engine.rules.unmatched(paths) if paths else []
        out["embedded_since_start"] = engine.embedder.stats.embedded
        out["reused_since_start"] = engine.embedder.stats.reused
        out["model"] = {"name": engine.model.name, "fingerprint": engine.model.fingerprint[:16]}
    return out


#: Commands the control socket runs on the engine thread.
REMOTE: dict[str, Callable[..., Any]] = {
    "search": search,
    "resync": resync,
    "verify": verify,
    "forget": forget,
}
