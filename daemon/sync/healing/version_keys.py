"""Stores written before versions shared points: found at start-up and written again.

Before points were shared by versions, a versioned source's point ids were keyed on
the document key with its version (``<version>:<path>``), one point per version. A
store made then still works, but holds a copy of each chunk per version. The first
check of such a source (:func:`rekey_versions`, before its first scan) finds ids made
the old way and clears its documents' rule fingerprints, so the scan that follows
writes every document again under the shared ids: vectors from the embedding cache
(or from the old points, by chunk hash), nothing embedded again; the old points are
deleted as each document's stale ids. One log line says so.
"""

from __future__ import annotations

import logging

from ingestd.daemon.sources.versions import is_versioned, split_document
from ingestd.daemon.sync.context import SyncContext
from ingestd.store.vectors.ids import point_ids

__all__ = ["old_version_keys", "rekey_versions"]

logger = logging.getLogger(__name__)


def old_version_keys(ctx: SyncContext, source: str) -> bool:
    """Whether ``source`` is versioned and its recorded points have per-version ids.

    Compares the committed ids of the first document holding points with the ids the
    shared scheme gives its chunk hashes (a few milliseconds).
    """
    src = ctx.source(source)
    if not is_versioned(src):
        return False
    for doc in ctx.manifest.iter_documents(source):
        rows = [c for c in ctx.manifest.chunks(doc.id) if not c.pending]
        rows.sort(key=lambda c: c.ordinal)
        version, path = split_document(src, doc.path)
        if not rows or version is None:
            continue
        want = point_ids(source, path, [r.chunk_hash for r in rows])
        return want != [r.point_id for r in rows]
    return False


def rekey_versions(ctx: SyncContext, source: str) -> int:
    """Make the next scan of ``source`` write every document under shared ids, when needed.

    Returns:
        The number of documents to be written again (0: the store is up to date).
    """
    if not old_version_keys(ctx, source):
        return 0
    n = ctx.manifest.forget_rule_fingerprints(source)
    logger.warning(
        "source %s: its points predate points shared by versions (one copy per version); "
        "writing its %d documents again with shared point ids (vectors from the embedding "
        "cache: nothing is embedded again)",
        source,
        n,
    )
    return n
