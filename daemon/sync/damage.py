"""Damaged state files: moved aside (never deleted), named in one line with the fix.

:func:`set_aside_damaged` is the first step of ``ingestd resync --rebuild``: a damaged
``manifest.db`` or embedded store is renamed (``*.damaged-<time>``), and the resync that
follows rebuilds it from the other half of the state, then the files.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ingestd.daemon.config import Config, SourceConfig
from ingestd.daemon.statedir import StatePaths
from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.manifest.manifest import Manifest, sqlite_url

__all__ = [
    "damaged_store_error",
    "set_aside",
    "set_aside_damaged",
    "sources_in_store",
]

logger = logging.getLogger(__name__)


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
        db = StatePaths(state_dir).manifest
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
        paths = cfg.paths(state_dir)
        if paths.qdrant.exists():
            from ingestd.store.vectors.qdrant import QdrantStore

            try:
                QdrantStore(path=str(paths.qdrant)).close()
            except Exception as exc:
                damage = damaged_store_error(paths.qdrant, exc)
                if damage is None:
                    raise
                moved = set_aside(paths.qdrant)
                notes.append(f"{damage}; moved aside to {moved}")
        if paths.edge.exists():
            edge_damage = _edge_damage(paths.edge)
            if edge_damage is not None:
                moved = set_aside(paths.edge)
                notes.append(f"{edge_damage}; moved aside to {moved}")
    return notes


def _edge_damage(path: Path) -> StateDamagedError | None:
    """The damage of an Edge store at ``path`` (its aliases file or a shard), or ``None``."""
    from ingestd.store.vectors.edge import EdgeStore

    try:
        store = EdgeStore(path)
    except StateDamagedError as exc:
        return exc
    try:
        for physical in store.collections():
            store.shard(physical)
        for physical in store.aliases().values():
            store.physical_of(physical)
    except StateDamagedError as exc:
        return exc
    except KeyError as exc:
        return StateDamagedError(path, "vector store", f"an alias names a missing {exc}")
    finally:
        store.close()
    return None


def sources_in_store(cfg: Config, state_dir: Path) -> tuple[SourceConfig, ...]:
    """Sources named after their root (given as PATH) found in an embedded store.

    What ``resync --rebuild`` syncs when neither a config nor PATH arguments name the
    sources and the manifest that recorded them is gone.
    """
    if cfg.qdrant.url:
        return ()
    from ingestd.store.vectors.engines import open_embedded

    paths = cfg.paths(state_dir)
    store = open_embedded(cfg.qdrant.engine, paths.qdrant, paths.edge)
    try:
        aliases = {physical: alias for alias, physical in store.aliases().items()}
        found: dict[str, str] = {}
        for name in store.collections():
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
