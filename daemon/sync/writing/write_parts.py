"""The records of a write, and the helpers the writers share.

:class:`InFlight` is what ``status`` shows of a document being written, :class:`DocWork`
one document's part of a write (:mod:`~ingestd.daemon.sync.writing.writer`,
:mod:`~ingestd.daemon.sync.writing.long_writes`); :func:`fails_whole_batch` tells a document's
own error from one of the store or the machine, :func:`vectors_from_store` finds
vectors the embedding cache evicted, :func:`embedded` and :func:`embedded_texts` give
the ``(chunk_hash, text)`` pairs the embedder reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.preparing.documents import PreparedDocument
from ingestd.daemon.sync.types import SyncInterrupted
from ingestd.store.manifest.manifest import ChunkRow

__all__ = [
    "DocWork",
    "InFlight",
    "embedded",
    "embedded_texts",
    "fails_whole_batch",
    "vectors_from_store",
]

logger = logging.getLogger(__name__)


@dataclass
class InFlight:
    """A document being written: pending in the manifest until its group commits.

    Attributes:
        source: the source name.
        path: POSIX path relative to the source root.
        chunks_done: new chunks of the document upserted so far.
        chunks_total: new chunks the document needs (kept chunks are not counted).
        size: the file's size, in bytes.
        phase: ``writing``; ``chunking`` while a long document is read and chunked in
            the background; ``queued`` while it waits for its turn (a long document, or
            one prepared ahead of the group being written).
    """

    source: str
    path: str
    chunks_done: int
    chunks_total: int
    size: int = 0
    phase: str = "writing"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "source": self.source,
            "path": self.path,
            "chunks_done": self.chunks_done,
            "chunks_total": self.chunks_total,
            "phase": self.phase,
        }


@dataclass
class DocWork:
    """One document of a write: its rows, the new ones, and the stale ids to delete.

    Attributes:
        prep: the prepared document.
        doc_id: its manifest id.
        rows: every chunk row of the new version.
        fresh: rows whose point is upserted (new ids, or every id when forced).
        stale: ids the manifest holds (committed or pending) that the new version drops.
        resparse: the rule fingerprint changed: kept points get their sparse vector
            written again too.
    """

    prep: PreparedDocument
    doc_id: int
    rows: list[ChunkRow]
    fresh: list[ChunkRow]
    stale: set[str]
    #: the rule fingerprint changed (e.g. the BM25 contract): kept points get their
    #: sparse vector re-written too
    resparse: bool = False


def fails_whole_batch(exc: BaseException) -> bool:
    """Whether ``exc`` is about the store, the manifest or the machine, not one document.

    Such errors (a stop request, a store or an embedding endpoint that cannot be
    reached or is damaged or misconfigured, a full disk, a locked database) fail the
    whole group, which is tried again later (damage stops the daemon, naming its fix);
    any other error is the document's own.
    """
    from sqlalchemy.exc import DisconnectionError, OperationalError

    from ingestd.store.common.damage import StateDamagedError
    from ingestd.store.embedding.remote_backend import EndpointDimensionError, EndpointError
    from ingestd.store.vectors.base import StoreUnavailableError

    if isinstance(
        exc,
        SyncInterrupted
        | OSError
        | MemoryError
        | StoreUnavailableError
        | EndpointError
        | EndpointDimensionError
        | StateDamagedError
        | OperationalError
        | DisconnectionError,
    ):
        return True
    return type(exc).__module__.startswith("qdrant_client")


def embedded(prep: PreparedDocument, ordinal: int) -> tuple[str, str]:
    """``(chunk_hash, embedded text)`` of chunk ``ordinal`` of ``prep``: what the embedder reads."""
    return prep.hashes[ordinal], prep.chunks[ordinal].embed_text


def embedded_texts(docs: Iterable[PreparedDocument]) -> list[tuple[str, str]]:
    """:func:`embedded` of every chunk of ``docs``, in order (texts a writer needs soon)."""
    return [embedded(p, i) for p in docs for i in range(len(p.ids))]


def vectors_from_store(ctx: SyncContext, collection: str) -> Callable[[list[str]], dict[str, Any]]:
    """A lookup of vectors by chunk hash among the points already in ``collection``.

    Used when the embedding cache has evicted a vector: a point with the same chunk
    hash (a renamed or copied document) still holds it.

    Returns:
        A function of chunk hashes -> ``{chunk hash: (dim,) float32 vector}`` of those
        found.
    """

    def fallback(hashes: list[str]) -> dict[str, Any]:
        import numpy as np

        ids = ctx.manifest.point_ids_for_hashes(hashes)
        if not ids:
            return {}
        by_id = {pid: h for h, pid in ids.items()}
        out: dict[str, Any] = {}
        recs = []
        # while a new version is built, its points are not behind the alias yet
        for name in dict.fromkeys([collection, ctx.store.write_target(collection)]):
            try:
                recs += ctx.store.retrieve(name, list(by_id), with_vectors=True)
            except Exception:
                logger.debug("vector lookup by chunk hash failed", exc_info=True)
        for pid, _payload, vec in recs:
            if vec is not None and not isinstance(vec, dict):
                out[by_id[pid]] = np.asarray(vec, dtype=np.float32)
        return out

    return fallback
