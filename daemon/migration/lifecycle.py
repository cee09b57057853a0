"""A collection's lifecycle, as the sync engine sees it: ensure, build, migrate, follow.

:class:`Collections` implements :class:`~ingestd.daemon.sync.context.CollectionLifecycle`,
the one interface through which a sync reaches collection versions. Before the first
write into a collection it records the collection's profile, creates the collection
when it is new, and runs what is due: a build of a new version when the stored layout
is older than :data:`~ingestd.store.vectors.base.LAYOUT` or a build was interrupted
(:func:`~ingestd.daemon.migration.rebuild.build_version`), then a migration to the
configured profile (:func:`~ingestd.daemon.migration.migrate.advance`). Each
collection is checked once per engine (and again when something changed it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ingestd.daemon.migration import migrate
from ingestd.daemon.migration.migrate import Migration
from ingestd.daemon.migration.rebuild import build_version
from ingestd.daemon.sync.context import SyncContext, Syncer
from ingestd.daemon.sync.profiles.profile import Profile
from ingestd.store.vectors.versions import CollectionVersions

__all__ = ["Collections"]


class Collections:
    """Collection versions and migrations for one sync engine.

    Args:
        ctx: the engine's context.
        syncer: the engine, which (re)writes documents for a build.
    """

    def __init__(self, ctx: SyncContext, syncer: Syncer) -> None:
        self.ctx = ctx
        self.syncer = syncer
        self._checked: set[str] = set()
        self._running: dict[str, Migration] = {}

    def ensure(self, collection: str) -> set[tuple[str, str]]:
        """Record the collection's profile, create it in the store if new, build what is due.

        A collection of an older layout (no sparse vectors), or one whose new version
        was being built when the daemon stopped, is (re)built here first; then the
        migration to the configured profile runs, when one is due.

        Returns:
            The documents ``(source, path)`` a build or migration wrote just now, as
            they are on disk (usually none).

        Raises:
            SyncInterrupted: a stop was requested during a build (it resumes next time).
        """
        if collection in self._checked:
            return set()
        ctx = self.ctx
        current = ctx.profiles.profile_of(collection)
        rec = ctx.manifest.collection_record(collection)
        if rec is None or (rec["settings"] is None and current is ctx.profiles.profile):
            ctx.manifest.record_collection(collection, current.settings)
        self._checked.add(collection)  # the builds write through here
        try:
            rebuilt: set[tuple[str, str]] = set()
            versions = CollectionVersions(ctx.store, ctx.manifest)
            reason = versions.pending(collection, current.model.dim)
            if reason is not None:
                rebuilt = build_version(ctx, self.syncer, collection, reason)
            return rebuilt | migrate.advance(ctx, collection, self._running)
        except BaseException:
            self._checked.discard(collection)
            raise

    def due(self, collection: str) -> bool:
        """Whether the manifest says ``collection`` needs a new version.

        It predates the store layout, a build was interrupted, or a migration to the
        configured profile is due. Manifest reads only: a no-op sync of an up-to-date
        store never opens the store.
        """
        from ingestd.store.vectors.base import LAYOUT

        if collection in self._checked:
            return False
        manifest = self.ctx.manifest
        known = manifest.collection_layout(collection)
        return known is not None and (
            known != LAYOUT
            or manifest.collection_build(collection) is not None
            or migrate.due(self.ctx, collection)
            or self.ctx.resources.engine_move_due()
        )

    def before_scan(self, collection: str) -> None:
        """A scan starts: a migration that waited (a missing root, held deletions) may go on."""
        if collection not in self._running and migrate.due(self.ctx, collection):
            self._checked.discard(collection)

    def before_check(self, collection: str) -> None:
        """Before the store is compared with the manifest: finish an interrupted switch.

        The manifest already describes the new version; the alias may still name the
        previous one.
        """
        build = self.ctx.manifest.collection_build(collection)
        if build is not None and build["phase"] == "switching":
            self.ensure(collection)

    def follow(self, collection: str, source: str, written: list[str], deleted: list[str]) -> None:
        """Changes the current version just got land in the version being built too."""
        running = self._running.get(collection)
        if running is not None:
            running.follow(source, written, deleted)

    def forget_check(self, collection: str) -> None:
        """Check ``collection`` again before the next write (it was found missing)."""
        self._checked.discard(collection)

    def recheck(self, collection: str) -> None:
        """Read ``collection``'s profile again and check what is due at its next write."""
        self.ctx.profiles.forget_current(collection)
        self._checked.discard(collection)

    def forget_source(self, collection: str, source: str) -> None:
        """Delete ``source``'s documents from the version a migration builds, if any."""
        migrate.forget_source(self.ctx, collection, source)

    def query_target(self, collection: str) -> tuple[str | None, Profile]:
        """Where a search of ``collection`` reads, and the profile that made it.

        Resolves the alias to its physical version once, so that the query vector and
        the version it is compared with always come from the same model, even while a
        migration switches the alias.

        Returns:
            ``(physical collection or None when missing, its profile)``.
        """
        physical = self.ctx.store.layout(collection).physical
        return physical, migrate.profile_of_version(self.ctx, collection, physical)

    def running(self) -> Mapping[str, Mapping[str, Any]]:
        """Progress of the migrations running in this process, by collection."""
        return {name: m.progress.as_dict() for name, m in self._running.items()}

    def abort(self, collections: list[str]) -> list[dict[str, Any]]:
        """Abort the migrations of ``collections`` (see :func:`migrate.abort`)."""
        return migrate.abort(self.ctx, self._running, collections)

    def restart(self, collections: list[str]) -> list[str]:
        """Forget aborted migrations of ``collections``; the next sync migrates them.

        Returns:
            The collections a migration is now due for.
        """
        for name in collections:
            self.ctx.manifest.set_collection_aborted(name, None)
            self.recheck(name)
        return [c for c in collections if migrate.due(self.ctx, c)]
