"""``search``: the chunks (or passages) that best answer a query, across the selected sources.

The daemon and the local path run these same functions, so ``ingestd search`` gives
the same answer whether it opens the store itself or asks the running daemon.

:func:`answer_request` is the one search path, given a whole
:class:`~ingestd.store.search.request.SearchRequest` (built once at each edge:
:func:`answer` from keyword arguments, :func:`wire_answer` from a control request).
What it returns is what the control command ``search`` returns: the hits, the mode
actually used, the passages made of the hits when a token budget is given
(:mod:`ingestd.store.search.passages`), notes (a query cut to the model's window, a
collection searched dense only) and how many documents are still being indexed (a
first reconcile answers from what is written so far). :func:`search` returns the hits
alone.

Arguments are checked before anything is searched
(:mod:`~ingestd.daemon.commands.query.search_filters`); an empty answer over sources
that hold nothing is "nothing indexed", not "no results"
(:mod:`~ingestd.daemon.commands.query.unindexed`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any

from ingestd.daemon.commands.query.chunks import chunks_between
from ingestd.daemon.commands.query.search_filters import check_path, check_version, filter_notes
from ingestd.daemon.commands.query.unindexed import check_indexed
from ingestd.daemon.commands.selection import selected_sources
from ingestd.daemon.sources.versions import version_view
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.chunkers.sizing.tokenizers import ModelSizer
    from ingestd.daemon.engine import Engine
    from ingestd.store.search.query import Filters, Mode
    from ingestd.store.search.request import SearchRequest

__all__ = [
    "MAX_BUDGET",
    "MAX_PASSAGE_HITS",
    "answer",
    "answer_request",
    "cut_query",
    "search",
    "wire_answer",
]

#: Largest token budget a search fills.
MAX_BUDGET = 32_768
#: Most hits a budgeted search ranks to make its passages (a passage is about 40 tokens
#: at the least: one hit per 40 tokens of budget, at least ``k``, at most this many).
MAX_PASSAGE_HITS = 200
_TOKENS_PER_HIT = 40


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
        query: the question (cut to the model's window, see :func:`cut_query`).
        k: number of hits.
        source: only this source.
        path: only this file, or the files under this folder (relative to a source's
            root; see :func:`check_path`).
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
        DaemonError: unknown source or mode, a path filter outside every source's root
            (exit code 2); no hit while no searched source holds a document (exit code
            1, with each source's reason:
            :func:`~ingestd.daemon.commands.query.unindexed.check_indexed`).
    """
    hits: list[dict[str, Any]] = answer(
        engine, query, k, source, path, version=version, expand=expand, mode=mode, ranks=ranks
    )["hits"]
    return hits


def answer(
    engine: Engine,
    query: str,
    k: int = 5,
    source: str | None = None,
    path: str | None = None,
    *,
    version: str | None = None,
    expand: bool = False,
    mode: str | None = None,
    ranks: bool = False,
    budget_tokens: int | None = None,
    per_page: int | None = None,
) -> dict[str, Any]:
    """The answer of ``ingestd search``: hits (or passages), the mode used, notes.

    Args:
        engine: the engine (its store and model).
        query: the question.
        k: number of hits; with ``budget_tokens``, the most passages.
        source: only this source.
        path: only this file or folder (see :func:`check_path`).
        version: only this version of a versioned source (a git branch or tag name).
        expand: add each hit's parent section.
        mode: ``hybrid``, ``dense`` or ``sparse`` (default: ``search.mode``).
        ranks: add each hit's rank and score in each ranking (see :func:`search`).
        budget_tokens: fill this many tokens (of the index's budget tokenizer,
            cl100k_base by default) with passages made of the best hits (at most
            :data:`MAX_BUDGET`); ``None``: hits only.
        per_page: with ``budget_tokens``, most passages of one document.

    Returns:
        ``query`` (as searched), ``mode`` (the ranking used: ``dense`` when a
        collection has no sparse vectors yet), ``hits`` (as :func:`search`; with a
        budget, the hits the passages were made of), ``passages``
        (:meth:`~ingestd.store.search.passages.Passage.as_dict` of each, best first;
        ``None`` without a budget), ``budget_tokens``, ``tokens`` (of the passages),
        ``notes`` (sentences for the reader) and ``indexing`` (``None``, or
        ``documents``: documents of the selected sources still being indexed, and
        ``sources``).

    Raises:
        DaemonError: see :func:`search`; a budget under 1 or over :data:`MAX_BUDGET`.
    """
    from ingestd.store.search.query import Filters
    from ingestd.store.search.request import SearchRequest

    request = SearchRequest(
        query,
        k,
        mode,  # type: ignore[arg-type]  # checked by answer_request
        Filters(source=source, path=path, version=version),
        expand=expand,
        ranks=ranks,
        budget_tokens=budget_tokens,
        per_page=per_page,
    )
    return answer_request(engine, request)


def wire_answer(engine: Engine, **args: Any) -> dict[str, Any]:
    """:func:`answer_request` of the keyword arguments a control request carries.

    Raises:
        DaemonError: see :func:`answer`; an unknown argument (exit code 2).
    """
    from ingestd.store.search.request import SearchRequest

    try:
        request = SearchRequest.from_wire(args)
    except TypeError as e:
        raise DaemonError(str(e), 2) from None
    return answer_request(engine, request)


def answer_request(engine: Engine, request: SearchRequest) -> dict[str, Any]:
    """The one search path: :func:`answer` of a whole :class:`SearchRequest`.

    Raises:
        DaemonError: see :func:`answer`.
    """
    from ingestd.store.search.query import MODES

    budget_tokens, k, filters = request.budget_tokens, request.k, request.filters
    if budget_tokens is not None and not 1 <= budget_tokens <= MAX_BUDGET:
        raise DaemonError(f"budget_tokens must be between 1 and {MAX_BUDGET}", 2)
    source, version = filters.source, filters.version
    names = selected_sources(engine, [source] if source else None)
    mode = request.mode or engine.cfg.search.mode
    if mode not in MODES:
        raise DaemonError(f"unknown search mode {mode!r}; expected one of: {', '.join(MODES)}", 2)
    path, owner = check_path(engine, names, filters.path)
    if owner is not None:
        names, source = [owner], owner
    check_version(engine, names, version, strict=request.strict_version)
    filters = dataclasses.replace(filters, source=source, path=path)
    notes: list[str] = []
    query, cut = cut_query(engine, request.query)
    if cut:
        notes.append(cut)
    limit = k
    if budget_tokens is not None:
        limit = min(MAX_PASSAGE_HITS, max(k, math.ceil(budget_tokens / _TOKENS_PER_HIT)))
    hits, used = _ranked(engine, names, query, limit, filters, mode, request.ranks, notes)
    notes.extend(mark_unconfigured(engine, hits))
    if not hits:  # "no results" only from sources that hold documents
        check_indexed(engine, names)
    if not hits and (path or version):
        notes.extend(filter_notes(engine, names, path, version))
    if request.expand:
        _expand(engine, hits)
    homes = {h["id"]: h.pop("_collection", None) for h in hits}
    out: dict[str, Any] = {
        "query": query,
        "mode": used,
        "hits": hits,
        "passages": None,
        "budget_tokens": budget_tokens,
        "tokens": None,
        "notes": notes,
        "indexing": _indexing(engine, names),
    }
    if budget_tokens is not None:
        from ingestd.store.search.passages import fill

        count = engine.profiles.profile.rules.context.sizer.count
        passages = fill(
            hits,
            budget_tokens,
            count,
            max_passages=k,
            per_page=request.per_page,
            between=functools.partial(chunks_between, engine, homes),
        )
        kept = {i for p in passages for i in p.ids}
        out["hits"] = [h for h in hits if h["id"] in kept]
        out["passages"] = [p.as_dict() for p in passages]
        out["tokens"] = sum(p.n_tokens for p in passages)
    if out["indexing"]:
        n = out["indexing"]["documents"]
        notes.append(
            f"{n} document(s) of {', '.join(out['indexing']['sources'])} are still being "
            "indexed: results come from what is indexed so far"
        )
    return out


def mark_unconfigured(engine: Engine, hits: list[dict[str, Any]]) -> list[str]:
    """Mark the hits of sources the config no longer has; the note that says so.

    A source removed from the config keeps its points until ``ingestd forget`` (DESIGN.md
    point 1: removing a source is an explicit command), and a collection it shares
    with configured sources still answers with them. Nothing watches or syncs it any
    more, so its hits may be out of date: each gets ``"configured": false``.

    Returns:
        One note naming those sources, or none.
    """
    stray = sorted(
        {str(h.get("source")) for h in hits if h.get("source") not in engine.context.sources}
    )
    for h in hits:
        if h.get("source") not in engine.context.sources:
            h["configured"] = False
    if not stray:
        return []
    return [
        f"hits from source(s) {', '.join(stray)}, which the config no longer has: not "
        "watched or synced, they may be out of date (marked configured: false); "
        "`ingestd forget SOURCE` deletes them"
    ]


def _ranked(
    engine: Engine,
    names: list[str],
    query: str,
    k: int,
    filters: Filters,
    mode: Mode,
    ranks: bool,
    notes: list[str],
) -> tuple[list[dict[str, Any]], str]:
    """The best ``k`` hits over the selected sources' collections, and the mode used."""
    from ingestd.store.search.sparse import query_vector

    conf = engine.cfg.search
    collections = sorted({engine.context.sources[n].collection for n in names})
    engine.check_holdings(collections)  # never "no results" from a store that lost them
    sparse = query_vector(query) if mode != "dense" or ranks else None
    hits: list[dict[str, Any]] = []
    queries: dict[str, Any] = {}  # profile key -> the query's vector by its model
    modes: set[str] = set()
    for coll in collections:
        # a sparse search never loads the model, ranks or not (its dense ranks are null)
        physical, dense = _dense_query(engine, coll, query, queries, mode != "sparse")
        if physical is None:
            continue
        used = "dense" if not engine.resources.store.layout(physical).sparse else mode
        if used != mode:
            notes.append(
                f"collection {coll} has no BM25 vectors yet (written before hybrid search): "
                "searched by embeddings only until its next sync"
            )
        modes.add(used)
        found = engine.resources.store.search(
            physical,
            dense=dense,
            sparse=sparse,
            limit=k,
            filters=filters,
            mode=mode,
            rrf_k=conf.rrf_k,
            candidates=conf.candidates,
            ranks=ranks,
            fusion=conf.fusion,
        )
        for point in found:
            hit: dict[str, Any] = {"id": point.id, "score": point.score, "mode": used}
            # a point versions share: the filtered version's payload (else its first's)
            hit.update(version_view(point.payload, filters.version))
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
    used_mode = mode if not modes or modes == {mode} else "+".join(sorted(modes))
    return hits, used_mode


def _expand(engine: Engine, hits: list[dict[str, Any]]) -> None:
    """Add each hit's parent section (``parent``), when it has one."""
    for h in hits:
        pid = h.get("parent_id")
        if pid:
            recs = engine.resources.store.retrieve(h["_collection"], [pid])
            if recs:
                h["parent"] = version_view(recs[0][1], h.get("version"))


def cut_query(engine: Engine, query: str) -> tuple[str, str | None]:
    """``query`` cut to the embedding model's window, and a note when it was cut.

    The model reads at most ``max_seq_length`` word pieces (256 for all-MiniLM-L6-v2,
    2 of them special tokens) and drops the rest silently; the query is cut there for
    both rankings, so that BM25 ranks the words the model read.

    Returns:
        ``(query, None)`` when it fits, else the cut query and a sentence saying so.
    """
    info = engine.profiles.profile.model
    window = max(1, info.max_seq_length - 2)
    if len(query) <= window or info.tokenizer_json is None:
        return query, None  # a word piece is at least one character
    pieces = _model_sizer(str(info.tokenizer_json)).boundaries(query[: window * 64])
    if len(pieces) <= window and len(query) <= window * 64:
        return query, None
    cut = query[: pieces[window - 1]] if len(pieces) >= window else query[: window * 64]
    note = (
        f"the query was cut to its first {window} word pieces ({len(cut):,} of "
        f"{len(query):,} characters): the embedding model reads no more"
    )
    return cut, note


@functools.lru_cache(maxsize=4)
def _model_sizer(tokenizer_json: str) -> ModelSizer:
    from ingestd.chunkers.sizing.tokenizers import ModelSizer

    return ModelSizer(tokenizer_json)


def _indexing(engine: Engine, names: list[str]) -> dict[str, Any] | None:
    """Documents of ``names`` that running syncs have still to write, or ``None``."""
    left: dict[str, int] = {}
    for p in engine.checkpoints.running:
        if p.source in names and p.docs_total > p.docs_done:
            left[p.source] = max(left.get(p.source, 0), p.docs_total - p.docs_done)
    if not left:
        return None
    return {"documents": sum(left.values()), "sources": sorted(left)}


def _dense_query(
    engine: Engine, collection: str, query: str, queries: dict[str, Any], wanted: bool
) -> tuple[str | None, Any]:
    """The version of ``collection`` a search reads now, and the query's vector for it.

    The vector comes from the model that made that version: during a migration two
    versions of two models exist, and a query is never compared with the other's.
    ``queries`` caches the vectors by profile; ``wanted`` false: no vector (sparse).
    """
    physical, profile = engine.collections.query_target(collection)
    if physical is None or not wanted:
        return physical, None
    if profile.key not in queries:
        from ingestd.store.embedding.prompts import embed_queries

        queries[profile.key] = embed_queries(profile.embed_model(), profile.model, [query])[0]
    return physical, queries[profile.key]
