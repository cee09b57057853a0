"""``search``: the chunks that best answer a query, across the selected sources' collections.

The daemon and the local path run this same function, so ``ingestd search`` gives the
same answer whether it opens the store itself or asks the running daemon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingestd.daemon.commands.selection import selected_sources
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.sync.engine import Engine

__all__ = ["search"]


def search(
    engine: Engine,
    query: str,
    k: int = 5,
    source: str | None = None,
    path: str | None = None,
    version: str | None = None,
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
        version: only this version of a versioned source (a git branch or tag name).
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
        ``search.candidates`` best, and the dense ones always in ``sparse`` mode: it
        loads no model); with ``expand`` also ``parent`` (the enclosing
        section's payload).

    Raises:
        DaemonError: unknown source or mode (exit code 2).
    """
    from ingestd.store.search.query import MODES, Filters
    from ingestd.store.search.sparse import query_vector

    names = selected_sources(engine, [source] if source else None)
    conf = engine.cfg.search
    mode = mode or conf.mode
    if mode not in MODES:
        raise DaemonError(f"unknown search mode {mode!r}; expected one of: {', '.join(MODES)}", 2)
    collections = sorted({engine.sources[n].collection for n in names})
    engine.check_holdings(collections)  # never "no results" from a store that lost them
    sparse = query_vector(query) if mode != "dense" or ranks else None
    filters = Filters(source=source, path=path, version=version)
    hits: list[dict[str, Any]] = []
    queries: dict[str, Any] = {}  # profile key -> the query's vector by its model
    for coll in collections:
        # a sparse search never loads the model, ranks or not (its dense ranks are null)
        physical, dense = _dense_query(engine, coll, query, queries, mode != "sparse")
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
