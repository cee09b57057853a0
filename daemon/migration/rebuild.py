"""Building a new version of a collection from the files, behind its alias.

Used when the stored layout must change in a way Qdrant cannot apply in place: a store
written before sparse vectors existed (Qdrant cannot add a sparse vector to an existing
collection), or, later, a new embedding model. The store side (physical versions,
routing writes to the one being built, the atomic alias switch, the record in the
manifest) is :class:`ingestd.store.vectors.versions.CollectionVersions`; this module fills
the new version.

The embedded text a sparse vector is computed from is not in the payload (``text`` is
the verbatim chunk; the heading prefix and the clean rendering are not stored), so the
new version is filled by re-chunking the source files through the engine: every
document of every source of the collection is re-written with ``force`` (all its
points upserted), dense vectors taken from the embedding cache or, failing that, from
the previous version's points with the same chunk hash (never re-embedded unless the
text changed). The result is exactly what a from-scratch ingest of the current files
stores. What cannot be re-chunked (a source whose root is missing, documents held by
the mass-deletion guard, files unreadable right now) is carried over from the previous
version by :meth:`~ingestd.store.vectors.versions.CollectionVersions.finish`; such a point
gets its sparse vector when its document is next synced (its rule fingerprint changed).

Searches answer from the previous version until the switch. A stop request (SIGTERM)
ends the build at a checkpoint; finished sources are recorded, so the next start
resumes with the others.
"""

from __future__ import annotations

import logging

from ingestd.daemon.sync.context import SyncContext, Syncer
from ingestd.daemon.sync.types import SyncInterrupted
from ingestd.store.vectors.versions import ENGINE, CollectionVersions

__all__ = ["build_version"]

logger = logging.getLogger(__name__)


def build_version(
    ctx: SyncContext, syncer: Syncer, collection: str, reason: str
) -> set[tuple[str, str]]:
    """Build (or resume building) a new version of ``collection`` and switch to it.

    Args:
        ctx: the engine's context; its store is routed to the new version meanwhile.
        syncer: plans and writes every document again.
        collection: the configured collection name.
        reason: why (``upgrade`` or ``resume``), for the log and the manifest.

    Returns:
        The documents ``(source, path)`` re-written into the new version.

    Raises:
        SyncInterrupted: a stop was requested; the build resumes on the next start.
    """
    versions = CollectionVersions(ctx.store, ctx.manifest)
    versions.begin(collection, ctx.profiles.profile_of(collection).model.dim, reason)
    rebuilt: set[tuple[str, str]] = set()
    build = ctx.manifest.collection_build(collection)
    if build is not None and build["reason"] == ENGINE:
        # another engine holds the collection: its points move with their vectors,
        # nothing is re-chunked or embedded; searches meanwhile read the old version
        versions.finish(collection, lambda: ctx.checkpoints.checkpoint(serve_changes=False))
        return rebuilt
    if versions.phase(collection) == "building":
        done = versions.done_sources(collection)
        for name in sorted(ctx.sources):
            if ctx.collection_of(name) != collection or name in done:
                continue
            plan = syncer.plan(name)  # deletions, the mass-deletion guard, a missing root
            if plan.root_missing:
                logger.warning(
                    "source %s: root missing; its points are carried over unchanged", name
                )
                continue
            present = ctx.source(name).scan()
            plan.index = sorted(present)
            plan.sizes = {rel: st.size for rel, st in present.items()}
            plan.stat_only, plan.moves = [], []
            logger.info("collection %s: writing %d documents of %s", collection, len(present), name)
            res = syncer.apply(plan, force=True)
            if res.interrupted:
                raise SyncInterrupted(f"stop requested while building {collection}")
            rebuilt.update((name, rel) for rel in plan.index if rel not in res.retry)
            versions.source_done(collection, name)
    versions.finish(collection)
    return rebuilt
