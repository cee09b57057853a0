"""Documents and their chunks in the manifest: the typed rows, reads and writes.

The write order of a document (DESIGN.md point 5) is :meth:`DocumentRecords.add_pending`
(step a) before the upsert, then :meth:`DocumentRecords.commit_document` (step d) after
the stale ids are deleted. Rows are read and written with bulk Core statements, in
slices of 500 ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from ingestd.store.manifest.database import C, D, ManifestDatabase

__all__ = [
    "RECORD_COLUMNS",
    "AdoptedDocument",
    "ChunkRow",
    "DocRow",
    "DocumentRecord",
    "DocumentRecords",
    "chunk_values",
]

#: The columns of a :class:`ChunkRow`, in its field order.
_CHUNK_COLUMNS = (
    C.c.point_id,
    C.c.chunk_hash,
    C.c.ordinal,
    C.c.start_char,
    C.c.end_char,
    C.c.pending,
)


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


class DocumentRecords(ManifestDatabase):
    """The ``documents`` and ``chunks`` rows of a manifest.

    A part of :class:`~ingestd.store.manifest.manifest.Manifest`; opens its database as
    :class:`~ingestd.store.manifest.database.ManifestDatabase` does.
    """

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

    def documents_with_inodes(self, inodes: Iterable[int]) -> list[DocRow]:
        """The documents of every source whose recorded inode is one of ``inodes``.

        The other names (hard links) of a file. ``inode`` is not indexed: each slice of
        500 inodes reads the whole table, so callers ask for the few inodes new to them.
        """
        wanted = sorted(set(inodes))
        out: list[DocRow] = []
        with self.engine.connect() as conn:
            for i in range(0, len(wanted), 500):
                rows = conn.execute(select(D).where(D.c.inode.in_(wanted[i : i + 500])))
                out.extend(DocRow(**r._mapping) for r in rows)
        return out

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

    def holders(
        self, point_ids: Iterable[str], exclude: Iterable[int] = ()
    ) -> dict[str, list[tuple[int, str]]]:
        """The documents holding each point id, committed or pending: id -> ``[(doc id, path)]``.

        Ids no document holds are left out; so are the documents in ``exclude``.
        """
        out: dict[str, list[tuple[int, str]]] = {}
        ids = sorted(set(point_ids))
        skip = set(exclude)
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                rows = conn.execute(
                    select(C.c.point_id, D.c.id, D.c.path)
                    .join(D, D.c.id == C.c.doc_id)
                    .where(C.c.point_id.in_(ids[i : i + 500]))
                )
                for pid, doc_id, path in rows:
                    if int(doc_id) not in skip:
                        out.setdefault(str(pid), []).append((int(doc_id), str(path)))
        return out

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
            doc_id, created = self._upsert_document(conn, source, path, fields)
        if created or "state" in fields:  # what counts: documents, failed ones
            self.count_cache.changed([source])
        return doc_id

    def _sources_of(self, conn: Connection, doc_ids: Sequence[int]) -> set[str]:
        """The sources of documents ``doc_ids`` (their counts change with them)."""
        out: set[str] = set()
        ids = list(doc_ids)
        for i in range(0, len(ids), 500):
            out.update(conn.scalars(select(D.c.source).where(D.c.id.in_(ids[i : i + 500]))))
        return out

    def _upsert_document(
        self, conn: Connection, source: str, path: str, fields: dict[str, Any]
    ) -> tuple[int, bool]:
        """The id of the row of (source, path), and whether it was created."""
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
            return int(res.inserted_primary_key[0]), True  # type: ignore[index]
        if fields:
            conn.execute(update(D).where(D.c.id == row.id).values(**fields))
        return int(row.id), False

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
            missing = [p for p in paths if p not in out]
            for p in missing:
                out[p] = self._upsert_document(conn, source, p, {})[0]
        if missing:
            self.count_cache.changed([source])
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

    def add_pending_many(
        self, batch: Mapping[int, Sequence[ChunkRow]], *, shared: bool = False
    ) -> None:
        """Record pending point ids of several documents in one transaction (step a).

        Ids a document already holds (committed or pending) are left as they are. An id
        recorded under another document moves to this one, unless ``shared`` (the
        documents are versions of a versioned source: they share points).
        """
        if not any(batch.values()):
            return
        with self.engine.begin() as conn:
            sources = self._sources_of(conn, list(batch))
            new: list[dict[str, Any]] = []
            for doc_id, rows in batch.items():
                if not rows:
                    continue
                known = set(conn.scalars(select(C.c.point_id).where(C.c.doc_id == doc_id)))
                new.extend(
                    chunk_values(doc_id, r, pending=True) for r in rows if r.point_id not in known
                )
            if new and shared:
                conn.execute(insert(C), new)
            elif new:
                # an id recorded under another document (a path re-used after a move) moves
                ids = [n["point_id"] for n in new]
                for i in range(0, len(ids), 500):
                    conn.execute(delete(C).where(C.c.point_id.in_(ids[i : i + 500])))
                conn.execute(insert(C), new)
        self.count_cache.changed(sources)

    def commit_document(self, doc_id: int, rows: Sequence[ChunkRow], **fields: Any) -> None:
        """Make ``rows`` the document's points and update its columns (write order, step d)."""
        self.commit_documents([(doc_id, rows, fields)])

    def commit_documents(
        self, batch: Sequence[tuple[int, Sequence[ChunkRow], dict[str, Any]]]
    ) -> None:
        """Commit several documents in one transaction: ``(doc_id, rows, columns)`` each."""
        with self.engine.begin() as conn:
            ids = [doc_id for doc_id, _, _ in batch]
            sources = self._sources_of(conn, ids)
            for i in range(0, len(ids), 500):
                conn.execute(delete(C).where(C.c.doc_id.in_(ids[i : i + 500])))
            values = [chunk_values(d, r, pending=False) for d, rows, _ in batch for r in rows]
            if values:
                conn.execute(insert(C), values)
            for doc_id, _, fields in batch:
                if fields:
                    conn.execute(update(D).where(D.c.id == doc_id).values(**fields))
        self.count_cache.changed(sources)

    def forget_rule_fingerprints(self, source: str) -> int:
        """Clear the rule fingerprint of every document of ``source``.

        The next sync then chunks and writes each of them again.

        Returns:
            The number of documents.
        """
        with self.engine.begin() as conn:
            res = conn.execute(update(D).where(D.c.source == source).values(rule_fingerprint=""))
            return int(res.rowcount or 0)

    def update_document(self, doc_id: int, **fields: Any) -> None:
        """Update columns of one document (e.g. the stat after an unchanged hash)."""
        with self.engine.begin() as conn:
            sources = self._sources_of(conn, [doc_id]) if "state" in fields else set()
            conn.execute(update(D).where(D.c.id == doc_id).values(**fields))
        self.count_cache.changed(sources)

    def delete_document(self, doc_id: int) -> None:
        """Drop a document and its point rows."""
        with self.engine.begin() as conn:
            sources = self._sources_of(conn, [doc_id])
            conn.execute(delete(C).where(C.c.doc_id == doc_id))
            conn.execute(delete(D).where(D.c.id == doc_id))
        self.count_cache.changed(sources)

    def adopt(
        self, source: str, docs: Mapping[str, AdoptedDocument], *, shared: bool = False
    ) -> None:
        """Record points the vector store holds but the manifest lost (one transaction).

        A path the manifest does not know gets a row with a zero stat, so the next
        sync reads and hashes its file: equal bytes cost a stat update, other bytes
        (or a deleted file) take the usual way and nothing is embedded twice. A path it
        knows gets the points as *pending*: the next sync re-writes the document and
        deletes whichever of them is stale. With ``shared`` (a versioned source, whose
        documents share points) a point's rows under other documents are kept.
        """
        with self.engine.begin() as conn:
            rows = conn.execute(select(D.c.path, D.c.id).where(D.c.source == source))
            known = {str(p): int(i) for p, i in rows}
            values: list[dict[str, Any]] = []
            for path, doc in docs.items():
                doc_id = known.get(path)
                if doc_id is None:
                    doc_id, _ = self._upsert_document(
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
                q = delete(C).where(C.c.point_id.in_(ids[i : i + 500]))
                if shared:  # only the adopted documents' own rows of them
                    q = q.where(C.c.doc_id.in_(sorted({v["doc_id"] for v in values})))
                conn.execute(q)
            if values:
                conn.execute(insert(C), values)
        self.count_cache.changed([source])

    def iter_documents(self, source: str) -> Iterator[DocRow]:
        """Documents of ``source`` in path order."""
        yield from sorted(self.documents(source).values(), key=lambda d: d.path)
