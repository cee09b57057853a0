"""``migrate``: report, start or abort the migrations of the configured collections."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["migrate"]


def migrate(
    engine: Engine, abort: bool = False, dry_run: bool = False, start: bool = False
) -> dict[str, Any]:
    """Report, start or abort the migrations of the configured collections.

    Args:
        engine: the engine (its configured profile is the migrations' target).
        abort: drop the versions being built; the current ones stay (see
            :func:`ingestd.daemon.migration.migrate.abort`).
        dry_run: only report what the config would cost.
        start: start a migration again after an abort (the daemon queues a scan of
            the sources named in ``rescan``; in local mode the caller syncs them).

    Returns:
        ``{"migrations": [status...], "costs": [cost...]}``, with ``aborted`` entries
        for ``abort`` and ``rescan`` (source names) for ``start``.
    """
    from ingestd.daemon.migration import migrate as mig
    from ingestd.daemon.migration import status as migration_status

    collections = sorted({s.collection for s in engine.context.sources.values()})
    out: dict[str, Any] = {}
    if abort:
        out["aborted"] = engine.collections.abort(collections)
    elif start and not dry_run:
        due = engine.collections.restart(collections)
        out["rescan"] = sorted(n for n, s in engine.context.sources.items() if s.collection in due)
    out["migrations"] = migration_status.status(
        engine.resources.manifest, engine.collections.running()
    )
    out["costs"] = [
        c.as_dict()
        for c in mig.costs(engine.cfg, engine.resources.paths.root, engine.resources.manifest)
    ]
    return out
