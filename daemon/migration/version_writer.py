"""Writing documents into the version a migration builds, with the new profile.

The migration's counterpart of :mod:`~ingestd.daemon.sync.writing.writer`: documents are chunked
with the new profile's rules, embedded by its model (through the embedding cache, keyed
by the model's fingerprint) and upserted into the new physical collection by name, slice
by slice with checkpoints in between (DESIGN.md, "Long work is sliced"). What was
written is recorded in ``build_documents`` (:mod:`ingestd.store.manifest.builds`), never in the
manifest's ``documents``, which keeps describing the current version.

Write order per group of documents: (a) upsert the new points; (b) delete the points the
record holds for those documents that are not in the new set; (c) record the documents.
A crash between (a) and (c) leaves points the record does not know: the check before
the switch (:meth:`VersionWriter.check_points`) deletes them, and re-writes documents
whose recorded points are missing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.base import FileStat
from ingestd.daemon.sources.versions import is_versioned, split_document_key
from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.preparing.documents import (
    PreparedDocument,
    prepare_document,
    sparse_vector,
)
from ingestd.daemon.sync.types import UnreadableFile, eta_seconds
from ingestd.daemon.sync.writing.shared_writes import plan_shared
from ingestd.daemon.sync.writing.write_parts import embedded, embedded_texts
from ingestd.daemon.sync.writing.writer import GROUP_CHUNKS, GROUP_DOCS, SLICE_CHUNKS
from ingestd.store.manifest.builds import BuildDoc, BuildDocuments
from ingestd.store.manifest.manifest import ChunkRow

if TYPE_CHECKING:
    from ingestd.daemon.sync.profiles.profile import Profile

__all__ = ["BuildProgress", "VersionWriter"]

logger = logging.getLogger(__name__)


@dataclass
class BuildProgress:
    """Where a migration stands.

    Attributes:
        collection: the collection.
        phase: ``building``, ``checking`` (the last pass before the switch),
            ``switching``, or ``waiting`` (``waiting_for`` says for what).
        docs_done: documents of the configured sources written into the new version.
        docs_total: documents of the configured sources on disk.
        chunks_written: points upserted into the new version by this process.
        chunks_embedded: chunks embedded by the new model for it, by this process.
        waiting_for: why the switch waits (a missing root, held deletions, ...).
        started: when this process started on it (``time.monotonic()`` seconds).
        docs_at_start: ``docs_done`` when this process started on it (for the ETA).
    """

    collection: str
    phase: str = "building"
    docs_done: int = 0
    docs_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    waiting_for: str | None = None
    started: float = field(default_factory=time.monotonic)
    docs_at_start: int = 0

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left at the rate documents were done so far, or ``None`` before any."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        start = self.docs_at_start
        return eta_seconds(self.docs_done - start, self.docs_total - start, elapsed)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with ``eta_seconds``."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("started", "docs_at_start")}
        eta = self.eta_seconds()
        out["eta_seconds"] = None if eta is None else round(eta, 1)
        return out


class VersionWriter:
    """Writes documents into the new version of a collection.

    Args:
        ctx: the engine's context (its store, manifest, sources and file policy).
        collection: the collection name.
        physical: the new version's physical collection.
        profile: the new profile (rules, embedder).
        checkpoint: called after every slice with ``serve_changes``; may raise
            ``SyncInterrupted`` or ``MigrationAborted``.
        progress: the migration's progress, updated as documents are written.

    Attributes:
        in_flight: documents ``(source, path)`` being written right now.
    """

    def __init__(
        self,
        ctx: SyncContext,
        collection: str,
        physical: str,
        profile: Profile,
        checkpoint: Callable[[bool], None],
        progress: BuildProgress,
    ) -> None:
        self.ctx = ctx
        self.collection = collection
        self.physical = physical
        self.profile = profile
        self.checkpoint = checkpoint
        self.progress = progress
        self.record = BuildDocuments(ctx.manifest)
        self.in_flight: set[tuple[str, str]] = set()

    def stale(self, source: str, files: dict[str, FileStat]) -> tuple[list[str], list[str]]:
        """What of ``source`` the new version lacks: ``(paths to write, paths gone)``.

        A document is up to date when its record has the file's stat and the rule
        fingerprint the new profile gives its path.
        """
        known = self.record.documents(self.collection, source)
        todo = []
        for rel, st in sorted(files.items()):
            self.ctx.checkpoints.heartbeat()
            doc = known.get(rel)
            rule = self.ctx.rule_of(source, rel, self.profile)
            if doc is None or doc.rule_fingerprint != rule.fingerprint:
                todo.append(rel)
            elif FileStat(doc.size, doc.mtime_ns, doc.ctime_ns, doc.inode) != st:
                todo.append(rel)
        return todo, sorted(p for p in known if p not in files)

    def write(self, source: str, paths: Iterable[str], *, serve_changes: bool) -> list[str]:
        """Chunk, embed and write ``paths`` of ``source`` into the new version.

        Documents are written in groups; a whole group is written once the documents
        after it are chunked, up to one model call's texts, which fill the group's last
        call (see :mod:`~ingestd.daemon.sync.writing.writer`). Those are chunked again when a
        checkpoint of the group's write served a change to their file.

        Returns:
            The paths that could not be read (vanished or locked: retried later).
        """
        src = self.ctx.source(source)
        commit = src.revision()
        group: list[PreparedDocument] = []
        after: list[PreparedDocument] = []  # prepared ahead of a whole group
        per_call = self.profile.embedder.texts_per_call or 0
        unreadable: list[str] = []
        try:
            for rel in paths:
                self.ctx.checkpoints.heartbeat()
                prep = self._prepare(source, rel, commit, unreadable)
                if prep is None:
                    continue
                if len(group) < GROUP_DOCS and sum(len(p.ids) for p in group) < GROUP_CHUNKS:
                    group.append(prep)
                    continue
                after.append(prep)
                if len(after) >= GROUP_DOCS or sum(len(p.ids) for p in after) >= per_call:
                    self._write_group(source, group, serve_changes, embedded_texts(after))
                    group, after = self._current(source, after, commit, unreadable), []
            while group:
                self._write_group(source, group, serve_changes, embedded_texts(after))
                group, after = self._current(source, after, commit, unreadable), []
        finally:  # interrupted: what was chunked is not written
            for prep in [*group, *after]:
                self.in_flight.discard((source, prep.path))
        return unreadable

    def _prepare(
        self, source: str, rel: str, commit: str | None, unreadable: list[str]
    ) -> PreparedDocument | None:
        """Chunk ``rel`` with the new profile (in flight from now on); ``None``: unreadable."""
        ctx = self.ctx
        src = ctx.source(source)
        rule = ctx.rule_of(source, rel, self.profile)
        self.in_flight.add((source, rel))
        try:
            return prepare_document(src, rel, rule, ctx.cfg.files, commit)
        except UnreadableFile as exc:
            self.in_flight.discard((source, rel))
            if src.stat(rel) is None:
                logger.debug("%s is gone; its deletion is followed, or the last pass", rel)
                return None
            # retried with back-off like any unreadable file (a later sync, or the
            # last pass before the switch, writes it)
            if ctx.failures.retry.failed((source, rel), str(exc), ctx.now()):
                logger.warning("source %s: %s; tried again later", source, exc)
            unreadable.append(rel)
            return None
        except BaseException:
            self.in_flight.discard((source, rel))
            raise

    def _current(
        self,
        source: str,
        preps: list[PreparedDocument],
        commit: str | None,
        unreadable: list[str],
    ) -> list[PreparedDocument]:
        """``preps`` as their files are now (a checkpoint may have served a change).

        A document whose file changed is chunked again, one deleted is left out (the
        change's sync deleted it from the new version too).
        """
        src = self.ctx.source(source)
        out = []
        for prep in preps:
            if src.stat(prep.path) == prep.stat:
                out.append(prep)
                continue
            self.in_flight.discard((source, prep.path))
            again = self._prepare(source, prep.path, commit, unreadable)
            if again is not None:
                out.append(again)
        return out

    def delete(self, source: str, paths: list[str]) -> None:
        """Delete documents of ``source`` that are gone from the new version."""
        if not paths:
            return
        if is_versioned(self.ctx.source(source)):  # only these versions leave shared points
            self._write_shared(source, [], set(paths))
            self.record.delete(self.collection, source, paths)
            return
        known = self.record.documents(self.collection, source)
        ids = [pid for p in paths if p in known for pid in known[p].ids]
        if ids:
            self.ctx.store.delete(self.physical, ids)
        self.record.delete(self.collection, source, paths)

    def _write_group(
        self,
        source: str,
        group: list[PreparedDocument],
        serve_changes: bool,
        ahead: list[tuple[str, str]],
    ) -> None:
        """Write ``group``; ``ahead``: texts written next, which fill a part-empty model call."""
        from ingestd.store.vectors.base import Point

        ctx = self.ctx
        stats = ctx.profiles.stats
        _ = ctx.resources.cache  # open the cache before the first lookup
        if is_versioned(ctx.source(source)):  # versions share points
            try:
                self._write_shared(source, group, set(), ahead)
                self.record.commit(
                    self.collection, source, [_build_doc(p, ctx.now()) for p in group]
                )
                done = self.progress.docs_done + len(group)
                self.progress.docs_done = min(done, self.progress.docs_total)
            finally:
                for prep in group:
                    self.in_flight.discard((source, prep.path))
            return
        try:
            todo = [(prep, i) for prep in group for i in range(len(prep.ids))]
            texts = [embedded(prep, i) for prep, i in todo]
            e0 = stats.embedded
            for k in range(0, len(todo), SLICE_CHUNKS):
                part = todo[k : k + SLICE_CHUNKS]
                later = [*texts[k + SLICE_CHUNKS :], *ahead]
                vectors = self.profile.embedder.vectors(texts[k : k + SLICE_CHUNKS], None, later)
                now = ctx.now()
                points = [
                    Point(
                        prep.ids[i],
                        vectors[prep.hashes[i]],
                        {**prep.payloads[i], "indexed_at": now},
                        sparse_vector(prep.chunks[i]),
                    )
                    for prep, i in part
                ]
                ctx.store.upsert(self.physical, points)  # (a)
                self.progress.chunks_written += len(points)
                self.progress.chunks_embedded += stats.embedded - e0
                e0 = stats.embedded
                self.checkpoint(serve_changes)
            # the record is read again: a change served at a checkpoint may have moved on
            known = self.record.documents(self.collection, source)
            stale = [
                pid
                for prep in group
                if prep.path in known
                for pid in known[prep.path].ids - set(prep.ids)
            ]
            if stale:
                ctx.store.delete(self.physical, stale)  # (b)
            self.record.commit(self.collection, source, [_build_doc(p, ctx.now()) for p in group])
            done = self.progress.docs_done + len(group)
            self.progress.docs_done = min(done, self.progress.docs_total)
        finally:
            for prep in group:
                self.in_flight.discard((source, prep.path))

    def _write_shared(
        self,
        source: str,
        group: list[PreparedDocument],
        gone: set[str],
        ahead: list[tuple[str, str]] | None = None,
    ) -> None:
        """Write ``group`` and take the documents ``gone`` out, in points versions share.

        See :mod:`~ingestd.daemon.sync.writing.shared_writes`: points no version held are
        upserted (embedded by the new model through the cache), shared points upserted
        again with their payload's versions changed, points no version holds deleted.
        The record of the new version (``build_documents``) gives the other versions.
        """
        from ingestd.store.vectors.base import Point

        ctx = self.ctx
        known = self.record.documents(self.collection, source)
        written = {p.path for p in group} | gone
        own: dict[str, dict[str, Any]] = {}
        chunk_of: dict[str, tuple[PreparedDocument, int]] = {}
        touched: set[str] = set()
        for prep in group:
            version = split_document_key(prep.path)[0] or ""
            for i, pid in enumerate(prep.ids):
                own.setdefault(pid, {})[version] = prep.payloads[i]
                chunk_of.setdefault(pid, (prep, i))
            touched |= set(prep.ids)
        for path in written:
            if path in known:
                touched |= known[path].ids
        others: dict[str, set[str]] = {}
        for path, doc in known.items():
            if path not in written:
                for pid in doc.ids & touched:
                    others.setdefault(pid, set()).add(split_document_key(path)[0] or "")
        ids = sorted(touched)
        current = {pid: p for pid, p, _ in ctx.store.retrieve(self.physical, ids)} if ids else {}
        plan = plan_shared(current, touched, own, others)
        stats = ctx.profiles.stats
        texts = [embedded(*chunk_of[pid]) for pid in plan.fresh]
        for k in range(0, len(plan.fresh), SLICE_CHUNKS):
            part = plan.fresh[k : k + SLICE_CHUNKS]
            e0 = stats.embedded
            later = [*texts[k + SLICE_CHUNKS :], *(ahead or ())]
            vectors = self.profile.embedder.vectors(texts[k : k + SLICE_CHUNKS], None, later)
            now = ctx.now()
            points = []
            for pid in part:
                prep, i = chunk_of[pid]
                payload = {**plan.payloads[pid], "indexed_at": now}
                points.append(
                    Point(pid, vectors[prep.hashes[i]], payload, sparse_vector(prep.chunks[i]))
                )
            ctx.store.upsert(self.physical, points)
            self.progress.chunks_written += len(points)
            self.progress.chunks_embedded += stats.embedded - e0
            ctx.checkpoints.heartbeat()  # no changes served mid-plan: it holds the points
        if plan.delete:
            ctx.store.delete(self.physical, plan.delete)
        if plan.rewrite:
            now = ctx.now()
            again = []
            for p in ctx.store.retrieve_points(self.physical, plan.rewrite):
                sparse = (
                    sparse_vector(chunk_of[p.id][0].chunks[chunk_of[p.id][1]])
                    if p.id in chunk_of
                    else p.sparse
                )
                again.append(
                    Point(p.id, p.vector, {**plan.payloads[p.id], "indexed_at": now}, sparse)
                )
            ctx.store.upsert(self.physical, again)

    def check_points(self, serve_changes: bool) -> int:
        """Make the new version hold exactly the points its record lists.

        Deletes points the record does not know (left by a crash between an upsert and
        its record) and re-writes the documents whose recorded points are missing.

        Returns:
            Number of points deleted or re-written.
        """
        known = self.record.point_ids(self.collection)
        present = set(self.ctx.store.point_ids(self.physical))
        orphans = sorted(present - set(known))
        if orphans:
            self.ctx.store.delete(self.physical, orphans)
        missing = sorted(set(known) - present)
        redo: dict[str, set[str]] = {}
        for pid in missing:
            source, path = known[pid]
            redo.setdefault(source, set()).add(path)
        for source, paths in sorted(redo.items()):
            if source in self.ctx.sources:
                self.write(source, sorted(paths), serve_changes=serve_changes)
        if orphans or missing:
            logger.warning(
                "collection %s: the new version had %d unrecorded points (deleted) and "
                "lacked %d (re-written)",
                self.collection,
                len(orphans),
                len(missing),
            )
        return len(orphans) + len(missing)


def _build_doc(prep: PreparedDocument, now: float) -> BuildDoc:
    st = prep.stat
    return BuildDoc(
        path=prep.path,
        size=st.size,
        mtime_ns=st.mtime_ns,
        ctime_ns=st.ctime_ns,
        inode=st.inode,
        content_hash=prep.content_hash,
        rule_fingerprint=prep.rule.fingerprint,
        state="failed" if prep.error else "ok",
        error=prep.error or prep.note,
        git_commit=prep.payloads[0].get("git_commit") if prep.payloads else None,
        indexed_at=now,
        chunks=[
            ChunkRow(pid, h, i, c.start, c.end)
            for i, (pid, h, c) in enumerate(zip(prep.ids, prep.hashes, prep.chunks, strict=True))
        ],
    )
