"""The ``edge`` engine: Qdrant Edge (``qdrant-edge-py``), Qdrant's own engine in-process.

The default for a new store. Its store is :class:`~ingestd.store.vectors.edge.edge.EdgeStore`
(imported when opened); its folder (``<state dir>/edge``, ``qdrant.edge_path``) holds
the aliases file and one shard folder per physical collection
(:mod:`ingestd.store.vectors.edge.edge_shards`). Its shards' files are sparse: the disk they
take is their allocated blocks, a small part of their apparent size.

Damage read from the files (:meth:`EdgeEngine.files_damage`): the aliases file is JSON
of the known format; in each shard, ``edge_config.json``, ``wal/first-index`` and every
``segments/*/segment.json`` are JSON, and every write-ahead-log segment (``wal/open-*``,
``wal/closed-*``) starts with its ``wal`` header (the engine refuses "Illegal segment
header" and empty segments); every file the engine maps whole has the size its
``config.json`` says (:func:`~ingestd.store.vectors.edge.edge_guard.mapped_damage`: a
Gridstore ``page_*.dat`` its ``page_size_bytes``, a dense vector ``chunk_*.mmap`` its
``chunk_size_bytes``). A mapped file cut shorter than its mapping kills the process that
reads past its end with SIGBUS, before any error can be raised: a daemon checks these
sizes before each job. Damage deeper in a file (a torn vector page) is found when the
engine loads the shard (:meth:`EdgeEngine.deep_damage`).

What proves a shard is as a clean close left it (:meth:`EdgeEngine.proof`): where its
write-ahead log ends and the CRC-32C of its last entry (which chains through every
entry before it), the highest update number its segments applied, and the size of each
segment's id tracker (the files that say which points a segment holds). A write after
the close adds log entries; a cut log ends earlier or fails its CRC; a deleted segment
or a cut id tracker no longer matches. Loading a shard (a reader's too) rewrites some of
its files in place (the id tracker's versions, flag bitmaps: same sizes, measured with
qdrant-edge-py 0.9.0) and none of these.

Qdrant Edge has no read-only opening: ``EdgeShard.load`` takes the log's lock, saves
the shard's config and replays the log, and dropping a shard flushes it (qdrant-edge-py
0.9.0; Qdrant's Rust crate has a ``ReadOnlyEdgeShard`` that the Python bindings do not
offer). A reader (``read_only``) therefore loads a shard without a config (nothing is
converted), never heals it, adds no index, writes nothing itself, and holds the state
dir's reader lock (:mod:`ingestd.daemon.wire.statelock`), so that no writer runs and
only one reader loads the store at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.vectors.edge.edge_guard import mapped_damage
from ingestd.store.vectors.edge.edge_shards import (
    ALIASES_FILE,
    COLLECTIONS_DIR,
    FORMAT,
    is_edge_store,
)
from ingestd.store.vectors.edge.edge_wal import segments_version, wal_end
from ingestd.store.vectors.spec import STORE_PART, EngineSpec, json_damage

if TYPE_CHECKING:
    from ingestd.store.search.conditions import Conditions
    from ingestd.store.vectors.base import VectorStore

__all__ = ["SPEC", "EdgeEngine"]

_WAL_MAGIC = b"wal"
#: Names of the files of a segment that say which points it holds (its id tracker).
_ID_TRACKER = ("id_tracker.", "mutable_id_tracker.")


class EdgeEngine(EngineSpec):
    """The spec of Qdrant Edge (see the module docstring)."""

    name = "edge"
    folder = "edge"
    config_key = "edge_path"
    collections_dir = COLLECTIONS_DIR
    package = "qdrant_edge"
    install_hint = "`pip install qdrant-edge-py`, or set qdrant.engine: local"

    def holds_store(self, path: Path) -> bool:
        """Whether ``path`` holds an Edge store (its aliases file), with collections or not."""
        return is_edge_store(path)

    def holds_collections(self, path: Path) -> bool:
        """Whether ``path`` holds an Edge store with at least one shard folder."""
        return is_edge_store(path) and any((path / COLLECTIONS_DIR).glob("*"))

    def open(self, path: Path, *, read_only: bool = False) -> VectorStore:
        """The :class:`~ingestd.store.vectors.edge.edge.EdgeStore` of ``path``.

        ``read_only``: a reader's store (see the module docstring).

        Raises:
            ingestd.store.vectors.base.StoreUnavailableError: ``qdrant-edge-py`` is not installed.
            ingestd.store.common.damage.StateDamagedError: the aliases file is damaged.
        """
        from ingestd.store.vectors.edge.edge import EdgeStore

        return EdgeStore(path, read_only=read_only, engine=self.name)

    def physical_of(self, path: Path, name: str) -> str | None:
        """The shard behind ``name``: its alias's target in the aliases file, or itself."""
        try:
            aliases = json.loads((path / ALIASES_FILE).read_bytes()).get("aliases") or {}
        except (OSError, ValueError, AttributeError):
            aliases = {}
        physical = str(aliases.get(name, name))
        return physical if (path / COLLECTIONS_DIR / physical).is_dir() else None

    def proof(self, path: Path, physical: str) -> dict[str, Any] | None:
        """The shard's log end and CRC, its segments' version, its id trackers' sizes.

        See the module docstring; ``None`` when the log cannot be read.
        """
        shard = path / COLLECTIONS_DIR / physical
        end = wal_end(shard / "wal")
        if end is None:
            return None
        return {
            "wal": list(end),
            "version": segments_version(shard),
            "segments": _trackers(shard),
        }

    def proof_change(self, path: Path, physical: str, proof: Mapping[str, Any]) -> str | None:
        """What differs from ``proof`` in the shard's files (see :meth:`proof`), or ``None``."""
        shard = path / COLLECTIONS_DIR / physical
        if not shard.is_dir():
            return "its folder is missing"
        now = self.proof(path, physical)
        if now is None:
            return "its write-ahead log cannot be read"
        (last, crc), (was_last, was_crc) = now["wal"], proof.get("wal") or (None, None)
        if last != was_last or crc != was_crc:
            if isinstance(was_last, int) and last > was_last:
                return "it was written after ingestd closed it"
            return f"its write-ahead log ends at entry {last}, not at {was_last} (cut or damaged)"
        if now["version"] != proof.get("version"):
            return f"its segments hold updates up to {now['version']}, not {proof.get('version')}"
        have = now["segments"]
        for segment, sizes in sorted((proof.get("segments") or {}).items()):
            if segment not in have:
                return f"its segment {segment} is missing"
            if have[segment] != sizes:
                return f"the id tracker of its segment {segment} changed size"
        return None

    def files_damage(self, path: Path) -> StateDamagedError | None:
        """The first damage in the files of the Edge store at ``path``, or ``None``."""
        aliases = path / ALIASES_FILE
        try:
            data = json.loads(aliases.read_bytes())
            if data.get("format") != FORMAT or not isinstance(data.get("aliases"), dict):
                raise ValueError(f"unknown format {data.get('format')!r}")
        except (FileNotFoundError, PermissionError):
            pass
        except (ValueError, AttributeError) as exc:
            return StateDamagedError(aliases, STORE_PART, f"{type(exc).__name__}: {exc}")
        for shard in sorted(p for p in (path / COLLECTIONS_DIR).glob("*") if p.is_dir()):
            damage = _shard_damage(shard)
            if damage is not None:
                return damage
        return None

    def deep_damage(self, path: Path) -> StateDamagedError | None:
        """The damage of the Edge store at ``path``: its aliases file or a shard, read whole.

        Each shard is loaded and every point read, payload and vectors (for ``resync
        --rebuild``, which moves a damaged store aside; a few seconds per 100,000
        points).
        """
        from ingestd.store.vectors.edge.edge import EdgeStore

        try:
            store = EdgeStore(path, engine=self.name)
        except StateDamagedError as exc:
            return exc
        try:
            for physical in store.collections():
                store.shard(physical)
                # every payload and vector page is read: a page cut short is found here
                for _ in store.scroll(physical):
                    pass
                store.retrieve_points(physical, list(store.point_ids(physical)))
            for physical in store.aliases().values():
                store.physical_of(physical)
        except StateDamagedError as exc:
            return exc
        except KeyError as exc:
            return StateDamagedError(path, STORE_PART, f"an alias names a missing {exc}")
        finally:
            store.close()
        return None

    def filter(self, conditions: Conditions | None) -> Any:
        """Qdrant Edge's ``Filter`` (:func:`ingestd.store.vectors.edge.edge.edge_filter`)."""
        from ingestd.store.vectors.edge.edge import edge_filter

        return edge_filter(conditions)


def _trackers(shard: Path) -> dict[str, dict[str, int]]:
    """Segment folder name -> {id tracker file name -> size in bytes}."""
    out: dict[str, dict[str, int]] = {}
    for seg in (shard / "segments").glob("*"):
        if not seg.is_dir() or seg.name.startswith("."):
            continue
        sizes = {}
        for f in seg.iterdir():
            if f.name.startswith(_ID_TRACKER):
                try:
                    sizes[f.name] = f.stat().st_size
                except OSError:
                    continue
        out[seg.name] = sizes
    return out


def _shard_damage(shard: Path) -> StateDamagedError | None:
    """The first damaged file of one shard folder, or ``None``."""
    for file in (
        shard / "edge_config.json",
        shard / "wal" / "first-index",
        *sorted(shard.glob("segments/*/segment.json")),
    ):
        damage = json_damage(file)
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
            return StateDamagedError(seg, STORE_PART, f"{detail} write-ahead-log segment")
    return mapped_damage(shard)


#: The spec of the ``edge`` engine, named in :data:`ingestd.store.vectors.engines.ENGINES`.
SPEC = EdgeEngine()
