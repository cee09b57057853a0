"""Applying a plan: documents prepared and written in groups, deletions, stat updates.

Documents are prepared by :class:`~ingestd.daemon.sync.preparer.Preparer` and written
by :class:`~ingestd.daemon.sync.writer.Writer` in the crash-safe write order, in groups
that span documents (embedding batches fill up across small files), slice by slice
with a checkpoint after each.

Syncs nest: a change batch of other files may run inside a checkpoint of a long scan.
A nested sync leaves the documents the running one has in flight to a later batch
(``deferred``), and those it has yet to read to it, so each is processed once.
"""

from __future__ import annotations

import logging

from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext
from ingestd.daemon.sync.documents import PreparedDocument
from ingestd.daemon.sync.memory import release_free_memory
from ingestd.daemon.sync.preparer import Preparer
from ingestd.daemon.sync.scanner import stat_file
from ingestd.daemon.sync.types import (
    Plan,
    ProgressFn,
    SyncInterrupted,
    SyncProgress,
    SyncResult,
    UnreadableFile,
)
from ingestd.daemon.sync.writer import Writer

__all__ = ["GROUP_CHUNKS", "GROUP_DOCS", "Applier"]

logger = logging.getLogger(__name__)

GROUP_DOCS = 16  # documents per manifest commit
GROUP_CHUNKS = 128  # new chunks per manifest commit (embedding batches span documents)


class Applier:
    """Carries out plans.

    Args:
        ctx: the engine's context.
        preparer: reads and chunks documents.
        writer: writes prepared documents.
        collections: collection versions (created before a write, kept in step after).
    """

    def __init__(
        self,
        ctx: SyncContext,
        preparer: Preparer,
        writer: Writer,
        collections: CollectionLifecycle,
    ) -> None:
        self.ctx = ctx
        self.preparer = preparer
        self.writer = writer
        self.collections = collections
        self._queued: list[tuple[str, set[str]]] = []  # per running apply: paths not yet read

    def apply(
        self,
        plan: Plan,
        *,
        progress: ProgressFn | None = None,
        force: bool = False,
    ) -> SyncResult:
        """Carry out ``plan``; a stop request ends it at the next checkpoint.

        Paths another sync is writing right now (this one runs nested inside its
        checkpoint) are left out and listed in ``deferred``.

        Args:
            plan: from :meth:`~ingestd.daemon.sync.planner.Planner.plan` (or built by
                hand, e.g. for a repair).
            progress: called with a :class:`SyncProgress` after every write slice.
            force: re-upsert every point of the indexed documents (repair).

        Returns:
            The counts; ``interrupted`` when a stop request ended it early (nothing of
            the documents in flight is committed: the next sync finishes them).
        """
        ctx = self.ctx
        source = plan.source
        res = SyncResult(
            source, held=list(plan.held), root_missing=plan.root_missing, repaired=plan.repaired
        )
        self._leave_to_running(plan, res)
        self._queued.append((source, set(plan.index)))
        stats = ctx.profiles.stats
        e0, r0 = stats.embedded, stats.reused
        prog = SyncProgress(
            source,
            docs_total=len(plan.index),
            bytes_total=sum(plan.sizes.get(p, 0) for p in plan.index),
        )
        ctx.checkpoints.begin(prog, progress)
        collection = ctx.collection_of(source)
        if plan.scan:
            self.collections.before_scan(collection)
        try:
            if plan.index or plan.delete or self.collections.due(collection):
                rebuilt = self.collections.ensure(collection)
                plan.index = [p for p in plan.index if (source, p) not in rebuilt]
            self._index(plan, res, prog, force)
            for rel in plan.delete:
                ctx.checkpoints.heartbeat()
                self._delete(source, rel, res)
            written = [p for p in plan.index if p not in res.retry]
            self.collections.follow(collection, source, written, plan.delete)
            for rel, st in plan.stat_only:
                ctx.checkpoints.heartbeat()
                doc = ctx.manifest.document(source, rel)
                if doc is not None:
                    ctx.manifest.update_document(
                        doc.id, size=st.size, mtime_ns=st.mtime_ns, ctime_ns=st.ctime_ns,
                        inode=st.inode,
                    )  # fmt: skip
        except SyncInterrupted:
            res.interrupted = True
        finally:
            ctx.checkpoints.end()
            self._queued.pop()
            res.embedded = stats.embedded - e0
            res.reused = stats.reused - r0
        ctx.failures.settle(plan, res)
        if (plan.index or plan.delete) and not self._queued:
            release_free_memory()  # see ingestd.daemon.sync.memory
        if plan.scan and not plan.root_missing:
            ctx.manifest.set_held_deletes(source, len(plan.held))
        elif not plan.root_missing:
            self._release_held(plan)
        now = ctx.now()
        if res.indexed or res.deleted or res.failed:  # a change became searchable
            ctx.manifest.set_last_change_synced(source, now)
        if res.complete:
            ctx.manifest.set_last_sync(source, now)
        return res

    def _release_held(self, plan: Plan) -> None:
        """Forget held deletions that a sync of changed paths settled.

        The guard holds the deletions of a scan; a later sync of changed paths (files
        checked out again, or deleted for good) settles the held paths it covers: a
        path whose file is back, or whose document is gone, is no longer held. The
        count in the manifest (``status``) follows.
        """
        ctx = self.ctx
        source = plan.source
        held = ctx.held.get(source)
        if not held:
            return
        scope = plan.scope

        def covered(rel: str) -> bool:
            return any(not s or rel == s or rel.startswith(s + "/") for s in scope)

        root = ctx.root(source)
        still = [
            rel
            for rel in held
            if not covered(rel)
            or (stat_file(root / rel) is None and ctx.manifest.document(source, rel) is not None)
        ]
        if len(still) == len(held):
            return
        if still:
            ctx.held[source] = still
        else:
            ctx.held.pop(source, None)
        ctx.manifest.set_held_deletes(source, len(still))
        logger.info("source %s: %d deletions no longer held", source, len(held) - len(still))

    def _leave_to_running(self, plan: Plan, res: SyncResult) -> None:
        """Keep a sync nested in another one's checkpoint off the other one's documents.

        Documents the running sync has in flight are *deferred* (the caller syncs them
        again once it ends); documents it has yet to read are left to it (it reads them
        after this change, so each is processed once).
        """
        busy = {p for s, p in self.writer.in_flight if s == plan.source}
        ahead = set().union(*(q for s, q in self._queued if s == plan.source))
        if not busy and not ahead:
            return
        res.deferred = sorted(
            busy & (set(plan.index) | set(plan.delete) | {p for p, _ in plan.stat_only})
        )
        skip = busy | ahead
        plan.index = [p for p in plan.index if p not in skip]
        plan.delete = [p for p in plan.delete if p not in skip]
        plan.stat_only = [(p, st) for p, st in plan.stat_only if p not in skip]

    def _index(self, plan: Plan, res: SyncResult, prog: SyncProgress, force: bool) -> None:
        """Prepare and write ``plan.index`` in groups spanning documents, slice by slice."""
        ctx = self.ctx
        source = plan.source
        git_commit = self.preparer.git_commit(source) if plan.index else None
        group: list[PreparedDocument] = []
        new_chunks = 0
        bytes_before = 0
        e0 = ctx.profiles.stats.embedded

        def report() -> None:
            prog.chunks_written = res.chunks_written
            prog.chunks_embedded = ctx.profiles.stats.embedded - e0
            flying = [f for f in self.writer.in_flight.values() if f.source == source]
            prog.path = flying[-1].path if flying else None
            partial = sum(
                f.size * f.chunks_done // f.chunks_total for f in flying if f.chunks_total
            )
            prog.bytes_done = bytes_before + partial
            ctx.checkpoints.report(prog)

        def flush() -> None:
            nonlocal group, new_chunks, bytes_before
            self.writer.write(
                source, group, res, force=force, checkpoint=ctx.checkpoints.checkpoint,
                progress=report,
            )  # fmt: skip
            prog.docs_done += len(group)
            bytes_before += sum(p.size for p in group)
            group, new_chunks = [], 0
            report()

        queued = self._queued[-1][1]
        for rel in plan.index:
            ctx.checkpoints.heartbeat()
            queued.discard(rel)
            try:
                prep = self.preparer.prepare_watched(
                    source, rel, git_commit, plan.sizes.get(rel, 0)
                )
            except UnreadableFile as exc:
                ctx.failures.unreadable(source, rel, str(exc))
                res.retry.append(rel)
                prog.docs_done += 1
                continue
            ctx.failures.readable(source, rel)
            group.append(prep)
            new_chunks += len(prep.ids)
            if len(group) >= GROUP_DOCS or new_chunks >= GROUP_CHUNKS:
                flush()
        if group:
            flush()

    def _delete(self, source: str, rel: str, res: SyncResult) -> None:
        """Delete the points and rows of a document that is gone.

        A file that is back by now (re-created while a long sync ran) is not deleted:
        its own change event, or the next scan, indexes it.
        """
        ctx = self.ctx
        doc = ctx.manifest.document(source, rel)
        if doc is None:
            return
        if stat_file(ctx.root(source) / rel) is not None:
            logger.debug("%s is back; not deleted", rel)
            return
        ids = [c.point_id for c in ctx.manifest.chunks(doc.id)]
        if ids:
            collection = ctx.collection_of(source)
            self.collections.ensure(collection)
            ctx.store.delete(collection, ids)
        ctx.manifest.delete_document(doc.id)
        res.deleted += 1
        res.chunks_deleted += len(ids)
