"""``resync``: reconcile the selected sources with their files once (or plan it: ``dry_run``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ingestd.daemon.commands.index.sync import fetch
from ingestd.daemon.commands.selection import selected_sources
from ingestd.daemon.sources.base import Fetched, Source

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine
    from ingestd.daemon.sync.types import SyncProgress

__all__ = ["EXIT_HELD", "resync"]

#: ``exit_code`` of a resync whose deletions the mass-deletion guard held.
EXIT_HELD = 3


def resync(
    engine: Engine,
    sources: Sequence[str] | None = None,
    full: bool = False,
    dry_run: bool = False,
    allow_mass_delete: bool = False,
    progress: Callable[[SyncProgress], None] | None = None,
) -> dict[str, Any]:
    """Reconcile the selected sources with their files.

    Returns:
        ``{"sources": [...], "exit_code": N}``: per source the plan (``dry_run``) or the
        counts of what was done (with ``fetch_error`` when a fetched source's origin
        could not be fetched: it is synced from its last copy); ``exit_code`` is 0 when
        the store matches the files, 3 when the mass-deletion guard held deletions, 1
        when files could not be read, a source's root is missing (nothing of it is
        synced or deleted) or its origin could not be fetched.
    """
    out = []
    code = 0
    selected = selected_sources(engine, sources)
    for name in selected:
        # a fetched source (git, sitemap): its origin now; a failure keeps the last copy
        fetch_error = None if dry_run else fetch(engine, name)
        plan = engine.plan(
            name, full=full, allow_mass_delete=allow_mass_delete, check_store=not dry_run
        )
        if dry_run:
            summary = {**plan.summary(), **_remote_check(engine.context.source(name))}
            out.append(summary)
            if plan.held:
                code = max(code, EXIT_HELD)
            elif plan.root_missing and not summary.get("remote_ok"):
                code = max(code, 1)
            continue
        res = engine.apply(plan, progress=progress)
        done = {**res.as_dict(), "skipped": engine.failures.skipped_entries(name)}
        if fetch_error:
            done["fetch_error"] = fetch_error
        out.append(done)
        if res.held:
            code = max(code, EXIT_HELD)
        elif res.retry or res.root_missing or res.interrupted or res.deferred or fetch_error:
            code = max(code, 1)
    result: dict[str, Any] = {"sources": out, "exit_code": code}
    if dry_run:
        from ingestd.daemon.migration import migrate

        wanted = {engine.context.sources[n].collection for n in selected}
        result["migrations"] = [
            c.as_dict()
            for c in migrate.costs(
                engine.cfg, engine.resources.paths.root, engine.resources.manifest
            )
            if c.collection in wanted
        ]
    return result


def _remote_check(source: Source) -> dict[str, Any]:
    """What a dry run says of a fetched source (a git repository, a site): it fetches nothing.

    Returns:
        ``{}`` for a source that is not fetched; ``dry_run_note`` (what the plan was
        made from) when the last fetch can be planned from; else what the source's
        :meth:`~ingestd.daemon.sources.base.Fetched.dry_run` says of its origin.
    """
    if not isinstance(source, Fetched):
        return {}
    fetched = source.fetch_state().get("fetched_at")
    if fetched and source.missing() is None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(fetched))
        return {"dry_run_note": f"planned from the last fetch ({when}); a dry run fetches nothing"}
    return source.dry_run()
