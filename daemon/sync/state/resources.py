"""The state a sync engine owns: the manifest, the vector store and the embedding cache.

The manifest opens at once (it is needed by every command); the vector store and the
embedding cache open on first use, so a no-op ``resync`` never imports qdrant-client or
touches the cache. One thread owns these handles (embedded Qdrant is not thread-safe).

A writer's resources keep the state dir's clean-close record
(:mod:`~ingestd.daemon.sync.state.clean_close`): it is read and removed before anything is
written, tells which collections are as the last clean close left them (counted from
the record, with no point-by-point check), and is written again when they close
cleanly. A reader's resources (``read_only``) open the manifest and the store to read
only, and leave the record alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.daemon.config import Config
from ingestd.daemon.statedir import (
    StatePaths,
    engine_folder_names,
    folder_bytes,
    secure_state_dir,
)
from ingestd.daemon.sync.state.clean_close import (
    Proven,
    Sealed,
    check_record,
    manifest_identity,
    manifest_unchanged,
    new_record,
    read_record,
    remove_record,
    write_record,
)
from ingestd.daemon.sync.state.healing_cache import HealingCache
from ingestd.store.manifest.manifest import Manifest, sqlite_url
from ingestd.store.vectors.base import VectorStore
from ingestd.store.vectors.spec import EngineSpec

if TYPE_CHECKING:
    from ingestd.store.vectors.edge.edge_guard import MappedFiles

__all__ = ["Resources"]

logger = logging.getLogger(__name__)

#: Seconds between two measurements of the state dir's folders when the manifest is a
#: ``manifest.url`` database (no file tells that it changed).
MEASURE_EVERY_S = 60


class Resources:
    """Opens and closes the manifest, the vector store and the embedding cache.

    Args:
        cfg: validated config (``manifest``, ``qdrant``, ``embedding`` sections).
        state_dir: the state dir (created 0700 when missing).
        now: the clock of the manifest, seconds since the epoch.
        store: a vector store to use instead of the configured one (tests, faults).
        cache_path: the embedding cache file, instead of ``<state dir>/embeddings.db``.
        read_only: a reader's resources: the manifest and the store are opened to read
            only, nothing is created, and the clean-close record is left alone.

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
        read_only: bool = False,
    ) -> None:
        self.cfg = cfg
        self.read_only = read_only
        self.paths: StatePaths = cfg.paths(state_dir)
        self._proven: Proven | None = None  # what the record proves (writers only)
        self._existed: set[str] = set()  # physical collections when the store was opened
        self._checked: set[str] = set()  # physical collections checked point by point
        manifest_file = None if cfg.manifest.url else self.paths.manifest
        self._record = read_record(self.paths.root)
        if not read_only:
            # created 0700 when missing; the store folders too when configured elsewhere,
            # and every file inside them unless a clean close of this version vouches
            folders = self.paths.engine_folders().values()
            secure_state_dir(self.paths.root, folders, inside=self._record is None)
        #: the manifest is as the recorded clean close left it (read before it is opened)
        self._manifest_unchanged = manifest_unchanged(self._record, manifest_file)
        if not read_only:
            remove_record(self.paths.root)  # before anything is written
        self.manifest = Manifest(
            cfg.manifest.url or sqlite_url(self.paths.manifest), now=now, read_only=read_only
        )
        if self._manifest_unchanged and self._record is not None:
            self.manifest.seed_counts(self._record.counts)  # nobody counts them again
        #: (manifest identity, folder -> bytes) last measured: at first the record's, when
        #: the manifest was as it left it before it opened (opening makes its ``-wal``)
        recorded = self._record.folder_bytes if self._record is not None else {}
        self._sizes: tuple[object, dict[str, int]] = (
            manifest_identity(manifest_file),
            dict(recorded) if self._manifest_unchanged else {},
        )
        self._opened_store = False  # the store was opened by this process
        self._store = store
        self._given_store = store
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
            ingestd.daemon.sync.state.ownership.StoreOwnedError: another state dir owns the
                embedded store.
        """
        if self._store is None:
            from ingestd.store.vectors.engines import embedded, open_store

            q = self.cfg.qdrant
            folders = self.paths.engine_folders()
            in_state_dir = embedded(q)
            if in_state_dir:
                from ingestd.daemon.sync.state.ownership import owner_problem

                for folder in folders.values():  # before anything in it is touched
                    problem = owner_problem(folder, self.paths.root)
                    if problem is not None:
                        raise problem
                if not self.read_only:
                    self._check_record()  # before the store's files change
            self._store = open_store(q, folders, read_only=self.read_only)
            self._opened_store = True
            if in_state_dir and not self.read_only:
                from ingestd.daemon.sync.state.ownership import claim_store

                for folder in folders.values():
                    claim_store(folder, self.paths.root)
        return self._store

    def folder_bytes(self) -> dict[str, int]:
        """Bytes each folder of the state dir takes (:func:`~ingestd.daemon.statedir.folder_bytes`).

        Measured again only when the manifest's file changed since the last measurement
        (every write to the store, a git mirror or a site's pages is followed by one):
        a ``status`` poll while nothing changed walks no folder. The first figures are
        those of the clean-close record read at start, when the manifest is as it left
        it. With a ``manifest.url`` database they are measured again at most once a
        minute (:data:`MEASURE_EVERY_S`).
        """
        file = None if self.cfg.manifest.url else self.paths.manifest
        key: object = manifest_identity(file) if file else int(time.monotonic() // MEASURE_EVERY_S)
        if self._sizes[0] != key or not self._sizes[1]:
            self._sizes = (key, folder_bytes(self.paths.root))
        return dict(self._sizes[1])

    # -- the clean-close record ----------------------------------------------------------------

    def _sealing(self) -> tuple[str, EngineSpec, Path] | None:
        """``(engine, spec, folder)`` of an embedded store whose close is recorded.

        ``None`` for a server, a store given by the caller, a reader, while collections
        move between engines, and for an engine whose every update is durable (nothing
        to prove: it is never checked point by point, and it is counted from its files).
        """
        from ingestd.store.vectors.engines import embedded, engine_spec

        if self.read_only or not embedded(self.cfg.qdrant) or self._given_store is not None:
            return None

        engine, previous = self.engine()
        spec = engine_spec(engine)
        if previous is not None or spec.durable_updates:
            return None
        return engine, spec, self.paths.engine_folder(engine)

    def _check_record(self) -> Proven:
        """What the record read at start proves (read from the files before the store opens)."""
        if self._proven is None:
            self._proven = Proven()
            sealing = self._sealing()
            if sealing is not None:
                engine, spec, folder = sealing
                manifest = None if self.cfg.manifest.url else self.paths.manifest
                self._proven = check_record(
                    self._record, manifest, {engine: folder}, engines={engine}
                )
                # read before the manifest was opened (opening it creates its -wal)
                self._proven.manifest_unchanged = self._manifest_unchanged
                self._existed = set(spec.physicals(folder))
                for (_, physical), change in sorted(self._proven.changed.items()):
                    logger.warning(
                        "vector store %s changed since ingestd last closed it (%s): checking "
                        "it point by point",
                        physical,
                        change,
                    )
        return self._proven

    def physical_of(self, collection: str) -> str | None:
        """The physical collection behind ``collection`` (read from the files when unopened)."""
        if self._store is not None:
            return self._store.layout(collection).physical
        sealing = self._sealing()
        if sealing is None:
            return None
        _, spec, folder = sealing
        return spec.physical_of(folder, collection)

    def proven(self, collection: str) -> bool:
        """Whether ``collection``'s points need no point-by-point check in this process.

        True when the store's updates are durable (see :meth:`durable_updates`); else
        when its physical collection was created or checked by this process, or is as
        the last clean close left it with the manifest unchanged since (the record).
        """
        if self.durable_updates():
            return True
        sealing = self._sealing()
        if sealing is None:
            return False
        proven = self._check_record()
        physical = self.physical_of(collection)
        if physical is None:
            return False
        key = (sealing[0], physical)
        created = self._store is not None and physical not in self._existed
        return (
            physical in self._checked
            or created
            or (proven.manifest_unchanged and key in proven.held)
        )

    def held_points(self, collection: str) -> int | None:
        """Points of ``collection`` as the record proves them, while the store is unopened.

        ``None`` when the store is open or the record proves nothing of the collection.
        """
        if self._store is not None:
            return None
        sealing = self._sealing()
        if sealing is None:
            return None
        physical = self.physical_of(collection)
        if physical is None:
            return None
        return self._check_record().held.get((sealing[0], physical))

    def mark_checked(self, collection: str) -> None:
        """Record that ``collection`` was checked point by point (the close may vouch for it)."""
        physical = self.physical_of(collection)
        if physical is not None:
            self._checked.add(physical)

    def _vouched(self, store: VectorStore | None) -> dict[str, int]:
        """Physical collection -> points, for each the clean close being made vouches for.

        Counted by ``store`` when a write went to it (or it was checked or created here),
        else carried from the record read at start: a collection nobody wrote to is not
        loaded just to be counted.
        """
        sealing = self._sealing()
        if sealing is None:
            return {}
        engine, spec, folder = sealing
        proven = self._check_record()
        written = self._written(store)
        out: dict[str, int] = {}
        physicals = spec.physicals(folder) if store is None else store.collections()
        for physical in physicals:
            key = (engine, physical)
            was_proven = proven.manifest_unchanged and key in proven.held
            counted = physical in written or physical in self._checked
            if store is not None and (counted or physical not in self._existed):
                out[physical] = int(store.point_count(physical))
            elif was_proven:
                out[physical] = proven.held[key]
        return out

    def _write_record(self, points: dict[str, int], counts: dict[str, dict[str, int]]) -> None:
        """Write the clean-close record: the manifest now, its counts, each vouched proof."""
        record = new_record(None if self.cfg.manifest.url else self.paths.manifest)
        record.counts = counts
        sealing = self._sealing()
        if sealing is not None:
            engine, spec, folder = sealing
            record.folders[engine] = str(folder)
            sealed = record.collections.setdefault(engine, {})
            for physical, n in sorted(points.items()):
                proof = spec.proof(folder, physical)
                if proof is not None:
                    sealed[physical] = Sealed(n, proof)
        # a store this process never opened is as measured; the other folders are walked
        stores = set() if self._opened_store else set(engine_folder_names())
        carried = {f: n for f, n in self._sizes[1].items() if f in stores}
        record.folder_bytes = folder_bytes(self.paths.root, carried)
        write_record(self.paths.root, record)

    def open_collections(self, collections: list[str]) -> None:
        """Open the store, and each of ``collections`` that may be damaged.

        So a damaged or locked one stops ``ingestd run`` with its one line before it
        serves. One whose files the clean-close record vouches for is left to the first
        job that uses it (a Qdrant Edge shard of a million points takes seconds to load).

        Raises:
            ingestd.store.vectors.base.StoreUnavailableError: locked or unreachable.
            ingestd.store.common.damage.StateDamagedError: a collection's files are damaged.
        """
        vouched = {c for c in collections if self.held_points(c) is not None}
        store = self.store  # the store itself opens now: its aliases, its owner
        for collection in collections:
            if collection not in vouched and store.has_collection(collection):
                store.point_count(collection)

    def engine(self) -> tuple[str, str | None]:
        """The store's engine and, while collections move to it, the one they leave.

        Decided from the state dir's files, without opening the store (see
        :func:`ingestd.store.vectors.engines.placed_engine`); ``("server", None)`` for
        a Qdrant server.
        """
        from ingestd.store.vectors.engines import placed_engine

        return placed_engine(self.cfg.qdrant, self.paths.engine_folders())

    def durable_updates(self) -> bool:
        """Whether every write the store acknowledged survives a crash (see ``EngineSpec``).

        A Qdrant server keeps its own write-ahead log and recovers it itself: ``True``.
        """
        from ingestd.store.vectors.engines import engine_spec

        engine, previous = self.engine()
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
            from ingestd.store.vectors.edge.edge_guard import MappedFiles

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
        (:class:`~ingestd.daemon.sync.state.healing_cache.HealingCache`): never a fatal error.
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

    def take_over(self, old: Resources) -> None:
        """Go on from ``old``'s resources (same state dir), which close without a record.

        A reload builds the new engine while the old one runs, then closes the old one:
        the old one must not record a clean close (the new one writes on), and the new
        one knows what the old one proved and which collections it wrote to (they are
        counted again at the new one's close), and the counts its manifest kept.
        """
        self._record = old._record
        self._manifest_unchanged = old._manifest_unchanged
        self._sizes = old._sizes
        self._opened_store = self._opened_store or old._opened_store
        self._proven = old._check_record() if not old.read_only else None
        self._existed = set(old._existed)
        self._checked = set(old._checked) | old._written(old._store)
        self.manifest.seed_counts(old.manifest.count_cache.known())

    @staticmethod
    def _written(store: VectorStore | None) -> set[str]:
        """The physical collections writes went to since ``store`` was opened."""
        out: set[str] = set()
        if store is not None:
            for name in getattr(store, "written", ()):
                physical = store.layout(name).physical
                out.update([physical] if physical else [])
        return out

    def close(self, *, record: bool = True) -> None:
        """Close the store, the cache and the manifest; a writer's records the clean close.

        The record is written last, and only when the store closed without an error.
        ``record``: ``False`` for an engine a reload replaced (its successor writes on).
        """
        clean = record and not self.read_only and self._given_store is None
        points: dict[str, int] = {}
        counts: dict[str, dict[str, int]] = {}
        try:
            store, self._store = self._store, None
            if clean:
                try:
                    points = self._vouched(store)
                except Exception:  # nothing to vouch for: the next start checks
                    logger.debug("counting the store for its clean close failed", exc_info=True)
                    points = {}
            if store is not None:
                try:
                    store.close()
                except BaseException:
                    clean = False
                    raise
                clean = clean and not getattr(store, "close_failed", False)
            if clean:  # what each source holds: kept counts, only changed sources counted
                try:
                    counts = {
                        s["name"]: self.manifest.counts(s["name"]) for s in self.manifest.sources()
                    }
                except Exception:  # a manifest that cannot be counted proves nothing
                    logger.debug("counting the manifest for its clean close failed", exc_info=True)
                    clean = False
        finally:
            if self._cache is not None:
                self._cache.close()
                self._cache = None
            self.manifest.close()
        if clean:
            try:
                self._write_record(points, counts)
            except OSError as exc:  # a read-only or full disk: the next start checks
                logger.warning("could not record the clean close of %s: %s", self.paths.root, exc)
