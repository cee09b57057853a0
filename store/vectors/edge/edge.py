"""The :class:`~ingestd.store.vectors.base.VectorStore` on Qdrant Edge: Qdrant's engine in-process.

Every operation is one of the engine's own (DESIGN.md point 9): deletes by id, counts
and scrolls with a payload filter, retrieval by id, and a search is ONE batch call of
its dense and sparse rankings, each carrying the filter, which
:mod:`ingestd.store.search.fusion` settles (ties by point id) and fuses by reciprocal rank
fusion, as for every engine.

Every point is scored (no HNSW graph). New points are scored on their float32
vectors; after every :data:`~ingestd.store.vectors.edge.edge_shards.OPTIMIZE_EVERY` points an
upsert writes, it optimises the shard (:meth:`EdgeCollections.optimize`): the older
points are then scanned on an int8 copy and the best candidates rescored from float32
(see :mod:`ingestd.store.vectors.edge.edge_shards`). Writes are durable when the call returns:
the engine appends each update to its write-ahead log before applying it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from ingestd.store.search.conditions import Conditions, Match
from ingestd.store.search.fusion import Fusion, available, rank_and_fuse
from ingestd.store.search.query import (
    MODES,
    PENDING_KEY,
    Filters,
    Hit,
    Mode,
    Ranking,
    payloads_by_id,
    scored_hits,
)
from ingestd.store.search.sparse import SPARSE_VECTOR, SparseVec
from ingestd.store.vectors.base import DenseVector, Point
from ingestd.store.vectors.edge.edge_heal import heal_torn_log
from ingestd.store.vectors.edge.edge_shards import OPTIMIZE_EVERY, OVERSAMPLING, EdgeCollections

__all__ = ["BATCH", "EdgeStore", "edge_filter", "edge_request"]

logger = logging.getLogger(__name__)

#: Points per update call, ids per retrieve call and per scroll page.
BATCH = 256


def edge_filter(conditions: Conditions | None) -> Any:
    """The Qdrant Edge ``Filter`` of ``conditions`` (``None``: no filter).

    A flag that must not be set (parents, points not yet committed: see
    :meth:`ingestd.store.search.query.Filters.conditions`) is an ``IsEmptyCondition``:
    the flag is ``true`` on the points it marks and absent on every other point, so
    "it is empty" keeps exactly the others. ``MatchValue(True)`` cannot say it:
    qdrant-edge-py 0.9.0 turns ``True`` into the integer 1, which matches no boolean.
    Both flags have a boolean index, so neither condition reads the points' payload. A
    match is a ``FieldCondition`` with ``MatchValue`` (``MatchAny``).
    """
    if conditions is None:
        return None
    from qdrant_edge import FieldCondition, Filter, IsEmptyCondition, MatchAny, MatchValue

    must: list[Any] = [IsEmptyCondition(key=key) for key in conditions.unset]
    for cond in conditions.must:
        if isinstance(cond, Match):
            match: Any = MatchValue(cond.value)
        else:
            match = MatchAny(list(cond.values))
        must.append(FieldCondition(key=cond.key, match=match))
    return Filter(must=must)


def edge_only(flt: Any, ids: Sequence[str]) -> Any:
    """The Qdrant Edge filter ``flt`` (or none) narrowed to the points ``ids``."""
    from qdrant_edge import Filter, HasIdCondition

    only: list[Any] = [HasIdCondition(set(ids))]
    if flt is not None:
        only.append(flt)
    return Filter(must=only)


def edge_request(
    ranking: Ranking,
    dense: Sequence[float] | None,
    sparse: SparseVec | None,
    limit: int,
    flt: Any,
    *,
    with_payload: bool = True,
) -> Any:
    """The Qdrant Edge ``QueryRequest`` of one ranking of a search, best ``limit`` points.

    ``dense`` scans the int8 copy of immutable segments and rescores ``limit x``
    :data:`~ingestd.store.vectors.edge.edge_shards.OVERSAMPLING` candidates from float32.

    Raises:
        ValueError: the ranking's vector is missing.
    """
    from qdrant_edge import QuantizationSearchParams, Query, QueryRequest, SearchParams
    from qdrant_edge import SparseVector as EdgeSparse

    if ranking == "dense":
        if dense is None:
            raise ValueError("dense search needs the query embedding")
        params = SearchParams(
            quantization=QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
        )
        query = Query.Nearest([float(x) for x in dense])
        return QueryRequest(
            limit=limit, query=query, filter=flt, with_payload=with_payload, params=params
        )
    if sparse is None:
        raise ValueError("sparse search needs the query's sparse vector")
    vector = EdgeSparse(list(sparse.indices), list(sparse.values))
    query = Query.Nearest(vector, using=SPARSE_VECTOR)
    return QueryRequest(limit=limit, query=query, filter=flt, with_payload=with_payload)


def _vector(dense: DenseVector, sparse: SparseVec | None) -> dict[str, Any]:
    from qdrant_edge import SparseVector as EdgeSparse

    tolist = getattr(dense, "tolist", None)  # a NumPy array converts in C
    out: dict[str, Any] = {"": tolist() if tolist is not None else [float(x) for x in dense]}
    if sparse is not None:
        out[SPARSE_VECTOR] = EdgeSparse(list(sparse.indices), list(sparse.values))
    return out


def _dense_of(vector: Any) -> DenseVector | None:
    """The dense vector of a record: the engine gives a list when only it was asked for."""
    if isinstance(vector, dict):
        dense: DenseVector | None = vector.get("")
        return dense
    return vector if vector is not None else None


class EdgeStore(EdgeCollections):
    """:class:`~ingestd.store.vectors.base.VectorStore` on Qdrant Edge (embedded, in-process).

    Args: see :class:`~ingestd.store.vectors.edge.edge_shards.EdgeCollections`.

    Raises:
        ingestd.store.vectors.base.StoreReadOnlyError: a write to a reader's store.
    """

    def shard(self, physical: str) -> Any:
        """The open shard of ``physical``, healed first if its log ends too early.

        See :func:`~ingestd.store.vectors.edge.edge_heal.heal_torn_log` (a reader's store never
        heals: it reads what is there); otherwise as
        :meth:`~ingestd.store.vectors.edge.edge_shards.EdgeCollections.shard`.
        """
        if (
            not self.read_only
            and physical not in self._shards
            and self.shard_path(physical).is_dir()
        ):
            try:
                heal_torn_log(self, physical)
            except Exception as exc:  # the load below names the damage, if any
                logger.warning("vector store %s could not be rebuilt: %s", physical, exc)
        return super().shard(physical)

    def _target(self, collection: str) -> Any:
        """The shard that writes for ``collection`` go to.

        Raises:
            StoreReadOnlyError: a reader's store.
        """
        self.writable()
        return self.shard(self.physical_of(self.write_target(collection)))

    # -- writes ----------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Upsert ``points`` in calls of :data:`BATCH`; durable when it returns.

        The call that brings the points written since the last optimisation to
        :data:`~ingestd.store.vectors.edge.edge_shards.OPTIMIZE_EVERY` also optimises the
        shard (blocking, ~20 s per 100,000 points).
        """
        from qdrant_edge import Point as EdgePoint
        from qdrant_edge import UpdateOperation

        shard = self._target(collection)
        physical = self.physical_of(self.write_target(collection))
        for i in range(0, len(points), BATCH):
            batch = [
                EdgePoint(id=p.id, vector=_vector(p.vector, p.sparse), payload=p.payload)
                for p in points[i : i + BATCH]
            ]
            shard.update(UpdateOperation.upsert_points(batch))
        written = self._written.get(physical, 0) + len(points)
        self._written[physical] = written
        if written >= OPTIMIZE_EVERY:
            self.optimize(physical)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id (unknown ids are fine)."""
        from qdrant_edge import UpdateOperation

        shard = self._target(collection)
        physical = self.physical_of(self.write_target(collection))
        todo: list[Any] = list(ids)
        for i in range(0, len(todo), 1000):
            shard.update(UpdateOperation.delete_points(todo[i : i + 1000]))
        self.churned(physical, len(todo))

    def set_payload(
        self, collection: str, updates: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        """Overwrite the given payload keys of each point (one update per point).

        Returns:
            The ids of ``updates`` whose point does not exist, in their order (the
            caller upserts those whole).
        """
        from qdrant_edge import UpdateOperation

        shard = self._target(collection)
        present = self._existing_in(shard, [pid for pid, _ in updates])
        missing = []
        for pid, payload in updates:
            if pid in present:
                shard.update(UpdateOperation.set_payload([pid], payload))
            else:
                missing.append(pid)
        self.churned(self.physical_of(self.write_target(collection)), len(updates) - len(missing))
        return missing

    def unmark_pending(self, collection: str, ids: Sequence[str]) -> None:
        """Remove the pending marker from the points ``ids`` (commit step; unknown ids are fine)."""
        from qdrant_edge import UpdateOperation

        shard = self._target(collection)
        todo: list[Any] = list(ids)
        for i in range(0, len(todo), 1000):
            shard.update(UpdateOperation.delete_payload(todo[i : i + 1000], [PENDING_KEY]))

    def set_sparse(self, collection: str, updates: Sequence[tuple[str, SparseVec]]) -> None:
        """Overwrite the sparse vector of each existing point (the dense one is kept)."""
        from qdrant_edge import PointVectors, UpdateOperation
        from qdrant_edge import SparseVector as EdgeSparse

        shard = self._target(collection)
        present = self._existing_in(shard, [pid for pid, _ in updates])
        todo = [
            PointVectors(pid, {SPARSE_VECTOR: EdgeSparse(list(v.indices), list(v.values))})
            for pid, v in updates
            if pid in present
        ]
        for i in range(0, len(todo), BATCH):
            shard.update(UpdateOperation.update_vectors(todo[i : i + BATCH]))

    # -- reads ---------------------------------------------------------------------------

    def _records(
        self, collection: str, ids: Sequence[str], *, payload: bool, vectors: Any
    ) -> Iterator[Any]:
        try:
            shard = self.shard(self.physical_of(collection))
        except KeyError:
            return
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            yield from shard.retrieve(ids[i : i + 1000], payload, vectors)

    @staticmethod
    def _existing_in(shard: Any, ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            out.update(str(r.id) for r in shard.retrieve(ids[i : i + 1000], False, False))
        return out

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], DenseVector | None]]:
        """``(id, payload, dense vector or None)`` of the existing points among ``ids``."""
        vectors: Any = [""] if with_vectors else False
        return [
            (str(r.id), dict(r.payload or {}), _dense_of(r.vector) if with_vectors else None)
            for r in self._records(collection, ids, payload=True, vectors=vectors)
        ]

    def existing(self, collection: str, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` that have a point in ``collection``."""
        return {str(r.id) for r in self._records(collection, ids, payload=False, vectors=False)}

    def retrieve_points(self, collection: str, ids: Sequence[str]) -> list[Point]:
        """The existing points among ``ids``, whole: dense and sparse vector, payload."""
        out = []
        for r in self._records(collection, ids, payload=True, vectors=True):
            vec = r.vector or {}
            sv = vec.get(SPARSE_VECTOR)
            sparse = SparseVec(list(sv.indices), list(sv.values)) if sv is not None else None
            dense = vec.get("")
            if dense is not None:  # every point has one; the type says it may not
                out.append(Point(str(r.id), dense, dict(r.payload or {}), sparse))
        return out

    def sparse_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, SparseVec | None]:
        """The sparse vector of each existing point among ``ids`` (``None``: it has none)."""
        out: dict[str, SparseVec | None] = {}
        for r in self._records(collection, ids, payload=False, vectors=[SPARSE_VECTOR]):
            sv = (r.vector or {}).get(SPARSE_VECTOR)
            out[str(r.id)] = SparseVec(list(sv.indices), list(sv.values)) if sv else None
        return out

    def _scroll(self, collection: str, flt: Any, with_payload: bool | list[str]) -> Iterator[Any]:
        from qdrant_edge import ScrollRequest

        try:
            shard = self.shard(self.physical_of(collection))
        except KeyError:
            return
        offset: uuid.UUID | str | int | None = None
        while True:
            page, offset = shard.scroll(
                ScrollRequest(
                    offset=offset,
                    limit=1000,
                    filter=flt,
                    with_payload=with_payload,
                    with_vector=False,
                )
            )
            yield from page
            if offset is None:
                return

    def scroll(
        self, collection: str, source: str | None = None, keys: Sequence[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point of ``collection`` (of one ``source`` if given) as ``(id, payload)``.

        ``keys``: only these payload keys are read (``None``: the whole payload).
        """
        flt = edge_filter(Conditions.of_source(source))
        for r in self._scroll(collection, flt, list(keys) if keys is not None else True):
            yield str(r.id), dict(r.payload or {})

    def point_ids(self, collection: str) -> Iterator[str]:
        """The id of every point of ``collection`` (no payload, no vectors read)."""
        for r in self._scroll(collection, None, False):
            yield str(r.id)

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """Exact number of points in ``collection`` (of ``sources`` only, if given)."""
        from qdrant_edge import CountRequest

        self.forget_layout(collection)
        try:
            shard = self.shard(self.physical_of(collection))
        except KeyError:
            return 0
        flt = edge_filter(Conditions.of_sources(sources))
        return int(shard.count(CountRequest(exact=True, filter=flt)))

    def search(
        self,
        collection: str,
        *,
        dense: Sequence[float] | None,
        sparse: SparseVec | None,
        limit: int,
        filters: Filters | None = None,
        mode: Mode = "hybrid",
        rrf_k: int = 60,
        candidates: int = 50,
        ranks: bool = False,
        fusion: Fusion = "union",
    ) -> list[Hit]:
        """Best ``limit`` points for a query, best first, ties by id, in one batch call.

        See :meth:`ingestd.store.vectors.client.qdrant.QdrantStore.search` for the arguments and
        :func:`ingestd.store.search.fusion.rank_and_fuse` for the rankings asked for (a tie at
        a ranking's cut takes another call).

        Raises:
            ValueError: unknown mode, or a vector the mode needs is missing.
            KeyError: the collection does not exist.
        """
        from qdrant_edge import QueryBatchRequest

        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of {MODES}")
        shard = self.shard(self.physical_of(collection))
        flt = edge_filter((filters or Filters()).conditions())

        def fetch(wanted: Sequence[tuple[Ranking, int]], with_payload: bool) -> list[list[Hit]]:
            reqs = [
                edge_request(name, dense, sparse, n, flt, with_payload=with_payload)
                for name, n in wanted
            ]
            return [scored_hits(found) for found in shard.query_batch(QueryBatchRequest(reqs))]

        def score(wanted: Sequence[tuple[Ranking, Sequence[str]]]) -> list[dict[str, float]]:
            reqs = [
                edge_request(name, dense, sparse, len(ids), edge_only(flt, ids), with_payload=False)
                for name, ids in wanted
            ]
            found = shard.query_batch(QueryBatchRequest(reqs))
            return [{str(p.id): float(p.score) for p in points} for points in found]

        payloads = payloads_by_id(
            lambda ids: self._records(collection, ids, payload=True, vectors=False)
        )

        return rank_and_fuse(
            fetch,
            payloads,
            mode,
            available(dense, sparse),
            limit=limit,
            candidates=candidates,
            rrf_k=rrf_k,
            ranks=ranks,
            score=score,
            fusion=fusion,
        )
