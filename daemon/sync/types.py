"""The sync engine's data: what a sync plans, what it did, where it stands.

A leaf module: every part of the engine, the migrations, the commands and the service
share these types without importing each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ingestd.daemon.sources.base import FileStat

__all__ = [
    "Plan",
    "ProgressFn",
    "SyncInterrupted",
    "SyncProgress",
    "SyncResult",
    "UnreadableFile",
    "eta_seconds",
]


class UnreadableFile(Exception):
    """A file vanished or could not be opened mid-read: retried, never a delete."""


class SyncInterrupted(Exception):
    """A stop was requested (SIGTERM): raised at a checkpoint, the work in flight is left.

    What was written before stays recorded as pending in the manifest, so the next sync
    finishes the documents in flight, reusing their cached vectors.
    """


@dataclass
class Plan:
    """What a sync of one source would do.

    Attributes:
        source: the source name.
        index: paths to (re)chunk: new, changed content, changed rule, or interrupted.
        stat_only: paths whose bytes are unchanged (only the stat is recorded).
        delete: paths whose documents are gone.
        moves: ``(old, new)`` pairs among ``delete`` x ``index`` with equal content:
            re-keyed with vectors from the cache, never re-embedded.
        held: deletions held by the mass-deletion guard (not applied).
        removed_versions: versions of a versioned source whose ref is gone -> the
            number of their documents deleted (the owner's intent: never held).
        unchanged: documents skipped by the stat fast path or an equal hash.
        hashes: content hash of each path in ``index`` / ``stat_only`` when read.
        sizes: size in bytes of each path in ``index`` (for progress and its ETA).
        root_missing: the source cannot be listed (a root folder that is missing, a
            repository not fetched yet): nothing planned.
        why_missing: why, in the source's words (``root_missing``), else ``None``.
        scan: planned from a scan of the whole source (the guard applied).
        repaired: what the check of the store before the scan repaired (counts), empty
            when the store and the manifest agreed.
        scope: the changed paths planned for, when not a scan.
        updates: paths of ``index`` whose document the manifest holds already (an
            update rather than an addition, for ``summary``).
    """

    source: str
    index: list[str] = field(default_factory=list)
    stat_only: list[tuple[str, FileStat]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    moves: list[tuple[str, str]] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    removed_versions: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    hashes: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    root_missing: bool = False
    why_missing: str | None = None
    scan: bool = False
    repaired: dict[str, int] = field(default_factory=dict)
    scope: list[str] = field(default_factory=list)
    updates: set[str] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        """Whether nothing would be written."""
        return not (self.index or self.stat_only or self.delete)

    def summary(self) -> dict[str, Any]:
        """Counts and paths, for ``--dry-run`` and JSON output."""
        moved_new = {n for _, n in self.moves}
        moved_old = {o for o, _ in self.moves}
        return {
            "source": self.source,
            "add": sorted(p for p in self.index if p not in moved_new and p not in self.updates),
            "update": sorted(p for p in self.index if p in self.updates),
            "rekey": [{"from": o, "to": n} for o, n in sorted(self.moves)],
            "delete": sorted(p for p in self.delete if p not in moved_old),
            "held_deletes": sorted(self.held),
            "removed_versions": dict(self.removed_versions),
            "stat_only": len(self.stat_only),
            "unchanged": self.unchanged,
            "root_missing": self.root_missing,
            "why_missing": self.why_missing,
        }


@dataclass
class SyncResult:
    """Counts of one sync (documents unless noted).

    Attributes:
        source: the source name.
        indexed: documents written.
        deleted: documents deleted.
        failed: documents recorded as failed (no chunks; their error in ``status``).
        retry: paths that could not be read (vanished or locked): retried later.
        held: deletions held by the mass-deletion guard.
        removed_versions: see :class:`Plan` (deleted, never held).
        deferred: paths left for later because another job was writing them.
        background: long documents left to background writing (``LongWrites``): not
            written when the sync returns.
        chunks_written: points upserted.
        chunks_deleted: points deleted.
        embedded: chunks embedded by the model.
        reused: vectors taken from the embedding cache or the store.
        root_missing: the source cannot be listed (see :class:`Plan`): nothing was synced.
        why_missing: why, in the source's words (``root_missing``), else ``None``.
        interrupted: a stop request ended the sync before it was complete.
        repaired: what the check of the store repaired first (see :class:`Plan`).
        refused: paths whose points the store refused to write (recorded as failed
            with the store's reason): the index does not hold them.
    """

    source: str
    indexed: int = 0
    deleted: int = 0
    failed: int = 0
    retry: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    removed_versions: dict[str, int] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)
    background: list[str] = field(default_factory=list)
    chunks_written: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    reused: int = 0
    root_missing: bool = False
    why_missing: str | None = None
    interrupted: bool = False
    repaired: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether the sync applied everything: nothing held, deferred, to retry or missing."""
        return not (self.background or self.incomplete_otherwise)

    @property
    def incomplete_otherwise(self) -> bool:
        """Whether something but long documents written in the background is left."""
        return bool(
            self.retry
            or self.deferred
            or self.held
            or self.root_missing
            or self.interrupted
            or self.refused
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts."""
        return {k: dict(v) if isinstance(v, dict) else v for k, v in self.__dict__.items()}


@dataclass
class SyncProgress:
    """Where a running sync stands, reported after every slice.

    Attributes:
        source: the source name.
        phase: ``"indexing"``, or ``"loading embedding model"`` while the model loads.
        docs_done: documents of the plan written (or failed) so far.
        docs_total: documents the plan indexes.
        bytes_done: bytes of those documents done, the document in flight pro rata.
        bytes_total: bytes of the documents the plan indexes.
        chunks_written: points upserted so far.
        chunks_embedded: chunks embedded by the model so far (the costly unit of work).
        path: the document in flight, if any.
        started: when the sync started (``time.monotonic()`` seconds).
    """

    source: str
    phase: str = "indexing"
    docs_done: int = 0
    docs_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    path: str | None = None
    started: float = field(default_factory=time.monotonic)

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left at the rate so far, or ``None`` before anything was done.

        Embedding dominates the cost, and a document's chunks grow with its bytes, so
        the bytes still to do are timed at the rate bytes were done so far.
        """
        elapsed = (time.monotonic() if now is None else now) - self.started
        return eta_seconds(self.bytes_done, self.bytes_total, elapsed)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with ``eta_seconds``."""
        out = {k: v for k, v in self.__dict__.items() if k != "started"}
        eta = self.eta_seconds()
        out["eta_seconds"] = None if eta is None else round(eta, 1)
        return out


ProgressFn = Callable[[SyncProgress], None]


def eta_seconds(done: float, total: float, elapsed: float) -> float | None:
    """Seconds left to do ``total`` at the rate ``done`` took ``elapsed`` seconds.

    Args:
        done: work done so far (bytes, documents: any unit, the same as ``total``).
        total: all the work.
        elapsed: seconds spent on ``done``.

    Returns:
        ``None`` before anything was done.
    """
    if done <= 0 or elapsed <= 0:
        return None
    return max(0.0, (total - done) * elapsed / done)
