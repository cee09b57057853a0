"""A search of sources that hold nothing: "nothing indexed", with each source's reason.

An empty answer over sources that hold no document is not "no results": the index has
nothing to search, for a reason the user can fix (a site whose fetch failed, a folder
unmounted, a source never synced). Decided per searched source, from the manifest's
counts and what the state dir records of each source's kind
(:func:`~ingestd.daemon.sources.shown.recorded_status`: what ``ingestd status`` shows),
so the CLI, the daemon, the MCP tool and the Python API say the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.daemon.sources.shown import recorded_status
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["check_indexed", "unindexed_reason"]


def check_indexed(engine: Engine, names: list[str]) -> None:
    """Refuse a search whose sources all hold nothing (none is being synced either).

    Called on an empty answer only (counting costs a query per source, cached).

    Args:
        engine: the engine (its manifest, its sources and their running syncs).
        names: the searched sources.

    Raises:
        DaemonError: exit code 1, ``nothing indexed in source(s) NAMES: REASON; see
            `ingestd status```, when no searched source holds a document and no sync of
            one runs (a running sync's documents come: the answer says they are being
            indexed).
    """
    if not names or any(p.source in names for p in engine.checkpoints.running):
        return
    manifest = engine.resources.manifest
    if any(manifest.counts(n).get("documents", 0) for n in names):
        return
    synced = {str(s["name"]): s.get("last_sync") for s in manifest.sources()}
    reasons = [(n, unindexed_reason(engine, n, synced.get(n))) for n in names]
    if len(reasons) == 1:
        said = f"source {names[0]}: {reasons[0][1]}"
    else:
        said = f"sources {', '.join(names)}: " + "; ".join(f"{n}: {r}" for n, r in reasons)
    raise DaemonError(f"nothing indexed in {said}; see `ingestd status`", 1)


def unindexed_reason(engine: Engine, name: str, last_sync: float | None) -> str:
    """Why source ``name``, which holds no document, holds none (a phrase).

    Args:
        engine: the engine (the source's root).
        name: the source.
        last_sync: the end of its last complete sync (``None``: never), as recorded.

    Returns:
        Its kind's fetch error (a site, a git repository), a missing root, never
        synced, or a sync that found no document.
    """
    root = getattr(engine.context.source(name), "root", None)
    keys = recorded_status(Path(root)) if root is not None else {}
    error = keys.get("fetch_error")
    fetched_kind = "fetched_at" in keys
    if error:
        return f"its fetch failed ({error})"
    if fetched_kind and not keys.get("fetched_at"):
        return "not fetched yet"
    if root is not None and not fetched_kind and not os.path.isdir(root):
        return f"its root {root} is not a folder (unmounted, moved or deleted?)"
    if last_sync is None:
        return "not synced yet"
    return "its last sync found no document to index (see its include and exclude globs)"
