"""The query side: exact filters, and dense, sparse or hybrid (RRF) rankings in Qdrant.

A search asks Qdrant for ONE batch of rankings, the same in embedded and server mode:

* ``dense``: nearest neighbours of the query embedding (cosine);
* ``sparse``: BM25 over the sparse vector (:mod:`ingestd.store.search.sparse`; Qdrant adds IDF);
* ``hybrid``: both, ``candidates`` points each, fused by reciprocal rank fusion,
  ``score = sum over rankings of 1 / (rrf_k + rank - 1)`` with 1-based ranks (Cormack,
  Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
  Rank Learning Methods", SIGIR 2009), after each ranking's ties are ordered by point
  id (:mod:`ingestd.store.search.fusion`). :func:`request` also gives the one fused Query API
  request for applications that send it themselves (the same ranking up to ties).

A :class:`Filters` means engine-neutral conditions (:meth:`Filters.conditions`, see
:mod:`ingestd.store.search.conditions`), which each engine turns into its own filter
(:func:`client_filter` for qdrant-client). Filters are applied by the store before
ranking, for any ``limit``,
inside every ranking, and inside every prefetch of :func:`request` (qdrant-client's
local mode fuses prefetches without looking at a top-level filter, so the filter lives
in each prefetch, which a server honours too).
``path`` matches the payload key :data:`PATH_KEY`: the file's ancestor folders and its
own path (:func:`path_prefixes`), so ``--path docs/a`` selects the file ``docs/a`` or
everything under the folder ``docs/a``. Parent sections (:data:`PARENT_KEY`) are never hits,
and neither are points of a version not yet committed (:data:`PENDING_KEY`): while a
document is written, searches answer from one version of it.

With ``ranks=True`` each hit also says where dense and sparse ranked it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from ingestd.store.search.conditions import Condition, Conditions, Match
from ingestd.store.search.sparse import SPARSE_VECTOR, SparseVec

__all__ = [
    "HIDDEN_KEYS",
    "INDEXED_KEYS",
    "MODES",
    "PARENT_KEY",
    "PATH_KEY",
    "PENDING_KEY",
    "Filters",
    "Hit",
    "Mode",
    "Ranking",
    "client_filter",
    "client_rankings",
    "client_scores",
    "path_prefixes",
    "payloads_by_id",
    "request",
    "scored_hits",
]

#: Payload key holding the file's ancestor folders and its own path (keyword list).
PATH_KEY = "path_prefixes"
#: Payload key of points written but not yet committed (``true``; absent on every other
#: point): a document's new points carry it from their upsert until the commit step of
#: the write order removes it, so searches never see a version half written, nor the
#: old and new versions of a document at once. A stop or crash leaves it only on ids the
#: manifest holds as pending, which the next write of the document deletes or commits.
PENDING_KEY = "pending"
#: Payload key of parent sections (``true``; absent on every other point): a parent is
#: written for its children's context and is never a hit itself.
PARENT_KEY = "is_parent"
#: Flags whose points are never hits, in the order the engines' filters list them.
HIDDEN_KEYS = (PARENT_KEY, PENDING_KEY)
#: Payload keys a search or ``forget`` filters on: each engine gives them a keyword
#: index (the embedded qdrant-client store has none: it ignores payload indexes).
INDEXED_KEYS = ("source", "path", PATH_KEY, "version")

Mode = Literal["hybrid", "dense", "sparse"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "sparse")
#: One ranking the engine gives; ``hybrid`` fuses both.
Ranking = Literal["dense", "sparse"]


def path_prefixes(path: str) -> list[str]:
    """The ancestor folders of POSIX relative ``path``, outermost first, then ``path``.

    ``"docs/usage/quickstart.rst"`` -> ``["docs", "docs/usage", "docs/usage/quickstart.rst"]``.
    """
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass(frozen=True, slots=True)
class Filters:
    """What a search is limited to.

    Attributes:
        source: a source name (payload ``source``).
        path: a file or folder, POSIX, relative to the source root (``./`` and a
            trailing ``/`` are ignored; empty or ``.`` means everything).
        version: a version of a versioned source (payload ``version``: a git
            branch or tag name); its points only.
    """

    source: str | None = None
    path: str | None = None
    version: str | None = None

    def normalised_path(self) -> str | None:
        """``path`` without ``./`` and trailing ``/``, or ``None`` for everything."""
        if self.path is None:
            return None
        p = self.path.strip()
        while p.startswith("./"):
            p = p[2:]
        p = p.strip("/")
        return None if p in ("", ".") else p

    def conditions(self, *, legacy: bool = False) -> Conditions:
        """What the filter means: its conditions, parents and uncommitted points left out.

        The one definition every engine translates (see
        :mod:`ingestd.store.search.conditions`): ``source`` matches the payload
        ``source``, ``version`` the payload ``version``; ``path`` matches
        :data:`PATH_KEY`, which holds the file's ancestor folders and its own path
        (a file, or everything under a folder); no point
        flagged by :data:`HIDDEN_KEYS` is a hit.

        Args:
            legacy: a collection written before :data:`PATH_KEY` existed (it is being
                upgraded): ``path`` then matches the payload ``path`` exactly (files only).
        """
        must: list[Condition] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                cond = self.condition(f.name, value, legacy=legacy)
                if cond is not None:
                    must.append(cond)
        return Conditions(must=tuple(must), unset=HIDDEN_KEYS)

    def condition(self, name: str, value: Any, *, legacy: bool = False) -> Condition | None:
        """The condition of one set filter field: the one translator of a filter.

        A field matches the payload key of its own name (a keyword filter needs no
        entry here); ``path`` is the one exception (see :meth:`conditions`). A new
        filter is a field of this record, plus an entry here when its payload key or
        match differs. ``None``: the field limits nothing (an empty path).
        """
        if name == "path":
            path = self.normalised_path()
            return None if path is None else Match("path" if legacy else PATH_KEY, path)
        return Match(name, str(value))

    def qdrant(self, *, legacy: bool = False) -> Any:
        """The qdrant-client ``Filter`` of :meth:`conditions` (see :func:`client_filter`)."""
        return client_filter(self.conditions(legacy=legacy))


def client_filter(conditions: Conditions | None) -> Any:
    """qdrant-client's ``models.Filter`` of ``conditions`` (``None``: no filter).

    A match is a ``FieldCondition`` with ``MatchValue`` (``MatchAny``) in ``must``; a
    flag that must not be set is a ``FieldCondition`` matching ``true`` in ``must_not``
    (a point without the key passes). Qdrant applies it before ranking, in a server and
    in local mode alike.
    """
    if conditions is None:
        return None
    from qdrant_client import models

    must: list[Any] = []
    for cond in conditions.must:
        match: Any = (
            models.MatchValue(value=cond.value)
            if isinstance(cond, Match)
            else models.MatchAny(any=list(cond.values))
        )
        must.append(models.FieldCondition(key=cond.key, match=match))
    must_not: list[Any] = [
        models.FieldCondition(key=key, match=models.MatchValue(value=True))
        for key in conditions.unset
    ]
    return models.Filter(must=must or None, must_not=must_not or None)


@dataclass(slots=True)
class Hit:
    """One search result.

    Attributes:
        id: point id.
        score: the score of the mode's ranking: cosine similarity (dense), BM25
            (sparse) or the RRF score (hybrid).
        payload: the point's payload.
        rank: 1-based position in the result.
        dense: ``(rank, cosine)`` in the dense ranking, when asked for and within its
            ``candidates``; else ``None``.
        sparse: ``(rank, BM25 score)`` in the sparse ranking, likewise.
    """

    id: str
    score: float
    payload: dict[str, Any]
    rank: int
    dense: tuple[int, float] | None = None
    sparse: tuple[int, float] | None = None


def _floats(vec: Sequence[float] | None) -> list[float]:
    return [] if vec is None else [float(x) for x in vec]


def _sparse(vec: SparseVec) -> Any:
    from qdrant_client import models

    return models.SparseVector(indices=vec.indices, values=vec.values)


def request(
    mode: Mode,
    dense: Sequence[float] | None,
    sparse: SparseVec | None,
    limit: int,
    flt: Any,
    *,
    rrf_k: int,
    candidates: int,
) -> Any:
    """The Qdrant ``QueryRequest`` of one search (payload not asked for).

    Args:
        mode: which ranking.
        dense: the query embedding (``dense`` and ``hybrid``).
        sparse: the query's BM25 vector (``sparse`` and ``hybrid``).
        limit: number of hits.
        flt: the Qdrant filter (see :meth:`Filters.qdrant`), inside each prefetch.
        rrf_k: the RRF constant.
        candidates: points each ranking contributes to the fusion (at least ``limit``).

    Raises:
        ValueError: a vector the mode needs is missing.
    """
    from qdrant_client import models

    if mode in ("dense", "hybrid") and dense is None:
        raise ValueError(f"{mode} search needs the query embedding")
    if mode in ("sparse", "hybrid") and sparse is None:
        raise ValueError(f"{mode} search needs the query's sparse vector")
    if mode == "dense":
        return models.QueryRequest(query=_floats(dense), filter=flt, limit=limit)
    assert sparse is not None
    if mode == "sparse":
        return models.QueryRequest(
            query=_sparse(sparse), using=SPARSE_VECTOR, filter=flt, limit=limit
        )
    n = max(candidates, limit)
    return models.QueryRequest(
        prefetch=[
            models.Prefetch(query=_floats(dense), filter=flt, limit=n),
            models.Prefetch(query=_sparse(sparse), using=SPARSE_VECTOR, filter=flt, limit=n),
        ],
        query=models.RrfQuery(rrf=models.Rrf(k=rrf_k)),
        limit=limit,
    )


def client_rankings(
    query_batch: Callable[[list[Any]], list[Any]],
    dense: Sequence[float] | None,
    sparse: SparseVec | None,
    flt: Any,
) -> Callable[[Sequence[tuple[Ranking, int]], bool], list[list[Hit]]]:
    """The :data:`ingestd.store.search.fusion.Fetch` of a search through qdrant-client.

    Args:
        query_batch: sends ``QueryRequest`` s in one call (``client.query_batch_points``
            for one collection), returning a ``QueryResponse`` per request.
        dense: the query embedding (the ``dense`` ranking).
        sparse: the query's BM25 vector (the ``sparse`` ranking).
        flt: the Qdrant filter (:meth:`Filters.qdrant`).
    """

    def fetch(wanted: Sequence[tuple[Ranking, int]], with_payload: bool) -> list[list[Hit]]:
        update = {"with_payload": with_payload}
        reqs = [
            request(name, dense, sparse, n, flt, rrf_k=0, candidates=0).model_copy(update=update)
            for name, n in wanted
        ]
        return [scored_hits(res.points) for res in query_batch(reqs)]

    return fetch


def client_scores(
    query_batch: Callable[[list[Any]], list[Any]],
    dense: Sequence[float] | None,
    sparse: SparseVec | None,
    flt: Any,
) -> Callable[[Sequence[tuple[Ranking, Sequence[str]]]], list[dict[str, float]]]:
    """The :data:`ingestd.store.search.fusion.Score` of a search through qdrant-client.

    Each ``(ranking, ids)`` is the ranking's request restricted to ``ids`` (a
    ``HasIdCondition`` beside the search's filter) with room for all of them: Qdrant
    scores each point it keeps exactly, by the same formula as the ranking (a filter
    this selective is answered by a full scan of the few points, not the graph).

    Args:
        query_batch: as :func:`client_rankings`.
        dense: the query embedding.
        sparse: the query's BM25 vector.
        flt: the Qdrant filter (:meth:`Filters.qdrant`), or ``None``.
    """
    from qdrant_client import models

    def score(wanted: Sequence[tuple[Ranking, Sequence[str]]]) -> list[dict[str, float]]:
        reqs = []
        for name, ids in wanted:
            only: list[Any] = [models.HasIdCondition(has_id=list(ids))]
            if flt is not None:
                only.append(flt)
            reqs.append(
                request(
                    name, dense, sparse, len(ids), models.Filter(must=only), rrf_k=0, candidates=0
                )
            )
        return [{str(p.id): float(p.score) for p in res.points} for res in query_batch(reqs)]

    return score


def scored_hits(points: Iterable[Any]) -> list[Hit]:
    """:class:`Hit` s of an engine's scored points, ranked from 1 in their order.

    qdrant-client's and Qdrant Edge's scored points both have ``id``, ``score`` and
    ``payload``.
    """
    return [
        Hit(str(p.id), float(p.score), dict(p.payload or {}), rank)
        for rank, p in enumerate(points, 1)
    ]


def payloads_by_id(
    retrieve: Callable[[list[str]], Iterable[Any]],
) -> Callable[[Sequence[str]], dict[str, dict[str, Any]]]:
    """The :data:`ingestd.store.search.fusion.Payloads` of an engine's read by id.

    ``retrieve(ids)``: the records (``id``, ``payload``) of the existing points among
    ``ids`` (``client.retrieve`` for one collection, or an Edge shard's).
    """

    def payloads(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {str(r.id): dict(r.payload or {}) for r in retrieve(list(ids))} if ids else {}

    return payloads
