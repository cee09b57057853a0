"""The vector store behind one typed interface: :class:`VectorStore`.

Everything the daemon asks of a vector store is a method of :class:`VectorStore`;
every filter, delete and count is an operation of the store itself, never a scan in
Python (DESIGN.md point 9). Implementations:

* :class:`~ingestd.store.vectors.client.qdrant.QdrantStore`, on qdrant-client: a Qdrant server or
  cluster (``qdrant.url``), or qdrant-client's embedded local mode (``qdrant.path``);
* :class:`~ingestd.store.vectors.edge.edge.EdgeStore`, on Qdrant Edge (embedded).

What an embedded engine is besides its points (its folder, opening it, damage, cost) is
its spec, in the table :data:`ingestd.store.vectors.engines.ENGINES`.

Layout of a collection (:data:`LAYOUT`): the configured collection name is an alias of
a physical collection ``<name>__v<N>`` (one per version, see
:mod:`ingestd.store.vectors.versions`), which holds an unnamed dense vector (cosine) and the
sparse vector :data:`~ingestd.store.search.sparse.SPARSE_VECTOR` with ``Modifier.IDF``. A
collection written before versions existed is a physical collection under the name
itself, without the sparse vector: *legacy*, searched dense-only until it is upgraded.
Reads name the alias; writes go to :meth:`VectorStore.write_target`, the version being
built while a build runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from ingestd.chunkers.errors import UnavailableError
from ingestd.store.common.extras import extra_hint
from ingestd.store.search.fusion import Fusion
from ingestd.store.search.query import PATH_KEY, Filters, Hit, Mode
from ingestd.store.search.sparse import SPARSE_VECTOR, SparseVec

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "LAYOUT",
    "QDRANT_CLIENT_EXTRA",
    "AliasedCollections",
    "DenseVector",
    "Layout",
    "Point",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "VectorStore",
    "ensure_collection",
    "physical_name",
    "version_of",
]


#: A dense vector: ``(dim,)`` floats (a float32 NumPy array, or a list read back).
DenseVector: TypeAlias = "Sequence[float] | npt.NDArray[np.float32]"

#: What a current collection looks like: alias -> ``<name>__v<N>`` with the dense vector,
#: the sparse BM25 vector and the payload key :data:`~ingestd.store.search.query.PATH_KEY`.
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


#: How to install qdrant-client, which a Qdrant server (``qdrant.url``) and the ``local``
#: engine need: an extra, since the default engine (Qdrant Edge) does without it.
QDRANT_CLIENT_EXTRA = extra_hint("qdrant-client")


class StoreUnavailableError(UnavailableError, RuntimeError):
    """The vector store could not be reached or opened."""


class StoreReadOnlyError(RuntimeError):
    """A store opened by a reader was asked to write (a reader's code path is wrong)."""


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
    vector: DenseVector
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
        engine: the name of the engine that holds it (its spec's, an entry of the
            table :data:`ingestd.store.vectors.engines.ENGINES`).
    """

    name: str
    physical: str | None
    aliased: bool = False
    sparse: bool = False
    dim: int | None = None
    engine: str | None = None

    @property
    def exists(self) -> bool:
        """Whether anything stands behind the name."""
        return self.physical is not None

    @property
    def current(self) -> bool:
        """Whether the collection has the current :data:`LAYOUT`."""
        return self.aliased and self.sparse


class AliasedCollections(Protocol):
    """What :func:`ensure_collection` uses of a :class:`VectorStore`: names behind aliases."""

    def layout(self, name: str) -> Layout:
        """What stands behind collection name ``name`` (alias, physical, legacy, missing)."""
        ...

    def create_physical(self, physical: str, dim: int) -> None:
        """Create physical collection ``physical`` with the current layout, if missing."""
        ...

    def point_alias(self, name: str, physical: str) -> None:
        """Make ``name`` an alias of ``physical``, atomically for readers."""
        ...


class VectorStore(AliasedCollections, Protocol):
    """What ingestd asks of a vector store: collections, versions, points, search.

    Collection names given to point operations are aliases or physical collections;
    writes (``upsert``, ``delete``, ``set_payload``, ``set_sparse``) go to
    :meth:`write_target` of the name. Ids are UUID strings. One thread owns a store.

    Attributes:
        engine: which engine new collections are made in: the name of the spec that
            opened the store (an entry of the table
            :data:`ingestd.store.vectors.engines.ENGINES`).
    """

    engine: str

    # -- collections, versions and aliases ------------------------------------------------

    def has_collection(self, name: str) -> bool:
        """Whether collection (or alias) ``name`` exists."""
        ...

    def collections(self) -> list[str]:
        """Every physical collection of the store."""
        ...

    def aliases(self) -> dict[str, str]:
        """Every alias of the store: alias -> physical collection."""
        ...

    def versions(self, name: str) -> dict[int, str]:
        """Physical collections that are versions of ``name``: version -> physical name."""
        ...

    def ensure_collection(self, name: str, dim: int) -> Layout:
        """Create ``name`` (``<name>__v1`` behind alias ``name``) if missing; its layout.

        Raises:
            ValueError: the collection exists with another dimension.
        """
        ...

    def drop_collection(self, name: str) -> None:
        """Delete a whole physical collection."""
        ...

    def route_writes(self, name: str, physical: str | None) -> None:
        """Send writes for ``name`` to ``physical`` (a version being built), or back."""
        ...

    def write_target(self, name: str) -> str:
        """The collection that writes for ``name`` go to (the alias, or a build)."""
        ...

    # -- writes ---------------------------------------------------------------------------

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

    def set_sparse(self, collection: str, updates: Sequence[tuple[str, SparseVec]]) -> None:
        """Overwrite the sparse vector of existing points."""
        ...

    def unmark_pending(self, collection: str, ids: Sequence[str]) -> None:
        """Remove the pending marker (``search.PENDING_KEY``) of points (commit step)."""
        ...

    # -- reads ----------------------------------------------------------------------------

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], DenseVector | None]]:
        """``(id, payload, dense vector or None)`` of the points that exist."""
        ...

    def retrieve_points(self, collection: str, ids: Sequence[str]) -> list[Point]:
        """The existing points among ``ids``, whole: dense and sparse vector, payload."""
        ...

    def existing(self, collection: str, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` that have a point in ``collection``."""
        ...

    def sparse_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, SparseVec | None]:
        """The sparse vector of each existing point among ``ids`` (``None``: it has none)."""
        ...

    def scroll(
        self, collection: str, source: str | None = None, keys: Sequence[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point's ``(id, payload)``, optionally of one source (a store filter).

        ``keys``: only these payload keys are read (``None``: the whole payload).
        """
        ...

    def point_ids(self, collection: str) -> Iterator[str]:
        """The id of every point of ``collection`` (no payload, no vectors read)."""
        ...

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        """Exact number of points in ``collection`` (of ``sources``); 0 when it is missing."""
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
        fusion: Fusion = "union",
    ) -> list[Hit]:
        """Best points for a query, best first, equal scores by point id.

        See :mod:`ingestd.store.search.query`.
        """
        ...

    def close(self) -> None:
        """Release the store (the embedded lock among others)."""
        ...


def ensure_collection(store: AliasedCollections, name: str, dim: int) -> Layout:
    """Create collection ``name`` (``<name>__v1`` behind alias ``name``) if missing.

    The same for every engine, through its :meth:`VectorStore.layout`,
    :meth:`VectorStore.create_physical` and :meth:`VectorStore.point_alias`.

    Returns:
        Its layout (a legacy collection is left as it is: see
        :class:`ingestd.store.vectors.versions.CollectionVersions`).

    Raises:
        ValueError: the collection exists with another dimension.
    """
    lay = store.layout(name)
    if not lay.exists:
        physical = physical_name(name, 1)
        store.create_physical(physical, dim)
        store.point_alias(name, physical)
        lay = store.layout(name)
    if lay.dim is not None and lay.dim != dim:
        raise ValueError(f"collection {name!r} has {lay.dim}-dim vectors, the model makes {dim}")
    return lay
