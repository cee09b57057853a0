"""The state a sync engine owns: the manifest, the vector store and the embedding cache.

The manifest opens at once (it is needed by every command); the vector store and the
embedding cache open on first use, so a no-op ``resync`` never imports qdrant-client or
touches the cache. One thread owns these handles (embedded Qdrant is not thread-safe).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.daemon.config import Config
from ingestd.daemon.statedir import StatePaths, secure_state_dir
from ingestd.daemon.sync.healing_cache import HealingCache
from ingestd.store.manifest.manifest import Manifest, sqlite_url
from ingestd.store.vectors.base import VectorStore

if TYPE_CHECKING:
    from ingestd.store.vectors.edge_guard import MappedFiles

__all__ = ["Resources"]


class Resources:
    """Opens and closes the manifest, the vector store and the embedding cache.

    Args:
        cfg: validated config (``manifest``, ``qdrant``, ``embedding`` sections).
        state_dir: the state dir (created 0700 when missing).
        now: the clock of the manifest, seconds since the epoch.
        store: a vector store to use instead of the configured one (tests, faults).
        cache_path: the embedding cache file, instead of ``<state dir>/embeddings.db``.

    Attributes:
        paths: the state dir's entries.
        manifest: the manifest, open.
        cache_path: the embedding cache file.
        on_cache_open: called with the cache when it is first opened (the profiles'
            embedders start using it).

    Raises:
        ingestd.store.common.damage.StateDamagedError: the manifest's file is damaged.
    """

    def __init__(
        self,
        cfg: Config,
        state_dir: Path,
        *,
        now: Callable[[], float],
        store: VectorStore | None = None,
        cache_path: Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.paths: StatePaths = cfg.paths(state_dir)
        # created 0700 when missing; the store folders too when configured elsewhere
        secure_state_dir(self.paths.root, self.paths.engine_folders().values())
        self.manifest = Manifest(cfg.manifest.url or sqlite_url(self.paths.manifest), now=now)
        self._store = store
        self._cache: HealingCache | None = None
        self._mapped: MappedFiles | None = None  # the open Edge store's mapped files
        self.cache_path = cache_path or self.paths.embeddings
        self.on_cache_open: Callable[[HealingCache], None] | None = None

    @property
    def store(self) -> VectorStore:
        """The vector store, opened on first use (imports its engine).

        Raises:
            ingestd.store.vectors.base.StoreUnavailableError: locked by another process.
            ingestd.store.common.damage.StateDamagedError: the embedded store's files are damaged.
            ingestd.daemon.sync.ownership.StoreOwnedError: another state dir owns the
                embedded store.
        """
        if self._store is None:
            q = self.cfg.qdrant
            if q.url:
                from ingestd.store.vectors.qdrant import QdrantStore

                self._store = QdrantStore(
                    url=q.url, api_key=os.environ.get(q.api_key_env), retry_seconds=q.retry_seconds
                )
            else:
                from ingestd.daemon.sync.ownership import claim_store, owner_problem
                from ingestd.store.vectors.engines import open_embedded

                folders = self.paths.engine_folders()
                for folder in folders.values():  # before anything in it is touched
                    problem = owner_problem(folder, self.paths.root)
                    if problem is not None:
                        raise problem
                self._store = open_embedded(q.engine, folders)
                for folder in folders.values():
                    claim_store(folder, self.paths.root)
        return self._store

    def engine(self) -> tuple[str, str | None]:
        """The store's engine and, while collections move to it, the one they leave.

        Decided from the state dir's files, without opening the store (see
        :func:`ingestd.store.vectors.engines.choose_engine`); ``("server", None)`` with
        ``qdrant.url``.
        """
        from ingestd.store.vectors.engines import SERVER, choose_engine

        if self.cfg.qdrant.url:
            return SERVER, None
        return choose_engine(self.cfg.qdrant.engine, self.paths.engine_folders())

    def durable_updates(self) -> bool:
        """Whether every write the store acknowledged survives a crash (see ``EngineSpec``).

        A Qdrant server keeps its own write-ahead log and recovers it itself: ``True``.
        """
        from ingestd.store.vectors.engines import SERVER, engine_spec

        engine, previous = self.engine()
        if engine == SERVER:
            return True
        return engine_spec(engine).durable_updates and (
            previous is None or engine_spec(previous).durable_updates
        )

    def engine_move_due(self) -> bool:
        """Whether collections are to move to the configured embedded engine (files only)."""
        return self.engine()[1] is not None

    def check_mapped_files(self) -> None:
        """Raise the damage of a file the open Edge store maps whole (a few stats).

        A payload or vector page cut under a running daemon kills it with SIGBUS at the
        next read past the cut, before any error can be raised; the daemon calls this
        before each job, so that such a cut stops it with the line that names the fix.
        Nothing is checked before the store is open, or for other engines.

        Raises:
            ingestd.store.common.damage.StateDamagedError: a mapped file is cut.
        """
        if self._store is None:
            return
        if self._mapped is None:
            from ingestd.store.vectors.edge_guard import MappedFiles

            folder = self.paths.engine_folders().get("edge")
            if folder is None or not folder.is_dir():
                return
            self._mapped = MappedFiles(folder)
        damage = self._mapped.damage()
        if damage is not None:
            raise damage

    @property
    def store_open(self) -> bool:
        """Whether the vector store has been opened."""
        return self._store is not None

    @property
    def cache(self) -> HealingCache:
        """The embedding cache (:attr:`cache_path`), opened on first use.

        A damaged file is moved aside and replaced by an empty cache, with a warning
        (:class:`~ingestd.daemon.sync.healing_cache.HealingCache`): never a fatal error.
        """
        if self._cache is None:
            self._cache = HealingCache(self.cache_path, self.cfg.embedding.cache_max_entries)
            if self.on_cache_open is not None:
                self.on_cache_open(self._cache)
        return self._cache

    @property
    def cache_open(self) -> HealingCache | None:
        """The embedding cache when it is open, else ``None`` (never opens it)."""
        return self._cache

    def close(self) -> None:
        """Close the store, the cache and the manifest."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        self.manifest.close()
