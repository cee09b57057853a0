"""``resync``: reconcile the selected sources with their files once (or plan it: ``dry_run``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ingestd.daemon.commands.index.sync import fetch
from ingestd.daemon.commands.selection import selected_sources
from ingestd.daemon.sources.base import Fetched
from ingestd.daemon.sources.gitcmd import GitError, redact_url

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine
    from ingestd.daemon.sources.git import GitSource
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
        counts of what was done; ``exit_code`` is 0 when the store matches the files, 3
        when the mass-deletion guard held deletions, 1 when files could not be read or
        a source's root is missing (nothing of it is synced or deleted).
    """
    out = []
    code = 0
    selected = selected_sources(engine, sources)
    for name in selected:
        if not dry_run:
            fetch(engine, name)  # a git source: its refs now (a failure keeps the last ones)
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
        out.append({**res.as_dict(), "skipped": engine.failures.skipped_entries(name)})
        if res.held:
            code = max(code, EXIT_HELD)
        elif res.retry or res.root_missing or res.interrupted or res.deferred:
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


def _remote_check(source: Any) -> dict[str, Any]:
    """What a dry run says of a git source: it fetches nothing, and checks the remote.

    Returns:
        ``{}`` for a source that is not a git repository; else ``dry_run_note`` (what the
        plan was made from), and ``remote_ok`` with ``remote_versions`` (version ->
        commit, from ``git ls-remote``) when the repository answers with refs to index.
    """
    if not isinstance(source, Fetched):
        return {}
    src: GitSource = cast("GitSource", source)  # the one kind fetched: its url and refs
    state = src.fetch_state()
    if state.get("refused"):
        return {"dry_run_note": str(state["refused"])}
    fetched = state.get("fetched_at")
    if fetched and src.missing() is None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(fetched))
        return {"dry_run_note": f"planned from the last fetch ({when}); a dry run fetches nothing"}
    url = redact_url(src.url)
    try:
        versions = src.list_remote()
    except GitError as exc:
        return {"dry_run_note": f"repository {url} cannot be listed: {exc}"}
    if not versions:
        refs = ", ".join(src.config.refs)
        return {"dry_run_note": f"repository {url} has no branch or tag that refs [{refs}] selects"}
    names = ", ".join(sorted(versions))
    return {
        "remote_ok": True,
        "remote_versions": versions,
        "dry_run_note": (
            f"repository {url} answers; {len(versions)} version(s) to index: {names}. "
            "A dry run fetches nothing: the first fetch (ingestd sync, or the daemon) indexes them"
        ),
    }
