"""Damaged state heals, or says exactly how: the checks run before every scan.

The state has two halves that describe each other: the manifest records every point
id the store should hold, and every point's payload carries what the manifest records
for it (source, path, ``doc_hash``, ``rule_fingerprint``, chunk hash, ordinal and
offsets). So either half can be rebuilt from the other, and then brought up to date
with the files by an ordinary sync.

* :func:`check_store` compares, before a scan, the number of points the store holds in
  a collection with the number the manifest records (a cheap count: a local-mode
  store's rows are counted in its SQLite file without opening the store, see
  :meth:`~ingestd.store.vectors.spec.EngineSpec.point_count`). When they differ (or crashed
  writes left pending rows) it compares ids: points the manifest lost are adopted
  from their payload, and documents whose points the store lost are written again
  through the writer, with vectors from the embedding cache (re-embedded when the
  cache evicted them).

Damaged files are handled apart: :mod:`~ingestd.daemon.sync.state.healing_cache` (the
embedding cache) and :mod:`~ingestd.daemon.sync.state.damage` (the manifest and the store).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ingestd.daemon.sources.versions import (
    BY_VERSION_KEY,
    VERSION_KEY,
    document_key,
    payload_versions,
    split_document_key,
    version_view,
)
from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext, Syncer
from ingestd.daemon.sync.types import Plan, SyncInterrupted
from ingestd.store.manifest.manifest import AdoptedDocument, ChunkRow
from ingestd.store.manifest.sources import PointRecord
from ingestd.store.search.query import PENDING_KEY
from ingestd.store.vectors.engines import embedded, engine_spec

__all__ = ["CHECK_KEYS", "StoreCheck", "check_store", "count_points"]

logger = logging.getLogger(__name__)

#: Payload keys a point needs to be adopted into the manifest.
_ADOPT_KEYS = ("source", "path", "doc_hash", "chunk_hash", "ordinal", "start_char", "end_char")
#: Payload keys a deep check compares with the manifest: what a sync's writes and
#: payload updates set, and the marker of a write not committed yet.
CHECK_KEYS = (*_ADOPT_KEYS, "rule_fingerprint", PENDING_KEY, VERSION_KEY, BY_VERSION_KEY)


@dataclass
class StoreCheck:
    """What :func:`check_store` found and did for one collection.

    Attributes:
        collection: the collection name.
        stored: points the store held before the check.
        committed: committed point rows the manifest held.
        pending: pending point rows (left by an interrupted write).
        adopted: points the manifest lost, recorded again from their payload.
        deleted: unusable points deleted (no payload to adopt them by).
        missing: committed points the store lost.
        stale: committed points whose payload fields differ from the manifest's (a deep
            check only): their documents are written again.
        unhidden: committed points still marked pending in the store (a deep check
            only): the marker is removed, so that searches find them.
        rewritten: documents written again to restore them.
        elsewhere: documents of sources not configured here whose points are missing.
        deep: every point's fields were compared, not only the counts.
    """

    collection: str
    stored: int = 0
    committed: int = 0
    pending: int = 0
    adopted: int = 0
    deleted: int = 0
    missing: int = 0
    stale: int = 0
    unhidden: int = 0
    rewritten: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    deep: bool = False

    def repairs(self) -> dict[str, int]:
        """Non-zero counts of what was repaired: adopted, deleted, rewritten, stale, unhidden."""
        out = {
            "adopted": self.adopted,
            "deleted": self.deleted,
            "rewritten": self.missing,
            "stale": self.stale,
            "unhidden": self.unhidden,
        }
        return {k: v for k, v in out.items() if v}

    @property
    def counts_agree(self) -> bool:
        """Whether the cheap count proved nothing is missing or unknown."""
        return self.pending == 0 and self.stored == self.committed


def count_points(ctx: SyncContext, collection: str, sources: list[str]) -> int:
    """Points of ``collection`` (of ``sources`` on a server), as cheaply as possible.

    An embedded store that is not open yet is counted from the state dir's clean-close
    record when its files still match it
    (:meth:`~ingestd.daemon.sync.state.resources.Resources.held_points`: a no-op ``resync``
    never opens a Qdrant Edge store), else from its files when its engine can (its
    spec's :meth:`~ingestd.store.vectors.spec.EngineSpec.point_count`: a local-mode
    store, which opening loads whole); a server counts the points of the manifest's
    sources only (another state dir may write other sources into the same collection).
    """
    if not ctx.resources.store_open:
        held = ctx.resources.held_points(collection)
        if held is not None:
            return held
        engine, previous = ctx.resources.engine()
        if engine_spec(engine).embedded and previous is None:
            from ingestd.daemon.sync.state.ownership import owner_problem

            folder = ctx.resources.paths.engine_folder(engine)
            problem = owner_problem(folder, ctx.resources.paths.root)
            if problem is not None:  # another state dir's store: not even counted
                raise problem
            n = engine_spec(engine).point_count(folder, collection)
            if n is not None:
                return n
    store = ctx.store
    if not embedded(ctx.cfg.qdrant):  # a server's collection: other state dirs' sources too
        return int(store.point_count(collection, sources=sources))
    return int(store.point_count(collection))


def check_store(
    ctx: SyncContext,
    syncer: Syncer,
    collections: CollectionLifecycle,
    source: str,
    *,
    deep: bool = False,
) -> StoreCheck:
    """Compare the store with the manifest for ``source``'s collection and repair.

    Runs before every scan (start-up, ``resync``, periodic rescans). Two depths:

    * a count (a few milliseconds): the points the store holds against the rows the
      manifest records; when they differ (or crashed writes left pending rows), the
      ids are compared;
    * ``deep``: every point's id, pending marker and the payload fields a sync writes
      (:data:`CHECK_KEYS`) against what the manifest records for it. Equal counts
      prove nothing after a crash: a torn write-ahead log of an Edge shard can lose the
      last payload updates (a ``doc_hash``, the removal of a pending marker) while
      every point stays. Run whenever the manifest holds pending rows (a write that
      did not finish), and at the first check of a collection in a process when
      nothing proves it whole: no clean close recorded its files, or they changed
      since (see :mod:`~ingestd.daemon.sync.state.clean_close`).

    Repairs: points the manifest lost are adopted from their payload; documents whose
    points the store lost, or whose payload fields are stale, are written again (their
    vectors from the embedding cache); pending markers of committed points are removed.

    Args:
        ctx: the engine's context.
        syncer: writes documents whose points the store lost again.
        collections: told when the collection is gone (it is created at the next write).
        source: a configured source name.
        deep: compare every point's fields, not only the counts.

    Returns:
        What was found and done.

    Raises:
        SyncInterrupted: a stop was requested while documents were written again.
    """
    collection = ctx.collection_of(source)
    manifest = ctx.manifest
    sources = [s["name"] for s in manifest.sources() if s["collection"] == collection]
    chk = StoreCheck(collection, deep=deep)
    chk.committed, chk.pending = manifest.collection_counts(collection)
    chk.stored = count_points(ctx, collection, sources)
    if chk.counts_agree and not deep:
        return chk
    if chk.stored == 0:
        collections.forget_check(collection)  # dropped: created again when written
    if chk.pending == 0 and not chk.counts_agree:
        logger.warning(
            "collection %s: the store holds %d points, the manifest records %d; repairing",
            collection,
            chk.stored,
            chk.committed,
        )
    records = manifest.point_records(collection)
    stored: dict[str, dict[str, Any]] = {}
    if chk.stored:
        keep = None if embedded(ctx.cfg.qdrant) else set(sources)
        # the fields compared, and those a point the manifest lost is adopted by
        for pid, payload in ctx.store.scroll(collection, keys=(*CHECK_KEYS, "git_commit")):
            if keep is None or payload.get("source") in keep:
                stored[pid] = payload
    _adopt(ctx, chk, {pid: p for pid, p in stored.items() if pid not in records})
    lost, unhide = _compare(chk, records, stored)
    if unhide:
        ctx.store.unmark_pending(collection, unhide)
        chk.unhidden = len(unhide)
    for src, paths in sorted(lost.items()):
        if src in ctx.sources:
            chk.rewritten.extend(_rewrite(ctx, syncer, src, paths))
        else:
            chk.elsewhere.extend(sorted(paths))
            logger.warning(
                "source %s (not configured here) lost %d documents' points from the store; "
                "resync it with its own configuration",
                src,
                len(paths),
            )
    if chk.adopted or chk.deleted or chk.missing or chk.stale or chk.unhidden:
        logger.warning(
            "collection %s repaired: %d points re-recorded in the manifest, %d unusable "
            "points deleted, %d lost points written again, %d points with stale payload "
            "fields written again (%d documents), %d pending markers of committed points "
            "removed",
            collection,
            chk.adopted,
            chk.deleted,
            chk.missing,
            chk.stale,
            len(chk.rewritten),
            chk.unhidden,
        )
    return chk


def _compare(
    chk: StoreCheck, records: dict[str, PointRecord], stored: dict[str, dict[str, Any]]
) -> tuple[dict[str, set[str]], list[str]]:
    """Documents to write again (by source) and committed points still marked pending.

    Counts :attr:`StoreCheck.missing` and, for a deep check, :attr:`StoreCheck.stale`.
    """
    # a document with pending ids was interrupted mid-write: its stale committed ids
    # may be deleted already, and the scan writes it again anyway
    in_flight = {(r.source, r.path) for r in records.values() if r.pending}
    lost: dict[str, set[str]] = {}
    unhide: list[str] = []
    for pid, rec in records.items():
        if rec.pending or (rec.source, rec.path) in in_flight:
            continue
        payload = stored.get(pid)
        if payload is None:
            chk.missing += 1
            lost.setdefault(rec.source, set()).add(rec.path)
        elif chk.deep:
            if payload.get(PENDING_KEY):
                unhide.append(pid)
            if _stale(rec, payload):
                chk.stale += 1
                lost.setdefault(rec.source, set()).add(rec.path)
    return lost, unhide


def _stale(rec: PointRecord, payload: dict[str, Any]) -> bool:
    """Whether a stored payload differs from what the manifest records for the point.

    A point shared by versions is compared in the view of the record's version.
    """
    if isinstance(payload.get(VERSION_KEY), list):
        payload = version_view(payload, split_document_key(rec.path)[0])
    return (
        payload.get("source") != rec.source
        or ("path" in payload and document_key(payload) != rec.path)
        or "path" not in payload
        or payload.get("doc_hash") != rec.doc_hash
        or payload.get("chunk_hash") != rec.chunk_hash
        or payload.get("ordinal") != rec.ordinal
        or payload.get("start_char") != rec.start_char
        or payload.get("end_char") != rec.end_char
        or (bool(rec.rule_fingerprint) and payload.get("rule_fingerprint") != rec.rule_fingerprint)
    )


def _adopt(ctx: SyncContext, chk: StoreCheck, unknown: dict[str, dict[str, Any]]) -> None:
    """Record points the manifest does not know, from their payload (or delete them)."""
    if not unknown:
        return
    by_doc: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    unusable: list[str] = []
    shared: set[str] = set()  # sources whose documents share points (versions)
    for pid, p in unknown.items():
        if not all(p.get(k) is not None for k in _ADOPT_KEYS):
            unusable.append(pid)
            continue
        if isinstance(p.get(VERSION_KEY), list):  # every version holding it
            shared.add(str(p["source"]))
            for v in payload_versions(p):
                view = version_view(p, v)
                by_doc.setdefault((str(p["source"]), document_key(view)), []).append((pid, view))
        else:
            by_doc.setdefault((str(p["source"]), document_key(p)), []).append((pid, p))
    recorded = {s["name"] for s in ctx.manifest.sources()}
    per_source: dict[str, dict[str, AdoptedDocument]] = {}
    for (src, path), points in sorted(by_doc.items()):
        if src not in recorded:
            # a source the manifest lost: named after its root when given as a PATH
            root = src if os.path.isabs(src) else ""
            ctx.manifest.ensure_source(src, root, chk.collection)
            recorded.add(src)
            logger.warning("source %s re-recorded from the store's points", src)
        first = points[0][1]
        keys = ("doc_hash", "rule_fingerprint", "git_commit")
        consistent = all(all(p.get(k) == first.get(k) for k in keys) for _, p in points)
        rows = tuple(_chunk_row(pid, p) for pid, p in points)
        per_source.setdefault(src, {})[path] = AdoptedDocument(
            str(first["doc_hash"]),
            str(first.get("rule_fingerprint") or ""),
            rows,
            first.get("git_commit"),
            consistent,
        )
    chk.adopted += len({pid for points in by_doc.values() for pid, _ in points})
    for src, docs in per_source.items():
        ctx.manifest.adopt(src, docs, shared=src in shared)
    if unusable:
        ctx.store.delete(chk.collection, unusable)
        chk.deleted = len(unusable)


def _chunk_row(pid: str, p: dict[str, Any]) -> ChunkRow:
    return ChunkRow(
        pid, str(p["chunk_hash"]), int(p["ordinal"]), int(p["start_char"]), int(p["end_char"])
    )


def _rewrite(ctx: SyncContext, syncer: Syncer, source: str, paths: set[str]) -> list[str]:
    """Write documents again whose points the store lost; returns their paths.

    The writer finds the lost points when it refreshes their payload and upserts them
    whole, with every vector and field a new point gets. Documents whose file is gone
    are left to the scan that follows (it deletes them, under the mass-deletion guard).
    """
    src = ctx.source(source)
    plan = Plan(source)
    plan.index = sorted(p for p in paths if src.stat(p) is not None)
    if plan.index:
        res = syncer.apply(plan)
        if res.interrupted:
            raise SyncInterrupted("stop requested")
    return plan.index
