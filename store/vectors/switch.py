"""Two embedded engines behind one store while collections move from one to the other.

When the configured embedded engine (``qdrant.engine``) is not the one that holds a
collection (a store made with qdrant-client's local mode, now configured for Qdrant
Edge), :class:`EngineSwitch` opens both: the *primary* (configured) engine and the
*previous* one. Each collection name is served by the engine that holds it, so
searches keep answering from the previous engine; new physical collections are made
in the primary one. The move itself is a collection-version build (reason
:data:`ENGINE`, see :class:`~ingestd.store.vectors.versions.CollectionVersions`): a new
version in the primary engine, every point copied with its vectors (nothing is
embedded), then the alias switch (the primary engine's alias wins from then on) and
the previous version dropped. Once the previous engine holds no collection, its
folder is removed.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ingestd.store.search.fusion import Fusion
from ingestd.store.search.query import Filters, Hit, Mode
from ingestd.store.search.sparse import SparseVec
from ingestd.store.vectors.base import DenseVector, Layout, Point, VectorStore
from ingestd.store.vectors.routing import RoutedWrites

__all__ = ["ENGINE", "EngineSwitch"]

logger = logging.getLogger(__name__)

#: Reason of a build that moves a collection to the configured engine.
ENGINE = "engine"


class EngineSwitch(RoutedWrites):
    """A :class:`~ingestd.store.vectors.base.VectorStore` over two engines during a move.

    Args:
        primary: the configured engine's store (new collections are made there).
        previous: the store that still holds collections.
        previous_path: the previous store's folder, removed once it holds nothing.
    """

    def __init__(self, primary: VectorStore, previous: VectorStore, previous_path: Path) -> None:
        super().__init__()
        self.primary = primary
        self.previous: VectorStore | None = previous
        self.previous_path = previous_path
        self.engine = primary.engine

    def _holder(self, name: str) -> VectorStore:
        """The store that holds ``name`` (the primary one when neither does)."""
        if self.previous is not None and not self.primary.has_collection(name):
            if self.previous.has_collection(name):
                return self.previous
        return self.primary

    # -- collections, versions and aliases ---------------------------------------------

    def layout(self, name: str) -> Layout:
        """What stands behind ``name``, in the engine that holds it."""
        return self._holder(name).layout(name)

    def has_collection(self, name: str) -> bool:
        """Whether either engine holds ``name``."""
        return self._holder(name).has_collection(name)

    def collections(self) -> list[str]:
        """Physical collections of both engines."""
        prev = self.previous.collections() if self.previous is not None else []
        return sorted({*self.primary.collections(), *prev})

    def aliases(self) -> dict[str, str]:
        """Aliases of both engines (the primary engine's win)."""
        prev = self.previous.aliases() if self.previous is not None else {}
        return {**prev, **self.primary.aliases()}

    def versions(self, name: str) -> dict[int, str]:
        """Versions of ``name`` in both engines."""
        prev = self.previous.versions(name) if self.previous is not None else {}
        return {**prev, **self.primary.versions(name)}

    def ensure_collection(self, name: str, dim: int) -> Layout:
        """The layout of ``name`` where it is; created in the primary engine if missing."""
        return self._holder(name).ensure_collection(name, dim)

    def create_physical(self, physical: str, dim: int) -> None:
        """Create ``physical`` in the primary engine."""
        self.primary.create_physical(physical, dim)

    def point_alias(self, name: str, physical: str) -> None:
        """Point ``name`` at ``physical`` in the primary engine (which wins from then on)."""
        self.primary.point_alias(name, physical)

    def drop_collection(self, name: str) -> None:
        """Drop ``name`` where it is; remove the previous engine once it holds nothing."""
        self._holder(name).drop_collection(name)
        prev = self.previous
        if prev is not None and not prev.collections():
            prev.close()
            self.previous = None
            shutil.rmtree(self.previous_path, ignore_errors=True)
            logger.info(
                "every collection is in the %s engine now; removed %s",
                self.engine,
                self.previous_path,
            )

    def _writer(self, collection: str) -> tuple[VectorStore, str]:
        target = self.write_target(collection)
        return self._holder(target), target

    # -- writes and reads, by where the collection is ----------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """See :meth:`VectorStore.upsert`."""
        store, target = self._writer(collection)
        store.upsert(target, points)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """See :meth:`VectorStore.delete`."""
        store, target = self._writer(collection)
        store.delete(target, ids)

    def set_payload(
        self, collection: str, updates: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        """See :meth:`VectorStore.set_payload`."""
        store, target = self._writer(collection)
        return store.set_payload(target, updates)

    def set_sparse(self, collection: str, updates: Sequence[tuple[str, SparseVec]]) -> None:
        """See :meth:`VectorStore.set_sparse`."""
        store, target = self._writer(collection)
        store.set_sparse(target, updates)

    def unmark_pending(self, collection: str, ids: Sequence[str]) -> None:
        """See :meth:`VectorStore.unmark_pending`."""
        store, target = self._writer(collection)
        store.unmark_pending(target, ids)

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], DenseVector | None]]:
        """See :meth:`VectorStore.retrieve`."""
        return self._holder(collection).retrieve(collection, ids, with_vectors=with_vectors)

    def retrieve_points(self, collection: str, ids: Sequence[str]) -> list[Point]:
        """See :meth:`VectorStore.retrieve_points`."""
        return self._holder(collection).retrieve_points(collection, ids)

    def existing(self, collection: str, ids: Sequence[str]) -> set[str]:
        """See :meth:`VectorStore.existing`."""
        return self._holder(collection).existing(collection, ids)

    def sparse_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, SparseVec | None]:
        """See :meth:`VectorStore.sparse_vectors`."""
        return self._holder(collection).sparse_vectors(collection, ids)

    def scroll(
        self, collection: str, source: str | None = None, keys: Sequence[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """See :meth:`VectorStore.scroll`."""
        return self._holder(collection).scroll(collection, source, keys)

    def point_ids(self, collection: str) -> Iterator[str]:
        """See :meth:`VectorStore.point_ids`."""
        return self._holder(collection).point_ids(collection)

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """See :meth:`VectorStore.point_count`."""
        return self._holder(collection).point_count(collection, sources)

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
        """See :meth:`VectorStore.search`: answered by the engine that holds it."""
        return self._holder(collection).search(
            collection,
            dense=dense,
            sparse=sparse,
            limit=limit,
            filters=filters,
            mode=mode,
            rrf_k=rrf_k,
            candidates=candidates,
            ranks=ranks,
            fusion=fusion,
        )

    def close(self) -> None:
        """Close both engines."""
        self.primary.close()
        if self.previous is not None:
            self.previous.close()
