"""Sources in the manifest, and what each source and collection holds.

A source's row records its root, its collection, its last complete sync, when a change
of its files was last written, and the deletions the mass-deletion guard holds; the
counts and failures read here are what ``ingestd status`` and ``verify`` report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from sqlalchemy import Connection, delete, func, insert, select, text, update

from ingestd.store.manifest.database import C, D, ManifestDatabase, S
from ingestd.store.manifest.reader import SOURCE_POINTS_SQL

__all__ = ["PointRecord", "SourceRecords"]


class PointRecord(NamedTuple):
    """What the manifest records of one point: the payload fields a sync writes.

    Offsets are in characters of the decoded text; ``doc_hash`` is the document's
    content hash (its ``content_hash`` column).
    """

    source: str
    path: str
    pending: bool
    doc_hash: str
    rule_fingerprint: str
    chunk_hash: str
    ordinal: int
    start_char: int
    end_char: int


def _points(conn: Connection, source: str) -> tuple[int, int]:
    """``(committed, pending)`` points of ``source`` (:data:`SOURCE_POINTS_SQL`)."""
    by = {bool(p): int(n) for p, n in conn.execute(text(SOURCE_POINTS_SQL), {"source": source})}
    return by.get(False, 0), by.get(True, 0)


def _collection_sources(collection: str) -> Any:
    return select(S.c.name).where(S.c.collection == collection).scalar_subquery()


class SourceRecords(ManifestDatabase):
    """The ``sources`` rows of a manifest, and counts of what each source holds.

    A part of :class:`~ingestd.store.manifest.manifest.Manifest`; opens its database as
    :class:`~ingestd.store.manifest.database.ManifestDatabase` does.
    """

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
        """All recorded sources: ``name``, ``root``, ``collection``, ``last_sync``, ...

        Also ``held_deletes`` and ``last_change_synced`` (see :meth:`set_last_change_synced`).
        """
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(S).order_by(S.c.name))]

    def set_last_sync(self, name: str, when: float | None = None) -> None:
        """Record the end of a complete sync of source ``name``."""
        with self.engine.begin() as conn:
            conn.execute(update(S).where(S.c.name == name).values(last_sync=when or self.now()))

    def set_last_change_synced(self, name: str, when: float | None = None) -> None:
        """Record that a sync of source ``name`` just wrote or deleted documents.

        Unlike :meth:`set_last_sync`, recorded whether or not the sync was complete: it
        says when the last change of the source's files became searchable.
        """
        with self.engine.begin() as conn:
            conn.execute(
                update(S).where(S.c.name == name).values(last_change_synced=when or self.now())
            )

    def set_held_deletes(self, name: str, count: int) -> None:
        """Record how many deletions the mass-deletion guard holds for source ``name``."""
        with self.engine.begin() as conn:
            conn.execute(update(S).where(S.c.name == name).values(held_deletes=count))

    def forget_source(self, source: str) -> None:
        """Drop a source with all its documents and point rows."""
        with self.engine.begin() as conn:
            ids = select(D.c.id).where(D.c.source == source).scalar_subquery()
            conn.execute(delete(C).where(C.c.doc_id.in_(ids)))
            conn.execute(delete(D).where(D.c.source == source))
            conn.execute(delete(S).where(S.c.name == source))
        self.count_cache.changed([source])

    def seed_counts(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Take counts known to be current (see :meth:`CountCache.seed`)."""
        self.count_cache.seed(counts)

    def collection_counts(self, collection: str) -> tuple[int, int]:
        """``(committed, pending)`` point ids of every source recorded with ``collection``.

        Each source's points as :data:`~ingestd.store.manifest.reader.SOURCE_POINTS_SQL`
        counts them (a point that versions of a document share is one point); a point id
        names its source, so no two sources hold one. The sum of the sources'
        :meth:`counts`, so it costs nothing while they are kept
        (:mod:`~ingestd.store.manifest.counts`).
        """
        committed = pending = 0
        for s in self.sources():
            if s["collection"] == collection:
                c = self.counts(s["name"])
                committed, pending = committed + c["chunks"], pending + c["pending"]
        return committed, pending

    def point_index(self, collection: str) -> dict[str, tuple[str, str, bool]]:
        """Every recorded point of ``collection``: id -> ``(source, path, pending)``."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(C.c.point_id, D.c.source, D.c.path, C.c.pending)
                .join(D, D.c.id == C.c.doc_id)
                .where(D.c.source.in_(_collection_sources(collection)))
            )
            return {str(pid): (str(s), str(p), bool(x)) for pid, s, p, x in rows}

    def point_records(self, collection: str) -> dict[str, PointRecord]:
        """Every recorded point of ``collection`` with the payload fields it should carry.

        One query over ``chunks`` joined with ``documents``; what
        :func:`~ingestd.daemon.sync.healing.repair.check_store` compares with the store. A point
        that versions of a document share is given for one of them (a pending one
        first).
        """
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    C.c.point_id,
                    D.c.source,
                    D.c.path,
                    C.c.pending,
                    D.c.content_hash,
                    D.c.rule_fingerprint,
                    C.c.chunk_hash,
                    C.c.ordinal,
                    C.c.start_char,
                    C.c.end_char,
                )
                .join(D, D.c.id == C.c.doc_id)
                .where(D.c.source.in_(_collection_sources(collection)))
                .order_by(C.c.pending)  # a shared point: a pending row of it wins
            )
            return {
                str(pid): PointRecord(str(s), str(p), bool(x), str(h), str(r), str(c), o, a, b)
                for pid, s, p, x, h, r, c, o, a, b in rows
            }

    def documents_under(self, source: str, folder: str) -> int:
        """How many documents of ``source`` lie below ``folder`` (relative POSIX path)."""
        p = folder.strip("/") + "/"
        with self.engine.connect() as conn:
            n = conn.execute(
                select(func.count())
                .select_from(D)
                .where(D.c.source == source, func.substr(D.c.path, 1, len(p)) == p)
            ).scalar_one()
        return int(n)

    def counts(self, source: str) -> dict[str, int]:
        """``documents``, ``chunks``, ``pending``, ``failed``, ``partly_skipped`` of a source.

        ``chunks`` and ``pending`` count points
        (:data:`~ingestd.store.manifest.reader.SOURCE_POINTS_SQL`: versions share points).
        Kept between the writes that change them (``count_cache``, see
        :mod:`~ingestd.store.manifest.counts`).
        """
        return self.count_cache.get(source, lambda: self._count(source))

    def _count(self, source: str) -> dict[str, int]:
        """:meth:`counts`, counted in the database (a join over the source's chunk rows)."""
        with self.engine.connect() as conn:
            docs = conn.execute(
                select(func.count()).select_from(D).where(D.c.source == source)
            ).scalar_one()
            failed = conn.execute(
                select(func.count())
                .select_from(D)
                .where(D.c.source == source, D.c.state == "failed")
            ).scalar_one()
            partial = conn.execute(
                select(func.count())
                .select_from(D)
                .where(D.c.source == source, D.c.state == "ok", D.c.error.is_not(None))
            ).scalar_one()
            committed, pending = _points(conn, source)
        return {
            "documents": int(docs),
            "chunks": committed,
            "pending": pending,
            "failed": int(failed),
            "partly_skipped": int(partial),
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

    def partly_skipped(self, source: str) -> list[tuple[str, str]]:
        """``(path, note)`` of the indexed documents of ``source`` that lost chunks, by path.

        The note (chunks that were not prose, left out; see
        :func:`~ingestd.daemon.sync.preparing.nonprose.partly_skipped_note`) is kept in the
        ``error`` column of a document whose state is ``ok``.
        """
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(D.c.path, D.c.error)
                .where(D.c.source == source, D.c.state == "ok", D.c.error.is_not(None))
                .order_by(D.c.path)
            )
            return [(p, e) for p, e in rows]

    def has_pending(self, source: str) -> bool:
        """Whether a document of ``source`` has pending (uncommitted) point ids."""
        return self.counts(source)["pending"] > 0
