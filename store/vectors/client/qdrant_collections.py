"""qdrant-client's side of collections: the client, retries, layouts, versions, aliases.

:class:`QdrantCollections` opens a ``QdrantClient`` (embedded ``path`` or server
``url``) and manages what stands behind a collection name; its subclass
:class:`~ingestd.store.vectors.client.qdrant.QdrantStore` adds the point operations and search.

Transient server errors (connection errors, 5xx, 429) are retried with exponential
backoff (tenacity) up to ``retry_seconds``; past that the error propagates and the
caller keeps the work queued.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ingestd.store.search.query import HIDDEN_KEYS, INDEXED_KEYS
from ingestd.store.search.sparse import SPARSE_VECTOR
from ingestd.store.vectors.base import (
    QDRANT_CLIENT_EXTRA,
    Layout,
    StoreReadOnlyError,
    StoreUnavailableError,
    ensure_collection,
    version_of,
)
from ingestd.store.vectors.routing import RoutedWrites

__all__ = ["QdrantCollections"]

logger = logging.getLogger(__name__)


def _transient(exc: BaseException) -> bool:
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, ResponseHandlingException | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (429, 500, 502, 503, 504)
    return False


class QdrantCollections(RoutedWrites):
    """Collections of a qdrant-client store (embedded ``path`` or server ``url``).

    Args:
        path: folder of the embedded store (``<state dir>/qdrant``).
        url: server URL; ``api_key`` goes with it.
        retry_seconds: how long transient server errors are retried, in seconds.
        client: an already built ``QdrantClient`` (tests, fault injection).
        engine: the name of the engine whose store this is: its spec's
            :attr:`~ingestd.store.vectors.spec.EngineSpec.name`, which the spec passes
            when it opens or connects the store (no name is written here).
        read_only: a reader's store: its write methods raise
            :class:`~ingestd.store.vectors.base.StoreReadOnlyError`. qdrant-client's
            local mode writes nothing when it loads and closes a store (its ``.lock``
            file is locked, not written; measured with qdrant-client 1.20), and a
            missing embedded store is read as an empty one, never created.

    Raises:
        StoreUnavailableError: the embedded store is locked by another process, or
            qdrant-client is not installed (the message names its extra).
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
        super().__init__()
        self.read_only = read_only
        self.retry_seconds = retry_seconds
        self.local = client is None and url is None
        self.engine = engine
        if client is None:
            try:
                from qdrant_client import QdrantClient
            except ImportError as exc:
                where = f"a Qdrant server ({url})" if url else "the local engine"
                raise StoreUnavailableError(
                    f"{where} needs qdrant-client, which is not installed; it comes with "
                    f"{QDRANT_CLIENT_EXTRA}"
                ) from exc
            if read_only and not url and not (Path(str(path)) / "meta.json").is_file():
                path = ":memory:"  # nothing stored yet: read as empty, create nothing
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
        self.path = path

    def writable(self) -> None:
        """Raise unless this store may write.

        Raises:
            StoreReadOnlyError: a reader's store.
        """
        if self.read_only:
            raise StoreReadOnlyError(f"the vector store at {self.path} was opened to read only")

    def write_target(self, name: str) -> str:
        """The collection that writes for ``name`` go to (see ``RoutedWrites``).

        Raises:
            StoreReadOnlyError: a reader's store.
        """
        self.writable()
        return super().write_target(name)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` of the client, retrying transient server errors (not in local mode)."""
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

    def collections(self) -> list[str]:
        """Every physical collection of the store."""
        return [c.name for c in self.call(self.client.get_collections).collections]

    def layout(self, name: str) -> Layout:
        """What stands behind collection name ``name`` (cached until it changes here)."""
        if name in self._layouts:
            return self._layouts[name]
        aliases = self.aliases()
        if name in aliases:
            physical, aliased = aliases[name], True
        elif self.call(self.client.collection_exists, name):
            physical, aliased = name, False
        else:
            return Layout(name, None)
        params = self.call(self.client.get_collection, physical).config.params
        out = Layout(
            name,
            physical,
            aliased=aliased,
            sparse=SPARSE_VECTOR in (params.sparse_vectors or {}),
            dim=getattr(params.vectors, "size", None),
            engine=self.engine,
        )
        self._layouts[name] = out
        return out

    def forget_layout(self, name: str) -> None:
        """Read what stands behind ``name`` again at its next use (it changed elsewhere)."""
        self._layouts.pop(name, None)

    def aliases(self) -> dict[str, str]:
        """Every alias of the store: alias -> physical collection."""
        res = self.call(self.client.get_aliases)
        return {a.alias_name: a.collection_name for a in res.aliases}

    def versions(self, name: str) -> dict[int, str]:
        """Physical collections that are versions of ``name``: version -> physical name."""
        res = self.call(self.client.get_collections)
        out = {}
        for c in res.collections:
            version = version_of(c.name, name)
            if version is not None:
                out[version] = c.name
        return out

    def create_physical(self, physical: str, dim: int) -> None:
        """Create physical collection ``physical`` with the current layout, if missing.

        Dense vectors of ``dim`` dimensions (cosine), the sparse BM25 vector with
        ``Modifier.IDF``, and on a server keyword indexes on
        :data:`~ingestd.store.search.query.INDEXED_KEYS` and boolean ones on
        :data:`~ingestd.store.search.query.HIDDEN_KEYS` (local mode ignores payload indexes).
        """
        from qdrant_client import models

        self.writable()
        if self.call(self.client.collection_exists, physical):
            return
        self.call(
            self.client.create_collection,
            physical,
            vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
            sparse_vectors_config={
                SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
        )
        if not self.local:
            for key in INDEXED_KEYS:
                self.call(
                    self.client.create_payload_index,
                    physical,
                    key,
                    field_schema=models.PayloadSchemaType.KEYWORD,
                )
            for key in HIDDEN_KEYS:  # excluded from every search
                self.call(
                    self.client.create_payload_index,
                    physical,
                    key,
                    field_schema=models.PayloadSchemaType.BOOL,
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

        self.writable()
        before = self.layout(name)
        ops: list[Any] = []
        if before.aliased:
            ops.append(
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))
            )
        elif before.exists:
            self.call(self.client.delete_collection, name)
        ops.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=physical, alias_name=name)
            )
        )
        self._layouts.pop(name, None)
        self.call(self.client.update_collection_aliases, change_aliases_operations=ops)
        self._layouts.pop(name, None)

    def ensure_collection(self, name: str, dim: int) -> Layout:
        """See :func:`ingestd.store.vectors.base.ensure_collection`."""
        return ensure_collection(self, name, dim)

    def has_collection(self, name: str) -> bool:
        """Whether collection (or alias) ``name`` exists."""
        return self.layout(name).exists

    def drop_collection(self, name: str) -> None:
        """Delete a whole physical collection."""
        self.writable()
        self.call(self.client.delete_collection, name)
        self._layouts.clear()

    def close(self) -> None:
        """Close the client (releases the embedded store's lock)."""
        try:
            self.client.close()
        except Exception:
            logger.debug("error closing the vector store", exc_info=True)
