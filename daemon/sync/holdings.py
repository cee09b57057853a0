"""Does the store still hold what the manifest records? Asked before answering from it.

A store can lose data while nothing runs: its folder or a collection's folder deleted,
an alias left naming a missing version, a segment deleted, an id tracker cut short. Its
remaining files are sound, so nothing fails to open, and a search would answer "no
results", or from half the index, with exit status 0. So ``ingestd status`` and a
search without a daemon first compare the points the store holds, per collection,
with the committed points the manifest records (a count each, milliseconds), and
:class:`~ingestd.store.common.damage.StoreLostError` says what was lost and that
``ingestd resync`` writes it again. ``status`` also reads every page of a SQLite
manifest (``PRAGMA quick_check``): a damaged page that no count reads is found there.

A running daemon does not need this: it checks its store point by point at start-up
(:func:`~ingestd.daemon.sync.repair.check_store`), and mid-write the store may hold
fewer points than the manifest's committed rows for a moment (a document's stale
points deleted, its new rows not yet committed).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.store.common.damage import StateDamagedError, StoreLostError

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.store.manifest.reader import ManifestReader
    from ingestd.store.vectors.base import VectorStore

__all__ = ["check_holdings", "check_state", "recorded_points"]

logger = logging.getLogger(__name__)


def recorded_points(manifest: ManifestReader) -> dict[str, int]:
    """Committed points the manifest records, per collection (collections with none left out)."""
    out: dict[str, int] = {}
    for s in manifest.sources():
        n = manifest.counts(s["name"])["chunks"]
        if n:
            out[s["collection"]] = out.get(s["collection"], 0) + n
    return out


def check_holdings(
    store: VectorStore, recorded: Mapping[str, int], state_dir: Path | None = None
) -> None:
    """Raise when the store holds fewer points of a collection than the manifest records.

    Args:
        store: the open store.
        recorded: collection -> committed points (:func:`recorded_points`).
        state_dir: named in the fix.

    Raises:
        StoreLostError: the first collection, by name, that lost points.
    """
    for collection, n in sorted(recorded.items()):
        held = store.point_count(collection) if store.has_collection(collection) else 0
        if held < n:
            raise StoreLostError(collection, held, n, state_dir)


def check_state(cfg: Config | None, state_dir: Path, manifest: ManifestReader) -> None:
    """``status`` without a daemon: the manifest's pages, then what the store holds.

    The store is opened only when no other process holds the state dir (it is then
    taken for the few milliseconds of the counts); an embedded store whose folder
    holds no store at all is reported without opening anything.

    Raises:
        StateDamagedError: a page of the manifest is damaged.
        StoreLostError: the store lost points (see the module docstring).
    """
    from ingestd.daemon.statedir import StatePaths

    problem = manifest.integrity_problem()
    paths = cfg.paths(state_dir) if cfg is not None else StatePaths(state_dir)
    if problem is not None:
        raise StateDamagedError(paths.manifest, "manifest", problem)
    recorded = recorded_points(manifest)
    if not recorded or (cfg is not None and cfg.qdrant.url):
        return
    from ingestd.daemon.wire.statelock import StateLock, StateLockedError
    from ingestd.store.vectors.engines import choose_engine, engine_spec, open_embedded

    folders = paths.engine_folders()
    configured = cfg.qdrant.engine if cfg is not None else None
    engine, previous = choose_engine(configured, folders)
    spec = engine_spec(engine)
    if previous is None and not spec.holds_store(folders[engine]):
        collection, n = sorted(recorded.items())[0]
        raise StoreLostError(collection, 0, n, state_dir)
    if previous is None:  # counted from the files where the engine can (local mode)
        counted = {c: spec.point_count(folders[engine], c) for c in recorded}
        if all(v is not None for v in counted.values()):
            for collection, n in sorted(recorded.items()):
                held = counted[collection] or 0
                if held < n:
                    raise StoreLostError(collection, held, n, state_dir)
            return
    lock = StateLock(state_dir)
    try:
        lock.acquire("ingestd status")
    except StateLockedError:
        return  # another process works on the state: it checks the store itself
    try:
        store = open_embedded(configured, folders)
        try:
            check_holdings(store, recorded, state_dir)
        finally:
            store.close()
    finally:
        lock.release()
