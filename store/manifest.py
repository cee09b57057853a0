"""The manifest: which files ingestd has seen and which point ids it wrote for them.

SQLAlchemy 2.x typed ORM tables, written with bulk Core statements (per-row
``session.merge`` measured about 50x slower). SQLite in WAL mode by default, so
``status`` can read while the daemon writes; any SQLAlchemy URL works (PostgreSQL).

ATTENTION: the tables below are a stored format. Change them only together with a new
entry in :data:`MIGRATIONS` (named, ordered, each run once in a transaction, recorded in
``schema_migrations``).

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
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
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
    delete,
    event,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .damage import StateDamagedError, is_sqlite_damage

__all__ = [
    "AdoptedDocument",
    "ChunkRow",
    "DocRow",
    "DocumentRecord",
    "Manifest",
    "ModelMismatchError",
    "RECORD_COLUMNS",
    "StateDamagedError",
    "chunk_values",
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
    """A configured source, by name."""

    __tablename__ = "sources"
    name: Mapped[str] = mapped_column(String(1000), primary_key=True)
    root: Mapped[str] = mapped_column(Text)
    collection: Mapped[str] = mapped_column(String(255))
    last_sync: Mapped[float | None] = mapped_column(Float, nullable=True)
    held_deletes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


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
    """One point id of one document."""

    __tablename__ = "chunks"
    __table_args__ = (Index("ix_chunks_doc", "doc_id"), Index("ix_chunks_hash", "chunk_hash"))
    point_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    doc_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
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


#: Ordered, named schema migrations. Append only.
MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("001_initial", _m001_initial),
    ("002_held_deletes", _m002_held_deletes),
    ("003_collection_builds", _m003_collection_builds),
    ("004_profiles", _m004_profiles),
]

D = cast(Table, DocumentTable.__table__)
C = cast(Table, ChunkTable.__table__)
S = cast(Table, SourceTable.__table__)
K = cast(Table, CollectionTable.__table__)
CB = cast(Table, CollectionBuildTable.__table__)
BD = cast(Table, BuildDocumentTable.__table__)


#: The columns of a :class:`ChunkRow`, in its field order.
_CHUNK_COLUMNS = (
    C.c.point_id,
    C.c.chunk_hash,
    C.c.ordinal,
    C.c.start_char,
    C.c.end_char,
    C.c.pending,
)


class ModelMismatchError(RuntimeError):
    """A collection holds vectors of another embedding model than the configured one."""


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    """What is recorded of a document, in ``documents`` and ``build_documents`` alike.

    Attributes:
        path: POSIX path relative to the source root.
        size: bytes, with ``mtime_ns``, ``ctime_ns`` and ``inode`` the stat read
            before the bytes (the fast-path key).
        content_hash: sha256 hex of the raw bytes.
        rule_fingerprint: fingerprint of the rule that chunked it.
        state: ``ok`` or ``failed``.
        error: why it failed, or ``None``.
        git_commit: HEAD's commit of a git source, or ``None``.
        indexed_at: when it was written (seconds since the epoch).
    """

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    content_hash: str
    rule_fingerprint: str
    state: str
    error: str | None
    git_commit: str | None
    indexed_at: float


#: The fields of a :class:`DocumentRecord` but ``path``, in order: the values a
#: document row holds beside its key.
RECORD_COLUMNS = tuple(f.name for f in fields(DocumentRecord) if f.name != "path")


@dataclass(frozen=True, slots=True)
class DocRow(DocumentRecord):
    """A document as the manifest knows it: its record, row ``id`` and ``source``."""

    id: int
    source: str


@dataclass(frozen=True, slots=True)
class AdoptedDocument:
    """A document re-recorded from the points the vector store holds for it.

    Attributes:
        content_hash: the points' ``doc_hash``.
        rule_fingerprint: the points' ``rule_fingerprint``.
        rows: the points, as chunk rows.
        git_commit: the points' ``git_commit``, if any.
        consistent: all points agree on the fields above (else the document is
            recorded as ``new``, so that the next sync re-writes it).
    """

    content_hash: str
    rule_fingerprint: str
    rows: tuple[ChunkRow, ...]
    git_commit: str | None = None
    consistent: bool = True


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """One recorded point of a document (offsets in characters)."""

    point_id: str
    chunk_hash: str
    ordinal: int
    start_char: int
    end_char: int
    pending: bool = False


def chunk_values(doc_id: int, r: ChunkRow, *, pending: bool) -> dict[str, Any]:
    """The ``chunks`` row of point ``r`` of document ``doc_id``, as column values.

    Args:
        doc_id: the ``documents`` row id.
        r: the point (its own ``pending`` is not used).
        pending: whether the row records an id before its upsert.
    """
    return {
        "point_id": r.point_id,
        "doc_id": doc_id,
        "chunk_hash": r.chunk_hash,
        "ordinal": r.ordinal,
        "start_char": r.start_char,
        "end_char": r.end_char,
        "pending": pending,
    }


def sqlite_url(path: str | Path) -> str:
    """SQLAlchemy URL of a SQLite file."""
    return f"sqlite:///{Path(path)}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class Manifest:
    """Record of documents and their point ids, in any SQLAlchemy database.

    Args:
        url: SQLAlchemy URL; SQLite files get WAL, ``busy_timeout`` 10 s and foreign keys.
        now: the clock (seconds since the epoch); injected for tests.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be opened or migrated.
    """

    def __init__(self, url: str, *, now: Callable[[], float] = time.time) -> None:
        self.url = url
        self.now = now
        self.engine: Engine = create_engine(url, future=True)
        database = self.engine.url.database
        #: the SQLite file, ``None`` for other databases and ``:memory:``
        self.path: Path | None = None
        if self.engine.dialect.name == "sqlite":
            if database and database != ":memory:":
                self.path = Path(database)
            event.listen(self.engine, "connect", _sqlite_pragmas)
            event.listen(self.engine, "handle_error", self._on_error)
        try:
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

    # -- schema ------------------------------------------------------------------

    def _migrate(self) -> None:
        with self.engine.begin() as conn:
            cast(Table, SchemaMigration.__table__).create(conn, checkfirst=True)
            done = set(conn.scalars(select(SchemaMigration.name)))
            for name, step in MIGRATIONS:
                if name not in done:
                    step(conn)
                    conn.execute(insert(SchemaMigration).values(name=name, applied_at=self.now()))

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- sources and collections ----------------------------------------------------

    def ensure_source(self, name: str, root: str, collection: str) -> None:
        """Record source ``name`` (root and collection updated if they changed)."""
        with self.engine.begin() as conn:
            row = conn.execute(select(S.c.name).where(S.c.name == name)).first()
            if row is None:
                conn.execute(insert(S).values(name=name, root=root, collection=collection))
            else:
                conn.execute(
                    update(S).where(S.c.name == name).values(root=root, collection=collection)
                )

    def sources(self) -> list[dict[str, Any]]:
        """All recorded sources: ``name``, ``root``, ``collection``, ``last_sync``."""
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(S).order_by(S.c.name))]

    def set_last_sync(self, name: str, when: float | None = None) -> None:
        """Record the end of a complete sync of source ``name``."""
        with self.engine.begin() as conn:
            conn.execute(update(S).where(S.c.name == name).values(last_sync=when or self.now()))

    def set_held_deletes(self, name: str, count: int) -> None:
        """Record how many deletions the mass-deletion guard holds for source ``name``."""
        with self.engine.begin() as conn:
            conn.execute(update(S).where(S.c.name == name).values(held_deletes=count))

    def check_collection(self, name: str, model: str, fingerprint: str, dim: int) -> None:
        """Record or check the model of collection ``name``.

        Raises:
            ModelMismatchError: the collection was filled by another model.
        """
        with self.engine.begin() as conn:
            row = conn.execute(select(K).where(K.c.name == name)).first()
            if row is None:
                conn.execute(
                    insert(K).values(name=name, model=model, model_fingerprint=fingerprint, dim=dim)
                )
            elif row.model_fingerprint != fingerprint or row.dim != dim:
                raise ModelMismatchError(
                    f"collection {name!r} holds vectors of model {row.model!r} "
                    f"(fingerprint {row.model_fingerprint[:12]}, dim {row.dim}), but the "
                    f"configured model is {model!r} (fingerprint {fingerprint[:12]}, dim {dim}); "
                    "use another collection name, or `ingestd forget` its sources first"
                )

    def collection_record(self, name: str) -> dict[str, Any] | None:
        """What the manifest records of collection ``name``, or ``None``.

        Keys: ``name``, ``model``, ``model_fingerprint``, ``dim``, ``layout``,
        ``settings`` (the profile as a dict, ``None`` when written before profiles
        were recorded) and ``aborted`` (the profile of an aborted migration, or ``None``).
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(K).where(K.c.name == name)).first()
        if row is None:
            return None
        out = dict(row._mapping)
        for key in ("settings", "aborted"):
            out[key] = json.loads(out[key]) if out[key] else None
        return out

    def record_collection(self, name: str, settings: Mapping[str, Any]) -> None:
        """Record (or replace) the profile that made collection ``name``'s points.

        Args:
            name: the collection.
            settings: the profile (:meth:`ingestd.daemon.sync.profile.Profile.settings`):
                its ``model``, ``model_fingerprint`` and ``dim`` fill those columns.
        """
        values = {
            "model": str(settings["model"]),
            "model_fingerprint": str(settings["model_fingerprint"]),
            "dim": int(settings["dim"]),
            "settings": json.dumps(dict(settings), sort_keys=True),
        }
        with self.engine.begin() as conn:
            row = conn.execute(select(K.c.name).where(K.c.name == name)).first()
            if row is None:
                conn.execute(insert(K).values(name=name, **values))
            else:
                conn.execute(update(K).where(K.c.name == name).values(**values))

    def build_documents(self, collection: str) -> int:
        """Documents written into the version of ``collection`` a migration builds."""
        q = select(func.count()).select_from(BD).where(BD.c.collection == collection)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def set_collection_aborted(self, name: str, settings: Mapping[str, Any] | None) -> None:
        """Record the profile of an aborted migration of ``name`` (``None`` clears it)."""
        value = json.dumps(dict(settings), sort_keys=True) if settings is not None else None
        with self.engine.begin() as conn:
            conn.execute(update(K).where(K.c.name == name).values(aborted=value))

    def collection_layout(self, name: str) -> str | None:
        """The store layout collection ``name`` was last known to have.

        Returns:
            ``None`` when the manifest has no record of the collection, ``""`` when it
            was written before layouts were recorded, else the layout string.
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(K.c.layout).where(K.c.name == name)).first()
        return None if row is None else str(row.layout or "")

    def set_collection_layout(self, name: str, layout: str) -> None:
        """Record the store layout of collection ``name`` (its model row must exist)."""
        with self.engine.begin() as conn:
            conn.execute(update(K).where(K.c.name == name).values(layout=layout))

    def forget_collection(self, name: str) -> None:
        """Drop the model record of collection ``name``."""
        with self.engine.begin() as conn:
            conn.execute(delete(K).where(K.c.name == name))

    # -- collection builds -------------------------------------------------------------

    def collection_build(self, name: str) -> dict[str, Any] | None:
        """The build of a new version of collection ``name`` in progress, or ``None``.

        Keys: ``name``, ``target``, ``previous``, ``reason``, ``phase`` (``building``,
        ``switching``, or ``aborting`` for a migration), ``done_sources`` (list of
        source names), ``started_at``, ``settings`` (a migration's ``{"previous":
        profile, "target": profile}``, else ``None``).
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(CB).where(CB.c.name == name)).first()
        if row is None:
            return None
        out = dict(row._mapping)
        out["done_sources"] = json.loads(out["done_sources"] or "[]")
        out["settings"] = json.loads(out["settings"]) if out.get("settings") else None
        return out

    def start_collection_build(
        self,
        name: str,
        target: str,
        previous: str | None,
        reason: str,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        """Record that version ``target`` of collection ``name`` is being built.

        ``settings``: a migration's ``{"previous": profile, "target": profile}``.
        """
        with self.engine.begin() as conn:
            conn.execute(delete(CB).where(CB.c.name == name))
            conn.execute(
                insert(CB).values(
                    name=name,
                    target=target,
                    previous=previous,
                    reason=reason,
                    phase="building",
                    done_sources="[]",
                    started_at=self.now(),
                    settings=json.dumps(dict(settings), sort_keys=True) if settings else None,
                )
            )

    def update_collection_build(
        self, name: str, *, phase: str | None = None, done_source: str | None = None
    ) -> None:
        """Move a build to ``phase``, or record ``done_source`` as written into it."""
        with self.engine.begin() as conn:
            row = conn.execute(select(CB.c.done_sources).where(CB.c.name == name)).first()
            if row is None:
                return
            values: dict[str, Any] = {}
            if phase is not None:
                values["phase"] = phase
            if done_source is not None:
                done = set(json.loads(row.done_sources or "[]")) | {done_source}
                values["done_sources"] = json.dumps(sorted(done))
            conn.execute(update(CB).where(CB.c.name == name).values(**values))

    def end_collection_build(self, name: str) -> None:
        """Forget the build of collection ``name`` (it is complete)."""
        with self.engine.begin() as conn:
            conn.execute(delete(CB).where(CB.c.name == name))

    # -- documents ---------------------------------------------------------------------

    def documents(self, source: str, prefix: str | None = None) -> dict[str, DocRow]:
        """Documents of ``source`` by path, optionally only those under folder ``prefix``."""
        q = select(D).where(D.c.source == source)
        if prefix:
            p = prefix.rstrip("/") + "/"
            q = q.where((D.c.path == prefix) | (func.substr(D.c.path, 1, len(p)) == p))
        with self.engine.connect() as conn:
            return {r.path: DocRow(**r._mapping) for r in conn.execute(q)}

    def document(self, source: str, path: str) -> DocRow | None:
        """One document, or ``None``."""
        with self.engine.connect() as conn:
            r = conn.execute(select(D).where(D.c.source == source, D.c.path == path)).first()
        return DocRow(**r._mapping) if r else None

    def chunks(self, doc_id: int) -> list[ChunkRow]:
        """Every recorded point of a document, committed and pending, by ordinal."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*_CHUNK_COLUMNS)
                .where(C.c.doc_id == doc_id)
                .order_by(C.c.pending, C.c.ordinal)
            )
            return [ChunkRow(*r) for r in rows]

    def chunks_of_source(self, source: str) -> dict[str, ChunkRow]:
        """Every recorded point of a source, by point id."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*_CHUNK_COLUMNS).join(D, D.c.id == C.c.doc_id).where(D.c.source == source)
            )
            return {r[0]: ChunkRow(*r) for r in rows}

    def point_rows(self, source: str) -> list[tuple[str, int, bool]]:
        """``(point_id, doc_id, pending)`` of every recorded point of ``source``."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(C.c.point_id, C.c.doc_id, C.c.pending)
                .join(D, D.c.id == C.c.doc_id)
                .where(D.c.source == source)
            )
            return [(str(p), int(d), bool(x)) for p, d, x in rows]

    def pending_doc_ids(self, source: str) -> set[int]:
        """Ids of the documents of ``source`` that hold pending point ids."""
        with self.engine.connect() as conn:
            return set(
                conn.scalars(
                    select(C.c.doc_id)
                    .join(D, D.c.id == C.c.doc_id)
                    .where(D.c.source == source, C.c.pending.is_(True))
                    .distinct()
                )
            )

    def point_ids_for_hashes(self, hashes: Iterable[str]) -> dict[str, str]:
        """A committed point id holding each chunk hash, where one exists (hash -> id)."""
        out: dict[str, str] = {}
        hs = list(set(hashes))
        with self.engine.connect() as conn:
            for i in range(0, len(hs), 500):
                rows = conn.execute(
                    select(C.c.chunk_hash, C.c.point_id).where(
                        C.c.chunk_hash.in_(hs[i : i + 500]), C.c.pending.is_(False)
                    )
                )
                for h, pid in rows:
                    out.setdefault(h, pid)
        return out

    def upsert_document(self, source: str, path: str, **fields: Any) -> int:
        """Create or update the row of (source, path); returns its id.

        ``fields`` are columns of ``documents`` (size, mtime_ns, ...).
        """
        with self.engine.begin() as conn:
            return self._upsert_document(conn, source, path, fields)

    def _upsert_document(
        self, conn: Connection, source: str, path: str, fields: dict[str, Any]
    ) -> int:
        row = conn.execute(select(D.c.id).where(D.c.source == source, D.c.path == path)).first()
        if row is None:
            values = {
                "size": 0,
                "mtime_ns": 0,
                "ctime_ns": 0,
                "inode": 0,
                "content_hash": "",
                "rule_fingerprint": "",
                "state": "new",
                "indexed_at": self.now(),
            }
            values.update(fields)
            res = conn.execute(insert(D).values(source=source, path=path, **values))
            return int(res.inserted_primary_key[0])  # type: ignore[index]
        if fields:
            conn.execute(update(D).where(D.c.id == row.id).values(**fields))
        return int(row.id)

    def upsert_documents(self, source: str, paths: Sequence[str]) -> dict[str, int]:
        """Ids of the rows of ``paths`` of ``source``, creating missing rows (state ``new``).

        One transaction for the whole batch.
        """
        out: dict[str, int] = {}
        with self.engine.begin() as conn:
            for i in range(0, len(paths), 500):
                part = list(paths[i : i + 500])
                rows = conn.execute(
                    select(D.c.path, D.c.id).where(D.c.source == source, D.c.path.in_(part))
                )
                out.update({p: int(d) for p, d in rows})
            for p in paths:
                if p not in out:
                    out[p] = self._upsert_document(conn, source, p, {})
        return out

    def chunks_of_docs(self, doc_ids: Sequence[int]) -> dict[int, list[ChunkRow]]:
        """Every recorded point (committed and pending) of each document, in one query."""
        out: dict[int, list[ChunkRow]] = {d: [] for d in doc_ids}
        with self.engine.connect() as conn:
            for i in range(0, len(doc_ids), 500):
                rows = conn.execute(
                    select(C.c.doc_id, *_CHUNK_COLUMNS)
                    .where(C.c.doc_id.in_(list(doc_ids[i : i + 500])))
                    .order_by(C.c.doc_id, C.c.pending, C.c.ordinal)
                )
                for doc_id, *rest in rows:
                    out[int(doc_id)].append(ChunkRow(*rest))
        return out

    def rule_fingerprints(self, doc_ids: Sequence[int]) -> dict[int, str]:
        """The rule fingerprint each document was last committed with (``""`` if never)."""
        out: dict[int, str] = {}
        with self.engine.connect() as conn:
            for i in range(0, len(doc_ids), 500):
                rows = conn.execute(
                    select(D.c.id, D.c.rule_fingerprint).where(
                        D.c.id.in_(list(doc_ids[i : i + 500]))
                    )
                )
                out.update({int(d): str(fp or "") for d, fp in rows})
        return out

    def add_pending(self, doc_id: int, rows: Sequence[ChunkRow]) -> None:
        """Record ``rows`` as pending point ids of ``doc_id`` (write order, step a)."""
        self.add_pending_many({doc_id: rows})

    def add_pending_many(self, batch: Mapping[int, Sequence[ChunkRow]]) -> None:
        """Record pending point ids of several documents in one transaction (step a).

        Ids a document already holds (committed or pending) are left as they are.
        """
        if not any(batch.values()):
            return
        with self.engine.begin() as conn:
            new: list[dict[str, Any]] = []
            for doc_id, rows in batch.items():
                if not rows:
                    continue
                known = set(conn.scalars(select(C.c.point_id).where(C.c.doc_id == doc_id)))
                new.extend(
                    chunk_values(doc_id, r, pending=True) for r in rows if r.point_id not in known
                )
            if new:
                # an id recorded under another document (a path re-used after a move) moves
                ids = [n["point_id"] for n in new]
                for i in range(0, len(ids), 500):
                    conn.execute(delete(C).where(C.c.point_id.in_(ids[i : i + 500])))
                conn.execute(insert(C), new)

    def commit_document(self, doc_id: int, rows: Sequence[ChunkRow], **fields: Any) -> None:
        """Make ``rows`` the document's points and update its columns (write order, step d)."""
        self.commit_documents([(doc_id, rows, fields)])

    def commit_documents(
        self, batch: Sequence[tuple[int, Sequence[ChunkRow], dict[str, Any]]]
    ) -> None:
        """Commit several documents in one transaction: ``(doc_id, rows, columns)`` each."""
        with self.engine.begin() as conn:
            ids = [doc_id for doc_id, _, _ in batch]
            for i in range(0, len(ids), 500):
                conn.execute(delete(C).where(C.c.doc_id.in_(ids[i : i + 500])))
            values = [chunk_values(d, r, pending=False) for d, rows, _ in batch for r in rows]
            if values:
                conn.execute(insert(C), values)
            for doc_id, _, fields in batch:
                if fields:
                    conn.execute(update(D).where(D.c.id == doc_id).values(**fields))

    def update_document(self, doc_id: int, **fields: Any) -> None:
        """Update columns of one document (e.g. the stat after an unchanged hash)."""
        with self.engine.begin() as conn:
            conn.execute(update(D).where(D.c.id == doc_id).values(**fields))

    def delete_document(self, doc_id: int) -> None:
        """Drop a document and its point rows."""
        with self.engine.begin() as conn:
            conn.execute(delete(C).where(C.c.doc_id == doc_id))
            conn.execute(delete(D).where(D.c.id == doc_id))

    def forget_source(self, source: str) -> None:
        """Drop a source with all its documents and point rows."""
        with self.engine.begin() as conn:
            ids = select(D.c.id).where(D.c.source == source).scalar_subquery()
            conn.execute(delete(C).where(C.c.doc_id.in_(ids)))
            conn.execute(delete(D).where(D.c.source == source))
            conn.execute(delete(S).where(S.c.name == source))

    # -- checks and repairs ---------------------------------------------------------------

    def _collection_sources(self, collection: str) -> Any:
        return select(S.c.name).where(S.c.collection == collection).scalar_subquery()

    def collection_counts(self, collection: str) -> tuple[int, int]:
        """``(committed, pending)`` point rows of every source recorded with ``collection``."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(C.c.pending, func.count())
                .join(D, D.c.id == C.c.doc_id)
                .where(D.c.source.in_(self._collection_sources(collection)))
                .group_by(C.c.pending)
            ).all()
        by = {bool(p): int(n) for p, n in rows}
        return by.get(False, 0), by.get(True, 0)

    def point_index(self, collection: str) -> dict[str, tuple[str, str, bool]]:
        """Every recorded point of ``collection``: id -> ``(source, path, pending)``."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(C.c.point_id, D.c.source, D.c.path, C.c.pending)
                .join(D, D.c.id == C.c.doc_id)
                .where(D.c.source.in_(self._collection_sources(collection)))
            )
            return {str(pid): (str(s), str(p), bool(x)) for pid, s, p, x in rows}

    def adopt(self, source: str, docs: Mapping[str, AdoptedDocument]) -> None:
        """Record points the vector store holds but the manifest lost (one transaction).

        A path the manifest does not know gets a row with a zero stat, so the next
        sync reads and hashes its file: equal bytes cost a stat update, other bytes
        (or a deleted file) take the usual way and nothing is embedded twice. A path it
        knows gets the points as *pending*: the next sync re-writes the document and
        deletes whichever of them is stale.
        """
        with self.engine.begin() as conn:
            rows = conn.execute(select(D.c.path, D.c.id).where(D.c.source == source))
            known = {str(p): int(i) for p, i in rows}
            values: list[dict[str, Any]] = []
            for path, doc in docs.items():
                doc_id = known.get(path)
                if doc_id is None:
                    doc_id = self._upsert_document(
                        conn,
                        source,
                        path,
                        {
                            "content_hash": doc.content_hash,
                            "rule_fingerprint": doc.rule_fingerprint,
                            "git_commit": doc.git_commit,
                            "state": "ok" if doc.consistent else "new",
                        },
                    )
                    pending = not doc.consistent
                else:
                    pending = True
                values.extend(chunk_values(doc_id, r, pending=pending) for r in doc.rows)
            ids = [v["point_id"] for v in values]
            for i in range(0, len(ids), 500):
                conn.execute(delete(C).where(C.c.point_id.in_(ids[i : i + 500])))
            if values:
                conn.execute(insert(C), values)

    # -- reporting -------------------------------------------------------------------

    def counts(self, source: str) -> dict[str, int]:
        """``documents``, ``chunks``, ``pending`` and ``failed`` counts of a source."""
        with self.engine.connect() as conn:
            docs = conn.execute(
                select(func.count()).select_from(D).where(D.c.source == source)
            ).scalar_one()
            failed = conn.execute(
                select(func.count())
                .select_from(D)
                .where(D.c.source == source, D.c.state == "failed")
            ).scalar_one()
            chunks = conn.execute(
                select(C.c.pending, func.count())
                .join(D, D.c.id == C.c.doc_id)
                .where(D.c.source == source)
                .group_by(C.c.pending)
            ).all()
        by = {bool(p): int(n) for p, n in chunks}
        return {
            "documents": int(docs),
            "chunks": by.get(False, 0),
            "pending": by.get(True, 0),
            "failed": int(failed),
        }

    def failed(self, source: str) -> list[tuple[str, str]]:
        """``(path, error)`` of the documents of ``source`` that failed."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(D.c.path, D.c.error)
                .where(D.c.source == source, D.c.state == "failed")
                .order_by(D.c.path)
            )
            return [(p, e or "") for p, e in rows]

    def has_pending(self, source: str) -> bool:
        """Whether a document of ``source`` has pending (uncommitted) point ids."""
        return self.counts(source)["pending"] > 0

    def iter_documents(self, source: str) -> Iterator[DocRow]:
        """Documents of ``source`` in path order."""
        yield from sorted(self.documents(source).values(), key=lambda d: d.path)
