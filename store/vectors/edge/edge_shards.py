"""Qdrant Edge's side of collections: one shard folder per version, aliases in one file.

Qdrant Edge (``qdrant-edge-py``) runs Qdrant's own engine in-process; its unit is a
*shard*, one folder, with no collections and no aliases. :class:`EdgeCollections`
gives it both, with the guarantees of Qdrant's aliases:

* every physical collection (a version ``<name>__v<N>``) is a shard folder
  ``<root>/collections/<physical>/``, holding the unnamed dense vector (cosine), the
  sparse vector :data:`~ingestd.store.search.sparse.SPARSE_VECTOR` with ``Modifier.Idf``, and
  keyword payload indexes on ``source``, ``path`` and
  :data:`~ingestd.store.search.query.PATH_KEY`;
* the aliases live in ``<root>/edge.json``, written to a temporary file, flushed to
  disk and renamed over the old one (POSIX ``rename`` is atomic): a reader sees the
  old or the new aliases, and a crash during a switch leaves one of them current;
* one process opens a store: each shard takes a lock on its write-ahead log, and the
  state dir's locks keep a second writer, or a writer and a reader, apart before that;
* a reader's store (``read_only``) creates, converts and indexes nothing; its writes
  raise (what the engine writes when it loads: :mod:`~ingestd.store.vectors.edge.edge_engine`).

Shards open on first use and stay open until :meth:`EdgeCollections.close`.

The shard configuration (:func:`shard_config`) keeps memory bounded at a million
points. New points land in the shard's appendable segment, searched exactly on their
float32 vectors; after every :data:`OPTIMIZE_EVERY` points written,
:meth:`EdgeCollections.optimize` turns the appendable segment into an immutable one
whose vectors stay on disk (mmap, read on demand) beside an int8 copy in memory (a
quarter of the size). A search scans ALL the int8 vectors of such a segment (no HNSW
graph: ``m = 0``) and rescores the best ``limit x`` :data:`OVERSAMPLING` candidates
from the float32 vectors, so scores are exact and only the candidate set is
approximate (recall@10 1.000 against an exact float scan at 100,000 and 1,000,000
clustered points, ``bench/store.py``). A store below :data:`OPTIMIZE_EVERY` points
written by one process stays exact. Shards made by earlier versions take this
configuration when they are opened (the engine rewrites their config file; the data
is converted by the next :meth:`~EdgeCollections.optimize`).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.search.query import HIDDEN_KEYS, INDEXED_KEYS
from ingestd.store.search.sparse import SPARSE_VECTOR
from ingestd.store.vectors.base import (
    Layout,
    StoreReadOnlyError,
    StoreUnavailableError,
    ensure_collection,
    version_of,
)
from ingestd.store.vectors.edge.edge_guard import Guarded, mapped_damage
from ingestd.store.vectors.routing import RoutedWrites

__all__ = [
    "ALIASES_FILE",
    "COLLECTIONS_DIR",
    "FORMAT",
    "OPTIMIZE_EVERY",
    "OVERSAMPLING",
    "VACUUM_EVERY",
    "EdgeCollections",
    "add_indexes",
    "is_edge_store",
    "shard_config",
]

logger = logging.getLogger(__name__)

#: The file holding the aliases (and the store's format version), in the store's folder.
ALIASES_FILE = "edge.json"
#: The folder holding one shard folder per physical collection.
COLLECTIONS_DIR = "collections"
#: Version of the folder layout above, recorded in :data:`ALIASES_FILE`.
FORMAT = 1
#: Payload keys with a boolean index (excluded from searches by ``IsEmptyCondition``):
#: without one, excluding parents (:data:`~ingestd.store.search.query.PARENT_KEY`) from
#: a search reads every point's payload (360 ms at 100,000 points here, against 15 ms
#: with it).
BOOL_KEYS = HIDDEN_KEYS
#: Points written to a shard (by this process) between two :meth:`EdgeCollections.optimize`
#: calls: the appendable segment, whose files and indexes are all in memory, stays
#: below about this size. Optimising 100,000 points peaked at 1.4 GB RSS here.
OPTIMIZE_EVERY = 50_000
#: Points deleted or overwritten in a shard (by this process) between two
#: :meth:`EdgeCollections.optimize` calls. Until a segment is optimised, what a deletion
#: or a rewrite left behind stays in memory: under rewrite churn (one 12,000-character
#: file rewritten per second) the daemon grew ~15 MB a minute until 50,000 points were
#: written. Vacuumed every 2,000, an in-process replay of that churn stays level
#: (115-148 MB RSS over 90,000 points written, against a climb to 335 MB), at no cost
#: in time (``bench/soak.py`` measures the daemon).
VACUUM_EVERY = 2_000
#: Largest segment the optimiser makes by merging, in KB of vectors (~60,000 points of
#: 384 dimensions): merging segments into one of 300,000 points peaked at 3.4 GB RSS
#: and took 150 s, so the optimised segments are left as they are.
MAX_SEGMENT_KB = 120_000
#: An appendable segment above this size of float32 vectors, in KB, is made immutable
#: (int8 copy in memory, originals on disk) by :meth:`EdgeCollections.optimize`
#: (~13,000 points of 384 dimensions).
INDEXING_THRESHOLD_KB = 20_000
#: Candidates rescored from the float32 vectors per result, in segments searched on
#: their int8 copy: with 1 (the engine's default) recall@10 was 0.94 at 100,000
#: points, with 2 and more 1.000 (``bench/store.py`` measures it).
OVERSAMPLING = 4.0


def shard_config(dim: int, *, sparse: bool = True) -> Any:
    """The ``EdgeConfig`` of a shard of ``dim``-dimensional vectors (with or without BM25).

    Dense vectors: cosine, on disk (``Memory.Cold``: mmap, read when scored), int8
    scalar quantization kept in memory, no HNSW graph (``m = 0``: every search scans
    the int8 vectors in full and rescores from the originals), segments made immutable
    above :data:`INDEXING_THRESHOLD_KB`. Sparse index, payload and id tracker of
    immutable segments on disk too. Memory at 1,000,000 points: ~0.4 GB of int8
    vectors plus what searches touch.
    """
    from qdrant_edge import (
        Distance,
        EdgeConfig,
        EdgeOptimizersConfig,
        EdgeSparseVectorParams,
        EdgeVectorParams,
        HnswIndexConfig,
        Memory,
        Modifier,
        ScalarQuantizationConfig,
        ScalarType,
    )

    sparse_vectors = (
        {SPARSE_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf, memory=Memory.Cold)}
        if sparse
        else None
    )
    return EdgeConfig(
        vectors=EdgeVectorParams(size=dim, distance=Distance.Cosine, memory=Memory.Cold),
        sparse_vectors=sparse_vectors,
        quantization_config=ScalarQuantizationConfig(
            ScalarType.Int8, quantile=0.99, memory=Memory.Pinned
        ),
        hnsw_config=HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10, payload_m=0),
        optimizers=EdgeOptimizersConfig(
            indexing_threshold=INDEXING_THRESHOLD_KB, max_segment_size=MAX_SEGMENT_KB
        ),
        payload_memory=Memory.Cold,
        id_tracker_memory=Memory.Cold,
    )


def _release_memory() -> None:
    """Give freed heap back to the system (glibc keeps it after an optimisation)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def is_edge_store(path: str | Path) -> bool:
    """Whether ``path`` holds a store of this layout (its :data:`ALIASES_FILE`)."""
    return (Path(path) / ALIASES_FILE).is_file()


class EdgeCollections(RoutedWrites):
    """Collections, versions and aliases of an embedded Qdrant Edge store.

    Args:
        path: the store's folder (created 0700 by the caller's umask when missing).
        read_only: a reader's store: nothing is created, its write methods raise
            :class:`~ingestd.store.vectors.base.StoreReadOnlyError`.
        engine: the name of the engine whose store this is: its spec's
            :attr:`~ingestd.store.vectors.spec.EngineSpec.name`, which the spec passes
            when it opens the store (no name is written here).

    Raises:
        StoreUnavailableError: ``qdrant-edge-py`` is not installed.
        ingestd.store.common.damage.StateDamagedError: :data:`ALIASES_FILE` is damaged.
    """

    def __init__(self, path: str | Path, *, engine: str, read_only: bool = False) -> None:
        try:
            import qdrant_edge  # noqa: F401
        except ImportError as exc:  # pragma: no cover - the wheel is a dependency
            raise StoreUnavailableError(
                "qdrant.engine is edge but qdrant-edge-py is not installed "
                "(`pip install qdrant-edge-py`, or set qdrant.engine: local)"
            ) from exc
        super().__init__()
        self.engine = engine
        self.path = Path(path)
        self.read_only = read_only
        if not read_only:
            (self.path / COLLECTIONS_DIR).mkdir(parents=True, exist_ok=True)
        self._aliases = self._read_aliases()
        self._shards: dict[str, Any] = {}
        self._layouts: dict[str, Layout] = {}
        #: points upserted per physical collection since its last optimisation
        self._written: dict[str, int] = {}
        #: points deleted or overwritten per physical collection since then
        self._churned: dict[str, int] = {}
        self.close_failed = False  #: a shard failed to flush or close (see :meth:`close`)

    # -- the aliases file ----------------------------------------------------------------

    def _read_aliases(self) -> dict[str, str]:
        file = self.path / ALIASES_FILE
        if not file.exists():
            if not self.read_only:
                self._write_aliases({})
            return {}
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            aliases = data["aliases"]
            if data.get("format") != FORMAT or not isinstance(aliases, dict):
                raise ValueError(f"unknown format {data.get('format')!r}")
            return {str(k): str(v) for k, v in aliases.items()}
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise StateDamagedError(file, "vector store", f"{type(exc).__name__}: {exc}") from None

    def writable(self) -> None:
        """Raise :class:`StoreReadOnlyError` for a reader's store."""
        if self.read_only:
            raise StoreReadOnlyError(f"the vector store at {self.path} was opened to read only")

    def _write_aliases(self, aliases: dict[str, str]) -> None:
        """Replace :data:`ALIASES_FILE` atomically (temporary file, fsync, rename, fsync)."""
        self.writable()
        file = self.path / ALIASES_FILE
        tmp = file.with_name(file.name + ".tmp")
        data = json.dumps({"format": FORMAT, "aliases": aliases}, indent=1, sort_keys=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, file)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- shards ----------------------------------------------------------------------------

    def shard_path(self, physical: str) -> Path:
        """The folder of physical collection ``physical``."""
        return self.path / COLLECTIONS_DIR / physical

    def shard(self, physical: str) -> Any:
        """The open ``EdgeShard`` of ``physical`` (opened on first use).

        Raises:
            KeyError: no such physical collection.
            ingestd.store.common.damage.StateDamagedError: its files cannot be loaded.
            StoreUnavailableError: another process holds it.
        """
        shard = self._shards.get(physical)
        if shard is not None:
            return shard
        folder = self.shard_path(physical)
        if not folder.is_dir():
            raise KeyError(f"collection {physical!r} not found")
        cut = mapped_damage(folder)  # before the engine maps it: past a cut end is SIGBUS
        if cut is not None:
            raise cut
        from qdrant_edge import EdgeShard

        config = None if self.read_only else self.load_config(physical)
        try:
            shard = EdgeShard.load(str(folder), config)
        except Exception as exc:
            text = str(exc)
            if "lock" in text.lower() or "in use" in text.lower():
                raise StoreUnavailableError(
                    f"the embedded vector store at {self.path} is in use by another process "
                    "(is `ingestd run` active on this state dir?)"
                ) from exc
            raise StateDamagedError(folder, "vector store", f"{type(exc).__name__}: {exc}") from exc
        guarded = Guarded(shard, folder)
        if not self.read_only:
            _add_bool_indexes(guarded)
        self._shards[physical] = guarded
        return guarded

    def load_config(self, physical: str) -> Any:
        """:func:`shard_config` for the shard as it is (``None``: its config is unreadable).

        Given at load, the engine checks it against the shard's vectors and rewrites the
        shard's config file: shards made by earlier versions take the current one.
        """
        try:
            cfg = self._config(physical)
        except StateDamagedError:
            return None  # the load names the damage
        if not isinstance(cfg.get("dim"), int):
            return None
        return shard_config(cfg["dim"], sparse=SPARSE_VECTOR in cfg["sparse_vectors"])

    def optimize(self, physical: str) -> bool:
        """Make the appendable segment of ``physical`` immutable if it is big enough.

        Blocking, and it holds the GIL throughout (qdrant-edge-py 0.9.0): about 20 s per
        100,000 points here. Then flushes and returns freed memory to the system.

        Returns:
            Whether a segment was rewritten.
        """
        self.writable()
        shard = self.shard(physical)
        started = time.monotonic()
        self._written[physical] = self._churned[physical] = 0
        changed = bool(shard.optimize())
        shard.flush()
        _release_memory()
        if changed:
            logger.info("vector store %s optimised in %.1f s", physical, time.monotonic() - started)
        return changed

    def churned(self, physical: str, n: int) -> None:
        """Count ``n`` points of ``physical`` deleted or rewritten (vacuum: ``VACUUM_EVERY``)."""
        churned = self._churned.get(physical, 0) + n
        self._churned[physical] = churned
        if churned >= VACUUM_EVERY:
            self.optimize(physical)

    def collections(self) -> list[str]:
        """Every physical collection of the store."""
        root = self.path / COLLECTIONS_DIR
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def physical_of(self, name: str) -> str:
        """The physical collection that ``name`` (an alias or a physical name) is.

        Raises:
            KeyError: nothing stands behind ``name``.
        """
        physical = self._aliases.get(name, name)
        if not self.shard_path(physical).is_dir():
            raise KeyError(f"collection {name!r} not found")
        return physical

    # -- layout and versions -------------------------------------------------------------

    def layout(self, name: str) -> Layout:
        """What stands behind collection name ``name`` (cached until it changes here)."""
        if name in self._layouts:
            return self._layouts[name]
        try:
            physical = self.physical_of(name)
        except KeyError:
            return Layout(name, None)
        cfg = self._config(physical)
        out = Layout(
            name,
            physical,
            aliased=name in self._aliases,
            sparse=SPARSE_VECTOR in (cfg.get("sparse_vectors") or {}),
            dim=cfg.get("dim"),
            engine=self.engine,
        )
        self._layouts[name] = out
        return out

    def _config(self, physical: str) -> dict[str, Any]:
        """The dense dimension and sparse vectors of a shard, from its config file."""
        file = self.shard_path(physical) / "edge_config.json"
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StateDamagedError(file, "vector store", f"{type(exc).__name__}: {exc}") from None
        vectors = raw.get("vectors") or {}
        dense = vectors.get("") if isinstance(vectors, dict) else None
        return {
            "dim": dense.get("size") if isinstance(dense, dict) else None,
            "sparse_vectors": raw.get("sparse_vectors") or {},
        }

    def forget_layout(self, name: str) -> None:
        """Read what stands behind ``name`` again at its next use."""
        self._layouts.pop(name, None)

    def aliases(self) -> dict[str, str]:
        """Every alias of the store: alias -> physical collection."""
        return dict(self._aliases)

    def versions(self, name: str) -> dict[int, str]:
        """Physical collections that are versions of ``name``: version -> physical name."""
        out = {}
        for physical in self.collections():
            version = version_of(physical, name)
            if version is not None:
                out[version] = physical
        return out

    def create_physical(self, physical: str, dim: int) -> None:
        """Create physical collection ``physical`` with the current layout, if missing.

        :func:`shard_config` (dense vectors of ``dim`` dimensions, cosine; the sparse BM25
        vector with ``Modifier.Idf``), keyword payload indexes on
        :data:`~ingestd.store.search.query.INDEXED_KEYS`
        and boolean ones on :data:`BOOL_KEYS`, on disk in immutable segments.
        """
        from qdrant_edge import EdgeShard

        self.writable()
        folder = self.shard_path(physical)
        if folder.is_dir() and (folder / "edge_config.json").exists():
            return
        shard = Guarded(EdgeShard.create(str(folder), shard_config(dim)), folder)
        add_indexes(shard)
        shard.flush()
        self._shards[physical] = shard

    def point_alias(self, name: str, physical: str) -> None:
        """Make ``name`` an alias of ``physical`` (one atomic replace of the aliases file)."""
        aliases = {**self._aliases, name: physical}
        self._write_aliases(aliases)
        self._aliases = aliases
        self._layouts.pop(name, None)

    def ensure_collection(self, name: str, dim: int) -> Layout:
        """See :func:`ingestd.store.vectors.base.ensure_collection`."""
        return ensure_collection(self, name, dim)

    def has_collection(self, name: str) -> bool:
        """Whether collection (or alias) ``name`` exists."""
        try:
            self.physical_of(name)
        except KeyError:
            return False
        return True

    def drop_collection(self, name: str) -> None:
        """Delete a whole physical collection (its folder), and aliases that name it."""
        self.writable()
        shard = self._shards.pop(name, None)
        self._written.pop(name, None)
        self._churned.pop(name, None)
        if shard is not None:
            shard.close()
        stale = {a: p for a, p in self._aliases.items() if p != name}
        if stale != self._aliases:
            self._write_aliases(stale)
            self._aliases = stale
        shutil.rmtree(self.shard_path(name), ignore_errors=True)
        self._layouts.clear()

    def close(self) -> None:
        """Flush and close every open shard (releases their locks).

        A reader's store does not flush (the engine flushes a shard it drops). A shard
        that fails to flush or close sets :attr:`close_failed`: the close was not clean.
        """
        for physical, shard in list(self._shards.items()):
            try:
                if not self.read_only:
                    shard.flush()
                shard.close()
            except Exception as exc:
                self.close_failed = True
                logger.warning("vector store %s did not close cleanly: %s", physical, exc)
        self._shards.clear()


def add_indexes(shard: Any) -> None:
    """Give a new shard its payload indexes (keyword and boolean, on disk).

    Keyword indexes on :data:`~ingestd.store.search.query.INDEXED_KEYS`, boolean ones on
    :data:`BOOL_KEYS`.
    """
    from qdrant_edge import BoolIndexParams, KeywordIndexParams, Memory, UpdateOperation

    for key in INDEXED_KEYS:
        params = KeywordIndexParams(memory=Memory.Cold)
        shard.update(UpdateOperation.create_field_index(key, params))
    for key in BOOL_KEYS:
        bool_params = BoolIndexParams(memory=Memory.Cold)
        shard.update(UpdateOperation.create_field_index(key, bool_params))


def _add_bool_indexes(shard: Any) -> None:
    """Give a shard made by an earlier version the boolean indexes it lacks."""
    from qdrant_edge import PayloadSchemaType, UpdateOperation

    have = set(getattr(shard.info(), "payload_schema", None) or {})
    for key in BOOL_KEYS:
        if key not in have:
            shard.update(UpdateOperation.create_field_index(key, PayloadSchemaType.Bool))
