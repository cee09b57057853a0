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
from ingestd.daemon.sources.local import LocalSourceConfig
from ingestd.daemon.statedir import StatePaths
from ingestd.store.common.damage import StateDamagedError
from ingestd.store.manifest.manifest import Manifest, sqlite_url

__all__ = [
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


def set_aside_damaged(cfg: Config, state_dir: Path) -> list[str]:
    """Move a damaged manifest and embedded store aside (``resync --rebuild``, step one).

    Each embedded engine's store is checked by opening it whole (its spec's
    :meth:`~ingestd.store.vectors.spec.EngineSpec.deep_damage`). The caller holds the
    state-dir lock. What is moved is renamed, never deleted; the
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
    from ingestd.store.vectors.engines import embedded, engine_specs

    if embedded(cfg.qdrant):
        paths = cfg.paths(state_dir)
        for spec in engine_specs():
            folder = paths.engine_folder(spec.name)
            if not folder.exists():
                continue
            damage = spec.deep_damage(folder)
            if damage is not None:
                moved = set_aside(folder)
                notes.append(f"{damage}; moved aside to {moved}")
    return notes


def sources_in_store(cfg: Config, state_dir: Path) -> tuple[SourceConfig, ...]:
    """Sources named after their root (given as PATH) found in an embedded store.

    What ``resync --rebuild`` syncs when neither a config nor PATH arguments name the
    sources and the manifest that recorded them is gone.
    """
    from ingestd.store.vectors.engines import embedded, open_embedded

    if not embedded(cfg.qdrant):
        return ()

    store = open_embedded(cfg.qdrant.engine, cfg.paths(state_dir).engine_folders())
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
        LocalSourceConfig(name=s, root=Path(s), collection=c)
        for s, c in sorted(found.items())
        if os.path.isabs(s) and Path(s).is_dir()
    )
