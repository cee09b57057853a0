"""``sync``: make the index current, then answer ("sync, then answer").

:func:`sync` returns when every change made on disk before it was called is
searchable. Through the daemon it is the barrier ``ingestd resync`` is: a job on the
engine thread, after the job running now and the change batches queued before it,
which plans from the files themselves (so changes still coalescing in the watcher's
batcher are included). Without ``paths`` each selected source is scanned (the stat
fast path makes that cheap: a no-op scan of 768 files takes about a second); with
``paths``, only those files and folders are planned, and the sources they belong to.

Its answer says what it did, per source, and whether everything is searchable
(``complete``): a file that cannot be read now, deletions held by the mass-deletion
guard or a missing root leave it ``false``, with the reason in ``summary``. A sync that
wrote, deleted or failed a document logs one line per source, as a change batch of the
watcher does.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ingestd.chunkers.errors import IngestdError
from ingestd.daemon.sources.base import Fetched
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine
    from ingestd.daemon.sync.types import SyncResult

__all__ = ["fetch", "scopes", "sync", "unknown_paths"]

logger = logging.getLogger(__name__)


def scopes(
    engine: Engine, paths: Sequence[str] | None, sources: Sequence[str] | None = None
) -> dict[str, list[str] | None]:
    """What to sync: source -> relative paths, or ``None`` for a scan of the source.

    Args:
        engine: the engine (its sources and their roots).
        paths: files or folders, absolute or relative to a source's root (as search
            hits give them); ``None`` or empty: every selected source, whole.
        sources: only these sources (default: all; with relative ``paths``, every
            source is planned for them, which finds nothing where they are not).

    Raises:
        DaemonError: exit code 2: an unknown source, a path under no source's root, a
            relative path that leaves its root (``..``), or a path that is neither a
            file or folder of a selected source nor indexed (a typo: nothing would be
            synced, :func:`unknown_paths`).
    """
    names = list(sources) if sources else list(engine.context.sources)
    unknown = [n for n in names if n not in engine.context.sources]
    if unknown:
        known = ", ".join(engine.context.sources) or "none"
        raise DaemonError(f"unknown source(s): {', '.join(unknown)}; known sources: {known}", 2)
    if not paths:
        return dict.fromkeys(names)
    out: dict[str, list[str] | None] = {}

    def add(name: str, rel: str) -> None:
        if rel == "":
            out[name] = None  # the root itself: the whole source
            return
        planned = out.setdefault(name, [])
        if planned is not None:
            planned.append(rel)

    for p in paths:
        if os.path.isabs(p):
            real = Path(os.path.realpath(p))
            roots = [(n, Path(engine.context.sources[n].root)) for n in names]
            held = [(n, real.relative_to(r)) for n, r in roots if real.is_relative_to(r)]
            if not held:
                raise DaemonError(f"{p} is under no source's root", 2)
            for name, under in held:
                add(name, "" if str(under) == "." else under.as_posix())
            continue
        rel_path = PurePosixPath(p.strip())
        if ".." in rel_path.parts:
            raise DaemonError(f"{p}: a path relative to a source's root cannot contain ..", 2)
        rel = rel_path.as_posix().strip("/")
        for name in names:
            add(name, "" if rel == "." else rel)
    unknown = unknown_paths(engine, out)
    if unknown:
        raise DaemonError(
            f"{', '.join(unknown)}: not a file or folder of "
            f"{'any source' if len(out) > 1 else 'source ' + next(iter(out))}, nor indexed "
            "(paths are absolute, or relative to a source's root as search hits give them)",
            2,
        )
    return out


def unknown_paths(engine: Engine, planned: dict[str, list[str] | None]) -> list[str]:
    """The planned paths no selected source holds: on disk, or in the manifest.

    A path counts as held by a source when it is a file or folder under its root, or
    when the manifest has a document at it or below it (a file deleted since it was
    indexed: syncing it deletes its points). A source whose root is missing holds
    every path (its state is reported by the sync itself).
    """
    rels = sorted({r for paths in planned.values() if paths for r in paths})
    unknown = []
    for rel in rels:
        holders = [n for n, paths in planned.items() if paths and rel in paths]
        if not any(_holds(engine, name, rel) for name in holders):
            unknown.append(rel)
    return unknown


def _holds(engine: Engine, name: str, rel: str) -> bool:
    """Whether source ``name`` has ``rel`` on disk or in its manifest (:func:`unknown_paths`)."""
    src = engine.context.source(name)
    try:
        if src.missing() is not None or src.stat(rel) is not None or src.is_folder(rel):
            return True
    except OSError:
        return True  # cannot tell: the sync says what it finds
    m = engine.resources.manifest
    return m.document(name, rel) is not None or m.documents_under(name, rel) > 0


def sync(
    engine: Engine, paths: Sequence[str] | None = None, sources: Sequence[str] | None = None
) -> dict[str, Any]:
    """Sync the selected sources (or ``paths`` only); return what was done.

    Args:
        engine: the engine.
        paths: see :func:`scopes`.
        sources: see :func:`scopes`.

    Returns:
        ``sources``: per source its scope (``"scan"`` or the paths) and the sync's
        counts (see :class:`~ingestd.daemon.sync.types.SyncResult`); ``complete``:
        every change made before the call is searchable; ``seconds``; ``summary``:
        one line per source saying what it did and, when not complete, why.

    Raises:
        DaemonError: see :func:`scopes`.
    """
    t0 = time.monotonic()
    planned = scopes(engine, paths, sources)
    fetch_errors = {name: fetch(engine, name) for name in planned}
    done = [(engine.sync(name, rels), rels) for name, rels in planned.items()]
    for res, rels in done:
        if res.indexed or res.deleted or res.failed:
            logger.info(
                "sync of source %s (%s): %d indexed, %d deleted, %d failed",
                res.source,
                "scan" if rels is None else f"{len(rels)} path(s)",
                res.indexed,
                res.deleted,
                res.failed,
            )
    return {
        "sources": [
            {**res.as_dict(), "scope": "scan" if rels is None else rels} for res, rels in done
        ],
        "complete": all(res.complete and not fetch_errors[res.source] for res, _ in done),
        "seconds": round(time.monotonic() - t0, 3),
        "summary": [_summary(res, rels, fetch_errors[res.source]) for res, rels in done],
    }


def fetch(engine: Engine, name: str) -> str | None:
    """Bring source ``name`` up to date with its origin when it has one (a git source).

    Returns:
        ``None`` when fetched (or nothing to fetch), else why the fetch failed (the
        source keeps what it had: nothing is deleted).
    """
    source = engine.context.source(name)
    if not isinstance(source, Fetched):
        return None
    try:
        source.refresh()
    except IngestdError as exc:
        return str(exc)
    return None


def _summary(res: SyncResult, rels: list[str] | None, fetch_error: str | None = None) -> str:
    scope = "scanned" if rels is None else f"{len(rels)} path(s) checked"
    line = (
        f"{res.source}: {scope}; {res.indexed} document(s) written, {res.deleted} deleted, "
        f"{res.failed} failed"
    )
    why = []
    if fetch_error and not res.root_missing:  # else why_missing says it
        why.append(f"the fetch failed ({fetch_error})")
    if res.root_missing:
        why.append(res.why_missing or "its root folder is missing")
    if res.retry:
        why.append(f"{len(res.retry)} file(s) could not be read and are retried")
    if res.held:
        why.append(f"{len(res.held)} deletion(s) held by the mass-deletion guard")
    if res.interrupted:
        why.append("interrupted before the end")
    if res.deferred:
        why.append(f"{len(res.deferred)} document(s) were being written by another sync")
    return line + ("; NOT all searchable: " + ", ".join(why) if why else "; all searchable")
