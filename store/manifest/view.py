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
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.manifest.counts import COUNT_KEYS
from ingestd.store.manifest.reader import SOURCE_POINTS_SQL, ManifestReader

__all__ = ["ManifestView", "sqlite_read_uri"]


def sqlite_read_uri(path: str | Path) -> str:
    """The SQLite URI that reads ``path`` and creates nothing: ``file:...?mode=ro``.

    With ``&immutable=1`` when there is no ``-wal`` file (the last connection of a
    writer removes it when it closes, and a connected writer always has one): SQLite
    then creates no ``-wal`` or ``-shm`` file and takes no lock, so the state dir is left
    byte for byte as it was. A ``-wal`` file (a writer connected, or one that did not
    close) is read through its ``-shm`` index.
    """
    path = Path(path).absolute()
    params = "mode=ro"
    if not path.with_name(path.name + "-wal").exists():
        params += "&immutable=1"
    return f"file:{quote(str(path))}?{params}"


class ManifestView(ManifestReader):
    """Reads sources, counts and failures of a manifest SQLite file without writing.

    Opened with :func:`sqlite_read_uri`: a manifest left by a clean close is read
    without a file of the state dir changing.

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
        # never create or change a file (sqlite_read_uri); a write-ahead log without
        # its -shm index can only be read by a connection that may create it (mode=rw)
        uri = f"file:{quote(str(path.absolute()))}"
        self._conn = self._open(sqlite_read_uri(path)) or sqlite3.connect(
            f"{uri}?mode=rw", uri=True
        )
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA busy_timeout=10000")
        self._tables = {
            r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        self._seeded: dict[str, dict[str, int]] = {}

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

    def seed_counts(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Take counts known to be current (see :mod:`~ingestd.store.manifest.counts`)."""
        for source, c in counts.items():
            if all(isinstance(c.get(k), int) for k in COUNT_KEYS):
                self._seeded[source] = {k: int(c[k]) for k in COUNT_KEYS}

    def counts(self, source: str) -> dict[str, int]:
        """``documents``, ``chunks``, ``pending``, ``failed``, ``partly_skipped`` of a source.

        ``chunks`` and ``pending`` count points
        (:data:`~ingestd.store.manifest.reader.SOURCE_POINTS_SQL`). The seeded ones when
        known (:meth:`seed_counts`), else counted.
        """
        if source in self._seeded:
            return dict(self._seeded[source])
        if "documents" not in self._tables:
            return {"documents": 0, "chunks": 0, "pending": 0, "failed": 0, "partly_skipped": 0}
        docs, failed, partial = self._execute(
            "SELECT count(*), coalesce(sum(state = 'failed'), 0), "
            "coalesce(sum(state = 'ok' AND error IS NOT NULL), 0) FROM documents WHERE source = ?",
            (source,),
        ).fetchone()
        by = {bool(p): int(n) for p, n in self._execute(SOURCE_POINTS_SQL, {"source": source})}
        return {
            "documents": int(docs),
            "chunks": by.get(False, 0),
            "pending": by.get(True, 0),
            "failed": int(failed),
            "partly_skipped": int(partial),
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
        """``(path, error)`` of the documents of ``source`` that failed, by path.

        None read when the seeded counts (:meth:`seed_counts`) know of no failure: the
        query reads every document row of the source (0.1 s at 50k documents).
        """
        if "documents" not in self._tables or self._seeded.get(source, {}).get("failed") == 0:
            return []
        rows = self._execute(
            "SELECT path, error FROM documents WHERE source = ? AND state = 'failed' ORDER BY path",
            (source,),
        )
        return [(p, e or "") for p, e in rows]

    def partly_skipped(self, source: str) -> list[tuple[str, str]]:
        """As :meth:`ingestd.store.manifest.manifest.Manifest.partly_skipped`.

        None read when the seeded counts know of no such document.
        """
        if (
            "documents" not in self._tables
            or self._seeded.get(source, {}).get("partly_skipped") == 0
        ):
            return []
        rows = self._execute(
            "SELECT path, error FROM documents WHERE source = ? AND state = 'ok' "
            "AND error IS NOT NULL ORDER BY path",
            (source,),
        )
        return [(p, e) for p, e in rows]

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

    def documents_in(self, source: str, prefix: str, limit: int = 10_000) -> list[dict[str, Any]]:
        """The documents of ``source`` whose path starts with ``prefix`` (``""``: all), by path.

        Each ``path``, ``state`` (``ok`` or ``failed``), ``error``, ``size`` (bytes),
        ``indexed_at`` (seconds since the epoch), ``git_commit`` and ``chunks`` (its
        committed points). At most ``limit`` rows (the first by path).
        """
        if "documents" not in self._tables:
            return []
        rows = self._execute(
            "SELECT d.path, d.state, d.error, d.size, d.indexed_at, d.git_commit, "
            "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.id AND NOT c.pending) AS chunks "
            "FROM documents d WHERE d.source = ? AND d.path >= ? AND d.path < ? "
            "ORDER BY d.path LIMIT ?",
            (source, prefix, prefix + "\U0010ffff", limit),  # a range the index reads
        )
        return [dict(r) for r in rows]
