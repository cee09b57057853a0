"""Does the store still hold what the manifest records? Asked before answering from it.

A store can lose data while nothing runs: its folder or a collection's folder deleted,
an alias left naming a missing version, a segment deleted, an id tracker cut short. Its
remaining files are sound, so nothing fails to open, and a search would answer "no
results", or from half the index, with exit status 0. So ``ingestd status`` and a
search without a daemon first compare the points the store holds, per collection,
with the committed points the manifest records (a count each, milliseconds; ``status``
reads it from files, see :func:`check_state`), and
:class:`~ingestd.store.common.damage.StoreLostError` says what was lost and that
``ingestd resync`` writes it again. ``status`` also reads every page of a SQLite
manifest (``PRAGMA quick_check``) that changed since the last clean close: a damaged
page that no count reads is found there.

A running daemon does not need this: it checks its store at start-up
(:func:`~ingestd.daemon.sync.healing.repair.check_store`), and mid-write the store may hold
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
    from ingestd.daemon.sync.state.clean_close import Proven
    from ingestd.store.manifest.reader import ManifestReader
    from ingestd.store.vectors.base import VectorStore

__all__ = ["check_holdings", "check_state", "recorded_points", "unrecorded_points"]

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


def check_state(cfg: Config | None, state_dir: Path, manifest: ManifestReader) -> list[str]:
    """``status`` without a daemon: the manifest's pages, then what the store holds.

    Reads files only, under the readers' shared lock
    (:class:`~ingestd.daemon.wire.statelock.ReadLock`): it never opens the store and
    writes nothing, so a ``status`` poll never keeps a writer out (it fails fast and
    skips these checks while a writer holds the state dir: that writer checks the store
    itself). The points of a collection come from the clean-close record when the
    store's files still match it (:mod:`~ingestd.daemon.sync.state.clean_close`), else from
    the files where the engine can count them (local mode); a collection of Qdrant Edge
    that no clean close recorded (the last writer was killed) is not counted, and a note
    says so. The manifest's pages are read (``PRAGMA quick_check``) unless the record
    proves the manifest unchanged since that close.

    Returns:
        Notes on what could not be checked (one line each).

    Raises:
        StateDamagedError: a page of the manifest is damaged.
        StoreLostError: the store lost points, or a collection's files changed since the
            last clean close (see the module docstring).
    """
    from ingestd.daemon.statedir import StatePaths
    from ingestd.daemon.sync.state.clean_close import check_record, read_record
    from ingestd.daemon.wire.statelock import ReadLock, StateLockedError
    from ingestd.store.vectors.engines import embedded

    paths = cfg.paths(state_dir) if cfg is not None else StatePaths(state_dir)
    url = cfg is not None and bool(cfg.manifest.url)
    lock = ReadLock(state_dir)
    try:
        lock.acquire()
    except StateLockedError:  # a writer works on the state: it checks the store itself
        _check_pages(manifest, paths.manifest)
        return []
    try:
        folders = paths.engine_folders()
        proven = check_record(read_record(state_dir), None if url else paths.manifest, folders)
        if not proven.manifest_unchanged:
            _check_pages(manifest, paths.manifest)
        recorded = recorded_points(manifest)
        if not recorded or (cfg is not None and not embedded(cfg.qdrant)):
            return []
        return _check_counts(cfg, state_dir, folders, recorded, proven)
    finally:
        lock.release()


def _check_pages(manifest: ManifestReader, path: Path) -> None:
    problem = manifest.integrity_problem()
    if problem is not None:
        raise StateDamagedError(path, "manifest", problem)


def _check_counts(
    cfg: Config | None,
    state_dir: Path,
    folders: Mapping[str, Path],
    recorded: Mapping[str, int],
    proven: Proven,
) -> list[str]:
    """Compare each collection's points with the manifest's, from files (:func:`check_state`)."""
    from ingestd.store.vectors.engines import choose_engine, engine_spec

    configured = cfg.qdrant.engine if cfg is not None else None
    engine, previous = choose_engine(configured, folders)
    if previous is not None:
        return [f"collections are moving from {previous} to {engine}: points not counted"]
    spec = engine_spec(engine)
    folder = folders[engine]
    if not spec.holds_store(folder):
        collection, n = sorted(recorded.items())[0]
        raise StoreLostError(collection, 0, n, state_dir)
    notes = []
    for collection, n in sorted(recorded.items()):
        physical = spec.physical_of(folder, collection)
        key = (engine, physical or "")
        if key in proven.changed:
            raise StoreLostError(collection, None, n, state_dir, proven.changed[key])
        held = proven.held.get(key)
        if held is None:
            held = spec.point_count(folder, collection) if physical is not None else 0
        if held is None:
            notes.append(
                f"collection {collection}: points not counted (the store was not closed "
                "cleanly: the next `ingestd run` or `resync` checks it point by point)"
            )
        elif held < n:
            raise StoreLostError(collection, held, n, state_dir)
    return notes


def unrecorded_points(cfg: Config | None, state_dir: Path) -> dict[str, int | None]:
    """Points the embedded store holds per physical collection, for a manifest recording none.

    A manifest that was deleted (or never written while the store was) makes every
    point the store holds unknown to ingestd: ``status`` says so rather than "nothing
    indexed". Cheap like :func:`check_state`: the counts come from the clean-close
    record while a collection's files match it, else from the files where the engine
    can count them (local mode); the store is never opened and no point is read.

    Args:
        cfg: the config (its state paths), or ``None`` for the state dir's defaults.
        state_dir: the state dir.

    Returns:
        Physical collection -> points (``None``: there are points the engine cannot
        count without opening the store); collections holding none are left out. Empty
        for a server store (``qdrant.url``), which the state dir does not hold.
    """
    from ingestd.daemon.statedir import StatePaths
    from ingestd.daemon.sync.state.clean_close import check_record, read_record
    from ingestd.store.vectors.engines import embedded, engine_spec

    if cfg is not None and not embedded(cfg.qdrant):
        return {}
    paths = cfg.paths(state_dir) if cfg is not None else StatePaths(state_dir)
    folders = paths.engine_folders()
    proven = check_record(read_record(state_dir), None, folders)
    out: dict[str, int | None] = {}
    for engine, folder in folders.items():
        spec = engine_spec(engine)
        if not spec.holds_store(folder):
            continue
        for physical in spec.physicals(folder):
            held = proven.held.get((engine, physical))
            if held is None:
                held = spec.point_count(folder, physical)
            if held != 0:
                out[physical] = held
    return out
