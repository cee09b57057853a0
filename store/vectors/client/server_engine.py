"""The ``server`` engine: a Qdrant server or cluster, reached over the network.

Selected by a URL (``qdrant.url``) rather than chosen from the state dir's files: its
store is :class:`~ingestd.store.vectors.client.qdrant.QdrantStore` with a ``url`` (imported
when opened). It is no embedded engine (:attr:`~ingestd.store.vectors.spec.EngineSpec.embedded`
is ``False``): the server keeps its own files and write-ahead log, so nothing of it is in
the state dir (no folder, no owner, no damage read from files, no clean-close proof),
every write it acknowledged survives a crash, and other state dirs may write to the
same collections (a store check counts and reads the state dir's own sources only).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.vectors.base import QDRANT_CLIENT_EXTRA, StoreUnavailableError
from ingestd.store.vectors.spec import EngineSpec, StoreSettings

if TYPE_CHECKING:
    from ingestd.store.search.conditions import Conditions
    from ingestd.store.vectors.base import VectorStore


class ServerEngine(EngineSpec):
    """A Qdrant server or cluster: selected by ``StoreSettings.url``, nothing in the state dir."""

    name = "server"
    folder = ""
    collections_dir = ""
    package = "qdrant_client"
    install_hint = QDRANT_CLIENT_EXTRA
    durable_updates = True
    embedded = False

    def selected(self, settings: StoreSettings) -> bool:
        """Whether ``settings`` name a server (a ``url``)."""
        return bool(settings.url)

    def connect(self, settings: StoreSettings, *, read_only: bool = False) -> VectorStore:
        """The server ``settings`` name (a ``QdrantStore``).

        The API key is read from the environment variable ``settings.api_key_env``
        (none when it is unset); nothing is sent before the first call. The store
        reports this spec's :attr:`name` as its engine (a subclass's, for another server).
        """
        from ingestd.store.vectors.client.qdrant import QdrantStore

        return QdrantStore(
            url=settings.url,
            api_key=os.environ.get(settings.api_key_env),
            retry_seconds=settings.retry_seconds,
            engine=self.name,
            read_only=read_only,
        )

    def holds_store(self, path: Path) -> bool:
        """Never: a server's store is no folder of the state dir."""
        return False

    def holds_collections(self, path: Path) -> bool:
        """Never: a server's collections are no folder of the state dir."""
        return False

    def open(self, path: Path, *, read_only: bool = False) -> VectorStore:
        """Refused: a server is reached by its URL (:meth:`connect`), not from a folder.

        Raises:
            ingestd.store.vectors.base.StoreUnavailableError: always.
        """
        raise StoreUnavailableError("a Qdrant server is reached by its url, not from a folder")

    def files_damage(self, path: Path) -> StateDamagedError | None:
        """None: the server checks its own files."""
        return None

    def deep_damage(self, path: Path) -> StateDamagedError | None:
        """None: the server checks its own files."""
        return None

    def filter(self, conditions: Conditions | None) -> Any:
        """qdrant-client's ``Filter`` (:func:`ingestd.store.search.query.client_filter`)."""
        from ingestd.store.search.query import client_filter

        return client_filter(conditions)


#: The spec of the ``server`` engine, named in :data:`ingestd.store.vectors.engines.ENGINES`.
SPEC = ServerEngine()
