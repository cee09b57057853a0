"""Damage of an embedded store, read from its files: neither engine is imported or opened.

``ingestd status`` must answer in a few tenths of a second and import neither
qdrant-client nor Qdrant Edge, yet say when the store that ``search``, ``resync``,
``verify`` and ``run`` would fail to open is damaged. The checks read the small files
each engine reads first when it opens a store, and reject what it rejects:

* qdrant-client's local mode (``<state>/qdrant``): ``meta.json`` is JSON naming the
  collections, and each ``collection/<name>/storage.sqlite`` is a SQLite database
  whose ``points`` table can be counted (the count reads every page of the table,
  milliseconds for 10,000 points, the way the engine's start-up count does);
* Qdrant Edge (``<state>/edge``): the aliases file is JSON of the known format; in
  each shard, ``edge_config.json``, ``wal/first-index`` and every
  ``segments/*/segment.json`` are JSON, and every write-ahead-log segment
  (``wal/open-*``, ``wal/closed-*``) starts with its ``wal`` header (the engine
  refuses "Illegal segment header" and empty segments).

Damage deeper in a file (a torn vector page) is found when the engine opens it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.vectors.edge_shards import ALIASES_FILE, COLLECTIONS_DIR, FORMAT

__all__ = ["edge_files_damage", "embedded_store_damage", "local_files_damage"]

_PART = "vector store"
_WAL_MAGIC = b"wal"


def _json_damage(file: Path) -> StateDamagedError | None:
    """Damage of a JSON file that must parse (a missing one is none)."""
    try:
        json.loads(file.read_bytes())
    except FileNotFoundError:
        return None
    except OSError:
        return None  # unreadable: an error of its own when the store is opened
    except ValueError as exc:
        return StateDamagedError(file, _PART, f"{type(exc).__name__}: {exc}")
    return None


def local_files_damage(path: Path) -> StateDamagedError | None:
    """Damage of the files of a qdrant-client local-mode store at ``path``, or ``None``."""
    meta = path / "meta.json"
    damage = _json_damage(meta)
    if damage is not None:
        return damage
    for db in sorted(path.glob("collection/*/storage.sqlite")):
        try:
            conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
            try:
                conn.execute("SELECT count(*) FROM points").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            if is_sqlite_damage(exc):  # else locked, or no table yet: not damage
                return StateDamagedError(db, _PART, str(exc))
    return None


def edge_files_damage(path: Path) -> StateDamagedError | None:
    """Damage of the files of a Qdrant Edge store at ``path``, or ``None``."""
    aliases = path / ALIASES_FILE
    try:
        data = json.loads(aliases.read_bytes())
        if data.get("format") != FORMAT or not isinstance(data.get("aliases"), dict):
            raise ValueError(f"unknown format {data.get('format')!r}")
    except (FileNotFoundError, PermissionError):
        pass
    except (ValueError, AttributeError) as exc:
        return StateDamagedError(aliases, _PART, f"{type(exc).__name__}: {exc}")
    for shard in sorted(p for p in (path / COLLECTIONS_DIR).glob("*") if p.is_dir()):
        for file in (
            shard / "edge_config.json",
            shard / "wal" / "first-index",
            *sorted(shard.glob("segments/*/segment.json")),
        ):
            damage = _json_damage(file)
            if damage is not None:
                return damage
        for seg in sorted(shard.glob("wal/*")):
            if not seg.name.startswith(("open-", "closed-")):
                continue
            try:
                with seg.open("rb") as f:
                    head = f.read(len(_WAL_MAGIC))
            except OSError:
                continue
            if head != _WAL_MAGIC:
                detail = "an empty" if not head else "an illegal header in a"
                return StateDamagedError(seg, _PART, f"{detail} write-ahead-log segment")
    return None


def embedded_store_damage(local_path: Path, edge_path: Path) -> StateDamagedError | None:
    """The first damage found in the files of either embedded store, or ``None``.

    Args:
        local_path: the local-mode store's folder (``<state dir>/qdrant``).
        edge_path: the Edge store's folder (``<state dir>/edge``).
    """
    if local_path.is_dir():
        damage = local_files_damage(local_path)
        if damage is not None:
            return damage
    if edge_path.is_dir():
        return edge_files_damage(edge_path)
    return None
