"""``verify``: compare the files, the manifest and the store, and repair drift.

The expected state is what a from-scratch ingest of the current files would store
(:meth:`~ingestd.daemon.sync.preparing.preparer.Preparer.expected_points`): the same point
ids, the same payloads, provenance keys aside, and the same sparse vectors, recomputed from the
embedded text. Dense vectors are checked too: one with NaN, infinity or no length,
in the store or in the embedding cache, is never ranked by a cosine index
(:mod:`ingestd.store.embedding.finite`). Repair deletes orphans by id, drops bad
cached vectors, re-writes documents with missing, stale or non-finite points (vectors
from the embedding cache when known and good, else embedded again), and re-records
drifted manifest rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ingestd.daemon.sources.versions import document_keys
from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext, Syncer
from ingestd.daemon.sync.preparing.documents import strip_provenance
from ingestd.daemon.sync.preparing.preparer import Preparer
from ingestd.daemon.sync.types import Plan

__all__ = ["Verifier", "VerifyReport", "same_sparse"]

logger = logging.getLogger(__name__)

#: Points whose dense vectors are read at once by the non-finite check.
VECTOR_SLICE = 512


@dataclass
class VerifyReport:
    """Differences between the files, the manifest and the store for one source.

    ``missing``: expected points absent from the store; ``orphans``: store points no
    file produces; ``stale``: points whose payload differs; ``sparse``: points whose
    sparse (BM25) vector differs from the one recomputed from their text;
    ``nonfinite``: points whose dense vector holds NaN or infinity or has no length;
    ``cache``: chunk hashes of the source whose vector in the embedding cache is such;
    ``manifest``: paths whose manifest record disagrees with the files;
    ``root_missing``: the source's root folder is not there (an unmounted volume),
    so nothing could be compared (the report is not clean) and nothing is repaired;
    ``writing``: paths of long documents the daemon is writing in the background
    right now, left out of the comparison (their points are there only in part until
    the write commits): verify again once they are written.
    """

    source: str
    expected: int = 0
    missing: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    sparse: list[str] = field(default_factory=list)
    nonfinite: list[str] = field(default_factory=list)
    cache: list[str] = field(default_factory=list)
    manifest: list[str] = field(default_factory=list)
    root_missing: bool = False
    why_missing: str | None = None
    writing: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Whether files, manifest and store agree (unknown, so ``False``, without a root)."""
        return not (
            self.root_missing
            or self.missing
            or self.orphans
            or self.stale
            or self.sparse
            or self.nonfinite
            or self.cache
            or self.manifest
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready report (lists capped at 100 ids each, with totals)."""
        out: dict[str, Any] = {
            "source": self.source,
            "expected": self.expected,
            "clean": self.clean,
            "root_missing": self.root_missing,
            "why_missing": self.why_missing,
        }
        for k in (
            "missing",
            "orphans",
            "stale",
            "sparse",
            "nonfinite",
            "cache",
            "manifest",
            "writing",
        ):
            v = getattr(self, k)
            out[k] = v[:100]
            out[f"n_{k}"] = len(v)
        return out


class Verifier:
    """Compares the files, the manifest and the store, and repairs drift.

    Args:
        ctx: the engine's context (its store and manifest are read, written on repair).
        preparer: derives the expected points from the files.
        syncer: re-writes documents on repair.
        collections: makes sure the collection exists before orphans are deleted.
        writing: paths of a source whose long documents are being written in the
            background (left out of the comparison and the repair); none by default.
    """

    def __init__(
        self,
        ctx: SyncContext,
        preparer: Preparer,
        syncer: Syncer,
        collections: CollectionLifecycle,
        writing: Callable[[str], set[str]] = lambda source: set(),
    ) -> None:
        self.ctx = ctx
        self.preparer = preparer
        self.syncer = syncer
        self.collections = collections
        self.writing = writing

    def verify(self, source: str, *, repair: bool = False) -> VerifyReport:
        """Compare expected points with the manifest and the store; optionally repair.

        A source whose root folder is missing is not compared: its report says so
        (``root_missing``), and a repair deletes nothing.

        Args:
            source: a configured source name.
            repair: fix what differs, then verify again.

        Raises:
            KeyError: unknown source.
        """
        rep = VerifyReport(source)
        ctx = self.ctx
        missing = ctx.source(source).missing()
        if missing is not None:
            logger.warning("source %s: %s; not verified, nothing repaired", source, missing)
            rep.root_missing = True
            rep.why_missing = missing
            return rep
        want_sparse: dict[str, Any] = {}
        expected, docs = self.preparer.expected_points(source, sparse=want_sparse)
        busy = self.writing(source)
        rep.writing = sorted(busy)
        if busy:
            expected = {pid: p for pid, p in expected.items() if busy.isdisjoint(document_keys(p))}
            docs = {rel: why for rel, why in docs.items() if rel not in busy}
        rep.expected = len(expected)
        collection = ctx.collection_of(source)
        stored: dict[str, dict[str, Any]] = {}
        got_sparse: dict[str, Any] = {}
        common: list[str] = []
        if ctx.store.has_collection(collection):
            stored = {
                pid: strip_provenance(p)
                for pid, p in ctx.store.scroll(collection, source)
                if "path" not in p or busy.isdisjoint(document_keys(p))
            }
            common = sorted(set(expected) & set(stored))
            got_sparse = ctx.store.sparse_vectors(collection, common)
            rep.nonfinite = self._nonfinite(collection, common)
        rep.missing = sorted(set(expected) - set(stored))
        rep.orphans = sorted(set(stored) - set(expected))
        rep.stale = [pid for pid in common if expected[pid] != stored[pid]]
        rep.sparse = [
            pid for pid in common if not same_sparse(want_sparse[pid], got_sparse.get(pid))
        ]
        rep.cache = self._bad_cached(source, expected)
        rep.manifest = [
            rel for rel in self._manifest_drift(source, expected, docs) if rel not in busy
        ]
        if repair and not rep.clean:
            self._repair(source, rep, expected)
            return self.verify(source, repair=False)
        return rep

    def _nonfinite(self, collection: str, ids: list[str]) -> list[str]:
        """The points among ``ids`` whose dense vector is not finite or has no length."""
        from ingestd.store.embedding.finite import is_usable

        bad: list[str] = []
        for i in range(0, len(ids), VECTOR_SLICE):
            recs = self.ctx.store.retrieve(collection, ids[i : i + VECTOR_SLICE], with_vectors=True)
            bad += [pid for pid, _, vec in recs if not is_usable(vec)]
        return sorted(bad)

    def _bad_cached(self, source: str, expected: dict[str, dict[str, Any]]) -> list[str]:
        """Chunk hashes of ``expected`` whose vector in the embedding cache is not usable.

        Nothing is read when there is no cache file (it is not made by a check).
        """
        resources = self.ctx.resources
        if resources.cache_open is None and not resources.cache_path.exists():
            return []
        hashes = [str(p["chunk_hash"]) for p in expected.values() if "chunk_hash" in p]
        model = self.ctx.profile_of_source(source).embedder.fingerprint
        return list(resources.cache.unusable(model, hashes))

    def _manifest_drift(
        self,
        source: str,
        expected: dict[str, dict[str, Any]],
        docs: dict[str, str | None],
    ) -> list[str]:
        """Paths whose manifest record (ids, pending rows, state) disagrees with the files."""
        manifest = self.ctx.manifest
        known_docs = manifest.documents(source)
        expected_by_path: dict[str, set[str]] = {}
        for pid, p in expected.items():
            for key in document_keys(p):  # a point shared by versions: each version's document
                expected_by_path.setdefault(key, set()).add(pid)
        rows_by_doc: dict[int, set[str]] = {}
        pending_docs: set[int] = set()
        for pid, doc_id, pending in manifest.point_rows(source):
            rows_by_doc.setdefault(doc_id, set()).add(pid)
            if pending:
                pending_docs.add(doc_id)
        drift = []
        for rel in sorted(set(docs) | set(known_docs)):
            doc = known_docs.get(rel)
            if doc is None or rel not in docs:
                drift.append(rel)
                continue
            have = rows_by_doc.get(doc.id, set())
            if have != expected_by_path.get(rel, set()) or doc.id in pending_docs:
                drift.append(rel)
            elif (doc.state == "failed") != (docs[rel] is not None):
                drift.append(rel)
        return drift

    def _repair(self, source: str, rep: VerifyReport, expected: dict[str, dict[str, Any]]) -> None:
        ctx = self.ctx
        collection = ctx.collection_of(source)
        if rep.orphans:
            self.collections.ensure(collection)
            ctx.store.delete(collection, rep.orphans)
        if rep.cache:
            model = ctx.profile_of_source(source).embedder.fingerprint
            ctx.resources.cache.drop(model, rep.cache)
        paths = set(rep.manifest)
        bad_cached = set(rep.cache)
        for p in expected.values():
            if p.get("chunk_hash") in bad_cached:  # the cache is filled again (from the store)
                paths.update(document_keys(p))
        for pid in rep.missing + rep.stale + rep.sparse + rep.nonfinite:
            paths.update(document_keys(expected[pid]))
        on_disk = ctx.source(source).scan()
        plan = Plan(source)
        for rel in sorted(paths):
            if rel in on_disk:
                plan.index.append(rel)
            else:
                plan.delete.append(rel)
        res = self.syncer.apply(plan, force=True)
        logger.info(
            "repaired source %s: %d documents re-written, %d deleted, %d orphans removed",
            source,
            res.indexed + res.failed,
            res.deleted,
            len(rep.orphans),
        )


def same_sparse(want: Any, got: Any) -> bool:
    """Whether two sparse vectors (or ``None``) are equal, values up to float32 noise."""
    if want is None or got is None:
        return want is None and got is None
    return list(want.indices) == list(got.indices) and all(
        abs(a - b) <= 1e-6 * max(1.0, abs(a)) for a, b in zip(want.values, got.values, strict=True)
    )
