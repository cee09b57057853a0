"""Applying a plan: documents prepared and written in groups, deletions, stat updates.

Documents are prepared by :class:`~ingestd.daemon.sync.preparing.preparer.Preparer` and written
by :class:`~ingestd.daemon.sync.writing.writer.Writer` in the crash-safe write order, in groups
that span documents (embedding batches fill up across small files), slice by slice
with a checkpoint after each.

Syncs nest: a change batch of other files may run inside a checkpoint of a long scan.
A nested sync leaves the documents the running one has in flight to a later batch
(``deferred``: queued as soon as their group commits), and takes over those the running
one has yet to reach (it skips them), so each is processed once and no later change
waits for the running sync to end.

A sync of the daemon (``background=True``) hands long documents to
:class:`~ingestd.daemon.sync.writing.long_writes.LongWrites` instead of writing them itself
(``SyncResult.background``): a change that shares a batch or a scan with a long
document never waits for it. A sync that finds a document such a unit owns leaves it
to the unit when it is unchanged, and supersedes the unit otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ingestd.daemon.sources.versions import is_versioned
from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext
from ingestd.daemon.sync.memory import release_free_memory
from ingestd.daemon.sync.preparing.documents import PreparedDocument
from ingestd.daemon.sync.preparing.preparer import THREADED_PREPARE_BYTES, Preparer
from ingestd.daemon.sync.types import (
    Plan,
    ProgressFn,
    SyncInterrupted,
    SyncProgress,
    SyncResult,
    UnreadableFile,
)
from ingestd.daemon.sync.writing.long_writes import LONG_CHUNKS, LongWrite, LongWrites
from ingestd.daemon.sync.writing.shared_writes import SharedWriter
from ingestd.daemon.sync.writing.write_parts import InFlight, embedded_texts
from ingestd.daemon.sync.writing.writer import GROUP_CHUNKS, GROUP_DOCS, Writer

__all__ = ["Applier"]

logger = logging.getLogger(__name__)


class Applier:
    """Carries out plans.

    Args:
        ctx: the engine's context.
        preparer: reads and chunks documents.
        writer: writes prepared documents.
        collections: collection versions (created before a write, kept in step after).
        long_writes: long documents written in the background.
    """

    def __init__(
        self,
        ctx: SyncContext,
        preparer: Preparer,
        writer: Writer,
        collections: CollectionLifecycle,
        long_writes: LongWrites,
    ) -> None:
        self.ctx = ctx
        self.preparer = preparer
        self.writer = writer
        self.collections = collections
        self.long_writes = long_writes
        # per running apply: its paths not yet reached (a nested sync takes them over)
        self._queued: list[tuple[str, set[str]]] = []

    def busy(self, source: str) -> set[str]:
        """Paths of ``source`` in a group being written now (not long documents)."""
        units = self.long_writes.paths(source)
        return {p for s, p in self.writer.in_flight if s == source and p not in units}

    def apply(
        self,
        plan: Plan,
        *,
        progress: ProgressFn | None = None,
        force: bool = False,
        background: bool = False,
    ) -> SyncResult:
        """Carry out ``plan``; a stop request ends it at the next checkpoint.

        Paths another sync is writing right now (this one runs nested inside its
        checkpoint) are left out and listed in ``deferred``.

        Args:
            plan: from :meth:`~ingestd.daemon.sync.planning.planner.Planner.plan` (or built by
                hand, e.g. for a repair).
            progress: called with a :class:`SyncProgress` after every write slice.
            force: re-upsert every point of the indexed documents (repair).
            background: hand long documents to background writing (the daemon's
                syncs, when ``LongWrites.enabled``); otherwise every document is
                written before this returns (a unit that owns one is superseded).

        Returns:
            The counts; ``interrupted`` when a stop request ended it early (nothing of
            the documents in flight is committed: the next sync finishes them).
        """
        ctx = self.ctx
        source = plan.source
        res = SyncResult(
            source,
            held=list(plan.held),
            removed_versions=dict(plan.removed_versions),
            root_missing=plan.root_missing,
            why_missing=plan.why_missing,
            repaired=plan.repaired,
        )
        self._leave_to_running(plan, res)
        queued = set(plan.index) | set(plan.delete) | {p for p, _ in plan.stat_only}
        self._queued.append((source, queued))
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
            written = self._index(plan, res, prog, force, background)
            deleted = []
            for rel in plan.delete:
                if rel not in queued:
                    continue  # a sync nested in a checkpoint took it over
                queued.discard(rel)
                ctx.checkpoints.heartbeat()
                self.long_writes.cancel(source, rel)
                self._delete(source, rel, res)
                deleted.append(rel)
            self.collections.follow(collection, source, written, deleted)
            self._record_stats(plan, queued)
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
        elif not res.incomplete_otherwise:
            self._last_sync_after_long_writes(source, res, now)
        return res

    def _last_sync_after_long_writes(self, source: str, res: SyncResult, now: float) -> None:
        """Record a sync complete but for its long documents: now, or when they are written.

        The long writes step at this sync's checkpoints, so all of them may be written
        before it ends: then its end is the last sync.
        """
        for rel in res.background:
            unit = self.long_writes.get(source, rel)
            if unit is not None:
                unit.last_sync = True
        if not self.long_writes.paths(source):
            self.ctx.manifest.set_last_sync(source, now)

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

        src = ctx.source(source)
        still = [
            rel
            for rel in held
            if not covered(rel)
            or (src.stat(rel) is None and ctx.manifest.document(source, rel) is not None)
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
        again once their group commits); documents it has yet to reach are taken over
        (it skips them: this plan read them after the change).
        """
        busy = self.busy(plan.source)
        mine = set(plan.index) | set(plan.delete) | {p for p, _ in plan.stat_only}
        for s, q in self._queued:
            if s == plan.source:
                q.difference_update(mine - busy)
        if not busy:
            return
        res.deferred = sorted(busy & mine)
        plan.index = [p for p in plan.index if p not in busy]
        plan.delete = [p for p in plan.delete if p not in busy]
        plan.stat_only = [(p, st) for p, st in plan.stat_only if p not in busy]

    def _index(
        self, plan: Plan, res: SyncResult, prog: SyncProgress, force: bool, background: bool
    ) -> list[str]:
        """Prepare and write ``plan.index`` in groups spanning documents, slice by slice.

        Returns:
            The paths written (or recorded as failed) here.
        """
        ctx = self.ctx
        # a versioned source's documents share points: each is written in one go
        hand_off = (
            background
            and self.long_writes.enabled
            and not force
            and not is_versioned(ctx.source(plan.source))
        )
        written: list[str] = []
        source = plan.source
        git_commit = self.preparer.git_commit(source) if plan.index else None
        group: list[PreparedDocument] = []  # the next group to write
        after: list[PreparedDocument] = []  # prepared ahead of it (see _full)
        bytes_before = 0
        e0 = ctx.profiles.stats.embedded
        per_call = ctx.profiles.profile_of(ctx.collection_of(source)).embedder.texts_per_call

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
            nonlocal group, after, bytes_before
            self.writer.write(
                source, group, res, force=force, checkpoint=ctx.checkpoints.checkpoint,
                progress=report, ahead=embedded_texts(after),
            )  # fmt: skip
            prog.docs_done += len(group)
            bytes_before += sum(p.size for p in group)
            written.extend(p.path for p in group)
            group, after = after, []
            report()

        def add(prep: PreparedDocument) -> None:
            if not _full(group):
                group.append(prep)
                return
            after.append(prep)  # in flight: a nested sync leaves it to this one
            self.writer.in_flight[(source, prep.path)] = InFlight(
                source, prep.path, 0, 0, prep.size, "queued"
            )
            if _full(after) or sum(len(p.ids) for p in after) >= (per_call or 0):
                flush()

        try:
            self._prepare_all(plan, res, prog, hand_off, git_commit, add)
            while group:
                flush()
        finally:  # interrupted: what was prepared is not written
            for prep in [*group, *after]:
                self.writer.in_flight.pop((source, prep.path), None)
        return written

    def _prepare_all(
        self,
        plan: Plan,
        res: SyncResult,
        prog: SyncProgress,
        hand_off: bool,
        git_commit: str | None,
        add: Callable[[PreparedDocument], None],
    ) -> None:
        """Prepare the documents of ``plan.index`` and give each to ``add`` (or hand it off)."""
        ctx = self.ctx
        source = plan.source
        queued = self._queued[-1][1]
        for rel in plan.index:
            if rel not in queued:
                continue  # a sync nested in a checkpoint took it over
            queued.discard(rel)
            ctx.checkpoints.heartbeat()
            if self._owned(plan, rel, hand_off):
                res.background.append(rel)
                prog.docs_done += 1
                continue
            if hand_off and plan.sizes.get(rel, 0) >= THREADED_PREPARE_BYTES:
                self._hand_off(plan, rel, git_commit, None)  # chunked in the background
                res.background.append(rel)
                prog.docs_done += 1
                continue
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
            if hand_off and len(prep.ids) > LONG_CHUNKS:
                self._hand_off(plan, rel, git_commit, prep)
                res.background.append(rel)
                prog.docs_done += 1
                continue
            add(prep)

    def _record_stats(self, plan: Plan, queued: set[str]) -> None:
        """Record the stat of documents whose bytes did not change (not taken over)."""
        ctx = self.ctx
        source = plan.source
        for rel, st in plan.stat_only:
            if rel not in queued:
                continue
            queued.discard(rel)
            ctx.checkpoints.heartbeat()
            self.long_writes.cancel(source, rel)  # the file is back to what is committed
            doc = ctx.manifest.document(source, rel)
            if doc is not None:
                ctx.manifest.update_document(
                    doc.id, size=st.size, mtime_ns=st.mtime_ns, ctime_ns=st.ctime_ns,
                    inode=st.inode,
                )  # fmt: skip

    def _owned(self, plan: Plan, rel: str, hand_off: bool) -> bool:
        """Whether a background unit owns ``rel`` and writes what the plan would.

        A unit that writes something else (the file changed since, or its rule) is
        superseded, and so is every unit when the caller writes everything itself.
        """
        unit = self.long_writes.get(plan.source, rel)
        if unit is None:
            return False
        rule = self.ctx.rule_of(plan.source, rel)
        if (
            hand_off
            and unit.content_hash is not None
            and unit.content_hash == plan.hashes.get(rel)
            and unit.rule_fingerprint == rule.fingerprint
        ):
            return True
        self.long_writes.cancel(plan.source, rel)
        return False

    def _hand_off(
        self, plan: Plan, rel: str, git_commit: str | None, prep: PreparedDocument | None
    ) -> None:
        rule = self.ctx.rule_of(plan.source, rel)
        unit = LongWrite(
            plan.source,
            rel,
            plan.sizes.get(rel, 0) if prep is None else prep.size,
            plan.hashes.get(rel) if prep is None else prep.content_hash,
            rule.fingerprint,
            git_commit,
            prep=prep,
        )
        self.long_writes.add(unit)

    def _delete(self, source: str, rel: str, res: SyncResult) -> None:
        """Delete the points and rows of a document that is gone.

        A document is gone when its file is, or when the source no longer indexes it
        (a ``.gitignore`` or the config leaves it out now). A file that is back by now
        (re-created while a long sync ran) and that the source still indexes is not
        deleted: its own change event, or the next scan, indexes it.
        """
        ctx = self.ctx
        doc = ctx.manifest.document(source, rel)
        if doc is None:
            return
        src = ctx.source(source)
        if src.stat(rel) is not None and src.accepts(rel):
            logger.debug("%s is back; not deleted", rel)
            return
        if is_versioned(src):  # versions share points: only this version leaves them
            collection = ctx.collection_of(source)
            self.collections.ensure(collection)
            deleted = SharedWriter(ctx, self.writer.in_flight).remove(source, collection, doc.id)
            res.deleted += 1
            res.chunks_deleted += deleted
            return
        ids = [c.point_id for c in ctx.manifest.chunks(doc.id)]
        if ids:
            collection = ctx.collection_of(source)
            self.collections.ensure(collection)
            ctx.store.delete(collection, ids)
        ctx.manifest.delete_document(doc.id)
        res.deleted += 1
        res.chunks_deleted += len(ids)


def _full(group: list[PreparedDocument]) -> bool:
    """Whether ``group`` is whole: :data:`GROUP_DOCS` documents or :data:`GROUP_CHUNKS` chunks.

    A whole group is written once the documents after it are prepared, up to one model
    call's texts (or another whole group): their texts fill the group's last model call
    (see :mod:`~ingestd.daemon.sync.writing.writer`), and they begin the next group.
    """
    return len(group) >= GROUP_DOCS or sum(len(p.ids) for p in group) >= GROUP_CHUNKS
