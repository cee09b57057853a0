"""The :class:`~ingestd.store.vectors.base.VectorStore` on qdrant-client: server or local mode.

``qdrant.url`` selects a Qdrant server or cluster, ``qdrant.path`` qdrant-client's
embedded local mode: the same code path. Embedded mode is single-process and not
thread-safe: one thread owns a :class:`QdrantStore`.

Memory of embedded mode: qdrant-client's local collection only *marks* a deleted point
(``LocalCollection._delete_ids``); its id, payload (chunk text included) and vector stay
in memory until the client is opened again, which loads the live points only. A daemon
that rewrites files keeps deleting points, so :class:`QdrantStore` reopens an embedded
store once :data:`COMPACT_MIN_DELETED` points were deleted and they are at least half
as many as the live ones: memory stays within 1.5 times the live points' (plus a few
megabytes), at the cost of one reload per that many deletions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from ingestd.store.search.conditions import Conditions
from ingestd.store.search.fusion import Fusion, available, rank_and_fuse
from ingestd.store.search.query import (
    MODES,
    Filters,
    Hit,
    Mode,
    client_filter,
    client_rankings,
    client_scores,
    payloads_by_id,
)
from ingestd.store.search.sparse import SPARSE_VECTOR, SparseVec
from ingestd.store.vectors.base import DenseVector, Point, StoreUnavailableError
from ingestd.store.vectors.client.qdrant_collections import QdrantCollections

__all__ = ["COMPACT_MIN_DELETED", "QdrantStore"]

logger = logging.getLogger(__name__)

#: Deleted points an embedded store holds in memory before it is reopened (see above).
#: Each costs 3-12 KB (vector, payload with the chunk text, sparse vector, and the
#: local collection's arrays, which grow by doubling): about 12 KB under
#: ``bench/soak.py``, where 1,000 of them held 12 MB of a 33 MB plateau. Reopening a
#: store of a few hundred live points takes milliseconds.
COMPACT_MIN_DELETED = 200


class QdrantStore(QdrantCollections):
    """:class:`~ingestd.store.vectors.base.VectorStore` on qdrant-client.

    Args: see :class:`~ingestd.store.vectors.client.qdrant_collections.QdrantCollections`.
    """

    def __init__(
        self,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        retry_seconds: float = 60.0,
        engine: str,
        client: Any = None,
        read_only: bool = False,
    ) -> None:
        super().__init__(
            path=path,
            url=url,
            api_key=api_key,
            retry_seconds=retry_seconds,
            client=client,
            engine=engine,
            read_only=read_only,
        )
        self._deleted = 0  # points deleted since the embedded store was opened

    # -- writes ----------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Upsert ``points`` with ``wait=True``, in batches of 256."""
        from qdrant_client import models

        target = self.write_target(collection)
        for i in range(0, len(points), 256):
            batch = []
            for p in points[i : i + 256]:
                dense = [float(x) for x in p.vector]
                vector: Any = dense
                if p.sparse is not None:
                    vector = {
                        "": dense,
                        SPARSE_VECTOR: models.SparseVector(
                            indices=p.sparse.indices, values=p.sparse.values
                        ),
                    }
                batch.append(models.PointStruct(id=p.id, vector=vector, payload=p.payload))
            self.call(self.client.upsert, target, points=batch, wait=True)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id, ``wait=True``."""
        from qdrant_client import models

        target = self.write_target(collection)
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            self.call(
                self.client.delete,
                target,
                points_selector=models.PointIdsList(points=list(ids[i : i + 1000])),
                wait=True,
            )
        if self.local and self.path is not None:
            self._deleted += len(ids)
            self._compact_if_due()

    def _compact_if_due(self) -> None:
        """Reopen the embedded store when the deleted points it still holds are many."""
        if self._deleted < COMPACT_MIN_DELETED:
            return
        names = [c.name for c in self.client.get_collections().collections]
        live = sum(int(self.client.count(n, exact=True).count) for n in names)
        if 2 * self._deleted < live:
            return
        from qdrant_client import QdrantClient

        logger.debug("reopening the embedded vector store: %d points deleted", self._deleted)
        self.client.close()
        try:
            self.client = QdrantClient(path=self.path)
        except RuntimeError as exc:  # portalocker: another process took it meanwhile
            raise StoreUnavailableError(
                f"the embedded vector store at {self.path} could not be reopened: {exc}"
            ) from exc
        self._deleted = 0

    def set_payload(
        self, collection: str, updates: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        """Overwrite the given payload keys of each point, in batched calls (``wait=True``).

        A point the store does not hold (lost with its collection, or deleted behind
        ingestd's back) is not an error: the others are updated and its id is returned,
        so that the caller upserts it whole.

        Returns:
            The ids of ``updates`` whose point does not exist, in their order.
        """
        missing: list[str] = []
        for i in range(0, len(updates), 256):
            part = list(updates[i : i + 256])
            try:
                self._set_payload_batch(collection, part)
            except Exception as exc:
                # embedded mode raises KeyError(id) and ValueError for a missing
                # collection; a server answers 404 to both
                if not _missing_point(exc):
                    raise
                ids = [pid for pid, _ in part]
                self.forget_layout(collection)
                found = self.existing(collection, ids) if self.has_collection(collection) else set()
                missing.extend(pid for pid, _ in part if pid not in found)
                present = [(pid, p) for pid, p in part if pid in found]
                if present:
                    self._set_payload_batch(collection, present)
        return missing

    def _set_payload_batch(
        self, collection: str, part: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        from qdrant_client import models

        ops = [
            models.SetPayloadOperation(set_payload=models.SetPayload(payload=payload, points=[pid]))
            for pid, payload in part
        ]
        self._batch_update(collection, ops)

    def set_sparse(self, collection: str, updates: Sequence[tuple[str, SparseVec]]) -> None:
        """Overwrite the sparse vector of each point, in batched calls (``wait=True``)."""
        from qdrant_client import models

        ops = [
            models.UpdateVectorsOperation(
                update_vectors=models.UpdateVectors(
                    points=[
                        models.PointVectors(
                            id=pid,
                            vector={
                                SPARSE_VECTOR: models.SparseVector(
                                    indices=vec.indices, values=vec.values
                                )
                            },
                        )
                    ]
                )
            )
            for pid, vec in updates
        ]
        self._batch_update(collection, ops)

    def unmark_pending(self, collection: str, ids: Sequence[str]) -> None:
        """Remove the pending marker from the points ``ids`` (``wait=True``)."""
        from qdrant_client import models

        from ingestd.store.search.query import PENDING_KEY

        target = self.write_target(collection)
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            part = ids[i : i + 1000]
            try:
                self.call(
                    self.client.delete_payload,
                    target,
                    keys=[PENDING_KEY],
                    points=models.PointIdsList(points=list(part)),
                    wait=True,
                )
            except Exception as exc:  # embedded mode: KeyError for an unknown id
                if not _missing_point(exc):
                    raise
                found = self.existing(collection, part)
                if found:
                    self.unmark_pending(collection, [pid for pid in part if pid in found])

    def _batch_update(self, collection: str, ops: Sequence[Any]) -> None:
        target = self.write_target(collection)
        for i in range(0, len(ops), 256):
            self.call(
                self.client.batch_update_points,
                target,
                update_operations=list(ops[i : i + 256]),
                wait=True,
            )

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], DenseVector | None]]:
        """``(id, payload, dense vector or None)`` of the existing points among ``ids``."""
        out: list[tuple[str, dict[str, Any], Any]] = []
        for rec in self._retrieve(collection, ids, payload=True, vectors=with_vectors):
            vec = rec.vector
            if isinstance(vec, dict):
                vec = vec.get("")
            out.append((str(rec.id), dict(rec.payload or {}), vec))
        return out

    def existing(self, collection: str, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` that have a point in ``collection``."""
        return {str(r.id) for r in self._retrieve(collection, ids, payload=False, vectors=False)}

    def retrieve_points(self, collection: str, ids: Sequence[str]) -> list[Point]:
        """The existing points among ``ids``, whole: dense and sparse vector, payload."""
        out = []
        for rec in self._retrieve(collection, ids, payload=True, vectors=True):
            vec, sparse = rec.vector, None
            if isinstance(vec, dict):
                sv = vec.get(SPARSE_VECTOR)
                if sv is not None:
                    sparse = SparseVec(list(sv.indices), list(sv.values))
                vec = vec.get("")
            out.append(Point(str(rec.id), vec, dict(rec.payload or {}), sparse))
        return out

    def sparse_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, SparseVec | None]:
        """The sparse vector of each existing point among ``ids`` (``None``: it has none)."""
        out: dict[str, SparseVec | None] = {}
        for rec in self._retrieve(collection, ids, payload=False, vectors=[SPARSE_VECTOR]):
            sv = rec.vector.get(SPARSE_VECTOR) if isinstance(rec.vector, dict) else None
            out[str(rec.id)] = (
                SparseVec(list(sv.indices), list(sv.values)) if sv is not None else None
            )
        return out

    def _retrieve(self, collection: str, ids: Sequence[str], *, payload: bool, vectors: Any) -> Any:
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            yield from self.call(
                self.client.retrieve,
                collection,
                ids=ids[i : i + 1000],
                with_payload=payload,
                with_vectors=vectors,
            )

    def scroll(
        self, collection: str, source: str | None = None, keys: Sequence[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point of ``collection`` (of one ``source`` if given) as ``(id, payload)``.

        ``keys``: only these payload keys are read (``None``: the whole payload).
        """
        flt = client_filter(Conditions.of_source(source))
        offset = None
        while True:
            recs, offset = self.call(
                self.client.scroll,
                collection,
                scroll_filter=flt,
                limit=1000,
                offset=offset,
                with_payload=list(keys) if keys is not None else True,
                with_vectors=False,
            )
            for r in recs:
                yield str(r.id), dict(r.payload or {})
            if offset is None:
                return

    def point_ids(self, collection: str) -> Iterator[str]:
        """The id of every point of ``collection`` (no payload, no vectors read)."""
        offset = None
        while True:
            recs, offset = self.call(
                self.client.scroll,
                collection,
                limit=1000,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            for r in recs:
                yield str(r.id)
            if offset is None:
                return

    def count(self, collection: str) -> int:
        """Exact number of points in ``collection``."""
        return int(self.call(self.client.count, collection, exact=True).count)

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """Exact number of points in ``collection`` (of ``sources`` only, if given).

        Returns 0 when the collection does not exist, and forgets it as known, so that
        the next :meth:`ensure_collection` creates it again.
        """
        self.forget_layout(collection)  # it may have been dropped behind our back
        if not self.has_collection(collection):
            return 0
        flt = client_filter(Conditions.of_sources(sources))
        return int(self.call(self.client.count, collection, count_filter=flt, exact=True).count)

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
        """Best ``limit`` points for a query, best first, equal scores by point id.

        One batch call of the rankings :func:`ingestd.store.search.fusion.rank_and_fuse` asks
        for (another when a ranking's cut falls inside a tie); ``hybrid`` fuses them.

        Args:
            collection: collection name (alias).
            dense: the query embedding (needed by ``dense`` and ``hybrid``).
            sparse: the query's BM25 vector (needed by ``sparse`` and ``hybrid``).
            limit: number of hits.
            filters: exact conditions, applied by Qdrant before ranking (none: all).
            mode: ``hybrid``, ``dense`` or ``sparse``; a legacy collection (no sparse
                vector yet) is searched ``dense``.
            rrf_k: the RRF constant (``hybrid``).
            candidates: points each ranking gives the fusion (at least ``limit``).
            ranks: also report each hit's rank and score in the dense and the sparse
                ranking (their ``candidates`` best; over the union with ``fusion="union"``).
            fusion: how ``hybrid`` fuses (:data:`ingestd.store.search.fusion.FUSIONS`).

        Raises:
            ValueError: unknown mode, or a vector the mode needs is missing.
        """
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of {MODES}")
        lay = self.layout(collection)
        legacy = not lay.sparse
        if legacy and mode != "dense":
            logger.warning(
                "collection %s has no sparse vectors yet (it is upgraded by the next sync); "
                "searching it dense only",
                collection,
            )
            mode = "dense"
        flt = client_filter((filters or Filters()).conditions(legacy=legacy))
        batch = lambda reqs: self.call(self.client.query_batch_points, collection, requests=reqs)  # noqa: E731
        fetch = client_rankings(batch, dense, sparse, flt)
        payloads = payloads_by_id(
            lambda ids: self._retrieve(collection, ids, payload=True, vectors=False)
        )
        return rank_and_fuse(
            fetch,
            payloads,
            mode,
            available(dense, None if legacy else sparse),
            limit=limit,
            candidates=candidates,
            rrf_k=rrf_k,
            ranks=ranks,
            score=client_scores(batch, dense, sparse, flt),
            fusion=fusion,
        )


def _missing_point(exc: BaseException) -> bool:
    """Whether ``exc`` says that a point (or its collection) does not exist."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(exc, KeyError):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code == 404
    return isinstance(exc, ValueError) and "not found" in str(exc).lower()
