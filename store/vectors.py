"""The vector store behind one small interface, with a qdrant-client implementation.

``qdrant.path`` selects qdrant-client's embedded local mode (the default, zero set-up),
``qdrant.url`` a Qdrant server or cluster: the same code path. Embedded mode is
single-process and not thread-safe: one thread owns a :class:`QdrantStore`.

Transient server errors (connection errors, 5xx, 429) are retried with exponential
backoff (tenacity) up to ``retry_seconds``; past that the error propagates and the
caller keeps the work queued.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "Point",
    "QdrantStore",
    "ScoredPoint",
    "StoreUnavailableError",
    "VectorStore",
    "embedded_point_count",
]

logger = logging.getLogger(__name__)


class StoreUnavailableError(RuntimeError):
    """The vector store could not be reached or opened."""


@dataclass(frozen=True, slots=True)
class Point:
    """A point to write: id (UUID string), vector (float32 sequence), payload."""

    id: str
    vector: Any
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScoredPoint:
    """A search hit: id, cosine similarity score, payload."""

    id: str
    score: float
    payload: dict[str, Any]


class VectorStore(Protocol):
    """What ingestd needs from a vector store (a second embedded backend will follow)."""

    def ensure_collection(self, name: str, dim: int) -> None:
        """Create collection ``name`` (cosine, ``dim``) if missing."""
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

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], Any]]:
        """``(id, payload, vector or None)`` of the points that exist."""
        ...

    def scroll(
        self, collection: str, source: str | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point's ``(id, payload)``, optionally of one source."""
        ...

    def search(
        self,
        collection: str,
        vector: Any,
        limit: int,
        *,
        source: str | None = None,
        path_prefix: str | None = None,
    ) -> list[ScoredPoint]:
        """Nearest points by cosine similarity, best first."""
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
        self._known: set[str] = set()

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

    def ensure_collection(self, name: str, dim: int) -> None:
        """Create collection ``name`` (cosine distance, ``dim`` dims) if it is missing.

        Raises:
            ValueError: the collection exists with another dimension.
        """
        if name in self._known:
            return
        from qdrant_client import models

        if self._call(self.client.collection_exists, name):
            info = self._call(self.client.get_collection, name)
            params = info.config.params.vectors
            size = getattr(params, "size", None)
            if size is not None and size != dim:
                raise ValueError(
                    f"collection {name!r} has {size}-dim vectors, the model makes {dim}"
                )
        else:
            self._call(
                self.client.create_collection,
                name,
                vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
            )
            if not self.local:
                for key, schema in (
                    ("source", models.PayloadSchemaType.KEYWORD),
                    ("path", models.PayloadSchemaType.KEYWORD),
                ):
                    self._call(self.client.create_payload_index, name, key, field_schema=schema)
        self._known.add(name)

    def has_collection(self, name: str) -> bool:
        """Whether collection ``name`` exists."""
        return bool(self._call(self.client.collection_exists, name))

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Upsert ``points`` with ``wait=True``, in batches of 256."""
        from qdrant_client import models

        for i in range(0, len(points), 256):
            batch = [
                models.PointStruct(
                    id=p.id,
                    vector=[float(x) for x in p.vector],
                    payload=p.payload,
                )
                for p in points[i : i + 256]
            ]
            self._call(self.client.upsert, collection, points=batch, wait=True)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id, ``wait=True``."""
        from qdrant_client import models

        ids = list(ids)
        for i in range(0, len(ids), 1000):
            self._call(
                self.client.delete,
                collection,
                points_selector=models.PointIdsList(points=list(ids[i : i + 1000])),
                wait=True,
            )

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
                found = self._existing(collection, [pid for pid, _ in part])
                missing.extend(pid for pid, _ in part if pid not in found)
                present = [(pid, p) for pid, p in part if pid in found]
                if present:
                    self._set_payload_batch(collection, present)
        return missing

    def _existing(self, collection: str, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` whose point exists (none when the collection is gone)."""
        if not self.has_collection(collection):
            return set()
        recs = self._call(
            self.client.retrieve, collection, ids=list(ids), with_payload=False, with_vectors=False
        )
        return {str(r.id) for r in recs}

    def _set_payload_batch(
        self, collection: str, part: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        from qdrant_client import models

        ops = [
            models.SetPayloadOperation(set_payload=models.SetPayload(payload=payload, points=[pid]))
            for pid, payload in part
        ]
        self._call(self.client.batch_update_points, collection, update_operations=ops, wait=True)

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], Any]]:
        """``(id, payload, vector or None)`` of the existing points among ``ids``."""
        out: list[tuple[str, dict[str, Any], Any]] = []
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            recs = self._call(
                self.client.retrieve,
                collection,
                ids=ids[i : i + 1000],
                with_payload=True,
                with_vectors=with_vectors,
            )
            out.extend((str(r.id), dict(r.payload or {}), r.vector) for r in recs)
        return out

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

    def count(self, collection: str) -> int:
        """Exact number of points in ``collection``."""
        return int(self._call(self.client.count, collection, exact=True).count)

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """Exact number of points in ``collection`` (of ``sources`` only, if given).

        Returns 0 when the collection does not exist, and forgets it as known, so that
        the next :meth:`ensure_collection` creates it again.
        """
        from qdrant_client import models

        if not self.has_collection(collection):
            self._known.discard(collection)
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
        vector: Any,
        limit: int,
        *,
        source: str | None = None,
        path_prefix: str | None = None,
    ) -> list[ScoredPoint]:
        """Top ``limit`` points by cosine similarity, parents excluded, best first.

        ``path_prefix`` keeps points whose ``path`` starts with it.
        """
        from qdrant_client import models

        must: list[Any] = []
        if source is not None:
            must.append(models.FieldCondition(key="source", match=models.MatchValue(value=source)))
        must_not = [models.FieldCondition(key="is_parent", match=models.MatchValue(value=True))]
        flt = models.Filter(must=must or None, must_not=must_not)
        # a path prefix cannot be a keyword match: over-fetch and filter here
        fetch = limit * 20 if path_prefix else limit
        res = self._call(
            self.client.query_points,
            collection,
            query=[float(x) for x in vector],
            query_filter=flt,
            limit=fetch,
            with_payload=True,
        )
        hits = [ScoredPoint(str(p.id), float(p.score), dict(p.payload or {})) for p in res.points]
        if path_prefix:
            hits = [h for h in hits if str(h.payload.get("path", "")).startswith(path_prefix)]
        return hits[:limit]

    def drop_collection(self, name: str) -> None:
        """Delete a whole collection."""
        self._call(self.client.delete_collection, name)
        self._known.discard(name)

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
