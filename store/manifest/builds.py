"""The record of a version being built by a migration, and its adoption at the switch.

During a migration (:mod:`ingestd.daemon.migration.migrate`) the manifest's ``documents`` and
``chunks`` keep describing the *current* version of the collection, which searches
read and every change keeps in sync. What the migration has written into the new
version is recorded beside it, in ``build_documents``: one row per document, with the
same columns as ``documents`` and its point ids. These rows tell a resumed migration
which documents are done (their stat and rule fingerprint still match the file), which
point ids of a document to delete from the new version when it changes again, and which
ids the new version must hold before it may replace the current one.

At the switch, :meth:`BuildDocuments.adopt` makes them the manifest's documents and
chunks, records the new profile of the collection and moves the build to phase
``switching``, all in one transaction: before it the manifest describes the old
version, after it the new one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from ingestd.store.manifest.database import BD, CB, C, D, K, S
from ingestd.store.manifest.documents import RECORD_COLUMNS, ChunkRow, DocumentRecord, chunk_values
from ingestd.store.manifest.manifest import Manifest

__all__ = ["BuildDoc", "BuildDocuments"]


@dataclass(frozen=True, slots=True)
class BuildDoc(DocumentRecord):
    """A document as written into the version being built.

    Its record is as in ``documents``, with ``rule_fingerprint`` the fingerprint of
    the rule of the new profile that chunked it.

    Attributes:
        chunks: its points in document order.
    """

    chunks: list[ChunkRow] = field(default_factory=list)

    @property
    def ids(self) -> set[str]:
        """Its point ids."""
        return {c.point_id for c in self.chunks}

    def columns(self) -> dict[str, Any]:
        """The columns it shares with ``documents``, but ``path``."""
        return {k: getattr(self, k) for k in RECORD_COLUMNS}


def _chunks_json(rows: Sequence[ChunkRow]) -> str:
    return json.dumps(
        [[r.point_id, r.chunk_hash, r.ordinal, r.start_char, r.end_char] for r in rows]
    )


def _chunks_of(text: str | None) -> list[ChunkRow]:
    return [
        ChunkRow(str(p), str(h), int(o), int(s), int(e))
        for p, h, o, s, e in json.loads(text or "[]")
    ]


def _delete_rows(conn: Connection, collection: str, source: str, paths: list[str]) -> None:
    for i in range(0, len(paths), 500):
        conn.execute(
            delete(BD).where(
                BD.c.collection == collection,
                BD.c.source == source,
                BD.c.path.in_(paths[i : i + 500]),
            )
        )


class BuildDocuments:
    """The ``build_documents`` rows of a manifest.

    Args:
        manifest: the manifest holding them.
    """

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest

    def documents(self, collection: str, source: str) -> dict[str, BuildDoc]:
        """Documents of ``source`` written into the new version of ``collection``, by path."""
        q = select(BD).where(BD.c.collection == collection, BD.c.source == source)
        out = {}
        with self.manifest.engine.connect() as conn:
            for r in conn.execute(q):
                m = r._mapping
                cols = {k: m[k] for k in RECORD_COLUMNS}
                out[m["path"]] = BuildDoc(path=m["path"], chunks=_chunks_of(m["chunks"]), **cols)
        return out

    def commit(self, collection: str, source: str, docs: Sequence[BuildDoc]) -> None:
        """Record ``docs`` as written (replacing earlier rows), in one transaction."""
        if not docs:
            return
        with self.manifest.engine.begin() as conn:
            _delete_rows(conn, collection, source, [d.path for d in docs])
            conn.execute(
                insert(BD),
                [
                    {
                        "collection": collection,
                        "source": source,
                        "path": d.path,
                        "chunks": _chunks_json(d.chunks),
                        **d.columns(),
                    }
                    for d in docs
                ],
            )

    def delete(self, collection: str, source: str, paths: Iterable[str]) -> None:
        """Forget documents of ``source`` (gone from disk, or the source forgotten)."""
        with self.manifest.engine.begin() as conn:
            _delete_rows(conn, collection, source, list(paths))

    def point_ids(self, collection: str) -> dict[str, tuple[str, str]]:
        """Every point id written into the new version: id -> ``(source, path)``."""
        out: dict[str, tuple[str, str]] = {}
        q = select(BD.c.source, BD.c.path, BD.c.chunks).where(BD.c.collection == collection)
        with self.manifest.engine.connect() as conn:
            for source, path, chunks in conn.execute(q):
                for row in _chunks_of(chunks):
                    out[row.point_id] = (str(source), str(path))
        return out

    def clear(self, collection: str) -> None:
        """Forget every row of ``collection`` (the build was aborted or is complete)."""
        with self.manifest.engine.begin() as conn:
            conn.execute(delete(BD).where(BD.c.collection == collection))

    def adopt(self, collection: str, settings: Mapping[str, Any], layout: str) -> None:
        """Make the new version's record the manifest's, in one transaction.

        For every source of ``collection``: its documents and chunks become the
        ``build_documents`` rows (documents without one are dropped: the new version
        does not hold them). The collection's profile becomes ``settings`` (any aborted
        migration forgotten), its layout ``layout``, and the build moves to phase
        ``switching``; the rows are then deleted.
        """
        with self.manifest.engine.begin() as conn:
            sources = list(conn.scalars(select(S.c.name).where(S.c.collection == collection)))
            for source in sources:
                known = {
                    str(p): int(i)
                    for p, i in conn.execute(select(D.c.path, D.c.id).where(D.c.source == source))
                }
                ids = list(known.values())
                for i in range(0, len(ids), 500):
                    conn.execute(delete(C).where(C.c.doc_id.in_(ids[i : i + 500])))
                built = conn.execute(
                    select(BD).where(BD.c.collection == collection, BD.c.source == source)
                ).all()
                chunk_rows: list[dict[str, Any]] = []
                keep: set[str] = set()
                for r in built:
                    m = r._mapping
                    cols = {k: m[k] for k in RECORD_COLUMNS}
                    doc_id = known.get(m["path"])
                    if doc_id is None:
                        res = conn.execute(insert(D).values(source=source, path=m["path"], **cols))
                        doc_id = int(res.inserted_primary_key[0])  # type: ignore[index]
                    else:
                        conn.execute(update(D).where(D.c.id == doc_id).values(**cols))
                    keep.add(m["path"])
                    chunk_rows.extend(
                        chunk_values(doc_id, c, pending=False) for c in _chunks_of(m["chunks"])
                    )
                gone = [i for p, i in known.items() if p not in keep]
                for i in range(0, len(gone), 500):
                    conn.execute(delete(D).where(D.c.id.in_(gone[i : i + 500])))
                if chunk_rows:
                    conn.execute(insert(C), chunk_rows)
            conn.execute(
                update(K)
                .where(K.c.name == collection)
                .values(
                    model=str(settings["model"]),
                    model_fingerprint=str(settings["model_fingerprint"]),
                    dim=int(settings["dim"]),
                    settings=json.dumps(dict(settings), sort_keys=True),
                    layout=layout,
                    aborted=None,
                )
            )
            conn.execute(update(CB).where(CB.c.name == collection).values(phase="switching"))
            conn.execute(delete(BD).where(BD.c.collection == collection))
        self.manifest.count_cache.changed(sources)
