"""A read-only view of a SQLite manifest with the standard library's ``sqlite3``.

``ingestd status``, ``sources`` and the source-name checks of other commands only read a
few rows; importing SQLAlchemy and building its ORM tables costs more than the whole
answer (about 0.4 s here), so they read the tables of :mod:`ingestd.store.manifest.manifest`
directly. The answers equal :class:`~ingestd.store.manifest.manifest.Manifest`'s (a test
compares them); a manifest on another database (``manifest.url``) is read with
:class:`~ingestd.store.manifest.manifest.Manifest` itself.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.manifest.reader import SOURCE_POINTS_SQL, ManifestReader

__all__ = ["ManifestView"]


class ManifestView(ManifestReader):
    """Reads sources, counts and failures of a manifest SQLite file without writing.

    A :class:`~ingestd.store.manifest.reader.ManifestReader`, like
    :class:`~ingestd.store.manifest.manifest.Manifest`.

    Args:
        path: the ``manifest.db`` file.

    Raises:
        FileNotFoundError: ``path`` does not exist (no database is created).
        sqlite3.Error: the file is not a readable SQLite database.
    """

    def __init__(self, path: Path) -> None:
        path = Path(path)
        self.path = path
        if not path.is_file():
            raise FileNotFoundError(str(path))
        # never create the file: mode=rw (a WAL reader wants to write the -shm index),
        # else mode=ro for a reader without write permission
        uri = f"file:{quote(str(path.absolute()))}"
        self._conn = self._open(f"{uri}?mode=rw") or sqlite3.connect(f"{uri}?mode=ro", uri=True)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA busy_timeout=10000")
        self._tables = {
            r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }

    @staticmethod
    def _open(uri: str) -> sqlite3.Connection | None:
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(uri, uri=True)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
            return conn
        except sqlite3.OperationalError:
            if conn is not None:
                conn.close()
            return None

    def _execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """Run a query; a damaged page is a :class:`StateDamagedError` naming the file.

        Raises:
            ingestd.store.common.damage.StateDamagedError: SQLite reports damage.
            sqlite3.Error: any other failure.
        """
        try:
            return self._conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            if is_sqlite_damage(exc):
                raise StateDamagedError(self.path, "manifest", str(exc)) from None
            raise

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> ManifestView:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def sources(self) -> list[dict[str, Any]]:
        """Recorded sources: ``name``, ``root``, ``collection``, ``last_sync``, ``held_deletes``.

        And ``last_change_synced`` (``None`` in manifests older than that column).
        """
        if "sources" not in self._tables:
            return []
        out = []
        for r in self._execute("SELECT * FROM sources ORDER BY name"):
            row = dict(r)
            row.setdefault("held_deletes", 0)  # manifests older than these columns
            row.setdefault("last_change_synced", None)
            out.append(row)
        return out

    def counts(self, source: str) -> dict[str, int]:
        """``documents``, ``chunks``, ``pending`` and ``failed`` counts of a source.

        ``chunks`` and ``pending`` count points
        (:data:`~ingestd.store.manifest.reader.SOURCE_POINTS_SQL`).
        """
        if "documents" not in self._tables:
            return {"documents": 0, "chunks": 0, "pending": 0, "failed": 0}
        docs, failed = self._execute(
            "SELECT count(*), coalesce(sum(state = 'failed'), 0) FROM documents WHERE source = ?",
            (source,),
        ).fetchone()
        by = {bool(p): int(n) for p, n in self._execute(SOURCE_POINTS_SQL, {"source": source})}
        return {
            "documents": int(docs),
            "chunks": by.get(False, 0),
            "pending": by.get(True, 0),
            "failed": int(failed),
        }

    def integrity_problem(self) -> str | None:
        """What SQLite's ``PRAGMA quick_check`` finds wrong, or ``None`` (reads every page)."""
        try:
            rows = [str(r[0]) for r in self._conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return None if rows == ["ok"] else "; ".join(rows[:3])

    def documents_under(self, source: str, folder: str) -> int:
        """As :meth:`ingestd.store.manifest.manifest.Manifest.documents_under`."""
        if "documents" not in self._tables:
            return 0
        p = folder.strip("/") + "/"
        (n,) = self._execute(
            "SELECT count(*) FROM documents WHERE source = ? AND substr(path, 1, ?) = ?",
            (source, len(p), p),
        ).fetchone()
        return int(n)

    def failed(self, source: str) -> list[tuple[str, str]]:
        """``(path, error)`` of the documents of ``source`` that failed, by path."""
        if "documents" not in self._tables:
            return []
        rows = self._execute(
            "SELECT path, error FROM documents WHERE source = ? AND state = 'failed' ORDER BY path",
            (source,),
        )
        return [(p, e or "") for p, e in rows]

    def collection_record(self, name: str) -> dict[str, Any] | None:
        """As :meth:`ingestd.store.manifest.manifest.Manifest.collection_record`."""
        if "collections" not in self._tables:
            return None
        row = self._execute("SELECT * FROM collections WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        out = dict(row)
        for key in ("settings", "aborted"):  # NULL, or absent from older manifests
            out[key] = json.loads(out[key]) if out.get(key) else None
        return out

    def collection_build(self, name: str) -> dict[str, Any] | None:
        """As :meth:`ingestd.store.manifest.manifest.Manifest.collection_build`."""
        if "collection_builds" not in self._tables:
            return None
        row = self._execute("SELECT * FROM collection_builds WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["done_sources"] = json.loads(out["done_sources"] or "[]")
        out["settings"] = json.loads(out["settings"]) if out.get("settings") else None
        return out

    def build_documents(self, collection: str) -> int:
        """As :meth:`ingestd.store.manifest.manifest.Manifest.build_documents`."""
        if "build_documents" not in self._tables:
            return 0
        (n,) = self._execute(
            "SELECT count(*) FROM build_documents WHERE collection = ?", (collection,)
        ).fetchone()
        return int(n)
