"""The ``local`` engine: qdrant-client's local mode, a pure-Python engine in-process.

The fallback where the Qdrant Edge wheel cannot be installed, and the engine of stores
made before Edge. Its store is :class:`~ingestd.store.vectors.client.qdrant.QdrantStore` with a
``path`` (imported when opened); its folder (``<state dir>/qdrant``, ``qdrant.path``)
holds qdrant-client's layout (``qdrant_client/local/qdrant_local.py`` and
``persistence.py``): ``meta.json`` naming the collections and aliases, and
``collection/<name>/storage.sqlite`` with one row per point in table ``points``. The
engine holds every point in memory.

Damage read from the files (:meth:`LocalEngine.files_damage`): ``meta.json`` is JSON,
and each ``storage.sqlite`` is a SQLite database whose ``points`` table can be counted
(the count reads every page of the table, milliseconds for 10,000 points, the way the
engine's start-up count does).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.vectors.base import QDRANT_CLIENT_EXTRA
from ingestd.store.vectors.spec import STORE_PART, EngineSpec, json_damage

if TYPE_CHECKING:
    from ingestd.store.search.conditions import Conditions
    from ingestd.store.vectors.base import VectorStore

__all__ = ["SPEC", "LocalEngine"]


def _read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)


class LocalEngine(EngineSpec):
    """The spec of qdrant-client's local mode (see the module docstring)."""

    name = "local"
    folder = "qdrant"
    config_key = "path"
    collections_dir = "collection"
    package = "qdrant_client"
    install_hint = QDRANT_CLIENT_EXTRA
    durable_updates = True  # each write is a SQLite transaction

    def holds_store(self, path: Path) -> bool:
        """Whether ``path`` holds a local-mode store with a collection.

        A local-mode store without collections holds nothing worth keeping: a new
        store is then made with the preferred engine.
        """
        return self.holds_collections(path)

    def holds_collections(self, path: Path) -> bool:
        """Whether ``meta.json`` in ``path`` names at least one collection."""
        try:
            meta = json.loads((path / "meta.json").read_text())
            return bool(meta.get("collections"))
        except (OSError, ValueError, AttributeError):
            return False

    def open(self, path: Path, *, read_only: bool = False) -> VectorStore:
        """The local-mode store ``path`` (a ``QdrantStore``).

        ``read_only``: a reader's store. Local mode loads every point from its SQLite
        files and writes nothing when it opens and closes a store (it locks ``.lock``
        without writing it): it is read-only in effect.

        Raises:
            ingestd.store.vectors.base.StoreUnavailableError: another process holds it.
            Exception: whatever qdrant-client raises for damaged files (see
                :meth:`open_damage`).
        """
        from ingestd.store.vectors.client.qdrant import QdrantStore

        return QdrantStore(path=str(path), engine=self.name, read_only=read_only)

    def open_damage(self, path: Path, exc: BaseException) -> StateDamagedError | None:
        """The damaged file of the store at ``path`` that made opening it raise ``exc``.

        qdrant-client reports damage as whatever its readers raise: SQLite's errors, a
        ``ValueError`` of JSON, an unpickling error of a point record. The file named
        is ``meta.json`` when it does not parse, else the first collection database
        that fails SQLite's ``quick_check``, else the store's folder.

        Returns:
            ``None`` when ``exc`` is no sign of damage (a permission error, a full disk).
        """
        import pickle

        if isinstance(exc, OSError) or not (
            is_sqlite_damage(exc)
            or isinstance(
                exc, ValueError | KeyError | TypeError | EOFError | pickle.UnpicklingError
            )
        ):
            return None
        meta = path / "meta.json"
        try:
            json.loads(meta.read_text())
        except ValueError as bad:
            return StateDamagedError(meta, STORE_PART, f"{type(bad).__name__}: {bad}")
        except OSError:
            pass
        for db in sorted(path.glob("collection/*/storage.sqlite")):
            try:
                conn = _read_only(db)
                try:
                    rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
                finally:
                    conn.close()
            except sqlite3.DatabaseError as bad:
                return StateDamagedError(db, STORE_PART, str(bad))
            if rows != ["ok"]:
                return StateDamagedError(db, STORE_PART, "; ".join(map(str, rows[:3])))
        return StateDamagedError(path, STORE_PART, f"{type(exc).__name__}: {exc}")

    def files_damage(self, path: Path) -> StateDamagedError | None:
        """The first damage in the files of the local-mode store at ``path``, or ``None``."""
        damage = json_damage(path / "meta.json")
        if damage is not None:
            return damage
        for db in sorted(path.glob("collection/*/storage.sqlite")):
            try:
                conn = _read_only(db)
                try:
                    conn.execute("SELECT count(*) FROM points").fetchone()
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                if is_sqlite_damage(exc):  # else locked, or no table yet: not damage
                    return StateDamagedError(db, STORE_PART, str(exc))
        return None

    def deep_damage(self, path: Path) -> StateDamagedError | None:
        """Open the store at ``path`` (every point is read) and close it; its damage.

        Raises:
            Exception: what opening raised when it is no sign of damage.
        """
        try:
            self.open(path).close()
        except Exception as exc:
            damage = self.open_damage(path, exc)
            if damage is None:
                raise
            return damage
        return None

    def memory_bytes(self, store_bytes: int) -> int:
        """Local mode holds every point in memory: about the store's size on disk."""
        return store_bytes

    def physical_of(self, path: Path, name: str) -> str | None:
        """The collection behind ``name``: its alias's target in ``meta.json``, or itself."""
        try:
            meta = json.loads((path / "meta.json").read_text())
            physical = str(meta.get("aliases", {}).get(name, name))
            return physical if physical in meta["collections"] else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def point_count(self, path: Path, collection: str) -> int | None:
        """Points of ``collection``: the rows of its SQLite file, counted unopened.

        Opening a local-mode store loads every point into memory (about a second for
        12,000 points here, as long as importing qdrant-client); counting the rows of
        the collection's SQLite file takes milliseconds.

        Args:
            path: the store's folder (``<state dir>/qdrant``).
            collection: a collection name or alias.

        Returns:
            The number of points; 0 when the store or the collection does not exist;
            ``None`` when the files do not have the expected layout (open the store and
            count there instead).
        """
        if not path.exists():
            return 0
        try:
            meta = json.loads((path / "meta.json").read_text())
            name = meta.get("aliases", {}).get(collection, collection)
            if name not in meta["collections"]:
                return 0
            db = path / "collection" / name / "storage.sqlite"
            if not db.is_file():
                return None
            conn = _read_only(db)
            try:
                return int(conn.execute("SELECT count(*) FROM points").fetchone()[0])
            finally:
                conn.close()
        except (OSError, ValueError, KeyError, TypeError, AttributeError, sqlite3.Error):
            return None

    def filter(self, conditions: Conditions | None) -> Any:
        """qdrant-client's ``Filter`` (:func:`ingestd.store.search.query.client_filter`)."""
        from ingestd.store.search.query import client_filter

        return client_filter(conditions)


#: The spec of the ``local`` engine, named in :data:`ingestd.store.vectors.engines.ENGINES`.
SPEC = LocalEngine()
