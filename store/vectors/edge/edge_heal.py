"""Healing a Qdrant Edge shard whose write-ahead log ends before its segments.

Such a shard (see :mod:`~ingestd.store.vectors.edge.edge_wal`) loads and answers, but drops
every later update of a point written after the log's end: no error, no warning. It is
healed in place before it is used: its points (ids, dense and sparse vectors,
payloads) are copied into a new shard with the same configuration and indexes, whose
log numbers every update afresh, and the new shard takes the old one's place. The old
folder is moved aside (``<store>/damaged/<physical>-<time>``), never deleted. Nothing is
embedded again; a copy of 10,000 points takes about a second.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import TYPE_CHECKING, Any

from ingestd.store.vectors.edge.edge_shards import add_indexes
from ingestd.store.vectors.edge.edge_wal import wal_behind

if TYPE_CHECKING:
    from ingestd.store.vectors.edge.edge_shards import EdgeCollections

__all__ = ["DAMAGED_DIR", "REBUILD_DIR", "heal_torn_log"]

logger = logging.getLogger(__name__)

#: Folder of the store where a shard is rebuilt before it takes the old one's place.
REBUILD_DIR = "rebuilding"
#: Folder of the store where replaced shards are kept.
DAMAGED_DIR = "damaged"
_PAGE = 256


def heal_torn_log(store: EdgeCollections, physical: str) -> bool:
    """Rebuild shard ``physical`` of ``store`` from its points if its log ends too early.

    Call before the shard is first opened by ``store``.

    Returns:
        Whether the shard was rebuilt.

    Raises:
        Exception: whatever loading the shard or writing the new one raises (a damaged
            shard: the caller names the damage).
    """
    folder = store.shard_path(physical)
    behind = wal_behind(folder)
    if behind is None:
        return False
    last, version = behind
    logger.warning(
        "vector store %s: its write-ahead log ends at update %d but its segments hold "
        "updates up to %d (a torn log): later updates would be lost; rebuilding it from "
        "its points",
        physical,
        last,
        version,
    )
    from qdrant_edge import EdgeShard, Point, ScrollRequest, UpdateOperation

    started = time.monotonic()
    config = store.load_config(physical)
    if config is None:
        return False  # an unreadable config: loading the shard names that damage
    work = store.path / REBUILD_DIR / physical
    shutil.rmtree(work, ignore_errors=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    old = EdgeShard.load(str(folder), config)
    copied = 0
    try:
        new = EdgeShard.create(str(work), config)
        try:
            add_indexes(new)
            offset: Any = None
            while True:
                page, offset = old.scroll(
                    ScrollRequest(offset=offset, limit=_PAGE, with_payload=True, with_vector=True)
                )
                if page:
                    points = [Point(r.id, r.vector, r.payload) for r in page if r.vector]
                    new.update(UpdateOperation.upsert_points(points))
                    copied += len(points)
                if offset is None:
                    break
            new.flush()
        finally:
            new.close()
    finally:
        old.close()
    aside = store.path / DAMAGED_DIR / f"{physical}-{time.strftime('%Y%m%dT%H%M%S')}"
    aside.parent.mkdir(parents=True, exist_ok=True)
    os.replace(folder, aside)
    os.replace(work, folder)
    logger.warning(
        "vector store %s rebuilt from its %d points in %.1f s; the old shard is kept in %s",
        physical,
        copied,
        time.monotonic() - started,
        aside,
    )
    return True
