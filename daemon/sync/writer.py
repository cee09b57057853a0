"""Writing prepared documents to the store, in bounded slices with checkpoints.

Write order per group of documents (DESIGN.md point 5), which makes a crash at any
point harmless:

a. record new point ids as *pending* in the manifest;
b. upsert the new points (``wait=True``) and refresh the payload of kept points;
c. delete every id the manifest holds for the documents (committed or pending) that
   is not in the new set;
d. commit: the new ids become the documents' ids.

Steps (a) and (b) run slice by slice, at most :data:`SLICE_CHUNKS` chunks each (the
pending ids of a slice are recorded just before its upsert). After every slice the
writer calls its *checkpoint*: the daemon pings the systemd watchdog, serves searches
and other files' changes, and a stop request (SIGTERM) raises
:class:`~ingestd.daemon.sync.types.SyncInterrupted` there. So no document, however
large, holds the daemon for longer than one slice (DESIGN.md, "Long work is sliced"),
and a document interrupted mid-way costs the next attempt nothing but re-use of its
cached vectors.

One document never fails its neighbours: when writing a group raises an error that
is not about the store, the manifest or the machine as a whole (those fail the group,
which the daemon retries with back-off), the documents are written one by one, and
one that fails alone is committed as a failed document (no points, its error in
``status``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext
from ingestd.daemon.sync.documents import PreparedDocument, sparse_vector, strip_provenance
from ingestd.daemon.sync.types import SyncInterrupted, SyncResult
from ingestd.store.manifest import ChunkRow

__all__ = ["SLICE_CHUNKS", "InFlight", "Writer", "fails_whole_batch", "vectors_from_store"]

logger = logging.getLogger(__name__)

#: Chunks embedded and upserted between two checkpoints: about one to three seconds of
#: embedding with all-MiniLM-L6-v2 on two cores (25-35 chunks/s).
SLICE_CHUNKS = 32
#: Payload updates of kept points per call (and between two checkpoints).
PAYLOAD_SLICE = 256


@dataclass
class InFlight:
    """A document being written: pending in the manifest until its group commits.

    Attributes:
        source: the source name.
        path: POSIX path relative to the source root.
        chunks_done: new chunks of the document upserted so far.
        chunks_total: new chunks the document needs (kept chunks are not counted).
        size: the file's size, in bytes.
        phase: ``writing``, or ``chunking`` while a long document is read and chunked
            in the background.
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
class _DocWork:
    prep: PreparedDocument
    doc_id: int
    rows: list[ChunkRow]
    fresh: list[ChunkRow]
    stale: set[str]
    #: the rule fingerprint changed (e.g. the BM25 contract): kept points get their
    #: sparse vector re-written too
    resparse: bool = False


class Writer:
    """Writes groups of prepared documents into the current versions of collections.

    Args:
        ctx: the engine's context (manifest, store, cache, profiles, clock).
        collections: makes sure a collection exists and is up to date before a write.

    Attributes:
        in_flight: documents written right now, by ``(source, path)``; the daemon
            shows them in ``status`` and keeps other jobs off them.
    """

    def __init__(self, ctx: SyncContext, collections: CollectionLifecycle) -> None:
        self.ctx = ctx
        self.collections = collections
        self.in_flight: dict[tuple[str, str], InFlight] = {}

    def write(
        self,
        source: str,
        group: list[PreparedDocument],
        res: SyncResult,
        *,
        force: bool = False,
        checkpoint: Callable[[], None] | None = None,
        progress: Callable[[], None] | None = None,
    ) -> None:
        """Write ``group`` (steps a-d) and count what was done into ``res``.

        Args:
            source: the documents' source.
            group: prepared documents (failed ones commit their error and no chunks).
            res: the sync's counters (``chunks_written`` grows slice by slice).
            force: re-upsert every point of the documents (repair), not only new ones.
            checkpoint: called after every slice; may raise ``SyncInterrupted``.
            progress: called after every slice, before ``checkpoint``.

        A document whose own write fails is committed as failed instead (see the
        module docstring); the others are written.

        Raises:
            SyncInterrupted: from ``checkpoint``; the group stays pending, uncommitted.
            Exception: an error for which :func:`fails_whole_batch` holds (the store or
                the manifest cannot be written at all): nothing of the group is committed.
        """
        counts = (res.chunks_written, res.chunks_deleted, res.indexed, res.failed)
        try:
            self._write(source, group, res, force, checkpoint, progress)
            return
        except Exception as exc:
            if fails_whole_batch(exc):
                raise
            error = f"{type(exc).__name__}: {exc}"
            res.chunks_written, res.chunks_deleted, res.indexed, res.failed = counts
        if len(group) > 1:
            logger.warning(
                "writing %d documents together failed (%s); writing them one by one",
                len(group),
                error,
            )
            for prep in group:
                self.write(
                    source, [prep], res, force=force, checkpoint=checkpoint, progress=progress
                )
            return
        prep = group[0]
        logger.error("cannot write %s (%s); recording it as failed", prep.path, error)
        failed = PreparedDocument(
            prep.path, prep.stat, prep.content_hash, prep.rule, error=f"cannot be written: {error}"
        )
        try:
            self._write(source, [failed], res, False, checkpoint, progress)
        except Exception as exc:
            if fails_whole_batch(exc):
                raise
            logger.error(
                "cannot record %s as failed either (%s: %s)", prep.path, type(exc).__name__, exc
            )
            self.ctx.failures.skip(source, prep.path, f"cannot be written or recorded: {error}")

    def _write(
        self,
        source: str,
        group: list[PreparedDocument],
        res: SyncResult,
        force: bool,
        checkpoint: Callable[[], None] | None,
        progress: Callable[[], None] | None,
    ) -> None:
        ctx = self.ctx
        collection = ctx.collection_of(source)
        self.collections.ensure(collection)
        _ = ctx.resources.cache  # open the cache before the first lookup
        doc_ids = ctx.manifest.upsert_documents(source, [p.path for p in group])
        known = ctx.manifest.chunks_of_docs(list(doc_ids.values()))
        fingerprints = ctx.manifest.rule_fingerprints(list(doc_ids.values()))
        work = [self._plan_doc(p, doc_ids[p.path], known[doc_ids[p.path]], force) for p in group]
        for w in work:
            w.resparse = fingerprints.get(w.doc_id) != w.prep.rule.fingerprint
        keys = [(source, w.prep.path) for w in work]
        for key, w in zip(keys, work, strict=True):
            self.in_flight[key] = InFlight(source, w.prep.path, 0, len(w.fresh), w.prep.size)
        try:
            self._refresh_kept(source, collection, work, checkpoint)
            self._upsert_fresh(source, collection, work, res, checkpoint, progress)
            stale_ids = [pid for w in work for pid in w.stale]
            if stale_ids:  # (c)
                ctx.store.delete(collection, stale_ids)
            res.chunks_deleted += len(stale_ids)
            self._commit(work, res)  # (d)
        finally:
            for key in keys:
                self.in_flight.pop(key, None)

    def _plan_doc(
        self, prep: PreparedDocument, doc_id: int, known: list[ChunkRow], force: bool
    ) -> _DocWork:
        committed = {c.point_id for c in known if not c.pending}
        rows = [
            ChunkRow(pid, h, i, c.start, c.end)
            for i, (pid, h, c) in enumerate(zip(prep.ids, prep.hashes, prep.chunks, strict=True))
        ]
        fresh = [r for r in rows if force or r.point_id not in committed]
        stale = {c.point_id for c in known} - set(prep.ids)
        return _DocWork(prep, doc_id, rows, fresh, stale)

    def _upsert_fresh(
        self,
        source: str,
        collection: str,
        work: list[_DocWork],
        res: SyncResult,
        checkpoint: Callable[[], None] | None,
        progress: Callable[[], None] | None,
    ) -> None:
        """Steps (a) and (b) for the new points, slice by slice."""
        from ingestd.store.vectors import Point

        ctx = self.ctx
        todo = [(w, r) for w in work for r in w.fresh]
        embedder = ctx.profiles.profile_of(collection).embedder
        fallback = vectors_from_store(ctx, collection)
        for i in range(0, len(todo), SLICE_CHUNKS):
            part = todo[i : i + SLICE_CHUNKS]
            pending: dict[int, list[ChunkRow]] = {}
            for w, r in part:
                pending.setdefault(w.doc_id, []).append(r)
            ctx.manifest.add_pending_many(pending)  # (a)
            want = [
                (w.prep.hashes[r.ordinal], w.prep.chunks[r.ordinal].embed_text) for w, r in part
            ]
            vectors = embedder.vectors(want, fallback)
            now = ctx.now()
            points = []
            for w, r in part:
                payload = dict(w.prep.payloads[r.ordinal])
                payload["indexed_at"] = now
                chunk = w.prep.chunks[r.ordinal]
                vec = vectors[w.prep.hashes[r.ordinal]]
                points.append(Point(r.point_id, vec, payload, sparse_vector(chunk)))
            ctx.store.upsert(collection, points)  # (b)
            for w, _ in part:
                self.in_flight[(source, w.prep.path)].chunks_done += 1
            res.chunks_written += len(points)
            if progress is not None:
                progress()
            if checkpoint is not None:
                checkpoint()

    def _refresh_kept(
        self,
        source: str,
        collection: str,
        work: list[_DocWork],
        checkpoint: Callable[[], None] | None,
    ) -> None:
        """Step (b) for kept points: payload fields that moved (ordinal, offsets, ...).

        After a rule change their sparse vectors are re-written too (the BM25 contract
        is part of the rule fingerprint; the text, and so the point id, is unchanged).
        A kept point the store lost is upserted whole instead: its row joins the
        document's fresh rows (the in-flight counts grow accordingly).
        """
        updates: list[tuple[str, dict[str, Any]]] = []
        resparse: list[tuple[str, Any]] = []
        rows: dict[str, tuple[_DocWork, ChunkRow]] = {}
        for w in work:
            fresh_ids = {r.point_id for r in w.fresh}
            for r in w.rows:
                if r.point_id not in fresh_ids:
                    payload = w.prep.payloads[r.ordinal]
                    updates.append((r.point_id, strip_provenance(payload) | _git_of(payload)))
                    rows[r.point_id] = (w, r)
                    vec = sparse_vector(w.prep.chunks[r.ordinal]) if w.resparse else None
                    if vec is not None:
                        resparse.append((r.point_id, vec))
        lost: set[str] = set()
        for i in range(0, len(updates), PAYLOAD_SLICE):
            missing = self.ctx.store.set_payload(collection, updates[i : i + PAYLOAD_SLICE])
            lost.update(missing or ())
            for pid in missing or ():
                w, r = rows[pid]
                w.fresh.append(r)
                self.in_flight[(source, w.prep.path)].chunks_total += 1
            if missing:
                logger.warning("%d points missing from the store are written again", len(missing))
            if checkpoint is not None and i + PAYLOAD_SLICE < len(updates):
                checkpoint()
        resparse = [(pid, vec) for pid, vec in resparse if pid not in lost]  # upserted whole
        for i in range(0, len(resparse), PAYLOAD_SLICE):
            self.ctx.store.set_sparse(collection, resparse[i : i + PAYLOAD_SLICE])
            if checkpoint is not None and i + PAYLOAD_SLICE < len(resparse):
                checkpoint()

    def _commit(self, work: list[_DocWork], res: SyncResult) -> None:
        """Step (d): one manifest transaction for the group."""
        now = self.ctx.now()
        commits = []
        for w in work:
            prep, st = w.prep, w.prep.stat
            commits.append(
                (
                    w.doc_id,
                    w.rows,
                    {
                        "size": st.size,
                        "mtime_ns": st.mtime_ns,
                        "ctime_ns": st.ctime_ns,
                        "inode": st.inode,
                        "content_hash": prep.content_hash,
                        "rule_fingerprint": prep.rule.fingerprint,
                        "state": "failed" if prep.error else "ok",
                        "error": prep.error,
                        "git_commit": prep.payloads[0].get("git_commit") if prep.payloads else None,
                        "indexed_at": now,
                    },
                )
            )
            if prep.error:
                logger.warning("%s: %s", prep.path, prep.error)
                res.failed += 1
            else:
                res.indexed += 1
        self.ctx.manifest.commit_documents(commits)


def fails_whole_batch(exc: BaseException) -> bool:
    """Whether ``exc`` is about the store, the manifest or the machine, not one document.

    Such errors (a stop request, a store that cannot be reached, a full disk, a locked
    database) fail the whole group, which is tried again later; any other error is
    the document's own.
    """
    from sqlalchemy.exc import DisconnectionError, OperationalError

    from ingestd.store.vectors import StoreUnavailableError

    if isinstance(
        exc,
        SyncInterrupted
        | OSError
        | MemoryError
        | StoreUnavailableError
        | OperationalError
        | DisconnectionError,
    ):
        return True
    return type(exc).__module__.startswith("qdrant_client")


def _git_of(payload: dict[str, Any]) -> dict[str, Any]:
    return {"git_commit": payload["git_commit"]} if "git_commit" in payload else {}


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
