"""The vector store behind one small interface, with a qdrant-client implementation.

``qdrant.path`` selects qdrant-client's embedded local mode (the default, zero set-up),
``qdrant.url`` a Qdrant server or cluster: the same code path. Embedded mode is
single-process and not thread-safe: one thread owns a :class:`QdrantStore`.

Layout of a collection (:data:`LAYOUT`): the configured collection name is an alias of a
physical collection ``<name>__v<N>`` (one per version, see
:mod:`ingestd.store.collections`), which holds an unnamed dense vector (cosine) and the
sparse vector :data:`~ingestd.store.sparse.SPARSE_VECTOR` with ``Modifier.IDF``. A
collection written before versions existed is a physical collection under the name
itself, without the sparse vector: *legacy*, searched dense-only until it is upgraded.
Reads name the alias; writes go to :meth:`QdrantStore.write_target`, the version
being built while a build runs.

Transient server errors (connection errors, 5xx, 429) are retried with exponential
backoff (tenacity) up to ``retry_seconds``; past that the error propagates and the
caller keeps the work queued.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .search import MODES, PATH_KEY, Filters, Hit, Mode, request
from .sparse import SPARSE_VECTOR, SparseVec

__all__ = [
    "COMPACT_MIN_DELETED",
    "LAYOUT",
    "Layout",
    "Point",
    "QdrantStore",
    "StoreUnavailableError",
    "VectorStore",
    "embedded_point_count",
    "physical_name",
    "version_of",
]

logger = logging.getLogger(__name__)

#: Deleted points an embedded store holds in memory before it is reopened (see above).
#: Each costs 3-12 KB (vector, payload with the chunk text, sparse vector, and the
#: local collection's arrays, which grow by doubling): about 12 KB under
#: ``bench/soak.py``, where 1,000 of them held 12 MB of a 33 MB plateau. Reopening a
#: store of a few hundred live points takes milliseconds.
COMPACT_MIN_DELETED = 200


#: What a current collection looks like: alias -> ``<name>__v<N>`` with the dense vector,
#: the sparse BM25 vector and the payload key :data:`~ingestd.store.search.PATH_KEY`.
LAYOUT = f"alias+dense+{SPARSE_VECTOR}+{PATH_KEY}"
_VERSION_SEP = "__v"


def physical_name(name: str, version: int, tag: str | None = None) -> str:
    """Name of version ``version`` of collection ``name``: ``<name>__v<version>[-<tag>]``.

    ``tag`` says what made the version: a migration names it after the short
    fingerprint of the model (and settings) it embeds with.
    """
    return f"{name}{_VERSION_SEP}{version}" + (f"-{tag}" if tag else "")


def version_of(physical: str, name: str) -> int | None:
    """The version number of ``physical`` when it is a version of ``name``, else ``None``."""
    head, sep, tail = physical.rpartition(_VERSION_SEP)
    number = tail.split("-", 1)[0]
    return int(number) if sep and head == name and number.isdigit() else None


class StoreUnavailableError(RuntimeError):
    """The vector store could not be reached or opened."""


@dataclass(frozen=True, slots=True)
class Point:
    """A point to write.

    Attributes:
        id: UUID string.
        vector: the dense vector (float32 sequence).
        payload: JSON-ready payload.
        sparse: the BM25 vector of the embedded text; ``None`` for points never
            searched (parent sections).
    """

    id: str
    vector: Any
    payload: dict[str, Any]
    sparse: SparseVec | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """What stands behind a collection name.

    Attributes:
        name: the configured collection name.
        physical: the physical collection it resolves to, ``None`` when missing.
        aliased: ``name`` is an alias (else a legacy physical collection or missing).
        sparse: the physical collection has the sparse BM25 vector.
        dim: its dense vectors' dimension.
    """

    name: str
    physical: str | None
    aliased: bool = False
    sparse: bool = False
    dim: int | None = None

    @property
    def exists(self) -> bool:
        """Whether anything stands behind the name."""
        return self.physical is not None

    @property
    def current(self) -> bool:
        """Whether the collection has the current :data:`LAYOUT`."""
        return self.aliased and self.sparse


class VectorStore(Protocol):
    """What ingestd needs from a vector store (a second embedded backend will follow)."""

    def ensure_collection(self, name: str, dim: int) -> Layout:
        """Create collection ``name`` (current layout, ``dim``) if missing; its layout."""
        ...

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Write points; returns when they are durable (``wait=True``)."""
        ...

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id (missing ids are fine)."""
        ...

    def set_payload(
        self, collection: str, updates: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        """Overwrite some payload keys of existing points; returns the ids found missing."""
        ...

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """Exact number of points in ``collection`` (of ``sources``); 0 when it is missing."""
        ...

    def set_sparse(self, collection: str, updates: Sequence[tuple[str, SparseVec]]) -> None:
        """Overwrite the sparse vector of existing points."""
        ...

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], Any]]:
        """``(id, payload, dense vector or None)`` of the points that exist."""
        ...

    def scroll(
        self, collection: str, source: str | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point's ``(id, payload)``, optionally of one source."""
        ...

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
    ) -> list[Hit]:
        """Best points for a query, best first (see :mod:`ingestd.store.search`)."""
        ...

    def close(self) -> None:
        """Release the store (the embedded lock among others)."""
        ...


def _transient(exc: BaseException) -> bool:
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, ResponseHandlingException | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (429, 500, 502, 503, 504)
    return False


class QdrantStore:
    """:class:`VectorStore` on qdrant-client (embedded ``path`` or server ``url``).

    Args:
        path: folder of the embedded store (``<state dir>/qdrant``).
        url: server URL; ``api_key`` goes with it.
        retry_seconds: how long transient server errors are retried, in seconds.
        client: an already built ``QdrantClient`` (tests, fault injection).

    Raises:
        StoreUnavailableError: the embedded store is locked by another process.
    """

    def __init__(
        self,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        retry_seconds: float = 60.0,
        client: Any = None,
    ) -> None:
        self.retry_seconds = retry_seconds
        self.local = client is None and url is None
        if client is None:
            from qdrant_client import QdrantClient

            try:
                client = (
                    QdrantClient(url=url, api_key=api_key, timeout=30)
                    if url
                    else QdrantClient(path=path)
                )
            except RuntimeError as exc:  # portalocker: "already accessed by another instance"
                raise StoreUnavailableError(
                    f"the embedded vector store at {path} is in use by another process "
                    "(is `ingestd run` active on this state dir?)"
                ) from exc
        self.client = client
        self._layouts: dict[str, Layout] = {}
        self._write_to: dict[str, str] = {}
        self._path = path
        self._deleted = 0  # points deleted since the embedded store was opened

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.local:
            return fn(*args, **kwargs)
        from tenacity import (
            Retrying,
            retry_if_exception,
            stop_after_delay,
            wait_exponential,
            wait_random,
        )

        for attempt in Retrying(
            retry=retry_if_exception(_transient),
            # exponential back-off with jitter; tenacity 9 deprecates
            # wait_exponential_jitter(initial=...), this form works with 8.2 and 9
            wait=wait_exponential(multiplier=0.2, max=10) + wait_random(0, 0.2),
            stop=stop_after_delay(self.retry_seconds),
            reraise=True,
            before_sleep=lambda rs: logger.warning(
                "vector store unavailable (%s); retrying",
                rs.outcome.exception() if rs.outcome else "?",
            ),
        ):
            with attempt:
                return fn(*args, **kwargs)
        return None  # pragma: no cover

    # -- layout and versions -------------------------------------------------------------

    def layout(self, name: str) -> Layout:
        """What stands behind collection name ``name`` (cached until it changes here)."""
        if name in self._layouts:
            return self._layouts[name]
        aliases = self.aliases()
        if name in aliases:
            physical, aliased = aliases[name], True
        elif self._call(self.client.collection_exists, name):
            physical, aliased = name, False
        else:
            return Layout(name, None)
        params = self._call(self.client.get_collection, physical).config.params
        out = Layout(
            name,
            physical,
            aliased=aliased,
            sparse=SPARSE_VECTOR in (params.sparse_vectors or {}),
            dim=getattr(params.vectors, "size", None),
        )
        self._layouts[name] = out
        return out

    def aliases(self) -> dict[str, str]:
        """Every alias of the store: alias -> physical collection."""
        res = self._call(self.client.get_aliases)
        return {a.alias_name: a.collection_name for a in res.aliases}

    def versions(self, name: str) -> dict[int, str]:
        """Physical collections that are versions of ``name``: version -> physical name."""
        res = self._call(self.client.get_collections)
        out = {}
        for c in res.collections:
            version = version_of(c.name, name)
            if version is not None:
                out[version] = c.name
        return out

    def create_physical(self, physical: str, dim: int) -> None:
        """Create physical collection ``physical`` with the current layout, if missing.

        Dense vectors of ``dim`` dimensions (cosine), the sparse BM25 vector with
        ``Modifier.IDF``, and on a server keyword indexes on ``source``, ``path`` and
        :data:`~ingestd.store.search.PATH_KEY` (local mode ignores payload indexes).
        """
        from qdrant_client import models

        if self._call(self.client.collection_exists, physical):
            return
        self._call(
            self.client.create_collection,
            physical,
            vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
            sparse_vectors_config={
                SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
        )
        if not self.local:
            for key in ("source", "path", PATH_KEY):
                self._call(
                    self.client.create_payload_index,
                    physical,
                    key,
                    field_schema=models.PayloadSchemaType.KEYWORD,
                )

    def point_alias(self, name: str, physical: str) -> None:
        """Make ``name`` an alias of ``physical``.

        Switching an existing alias is one ``update_collection_aliases`` call (delete and
        create together), atomic in Qdrant: a reader sees the old or the new version.
        A legacy collection that holds the name itself is deleted first (Qdrant keeps
        aliases and collections in one namespace), so for that one switch the name is
        briefly missing; callers record the switch before, to finish it after a crash.
        """
        from qdrant_client import models

        before = self.layout(name)
        ops: list[Any] = []
        if before.aliased:
            ops.append(
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))
            )
        elif before.exists:
            self._call(self.client.delete_collection, name)
        ops.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=physical, alias_name=name)
            )
        )
        self._layouts.pop(name, None)
        self._call(self.client.update_collection_aliases, change_aliases_operations=ops)
        self._layouts.pop(name, None)

    def route_writes(self, name: str, physical: str | None) -> None:
        """Send writes for ``name`` to ``physical`` (a version being built), or back."""
        if physical is None:
            self._write_to.pop(name, None)
        else:
            self._write_to[name] = physical

    def write_target(self, name: str) -> str:
        """The collection that writes for ``name`` go to (the alias, or a build)."""
        return self._write_to.get(name, name)

    def ensure_collection(self, name: str, dim: int) -> Layout:
        """Create collection ``name`` (``<name>__v1`` behind alias ``name``) if missing.

        Returns:
            Its layout (a legacy collection is left as it is: see
            :class:`ingestd.store.collections.CollectionVersions`).

        Raises:
            ValueError: the collection exists with another dimension.
        """
        lay = self.layout(name)
        if not lay.exists:
            physical = physical_name(name, 1)
            self.create_physical(physical, dim)
            self.point_alias(name, physical)
            lay = self.layout(name)
        if lay.dim is not None and lay.dim != dim:
            raise ValueError(
                f"collection {name!r} has {lay.dim}-dim vectors, the model makes {dim}"
            )
        return lay

    def has_collection(self, name: str) -> bool:
        """Whether collection (or alias) ``name`` exists."""
        return self.layout(name).exists

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
            self._call(self.client.upsert, target, points=batch, wait=True)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id, ``wait=True``."""
        from qdrant_client import models

        target = self.write_target(collection)
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            self._call(
                self.client.delete,
                target,
                points_selector=models.PointIdsList(points=list(ids[i : i + 1000])),
                wait=True,
            )
        if self.local and self._path is not None:
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
            self.client = QdrantClient(path=self._path)
        except RuntimeError as exc:  # portalocker: another process took it meanwhile
            raise StoreUnavailableError(
                f"the embedded vector store at {self._path} could not be reopened: {exc}"
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
                self._layouts.pop(collection, None)
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

    def _batch_update(self, collection: str, ops: Sequence[Any]) -> None:
        target = self.write_target(collection)
        for i in range(0, len(ops), 256):
            self._call(
                self.client.batch_update_points,
                target,
                update_operations=list(ops[i : i + 256]),
                wait=True,
            )

    # -- reads --------------------------------------------------------------------------

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], Any]]:
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
            yield from self._call(
                self.client.retrieve,
                collection,
                ids=ids[i : i + 1000],
                with_payload=payload,
                with_vectors=vectors,
            )

    def scroll(
        self, collection: str, source: str | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point of ``collection`` (of one ``source`` if given) as ``(id, payload)``."""
        from qdrant_client import models

        flt = (
            models.Filter(
                must=[models.FieldCondition(key="source", match=models.MatchValue(value=source))]
            )
            if source is not None
            else None
        )
        offset = None
        while True:
            recs, offset = self._call(
                self.client.scroll,
                collection,
                scroll_filter=flt,
                limit=1000,
                offset=offset,
                with_payload=True,
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
            recs, offset = self._call(
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
        return int(self._call(self.client.count, collection, exact=True).count)

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """Exact number of points in ``collection`` (of ``sources`` only, if given).

        Returns 0 when the collection does not exist, and forgets it as known, so that
        the next :meth:`ensure_collection` creates it again.
        """
        from qdrant_client import models

        self._layouts.pop(collection, None)  # it may have been dropped behind our back
        if not self.has_collection(collection):
            return 0
        flt = None
        if sources is not None:
            flt = models.Filter(
                must=[models.FieldCondition(key="source", match=models.MatchAny(any=list(sources)))]
            )
        return int(self._call(self.client.count, collection, count_filter=flt, exact=True).count)

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
    ) -> list[Hit]:
        """Best ``limit`` points for a query, best first, in ONE Query API call.

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
                ranking (their ``candidates`` best); one batch call of three queries.

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
        flt = (filters or Filters()).qdrant(legacy=legacy)
        req = request(mode, dense, sparse, limit, flt, rrf_k=rrf_k, candidates=candidates)
        if not ranks:
            res = self._call(
                self.client.query_points,
                collection,
                query=req.query,
                prefetch=req.prefetch,
                using=req.using,
                query_filter=req.filter,
                limit=limit,
                with_payload=True,
            )
            return [
                Hit(str(p.id), float(p.score), dict(p.payload or {}), i)
                for i, p in enumerate(res.points, 1)
            ]
        n = max(candidates, limit)
        reqs = [req.model_copy(update={"with_payload": True})]
        names = []
        for name in ("dense", "sparse"):
            vec = dense if name == "dense" else sparse
            if vec is None or (name == "sparse" and legacy):
                continue
            one = request(name, dense, sparse, n, flt, rrf_k=rrf_k, candidates=candidates)
            reqs.append(one.model_copy(update={"with_payload": False}))
            names.append(name)
        res = self._call(self.client.query_batch_points, collection, requests=reqs)
        ranked = {
            name: {str(p.id): (i, float(p.score)) for i, p in enumerate(r.points, 1)}
            for name, r in zip(names, res[1:], strict=True)
        }
        hits = []
        for i, p in enumerate(res[0].points, 1):
            pid = str(p.id)
            hits.append(
                Hit(
                    pid,
                    float(p.score),
                    dict(p.payload or {}),
                    i,
                    dense=ranked.get("dense", {}).get(pid),
                    sparse=ranked.get("sparse", {}).get(pid),
                )
            )
        return hits

    def drop_collection(self, name: str) -> None:
        """Delete a whole physical collection."""
        self._call(self.client.delete_collection, name)
        self._layouts.clear()

    def close(self) -> None:
        """Close the client (releases the embedded store's lock)."""
        try:
            self.client.close()
        except Exception:
            logger.debug("error closing the vector store", exc_info=True)


def _missing_point(exc: BaseException) -> bool:
    """Whether ``exc`` says that a point (or its collection) does not exist."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(exc, KeyError):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code == 404
    return isinstance(exc, ValueError) and "not found" in str(exc).lower()


def embedded_point_count(path: str | Path, collection: str) -> int | None:
    """Points of ``collection`` in an embedded store, counted from its files, unopened.

    Opening an embedded store loads every point into memory (about a second for 12,000
    points here, as long as importing qdrant-client); counting the rows of the
    collection's SQLite file takes milliseconds. The layout read is qdrant-client's
    local mode (``meta.json`` naming collections and aliases,
    ``collection/<name>/storage.sqlite`` with one row per point in table ``points``,
    ``qdrant_client/local/persistence.py``).

    Args:
        path: the embedded store's folder (``<state dir>/qdrant``).
        collection: a collection name or alias.

    Returns:
        The number of points; 0 when the store or the collection does not exist;
        ``None`` when the files do not have the expected layout (open the store and
        count there instead).
    """
    import json
    import sqlite3

    root = Path(path)
    meta_path = root / "meta.json"
    if not root.exists():
        return 0
    try:
        meta = json.loads(meta_path.read_text())
        name = meta.get("aliases", {}).get(collection, collection)
        if name not in meta["collections"]:
            return 0
        db = root / "collection" / name / "storage.sqlite"
        if not db.is_file():
            return None
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM points").fetchone()[0])
        finally:
            conn.close()
    except (OSError, ValueError, KeyError, TypeError, AttributeError, sqlite3.Error):
        return None
