"""Writing prepared documents to the store, in bounded slices with checkpoints.

Write order per group of documents (DESIGN.md point 5), which makes a crash at any
point harmless:

a. record new point ids as *pending* in the manifest;
b. upsert the new points (``wait=True``) and refresh the payload of kept points;
c. delete every id the manifest holds for the documents (committed or pending) that
   is not in the new set;
d. commit: the pending marker is removed from the new points (one batched call), then
   the new ids become the documents' ids.

New points are upserted with the payload marker
:data:`~ingestd.store.search.query.PENDING_KEY`, which searches exclude: until its commit, a
document's new version is never returned, alone or beside its old one. A crash leaves
the marker only on ids the manifest holds as pending (the next write of the document
deletes or commits them; a scan hides them first, :meth:`Writer.hide_pending`).

Steps (a) and (b) run slice by slice, at most :data:`SLICE_CHUNKS` chunks each (the
pending ids of a slice are recorded just before its upsert). A slice's model call that
its own texts leave part-empty is filled with the texts of the slices after it, and of
the documents the caller will write next (``ahead``): their vectors wait in the
embedding cache, so that the calls (an embedding server's requests) stay full across
slices, groups and documents. After every slice the
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
from collections.abc import Callable, Sequence
from typing import Any

from ingestd.daemon.sources.versions import is_versioned
from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext
from ingestd.daemon.sync.preparing.documents import (
    PreparedDocument,
    sparse_vector,
    strip_provenance,
)
from ingestd.daemon.sync.types import SyncResult
from ingestd.daemon.sync.writing.shared_writes import SharedWriter
from ingestd.daemon.sync.writing.write_parts import (
    DocWork,
    InFlight,
    embedded,
    fails_whole_batch,
    vectors_from_store,
)
from ingestd.store.manifest.manifest import ChunkRow

__all__ = [
    "GROUP_CHUNKS",
    "GROUP_DOCS",
    "SLICE_CHUNKS",
    "DocWork",
    "InFlight",
    "Writer",
    "fails_whole_batch",
    "vectors_from_store",
]

logger = logging.getLogger(__name__)

#: Chunks embedded and upserted between two checkpoints: about one to three seconds of
#: embedding with all-MiniLM-L6-v2 on two cores (25-35 chunks/s).
SLICE_CHUNKS = 32
#: Documents per manifest commit when a sync writes many small ones.
GROUP_DOCS = 16
#: New chunks per manifest commit (embedding batches span documents).
GROUP_CHUNKS = 128
#: Payload updates of kept points per call (and between two checkpoints).
PAYLOAD_SLICE = 256


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
        ahead: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Write ``group`` (steps a-d) and count what was done into ``res``.

        Args:
            source: the documents' source.
            group: prepared documents (failed ones commit their error and no chunks).
            res: the sync's counters (``chunks_written`` grows slice by slice).
            force: re-upsert every point of the documents (repair), not only new ones.
            checkpoint: called after every slice; may raise ``SyncInterrupted``.
            progress: called after every slice, before ``checkpoint``.
            ahead: ``(chunk_hash, embedded text)`` of the chunks written next (by a
                later call): they fill a part-empty model call (see the module).

        A document whose own write fails is committed as failed instead (see the
        module docstring); the others are written.

        Raises:
            SyncInterrupted: from ``checkpoint``; the group stays pending, uncommitted.
            Exception: an error for which :func:`fails_whole_batch` holds (the store or
                the manifest cannot be written at all): nothing of the group is committed.
        """
        counts = (res.chunks_written, res.chunks_deleted, res.indexed, res.failed)
        try:
            self._write(source, group, res, force, checkpoint, progress, ahead)
            for prep in group:
                self.ctx.failures.accepted(source, prep.path)
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
        self.ctx.failures.refused(source, prep.path, error)
        res.refused.append(prep.path)
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
        ahead: Sequence[tuple[str, str]] = (),
    ) -> None:
        collection = self.ctx.collection_of(source)
        if is_versioned(self.ctx.source(source)):  # versions share points
            self.collections.ensure(collection)
            _ = self.ctx.resources.cache  # open the cache before the first lookup
            shared = SharedWriter(self.ctx, self.in_flight)
            try:
                work = shared.write(
                    source, collection, group, res, force, checkpoint, progress, ahead
                )
                self._commit(work, res)
            finally:
                for prep in group:
                    self.in_flight.pop((source, prep.path), None)
            return
        work = self.begin(source, group, force)
        try:
            self.refresh_kept(source, collection, work, checkpoint)
            todo = [(w, r) for w in work for r in w.fresh]
            texts = [embedded(w.prep, r.ordinal) for w, r in todo]
            for i in range(0, len(todo), SLICE_CHUNKS):
                later = [*texts[i + SLICE_CHUNKS :], *ahead]
                self.upsert_slice(source, collection, todo[i : i + SLICE_CHUNKS], res, later)
                if progress is not None:
                    progress()
                if checkpoint is not None:
                    checkpoint()
            self.finish(collection, work, res)
        finally:
            for w in work:
                self.in_flight.pop((source, w.prep.path), None)

    def begin(
        self, source: str, group: list[PreparedDocument], force: bool = False
    ) -> list[DocWork]:
        """Plan the write of ``group``: rows, fresh rows, stale ids; show it in flight.

        The caller ends each document's :attr:`in_flight` entry when it is done.
        """
        ctx = self.ctx
        self.collections.ensure(ctx.collection_of(source))
        _ = ctx.resources.cache  # open the cache before the first lookup
        doc_ids = ctx.manifest.upsert_documents(source, [p.path for p in group])
        known = ctx.manifest.chunks_of_docs(list(doc_ids.values()))
        fingerprints = ctx.manifest.rule_fingerprints(list(doc_ids.values()))
        work = [self._plan_doc(p, doc_ids[p.path], known[doc_ids[p.path]], force) for p in group]
        for w in work:
            w.resparse = fingerprints.get(w.doc_id) != w.prep.rule.fingerprint
            self.in_flight[(source, w.prep.path)] = InFlight(
                source, w.prep.path, 0, len(w.fresh), w.prep.size
            )
        return work

    def finish(self, collection: str, work: list[DocWork], res: SyncResult) -> None:
        """Steps (c) and (d): delete the stale ids, unmark the new points, commit."""
        ctx = self.ctx
        stale_ids = [pid for w in work for pid in w.stale]
        if stale_ids:  # (c)
            ctx.store.delete(collection, stale_ids)
        res.chunks_deleted += len(stale_ids)
        fresh_ids = [r.point_id for w in work for r in w.fresh]
        if fresh_ids:  # (d): searchable from here on
            ctx.store.unmark_pending(collection, fresh_ids)
        self._commit(work, res)

    def hide_pending(self, source: str) -> int:
        """Mark every point the manifest holds as pending for ``source`` (see the module).

        A point that versions share and one of them holds committed stays searchable.

        A crash between the unmarking and the commit of step (d) leaves points of an
        uncommitted version searchable; a scan calls this before anything is written.

        Returns:
            The number of pending ids.
        """
        from ingestd.store.search.query import PENDING_KEY

        rows = self.ctx.manifest.point_rows(source)
        committed = {pid for pid, _, pending in rows if not pending}  # shared by a version
        ids = sorted({pid for pid, _, pending in rows if pending} - committed)
        collection = self.ctx.collection_of(source)
        if ids and self.ctx.store.has_collection(collection):
            self.ctx.store.set_payload(collection, [(pid, {PENDING_KEY: True}) for pid in ids])
        return len(ids)

    def _plan_doc(
        self, prep: PreparedDocument, doc_id: int, known: list[ChunkRow], force: bool
    ) -> DocWork:
        committed = {c.point_id for c in known if not c.pending}
        rows = [
            ChunkRow(pid, h, i, c.start, c.end)
            for i, (pid, h, c) in enumerate(zip(prep.ids, prep.hashes, prep.chunks, strict=True))
        ]
        fresh = [r for r in rows if force or r.point_id not in committed]
        stale = {c.point_id for c in known} - set(prep.ids)
        return DocWork(prep, doc_id, rows, fresh, stale)

    def upsert_slice(
        self,
        source: str,
        collection: str,
        part: list[tuple[DocWork, ChunkRow]],
        res: SyncResult,
        ahead: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Steps (a) and (b) for one slice of new points (at most :data:`SLICE_CHUNKS`).

        ``ahead``: ``(chunk_hash, embedded text)`` of the chunks written next, which
        fill a part-empty model call (see the module docstring).
        """
        from ingestd.store.search.query import PENDING_KEY
        from ingestd.store.vectors.base import Point

        ctx = self.ctx
        embedder = ctx.profiles.profile_of(collection).embedder
        pending: dict[int, list[ChunkRow]] = {}
        for w, r in part:
            pending.setdefault(w.doc_id, []).append(r)
        ctx.manifest.add_pending_many(pending)  # (a)
        want = [embedded(w.prep, r.ordinal) for w, r in part]
        vectors = embedder.vectors(want, vectors_from_store(ctx, collection), ahead)
        now = ctx.now()
        points = []
        for w, r in part:
            payload = dict(w.prep.payloads[r.ordinal])
            payload["indexed_at"] = now
            payload[PENDING_KEY] = True  # searches skip it until step (d)
            chunk = w.prep.chunks[r.ordinal]
            vec = vectors[w.prep.hashes[r.ordinal]]
            points.append(Point(r.point_id, vec, payload, sparse_vector(chunk)))
        ctx.store.upsert(collection, points)  # (b)
        for w, _ in part:
            self.in_flight[(source, w.prep.path)].chunks_done += 1
        res.chunks_written += len(points)

    def refresh_kept(
        self,
        source: str,
        collection: str,
        work: list[DocWork],
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
        rows: dict[str, tuple[DocWork, ChunkRow]] = {}
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

    def _commit(self, work: list[DocWork], res: SyncResult) -> None:
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
                        "error": prep.error or prep.note,
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


def _git_of(payload: dict[str, Any]) -> dict[str, Any]:
    return {"git_commit": payload["git_commit"]} if "git_commit" in payload else {}
