"""Writing the documents of a versioned source, whose versions share points.

A point of a versioned source is held by every version that has the same chunk at the
same path (see :mod:`ingestd.daemon.sources.versions`): its payload is the merge of
those versions' payloads, and the manifest records it under each version's document
(the reference counts). So writing one version's document is a change to the points
it holds and held, in the light of the other documents holding them:

* a point no version held before is upserted (its vector from the embedding cache,
  else the model);
* a point another version holds gets this version added, removed or changed in its
  payload: the point is upserted again with its stored vectors (never embedded);
* a point no version holds any more is deleted.

The write order of :mod:`~ingestd.daemon.sync.writing.writer` holds: (a) new rows pending in the
manifest, (b) new points upserted with the pending marker, (c) points no version holds
deleted, (d) shared points' payloads re-written, new points unmarked, then the commit.
A crash anywhere leaves rows the manifest knows (pending or committed): a replay
computes the same payloads, since each is a function of the documents holding the
point (:func:`plan_shared`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ingestd.daemon.sources.versions import (
    POINT_KEYS,
    merge_versions,
    payload_versions,
    split_document_key,
    strip_keys,
    version_view,
)
from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.preparing.documents import PreparedDocument, sparse_vector
from ingestd.daemon.sync.types import SyncResult
from ingestd.daemon.sync.writing.write_parts import DocWork, InFlight, embedded, vectors_from_store
from ingestd.store.manifest.manifest import ChunkRow
from ingestd.store.search.query import PENDING_KEY

__all__ = ["SharedPlan", "SharedWriter", "plan_shared"]

logger = logging.getLogger(__name__)

#: Points upserted between two checkpoints
#: (as :data:`~ingestd.daemon.sync.writing.writer.SLICE_CHUNKS`).
SLICE_POINTS = 32
#: Shared points re-written per call.
REWRITE_SLICE = 256


@dataclass
class SharedPlan:
    """What a write of versions' documents does to the points they touch.

    Attributes:
        fresh: ids to upsert whole, with a vector from the cache or the model (absent
            from the store; every id a document holds when forced).
        rewrite: ids in the store whose payload changes (upserted again with their
            stored vectors).
        delete: ids in the store that no version holds any more.
        payloads: the new payload of each id in ``fresh`` and ``rewrite``.
    """

    fresh: list[str] = field(default_factory=list)
    rewrite: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)


def plan_shared(
    current: Mapping[str, Mapping[str, Any]],
    touched: Iterable[str],
    own: Mapping[str, Mapping[str, Mapping[str, Any]]],
    others: Mapping[str, set[str]],
    *,
    force: bool = False,
) -> SharedPlan:
    """The points to upsert, re-write and delete when documents of some versions change.

    Args:
        current: the stored payload of each touched id the store holds.
        touched: every id the written documents held before or hold now.
        own: id -> version -> the payload the written documents give it now.
        others: id -> the versions of the other documents (not written now) holding it;
            their part of the payload is read from ``current``.
        force: upsert every id the written documents hold (a repair).
    """
    plan = SharedPlan()
    for pid in sorted(set(touched)):
        cur = current.get(pid)
        views: dict[str, Mapping[str, Any]] = {}
        if cur is not None:
            held = others.get(pid, set())
            for v in payload_versions(cur):
                if v in held:
                    views[v] = strip_keys(version_view(cur, v), POINT_KEYS)
        views.update(own.get(pid, {}))
        if not views:
            if cur is not None:
                plan.delete.append(pid)
            continue
        merged = merge_versions(views)
        plan.payloads[pid] = merged
        if cur is None or (force and pid in own):
            plan.fresh.append(pid)
        elif cur.get(PENDING_KEY) or strip_keys(merged, POINT_KEYS) != strip_keys(cur, POINT_KEYS):
            plan.rewrite.append(pid)
    return plan


class SharedWriter:
    """Writes groups of documents of a versioned source (see the module docstring).

    Args:
        ctx: the engine's context.
        in_flight: the writer's documents in flight (``status``), by ``(source, path)``.
    """

    def __init__(self, ctx: SyncContext, in_flight: dict[tuple[str, str], InFlight]) -> None:
        self.ctx = ctx
        self.in_flight = in_flight

    def write(
        self,
        source: str,
        collection: str,
        group: list[PreparedDocument],
        res: SyncResult,
        force: bool,
        checkpoint: Callable[[], None] | None,
        progress: Callable[[], None] | None,
        ahead: Sequence[tuple[str, str]] = (),
    ) -> list[DocWork]:
        """Steps (a)-(d) but the commit for ``group``; returns the work to commit.

        ``ahead``: ``(chunk_hash, embedded text)`` of the chunks written next, which fill
        a part-empty model call (see :mod:`~ingestd.daemon.sync.writing.writer`).

        Raises:
            SyncInterrupted: from ``checkpoint``; nothing of the group is committed.
        """
        ctx = self.ctx
        doc_ids = ctx.manifest.upsert_documents(source, [p.path for p in group])
        known = ctx.manifest.chunks_of_docs(list(doc_ids.values()))
        own: dict[str, dict[str, Mapping[str, Any]]] = {}
        chunk_of: dict[str, tuple[PreparedDocument, int]] = {}
        touched: set[str] = set()
        work: list[DocWork] = []
        pending: dict[int, list[ChunkRow]] = {}
        for prep in group:
            doc_id = doc_ids[prep.path]
            version = split_document_key(prep.path)[0] or ""
            rows = [
                ChunkRow(pid, h, i, c.start, c.end)
                for i, (pid, h, c) in enumerate(
                    zip(prep.ids, prep.hashes, prep.chunks, strict=True)
                )
            ]
            for i, pid in enumerate(prep.ids):
                own.setdefault(pid, {})[version] = prep.payloads[i]
                chunk_of.setdefault(pid, (prep, i))
            held = {c.point_id for c in known[doc_id]}
            committed = {c.point_id for c in known[doc_id] if not c.pending}
            touched |= held | set(prep.ids)
            pending[doc_id] = [r for r in rows if r.point_id not in committed]
            work.append(DocWork(prep, doc_id, rows, [], held - set(prep.ids)))
        others = self._other_versions(touched, doc_ids.values())
        plan = self._plan(collection, touched, own, others, force)
        for w in work:
            n = sum(1 for pid in plan.fresh if chunk_of[pid][0] is w.prep)
            self.in_flight[(source, w.prep.path)] = InFlight(source, w.prep.path, 0, n, w.prep.size)
        ctx.manifest.add_pending_many(pending, shared=True)  # (a)
        self._upsert_fresh(
            source, collection, plan, chunk_of, res, checkpoint, progress, ahead
        )  # (b)
        if plan.fresh and checkpoint is not None:
            # a checkpoint may have served other writes of these points: plan the rest again
            fresh = set(plan.fresh)
            others = self._other_versions(touched, doc_ids.values())
            plan = self._plan(collection, touched, own, others, False)
            plan.rewrite = [pid for pid in plan.rewrite if pid not in fresh]
            plan.fresh = sorted(fresh)
        if plan.delete:  # (c)
            ctx.store.delete(collection, plan.delete)
        res.chunks_deleted += len(plan.delete)
        self._rewrite(collection, plan, chunk_of)  # (d)
        if plan.fresh:
            ctx.store.unmark_pending(collection, plan.fresh)
        return work

    def remove(self, source: str, collection: str, doc_id: int) -> int:
        """Take document ``doc_id`` out of the points it holds, then drop its rows.

        Points no other version holds are deleted; the others lose this version from
        their payload. Returns the number of points deleted.
        """
        ctx = self.ctx
        touched = {c.point_id for c in ctx.manifest.chunks(doc_id)}
        others = self._other_versions(touched, [doc_id])
        plan = self._plan(collection, touched, {}, others, False)
        if plan.delete:
            ctx.store.delete(collection, plan.delete)
        self._rewrite(collection, plan, {})
        ctx.manifest.delete_document(doc_id)
        return len(plan.delete)

    def _other_versions(self, touched: set[str], docs: Iterable[int]) -> dict[str, set[str]]:
        holders = self.ctx.manifest.holders(touched, exclude=docs)
        return {
            pid: {split_document_key(path)[0] or "" for _, path in rows}
            for pid, rows in holders.items()
        }

    def _plan(
        self,
        collection: str,
        touched: set[str],
        own: Mapping[str, Mapping[str, Mapping[str, Any]]],
        others: Mapping[str, set[str]],
        force: bool,
    ) -> SharedPlan:
        store = self.ctx.store
        current: dict[str, dict[str, Any]] = {}
        ids = sorted(touched)
        for i in range(0, len(ids), REWRITE_SLICE):
            for pid, payload, _ in store.retrieve(collection, ids[i : i + REWRITE_SLICE]):
                current[pid] = payload
        return plan_shared(current, touched, own, others, force=force)

    def _upsert_fresh(
        self,
        source: str,
        collection: str,
        plan: SharedPlan,
        chunk_of: Mapping[str, tuple[PreparedDocument, int]],
        res: SyncResult,
        checkpoint: Callable[[], None] | None,
        progress: Callable[[], None] | None,
        ahead: Sequence[tuple[str, str]],
    ) -> None:
        from ingestd.store.vectors.base import Point

        ctx = self.ctx
        embedder = ctx.profiles.profile_of(collection).embedder
        texts = [embedded(*chunk_of[pid]) for pid in plan.fresh]
        for k in range(0, len(plan.fresh), SLICE_POINTS):
            part = plan.fresh[k : k + SLICE_POINTS]
            later = [*texts[k + SLICE_POINTS :], *ahead]
            vectors = embedder.vectors(
                texts[k : k + SLICE_POINTS], vectors_from_store(ctx, collection), later
            )
            now = ctx.now()
            points = []
            for pid in part:
                prep, i = chunk_of[pid]
                payload = {**plan.payloads[pid], "indexed_at": now, PENDING_KEY: True}
                vec = vectors[prep.hashes[i]]
                points.append(Point(pid, vec, payload, sparse_vector(prep.chunks[i])))
                self.in_flight[(source, prep.path)].chunks_done += 1
            ctx.store.upsert(collection, points)
            res.chunks_written += len(points)
            if progress is not None:
                progress()
            if checkpoint is not None:
                checkpoint()

    def _rewrite(
        self,
        collection: str,
        plan: SharedPlan,
        chunk_of: Mapping[str, tuple[PreparedDocument, int]],
    ) -> None:
        """Upsert the points of ``plan.rewrite`` again: new payload, stored vectors.

        The sparse vector is recomputed from a written document's chunk when there is
        one (a rule change re-writes it), else kept. Between slices only searches are
        served (no other write may change these points meanwhile).
        """
        from ingestd.store.vectors.base import Point

        store = self.ctx.store
        for k in range(0, len(plan.rewrite), REWRITE_SLICE):
            part = plan.rewrite[k : k + REWRITE_SLICE]
            now = self.ctx.now()
            points = []
            for p in store.retrieve_points(collection, part):
                sparse = p.sparse
                if p.id in chunk_of:
                    prep, i = chunk_of[p.id]
                    sparse = sparse_vector(prep.chunks[i])
                payload = {**plan.payloads[p.id], "indexed_at": now}
                points.append(Point(p.id, p.vector, payload, sparse))
            store.upsert(collection, points)
            if k + REWRITE_SLICE < len(plan.rewrite):
                self.ctx.checkpoints.checkpoint(serve_changes=False)
