"""Damaged state heals, or says exactly how: the checks run before every scan.

The state has two halves that describe each other: the manifest records every point
id the store should hold, and every point's payload carries what the manifest records
for it (source, path, ``doc_hash``, ``rule_fingerprint``, chunk hash, ordinal and
offsets). So either half can be rebuilt from the other, and then brought up to date
with the files by an ordinary sync.

* :func:`check_store` compares, before a scan, the number of points the store holds in
  a collection with the number the manifest records (a cheap count: the embedded
  store's rows are counted in its SQLite file without opening the store, see
  :func:`~ingestd.store.vectors.embedded_point_count`). When they differ (or crashed
  writes left pending rows) it compares ids: points the manifest lost are adopted
  from their payload, and documents whose points the store lost are written again
  through the writer, with vectors from the embedding cache (re-embedded when the
  cache evicted them).
* :class:`HealingCache` moves a damaged ``embeddings.db`` aside and starts an empty
  one: it is a cache, never a reason to stop.
* :func:`set_aside_damaged` is the first step of ``ingestd resync --rebuild``: a
  damaged ``manifest.db`` or embedded store is renamed (``*.damaged-<time>``), never
  deleted, and the resync that follows rebuilds it from the other half, then the files.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.store.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.manifest import AdoptedDocument, ChunkRow, Manifest, sqlite_url

from .config import Config, SourceConfig

if TYPE_CHECKING:
    from .engine import Engine

__all__ = [
    "HealingCache",
    "StoreCheck",
    "check_store",
    "count_points",
    "damaged_store_error",
    "set_aside",
    "set_aside_damaged",
    "sources_in_store",
]

logger = logging.getLogger(__name__)

#: Payload keys a point needs to be adopted into the manifest.
_ADOPT_KEYS = ("source", "path", "doc_hash", "chunk_hash", "ordinal", "start_char", "end_char")


@dataclass
class StoreCheck:
    """What :func:`check_store` found and did for one collection.

    Attributes:
        collection: the collection name.
        stored: points the store held before the check.
        committed: committed point rows the manifest held.
        pending: pending point rows (left by an interrupted write).
        adopted: points the manifest lost, recorded again from their payload.
        deleted: unusable points deleted (no payload to adopt them by).
        missing: committed points the store lost.
        rewritten: documents written again to restore them.
        elsewhere: documents of sources not configured here whose points are missing.
    """

    collection: str
    stored: int = 0
    committed: int = 0
    pending: int = 0
    adopted: int = 0
    deleted: int = 0
    missing: int = 0
    rewritten: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)

    def repairs(self) -> dict[str, int]:
        """Non-zero counts of what was repaired: ``adopted``, ``deleted``, ``rewritten``."""
        out = {"adopted": self.adopted, "deleted": self.deleted, "rewritten": self.missing}
        return {k: v for k, v in out.items() if v}

    @property
    def counts_agree(self) -> bool:
        """Whether the cheap count proved nothing is missing or unknown."""
        return self.pending == 0 and self.stored == self.committed


def count_points(engine: Engine, collection: str, sources: list[str]) -> int:
    """Points of ``collection`` (of ``sources`` on a server), as cheaply as possible.

    An embedded store that is not open yet is counted from its files; a server
    counts the points of the manifest's sources only (another state dir may write
    other sources into the same collection).
    """
    if not engine.store_open and not engine.cfg.qdrant.url:
        from ingestd.store.vectors import embedded_point_count

        n = embedded_point_count(engine.qdrant_path, collection)
        if n is not None:
            return n
    store = engine.store
    if engine.cfg.qdrant.url:
        return int(store.point_count(collection, sources=sources))
    return int(store.point_count(collection))


def check_store(engine: Engine, source: str) -> StoreCheck:
    """Compare the store with the manifest for ``source``'s collection and repair.

    Runs before every scan (start-up, ``resync``, periodic rescans): the counts cost a
    few milliseconds; the comparison by id and the repair run only when they differ.

    Returns:
        What was found and done.

    Raises:
        SyncInterrupted: a stop was requested while documents were written again.
    """
    collection = engine.sources[source].collection
    manifest = engine.manifest
    sources = [s["name"] for s in manifest.sources() if s["collection"] == collection]
    chk = StoreCheck(collection)
    chk.committed, chk.pending = manifest.collection_counts(collection)
    chk.stored = count_points(engine, collection, sources)
    if chk.counts_agree:
        return chk
    if chk.stored == 0:
        engine.forget_collection_check(collection)  # dropped: created again when written
    if chk.pending == 0:
        logger.warning(
            "collection %s: the store holds %d points, the manifest records %d; repairing",
            collection,
            chk.stored,
            chk.committed,
        )
    index = manifest.point_index(collection)
    stored: dict[str, dict[str, Any]] = {}
    if chk.stored:
        keep = None if not engine.cfg.qdrant.url else set(sources)
        for pid, payload in engine.store.scroll(collection):
            if keep is None or payload.get("source") in keep:
                stored[pid] = payload
    _adopt(engine, chk, {pid: p for pid, p in stored.items() if pid not in index})
    # a document with pending ids was interrupted mid-write: its stale committed ids
    # may be deleted already, and the scan writes it again anyway
    in_flight = {(src, path) for src, path, pending in index.values() if pending}
    lost: dict[str, set[str]] = {}
    for pid, (src, path, pending) in index.items():
        if not pending and pid not in stored and (src, path) not in in_flight:
            chk.missing += 1
            lost.setdefault(src, set()).add(path)
    for src, paths in sorted(lost.items()):
        if src in engine.sources:
            chk.rewritten.extend(_rewrite(engine, src, paths))
        else:
            chk.elsewhere.extend(sorted(paths))
            logger.warning(
                "source %s (not configured here) lost %d documents' points from the store; "
                "resync it with its own configuration",
                src,
                len(paths),
            )
    if chk.adopted or chk.deleted or chk.missing:
        logger.warning(
            "collection %s repaired: %d points re-recorded in the manifest, %d unusable "
            "points deleted, %d lost points written again (%d documents)",
            collection,
            chk.adopted,
            chk.deleted,
            chk.missing,
            len(chk.rewritten),
        )
    return chk


def _adopt(engine: Engine, chk: StoreCheck, unknown: dict[str, dict[str, Any]]) -> None:
    """Record points the manifest does not know, from their payload (or delete them)."""
    if not unknown:
        return
    by_doc: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    unusable: list[str] = []
    for pid, p in unknown.items():
        if all(p.get(k) is not None for k in _ADOPT_KEYS):
            by_doc.setdefault((str(p["source"]), str(p["path"])), []).append((pid, p))
        else:
            unusable.append(pid)
    recorded = {s["name"] for s in engine.manifest.sources()}
    per_source: dict[str, dict[str, AdoptedDocument]] = {}
    for (src, path), points in sorted(by_doc.items()):
        if src not in recorded:
            # a source the manifest lost: named after its root when given as a PATH
            root = src if os.path.isabs(src) else ""
            engine.manifest.ensure_source(src, root, chk.collection)
            recorded.add(src)
            logger.warning("source %s re-recorded from the store's points", src)
        first = points[0][1]
        keys = ("doc_hash", "rule_fingerprint", "git_commit")
        consistent = all(all(p.get(k) == first.get(k) for k in keys) for _, p in points)
        rows = tuple(_chunk_row(pid, p) for pid, p in points)
        per_source.setdefault(src, {})[path] = AdoptedDocument(
            str(first["doc_hash"]),
            str(first.get("rule_fingerprint") or ""),
            rows,
            first.get("git_commit"),
            consistent,
        )
        chk.adopted += len(points)
    for src, docs in per_source.items():
        engine.manifest.adopt(src, docs)
    if unusable:
        engine.store.delete(chk.collection, unusable)
        chk.deleted = len(unusable)


def _chunk_row(pid: str, p: dict[str, Any]) -> ChunkRow:
    return ChunkRow(
        pid, str(p["chunk_hash"]), int(p["ordinal"]), int(p["start_char"]), int(p["end_char"])
    )


def _rewrite(engine: Engine, source: str, paths: set[str]) -> list[str]:
    """Write documents again whose points the store lost; returns their paths.

    The writer finds the lost points when it refreshes their payload and upserts them
    whole, with every vector and field a new point gets. Documents whose file is gone
    are left to the scan that follows (it deletes them, under the mass-deletion guard).
    """
    from .engine import Plan

    root = Path(engine.sources[source].root)
    plan = Plan(source)
    plan.index = sorted(p for p in paths if (root / p).is_file())
    if plan.index:
        res = engine.apply(plan)
        if res.interrupted:
            from .documents import SyncInterrupted

            raise SyncInterrupted("stop requested")
    return plan.index


# -- the embedding cache ----------------------------------------------------------------------


class HealingCache:
    """An :class:`~ingestd.store.embedder.EmbeddingCache` that survives damage to its file.

    A damaged file (at open or at any later read or write) is moved aside to
    ``embeddings.db.damaged-<time>`` with a warning, and an empty cache takes its
    place; the call that met the damage is answered as by an empty cache (a lookup
    finds nothing, a store is dropped). Vectors are only ever re-embedded.

    Args:
        path: the cache file.
        max_entries: most vectors kept (see ``EmbeddingCache``).
        open_cache: builds the underlying cache (tests inject faults).
    """

    def __init__(
        self, path: Path, max_entries: int, open_cache: Callable[[Path, int], Any] | None = None
    ) -> None:
        self.path = Path(path)
        self.max_entries = max_entries
        self._open = open_cache or _open_embedding_cache
        self._lock = threading.Lock()
        self._inner: Any = None
        self._inner = self._opened()

    def _opened(self) -> Any:
        try:
            return self._open(self.path, self.max_entries)
        except Exception as exc:
            if not is_sqlite_damage(exc):
                raise
            self._set_aside(exc)
            return self._open(self.path, self.max_entries)

    def _set_aside(self, exc: BaseException) -> None:
        if self._inner is not None:
            try:
                self._inner.close()
            except Exception:
                logger.debug("closing the damaged embedding cache failed", exc_info=True)
            self._inner = None
        moved = set_aside(self.path)
        logger.warning(
            "the embedding cache %s is damaged (%s); moved aside to %s and started empty "
            "(vectors are embedded again as needed)",
            self.path,
            exc,
            moved,
        )

    def _healing(self, name: str, *args: Any, empty: Any = None) -> Any:
        with self._lock:
            try:
                return getattr(self._inner, name)(*args)
            except Exception as exc:
                if not is_sqlite_damage(exc):
                    raise
                self._set_aside(exc)
                self._inner = self._opened()
                return empty

    def get_many(self, model: str, hashes: Any) -> dict[str, Any]:
        """See ``EmbeddingCache.get_many``; nothing is found in a damaged file."""
        out = self._healing("get_many", model, hashes, empty={})
        return dict(out)

    def put_many(self, model: str, items: dict[str, Any]) -> None:
        """See ``EmbeddingCache.put_many``; dropped when the file is damaged."""
        self._healing("put_many", model, items)

    def close(self) -> None:
        """Close the underlying cache."""
        if self._inner is not None:
            self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _open_embedding_cache(path: Path, max_entries: int) -> Any:
    from ingestd.store.embedding_cache import EmbeddingCache

    return EmbeddingCache(path, max_entries)


# -- damaged files --------------------------------------------------------------------------


def set_aside(path: Path) -> Path:
    """Rename ``path`` (and SQLite's ``-wal``/``-shm`` beside it) to ``<path>.damaged-<time>``.

    Returns:
        The new path.
    """
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    if path.exists():
        os.replace(path, target)
    for suffix in ("-wal", "-shm", "-journal"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target


def damaged_store_error(path: Path, exc: BaseException) -> StateDamagedError | None:
    """The :class:`StateDamagedError` naming the damaged file of an embedded store.

    Args:
        path: the embedded store's folder.
        exc: what opening it raised.

    Returns:
        ``None`` when ``exc`` is no sign of damage (a permission error, a full disk).
    """
    import json
    import pickle
    import sqlite3

    if isinstance(exc, OSError) or not (
        is_sqlite_damage(exc)
        or isinstance(exc, ValueError | KeyError | TypeError | EOFError | pickle.UnpicklingError)
    ):
        return None
    meta = path / "meta.json"
    try:
        json.loads(meta.read_text())
    except ValueError as bad:
        return StateDamagedError(meta, "vector store", f"{type(bad).__name__}: {bad}")
    except OSError:
        pass
    for db in sorted(path.glob("collection/*/storage.sqlite")):
        try:
            conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
            try:
                rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
            finally:
                conn.close()
        except sqlite3.DatabaseError as bad:
            return StateDamagedError(db, "vector store", str(bad))
        if rows != ["ok"]:
            return StateDamagedError(db, "vector store", "; ".join(map(str, rows[:3])))
    return StateDamagedError(path, "vector store", f"{type(exc).__name__}: {exc}")


def set_aside_damaged(cfg: Config, state_dir: Path) -> list[str]:
    """Move a damaged manifest and embedded store aside (``resync --rebuild``, step one).

    The caller holds the state-dir lock. What is moved is renamed, never deleted; the
    resync that follows rebuilds it from the other half of the state, then the files.

    Returns:
        One message per part moved aside.
    """
    notes: list[str] = []
    if not cfg.manifest.url:
        db = state_dir / "manifest.db"
        problem: str | None = None
        if db.exists():
            try:
                m = Manifest(sqlite_url(db))
            except StateDamagedError as exc:
                problem = exc.detail
            else:
                try:
                    problem = m.integrity_problem()
                finally:
                    m.close()
        if problem is not None:
            moved = set_aside(db)
            notes.append(f"the manifest {db} is damaged ({problem}); moved aside to {moved}")
    if not cfg.qdrant.url:
        path = Path(cfg.qdrant.path or state_dir / "qdrant")
        if path.exists():
            from ingestd.store.vectors import QdrantStore

            try:
                QdrantStore(path=str(path)).close()
            except Exception as exc:
                damage = damaged_store_error(path, exc)
                if damage is None:
                    raise
                moved = set_aside(path)
                notes.append(f"{damage}; moved aside to {moved}")
    return notes


def sources_in_store(cfg: Config, state_dir: Path) -> tuple[SourceConfig, ...]:
    """Sources named after their root (given as PATH) found in an embedded store.

    What ``resync --rebuild`` syncs when neither a config nor PATH arguments name the
    sources and the manifest that recorded them is gone.
    """
    if cfg.qdrant.url:
        return ()
    from ingestd.store.vectors import QdrantStore

    store = QdrantStore(path=str(cfg.qdrant.path or state_dir / "qdrant"))
    try:
        names = [c.name for c in store.client.get_collections().collections]
        aliases = {a.collection_name: a.alias_name for a in store.client.get_aliases().aliases}
        found: dict[str, str] = {}
        for name in names:
            for _, payload in store.scroll(name):
                src = payload.get("source")
                if isinstance(src, str) and src not in found:
                    found[src] = aliases.get(name, name)
    finally:
        store.close()
    return tuple(
        SourceConfig(name=s, root=Path(s), collection=c)
        for s, c in sorted(found.items())
        if os.path.isabs(s) and Path(s).is_dir()
    )
