"""Preparing documents of a source: its rule, its git commit, and big files off-thread.

:func:`~ingestd.daemon.sync.preparing.documents.prepare_document` turns one file into point ids
and payloads; :class:`Preparer` calls it with what the engine knows (the rule of the
profile that made the source's collection, the file policy), chunks a big file in a
worker thread while the engine thread keeps reaching checkpoints, and derives what a
from-scratch ingest of a whole source would store: the oracle ``verify`` compares with.
"""

from __future__ import annotations

from typing import Any

from ingestd.daemon.sources.versions import merge_versions, split_document
from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.preparing.documents import (
    PreparedDocument,
    prepare_document,
    sparse_vector,
    strip_provenance,
)
from ingestd.daemon.sync.types import UnreadableFile

__all__ = ["PREPARE_GRACE_S", "THREADED_PREPARE_BYTES", "Preparer"]

#: Files from this size on (bytes) are chunked in a worker thread while the engine thread
#: keeps reaching checkpoints: a slow chunker on a big file takes seconds.
THREADED_PREPARE_BYTES = 64 * 1024
#: Longest a chunker may run on one file with checkpoints (pings) going on meanwhile, in
#: seconds; past it the pings stop, so a chunker that hangs trips the systemd watchdog.
PREPARE_GRACE_S = 300.0


class Preparer:
    """Reads, decodes and chunks the documents of the configured sources.

    Args:
        ctx: the engine's context (sources, filters, profiles, file policy, checkpoints).
    """

    def __init__(self, ctx: SyncContext) -> None:
        self.ctx = ctx

    def git_commit(self, source: str) -> str | None:
        """HEAD's commit of ``source`` when it is a git checkout, else ``None``."""
        return self.ctx.source(source).revision()

    def prepare(self, source: str, rel: str, git_commit: str | None = None) -> PreparedDocument:
        """Read, decode and chunk one file; compute its point ids and payloads.

        Raises:
            UnreadableFile: the file vanished or could not be opened (retry later).
            SyncInterrupted: a stop was requested while the chunker embedded sentences.
        """
        rule = self.ctx.rule_of(source, rel)
        return prepare_document(self.ctx.source(source), rel, rule, self.ctx.cfg.files, git_commit)

    def prepare_watched(
        self, source: str, rel: str, git_commit: str | None, size: int
    ) -> PreparedDocument:
        """:meth:`prepare`, in a worker thread for a big file, with checkpoints meanwhile.

        Chunking is the one step of a document that cannot be sliced: a file of at
        least :data:`THREADED_PREPARE_BYTES` bytes is chunked in a daemon thread while
        this (the engine) thread reaches a checkpoint every half second (searches are
        served, a stop request returns at once and leaves the thread to finish on its
        own), for at most :data:`PREPARE_GRACE_S` seconds.

        Raises:
            UnreadableFile: the file vanished or could not be opened (retry later).
            SyncInterrupted: a stop was requested.
        """
        checkpoints = self.ctx.checkpoints
        if checkpoints.on_checkpoint is None or size < THREADED_PREPARE_BYTES:
            return self.prepare(source, rel, git_commit)
        return checkpoints.wait_for(
            lambda: self.prepare(source, rel, git_commit), PREPARE_GRACE_S, f"chunking {rel}"
        )

    def expected_points(
        self, source: str, sparse: dict[str, Any] | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
        """What a from-scratch ingest of the current files would store for ``source``.

        Args:
            source: a configured source name.
            sparse: filled, when given, with each point's expected sparse vector
                (:func:`~ingestd.daemon.sync.preparing.documents.sparse_vector`) by point id.

        Returns:
            ``(points, docs)``: point id -> payload (provenance keys removed), and
            path -> error (``None`` for documents that chunked fine).

        Raises:
            SyncInterrupted: a stop was requested.
        """
        points: dict[str, dict[str, Any]] = {}
        views: dict[str, dict[str, dict[str, Any]]] = {}  # shared points: pid -> version -> payload
        docs: dict[str, str | None] = {}
        src = self.ctx.source(source)
        for rel in sorted(src.scan()):
            self.ctx.checkpoints.heartbeat()
            try:
                prep = self.prepare(source, rel)
            except UnreadableFile:
                continue
            docs[rel] = prep.error
            version = split_document(src, rel)[0]
            for pid, payload in zip(prep.ids, prep.payloads, strict=True):
                if version is None:
                    points[pid] = strip_provenance(payload)
                else:
                    views.setdefault(pid, {})[version] = payload
            if sparse is not None:
                sparse.update(zip(prep.ids, map(sparse_vector, prep.chunks), strict=True))
        for pid, held in views.items():
            points[pid] = strip_provenance(merge_versions(held))
        return points, docs
