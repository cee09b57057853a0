"""The manifest's tables, their migrations, and the database they live in.

SQLAlchemy 2.x typed ORM tables, written with bulk Core statements (per-row
``session.merge`` measured about 50x slower). SQLite in WAL mode by default, so
``status`` can read while the daemon writes; any SQLAlchemy URL works (PostgreSQL).

ATTENTION: the tables below are a stored format. Change them only together with a new
entry in :data:`MIGRATIONS` (named, ordered, each run once in a transaction, recorded in
``schema_migrations``); :class:`ManifestDatabase` applies them when it opens a database.

Rows:

* ``documents``: one per (source, path): the stat fast-path key (size, mtime_ns,
  ctime_ns, inode), the content hash (sha256 hex of the raw bytes), the rule
  fingerprint, ``state`` (``ok`` or ``failed``) and the last error.
* ``chunks``: one per point id of a document, with its chunk hash, ordinal and
  character offsets. ``pending`` rows are ids recorded *before* their upsert
  (write order, DESIGN.md point 5): after a crash they are still known, so the next
  attempt deletes whatever of them is stale.
* ``sources`` and ``collections``: source roots, and the embedding model that made a
  collection's vectors (a mismatch is an error, never silent mixing).
* ``collection_builds`` and ``build_documents``: a new version of a collection under
  construction, and what has been written into it (see :mod:`ingestd.store.manifest.builds`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage
from ingestd.store.manifest.counts import CountCache
from ingestd.store.manifest.view import sqlite_read_uri

__all__ = [
    "BD",
    "C",
    "CB",
    "D",
    "K",
    "MIGRATIONS",
    "S",
    "Base",
    "BuildDocumentTable",
    "ChunkTable",
    "CollectionBuildTable",
    "CollectionTable",
    "DocumentColumns",
    "DocumentTable",
    "ManifestDatabase",
    "SchemaMigration",
    "SourceTable",
    "read_only_sqlite_url",
    "sqlite_url",
]


class Base(DeclarativeBase):
    """Declarative base of the manifest tables."""


class SchemaMigration(Base):
    """One applied migration."""

    __tablename__ = "schema_migrations"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    applied_at: Mapped[float] = mapped_column(Float)


class SourceTable(Base):
    """A configured source, by name.

    ``last_sync``: the end of its last complete sync (nothing held, deferred or left to
    retry); ``last_change_synced``: when a sync last wrote or deleted one of its
    documents (a watched edit included), complete or not.
    """

    __tablename__ = "sources"
    name: Mapped[str] = mapped_column(String(1000), primary_key=True)
    root: Mapped[str] = mapped_column(Text)
    collection: Mapped[str] = mapped_column(String(255))
    last_sync: Mapped[float | None] = mapped_column(Float, nullable=True)
    held_deletes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_change_synced: Mapped[float | None] = mapped_column(Float, nullable=True)


class CollectionTable(Base):
    """The settings that made a collection's points.

    ``settings``: JSON of the profile (NULL: written before profiles were recorded);
    ``aborted``: JSON of the profile a migration to which was aborted (the daemon then
    refuses a config that still asks for it).
    """

    __tablename__ = "collections"
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    model: Mapped[str] = mapped_column(Text)
    model_fingerprint: Mapped[str] = mapped_column(String(64))
    dim: Mapped[int] = mapped_column(Integer)
    layout: Mapped[str | None] = mapped_column(String(200), nullable=True)
    settings: Mapped[str | None] = mapped_column(Text, nullable=True)
    aborted: Mapped[str | None] = mapped_column(Text, nullable=True)


class CollectionBuildTable(Base):
    """A new version of a collection under construction (one at a time per collection)."""

    __tablename__ = "collection_builds"
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    target: Mapped[str] = mapped_column(String(255))
    previous: Mapped[str | None] = mapped_column(String(255), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    phase: Mapped[str] = mapped_column(String(16), default="building")
    done_sources: Mapped[str] = mapped_column(Text, default="[]")
    started_at: Mapped[float] = mapped_column(Float)
    #: JSON ``{"previous": profile, "target": profile}`` of a migration, else NULL
    settings: Mapped[str | None] = mapped_column(Text, nullable=True)


class DocumentColumns:
    """The columns of a document, shared by ``documents`` and ``build_documents``.

    A declarative mixin. SQLAlchemy places a table's own columns before a mixin's,
    so each table declares its ``id`` (and ``collection``) itself, and a column that
    follows these ones gets ``sort_order=1``: the stored column order stays as written.
    """

    source: Mapped[str] = mapped_column(String(1000))
    path: Mapped[str] = mapped_column(String(4000))
    size: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    ctime_ns: Mapped[int] = mapped_column(BigInteger)
    inode: Mapped[int] = mapped_column(BigInteger)
    content_hash: Mapped[str] = mapped_column(String(64))
    rule_fingerprint: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default="ok")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    git_commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    indexed_at: Mapped[float] = mapped_column(Float)


class BuildDocumentTable(DocumentColumns, Base):
    """A document written into the version being built by a migration.

    The same columns as ``documents``, and its point ids as JSON
    (``[[point_id, chunk_hash, ordinal, start_char, end_char], ...]``): at the switch
    these rows become the manifest's documents and chunks.
    """

    __tablename__ = "build_documents"
    __table_args__ = (UniqueConstraint("collection", "source", "path"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(255))
    chunks: Mapped[str] = mapped_column(Text, default="[]", sort_order=1)


class DocumentTable(DocumentColumns, Base):
    """One file of one source."""

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("source", "path"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)


class ChunkTable(Base):
    """One point id of one document.

    A point id is held by one document, except a point of a versioned source, which
    every version holding the same chunk at the same path shares (see
    :mod:`ingestd.daemon.sources.versions`): the key is (point id, document).
    """

    __tablename__ = "chunks"
    __table_args__ = (
        Index("ix_chunks_doc", "doc_id"),
        Index("ix_chunks_hash", "chunk_hash"),
    )
    point_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True
    )
    chunk_hash: Mapped[str] = mapped_column(String(64))
    ordinal: Mapped[int] = mapped_column(Integer)
    start_char: Mapped[int] = mapped_column(Integer)
    end_char: Mapped[int] = mapped_column(Integer)
    pending: Mapped[bool] = mapped_column(Boolean, default=False)


def _m001_initial(conn: Connection) -> None:
    Base.metadata.create_all(conn)


def _m002_held_deletes(conn: Connection) -> None:
    cols = {c["name"] for c in inspect(conn).get_columns("sources")}
    if "held_deletes" not in cols:  # databases created before the column existed
        conn.exec_driver_sql("ALTER TABLE sources ADD COLUMN held_deletes INTEGER DEFAULT 0")


def _m003_collection_builds(conn: Connection) -> None:
    cast(Table, CollectionBuildTable.__table__).create(conn, checkfirst=True)
    cols = {c["name"] for c in inspect(conn).get_columns("collections")}
    if "layout" not in cols:  # NULL: written before layouts were recorded (legacy)
        conn.exec_driver_sql("ALTER TABLE collections ADD COLUMN layout VARCHAR(200)")


def _m004_profiles(conn: Connection) -> None:
    cast(Table, BuildDocumentTable.__table__).create(conn, checkfirst=True)
    for table, names in (
        ("collections", ("settings", "aborted")),
        ("collection_builds", ("settings",)),
    ):
        cols = {c["name"] for c in inspect(conn).get_columns(table)}
        for col in names:
            if col not in cols:  # NULL: written before profiles were recorded
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {col} TEXT")


def _m005_last_change_synced(conn: Connection) -> None:
    cols = {c["name"] for c in inspect(conn).get_columns("sources")}
    if "last_change_synced" not in cols:  # NULL: no change written since the upgrade
        conn.exec_driver_sql("ALTER TABLE sources ADD COLUMN last_change_synced FLOAT")


def _m006_shared_points(conn: Connection) -> None:
    """``chunks`` keyed by (point id, document): versions of a document share points."""
    pk = inspect(conn).get_pk_constraint("chunks")["constrained_columns"]
    if "doc_id" in pk:  # created with the key already (001 makes today's tables)
        return
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_chunks_doc")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_chunks_hash")
    conn.exec_driver_sql("ALTER TABLE chunks RENAME TO chunks_before_006")
    cast(Table, ChunkTable.__table__).create(conn)
    cols = "point_id, doc_id, chunk_hash, ordinal, start_char, end_char, pending"
    conn.exec_driver_sql(f"INSERT INTO chunks ({cols}) SELECT {cols} FROM chunks_before_006")
    conn.exec_driver_sql("DROP TABLE chunks_before_006")


#: Ordered, named schema migrations. Append only.
MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("001_initial", _m001_initial),
    ("002_held_deletes", _m002_held_deletes),
    ("003_collection_builds", _m003_collection_builds),
    ("004_profiles", _m004_profiles),
    ("005_last_change_synced", _m005_last_change_synced),
    ("006_shared_points", _m006_shared_points),
]

D = cast(Table, DocumentTable.__table__)
C = cast(Table, ChunkTable.__table__)
S = cast(Table, SourceTable.__table__)
K = cast(Table, CollectionTable.__table__)
CB = cast(Table, CollectionBuildTable.__table__)
BD = cast(Table, BuildDocumentTable.__table__)


def sqlite_url(path: str | Path) -> str:
    """SQLAlchemy URL of a SQLite file."""
    return f"sqlite:///{Path(path)}"


def read_only_sqlite_url(path: str | Path) -> str:
    """SQLAlchemy URL that opens SQLite file ``path`` to read only, creating nothing.

    ``mode=ro``, and ``immutable=1`` when there is no ``-wal`` file (the last connection
    of a writer removes it when it closes, and a writer that is connected always has
    one): SQLite then creates no ``-wal`` or ``-shm`` file and takes no lock, so the
    state dir is left byte for byte as it was. A ``-wal`` file (a writer connected, or
    one that did not close) is read through its ``-shm`` index.
    """
    return f"sqlite:///{sqlite_read_uri(path)}&uri=true"


def _sqlite_read_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class ManifestDatabase:
    """The database of a manifest: engine, SQLite settings, damage detection, migrations.

    The base of the manifest's parts (:class:`ingestd.store.manifest.manifest.Manifest`).

    Args:
        url: SQLAlchemy URL; SQLite files get WAL, ``busy_timeout`` 10 s and foreign keys.
        now: the clock (seconds since the epoch); injected for tests.
        read_only: a reader's manifest: nothing is migrated or written, and a SQLite
            file is opened with :func:`read_only_sqlite_url` (nothing created).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be opened or migrated.
        FileNotFoundError: ``read_only`` and the SQLite file does not exist.
        ingestd.chunkers.errors.StateError: ``read_only`` and the manifest needs a
            migration of this version first.
    """

    def __init__(
        self, url: str, *, now: Callable[[], float] = time.time, read_only: bool = False
    ) -> None:
        self.url = url
        self.now = now
        self.read_only = read_only
        #: each source's counts, kept between the writes that change them
        self.count_cache = CountCache()
        self.engine: Engine = create_engine(url, future=True)
        database = self.engine.url.database
        #: the SQLite file, ``None`` for other databases and ``:memory:``
        self.path: Path | None = None
        if self.engine.dialect.name == "sqlite":
            if database and database != ":memory:":
                self.path = Path(database)
                if read_only:
                    if not self.path.is_file():
                        raise FileNotFoundError(f"no manifest at {self.path}: nothing indexed")
                    self.engine.dispose()
                    self.engine = create_engine(read_only_sqlite_url(self.path), future=True)
            pragmas = _sqlite_read_pragmas if read_only else _sqlite_pragmas
            event.listen(self.engine, "connect", pragmas)
            event.listen(self.engine, "handle_error", self._on_error)
        try:
            if read_only:
                self._check_schema()
            else:
                self._migrate()
        except StateDamagedError:
            self.engine.dispose()
            raise
        except Exception as exc:
            self.engine.dispose()
            if self.path is not None and is_sqlite_damage(exc):
                raise self._damaged(exc) from exc
            raise

    def _damaged(self, exc: BaseException) -> StateDamagedError:
        orig = getattr(exc, "orig", None) or exc
        return StateDamagedError(self.path or self.url, "manifest", str(orig))

    def _on_error(self, ctx: Any) -> None:
        """SQLAlchemy ``handle_error`` hook: a damaged file raises :class:`StateDamagedError`."""
        if self.path is not None and is_sqlite_damage(ctx.original_exception):
            raise self._damaged(ctx.original_exception)

    def integrity_problem(self) -> str | None:
        """What SQLite's ``PRAGMA quick_check`` finds wrong (``None``: nothing, or not SQLite).

        Reads every page: about as long as reading the file.
        """
        if self.engine.dialect.name != "sqlite":
            return None
        try:
            with self.engine.connect() as conn:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check")]
        except StateDamagedError as exc:
            return exc.detail
        except DBAPIError as exc:
            if is_sqlite_damage(exc):
                return str(exc.orig)
            raise
        return None if rows == ["ok"] else "; ".join(rows[:3])

    def _migrate(self) -> None:
        with self.engine.begin() as conn:
            cast(Table, SchemaMigration.__table__).create(conn, checkfirst=True)
            done = set(conn.scalars(select(SchemaMigration.name)))
            for name, step in MIGRATIONS:
                if name not in done:
                    step(conn)
                    conn.execute(insert(SchemaMigration).values(name=name, applied_at=self.now()))

    def _check_schema(self) -> None:
        """A reader's check that every migration was applied (it applies none).

        Raises:
            ingestd.chunkers.errors.StateError: some are missing.
        """
        from ingestd.chunkers.errors import StateError

        with self.engine.connect() as conn:
            try:
                done = set(conn.scalars(select(SchemaMigration.name)))
            except DBAPIError:
                done = set()
        missing = [name for name, _ in MIGRATIONS if name not in done]
        if missing:
            raise StateError(
                f"the manifest {self.path or self.url} was written by an earlier version of "
                "ingestd: `ingestd resync` (or starting the daemon) upgrades it"
            )

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()
