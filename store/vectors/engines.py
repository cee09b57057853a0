"""Which embedded engine holds a state dir's vectors, and opening it.

Two engines can hold a state dir's collections: Qdrant Edge (``edge``, the default for
a new store: Qdrant's own engine in-process) and qdrant-client's local mode
(``local``, a pure-Python engine that scans every point for each query). A store made
with ``local`` keeps working with ``local``; configuring ``edge`` for it moves its
collections, one collection-version build each
(:class:`~ingestd.store.vectors.switch.EngineSwitch`). Telling the engines apart reads
two small files and imports neither engine.
"""

from __future__ import annotations

import json
from pathlib import Path

from ingestd.store.vectors.base import VectorStore
from ingestd.store.vectors.edge_shards import is_edge_store

__all__ = [
    "EMBEDDED",
    "choose_engine",
    "edge_available",
    "local_has_collections",
    "open_embedded",
]

#: The embedded engines.
EMBEDDED = ("edge", "local")


def local_has_collections(path: Path) -> bool:
    """Whether ``path`` holds a local-mode store with at least one collection.

    Reads qdrant-client's ``meta.json`` (``qdrant_client/local/qdrant_local.py``).
    """
    try:
        meta = json.loads((path / "meta.json").read_text())
        return bool(meta.get("collections"))
    except (OSError, ValueError, AttributeError):
        return False


def edge_available() -> bool:
    """Whether Qdrant Edge (``qdrant-edge-py``) is installed (it has no wheel everywhere)."""
    import importlib.util

    return importlib.util.find_spec("qdrant_edge") is not None


def choose_engine(
    configured: str | None, local_path: Path, edge_path: Path
) -> tuple[str, str | None]:
    """The engine to use, and the other one when it still holds collections.

    Args:
        configured: ``qdrant.engine`` (``None``: ``edge``, unless only a local-mode
            store exists, or a new store is made where Qdrant Edge is not installed).
        local_path: the local-mode store's folder.
        edge_path: the Edge store's folder.

    Returns:
        ``(engine, previous)``; ``previous`` is the engine whose collections are to
        move to ``engine``, or ``None``.
    """
    local = local_has_collections(local_path)
    edge = is_edge_store(edge_path) and any((edge_path / "collections").glob("*"))
    if configured is None:
        fresh = not local and not is_edge_store(edge_path)
        if fresh and not edge_available():
            configured = "local"  # no Edge wheel for this machine: the fallback
        else:
            configured = "local" if local and not is_edge_store(edge_path) else "edge"
    if configured == "edge":
        return "edge", "local" if local else None
    return "local", "edge" if edge else None


def open_embedded(configured: str | None, local_path: Path, edge_path: Path) -> VectorStore:
    """Open the embedded store: one engine, or both while collections move.

    Raises:
        ingestd.store.vectors.base.StoreUnavailableError: a store is in use by another
            process, or its engine is not installed.
        ingestd.store.common.damage.StateDamagedError: an Edge store's files are damaged.
        Exception: whatever opening a damaged local-mode store raises (see
            :func:`ingestd.daemon.sync.damage.damaged_store_error`).
    """
    engine, previous = choose_engine(configured, local_path, edge_path)
    store = _open(engine, local_path, edge_path)
    if previous is None:
        return store
    from ingestd.store.vectors.switch import EngineSwitch

    try:
        old = _open(previous, local_path, edge_path)
    except BaseException:
        store.close()
        raise
    return EngineSwitch(store, old, local_path if previous == "local" else edge_path)


def _open(engine: str, local_path: Path, edge_path: Path) -> VectorStore:
    if engine == "edge":
        from ingestd.store.vectors.edge import EdgeStore

        return EdgeStore(edge_path)
    from ingestd.store.vectors.qdrant import QdrantStore

    return QdrantStore(path=str(local_path))
