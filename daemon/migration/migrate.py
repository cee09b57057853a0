"""Changing the embedding model, or chunking settings, without downtime: migrations.

A collection's points are made by a *profile* (:mod:`ingestd.daemon.sync.profiles.profile`): the
embedding model's fingerprint, the tokenizer and ``embedding.fit_model``. When the
configured profile differs from the one the manifest records for a collection, the
collection is migrated on the collection-version mechanism
(:class:`~ingestd.store.vectors.versions.CollectionVersions`):

1. *Begin.* The cost is logged (:mod:`~ingestd.daemon.migration.cost`), the build is
   recorded (``collection_builds``: reason ``migrate``, both profiles) and a new
   physical version ``<name>__v<N+1>-<fingerprint>`` is created, named after the new
   model's fingerprint (its first 12 hex digits), with the new model's dimension.
2. *Build.* Every document of the collection's sources is chunked with the new rules,
   embedded by the new model (vectors cached by its fingerprint are reused: a migration
   back to an earlier model embeds only what the cache lost) and written into the new
   version by :class:`~ingestd.daemon.migration.version_writer.VersionWriter`, which records what
   it wrote in ``build_documents``. Meanwhile nothing else changes: the manifest keeps
   describing the current version, searches read it (the alias) with the query embedded
   by the model that made it (:func:`profile_of_version`), and changes to files keep it
   in sync with that model; while the build runs, they are written into the new version
   too (:meth:`Migration.follow`). Both models are loaded meanwhile.
3. *Check.* With changes held back (checkpoints serve searches only), every file is
   compared with the record once more (stat and rule fingerprint) and written again
   where it differs, and the new version is made to hold exactly the recorded points.
   The switch waits (phase ``waiting``, retried at the next scan) while a source's root
   is missing, deletions are held by the mass-deletion guard, or a source recorded in
   the collection is no longer configured: switching then would drop their documents.
4. *Switch.* One manifest transaction makes the record the manifest's documents and
   chunks, records the new profile and moves the build to phase ``switching``
   (:meth:`~ingestd.store.manifest.builds.BuildDocuments.adopt`); then the alias is pointed at
   the new version (one atomic alias update) and the old version is dropped.

A crash or SIGTERM resumes where it stopped: a build in phase ``building`` goes on with
the documents whose record is not up to date, one in ``switching`` finishes the switch,
one in ``aborting`` finishes the abort. ``ingestd migrate --abort`` drops the partial
version and leaves the current one untouched; the collection's record keeps the aborted
profile, and an engine whose config still asks for it keeps the current version
(searched and kept in sync with the model that made it; ``status`` and the log say so)
until the config goes back, or ``ingestd migrate`` starts the migration again. A config
that changes again during a migration drops the partial version and migrates to the
newest profile (or to none, when it went back).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.migration.cost import MigrationCost, estimate
from ingestd.daemon.migration.status import migration_build
from ingestd.daemon.migration.version_writer import BuildProgress, VersionWriter
from ingestd.daemon.sources.base import FileStat
from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.profiles.profile import model_of, settings_of
from ingestd.daemon.sync.profiles.settings import describe, profile_key, recorded_settings
from ingestd.store.manifest.builds import BuildDocuments
from ingestd.store.manifest.manifest import Manifest
from ingestd.store.vectors.versions import MIGRATE, CollectionVersions

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.daemon.sync.profiles.profile import Profile

__all__ = [
    "Migration",
    "MigrationAborted",
    "abort",
    "advance",
    "costs",
    "due",
    "forget_source",
    "profile_of_version",
]

logger = logging.getLogger(__name__)

PROGRESS_LOG_S = 30.0  # seconds between progress lines in the log


class MigrationAborted(Exception):
    """``ingestd migrate --abort`` arrived: the running migration drops its version."""


def due(ctx: SyncContext, collection: str) -> bool:
    """Whether a migration of ``collection`` is under way or due (manifest reads only).

    Due: the manifest records another profile than the configured one, and the
    migration to the configured one was not aborted.
    """
    if migration_build(ctx.manifest, collection) is not None:
        return True
    rec = ctx.manifest.collection_record(collection)
    configured = ctx.profiles.profile
    if rec is None or ctx.profiles.profile_of(collection) is configured:
        return False
    aborted = rec.get("aborted")
    return not (aborted and profile_key(aborted) == configured.key)


def profile_of_version(ctx: SyncContext, collection: str, physical: str | None) -> Profile:
    """The profile that made physical version ``physical`` of ``collection``.

    During a migration the alias may point at the previous version or, once switched,
    the new one; a search must embed its query with the model of the one it reads.
    """
    build = migration_build(ctx.manifest, collection)
    if build is not None and physical is not None:
        if physical == build["target"]:
            return ctx.profiles.profile_for(build["settings"]["target"])
        if physical == build["previous"]:
            return ctx.profiles.profile_for(build["settings"]["previous"])
    return ctx.profiles.profile_of(collection)


def advance(
    ctx: SyncContext, collection: str, running: dict[str, Migration]
) -> set[tuple[str, str]]:
    """Start, resume, finish or abort the migration of ``collection``, as due.

    Args:
        ctx: the engine's context (its configured profile is the target).
        collection: the collection.
        running: the migrations running in this process, by collection; the one
            started here is registered there while it runs (``status`` and ``abort``
            find it there).

    Returns:
        The documents ``(source, path)`` the new version holds when it switched just
        now (as they are on disk), else an empty set.

    Raises:
        SyncInterrupted: a stop was requested; the migration resumes next time.
    """
    build = migration_build(ctx.manifest, collection)
    if build is not None:
        if build["phase"] == "switching":
            _finish_switch(ctx, collection, build)
            return set()
        if build["phase"] == "aborting":
            _drop(ctx, collection, build, explicit=True)
            return set()
        if profile_key(build["settings"]["target"]) != ctx.profiles.profile.key:
            logger.warning(
                "collection %s: the config no longer asks for %s; dropping its partial version %s",
                collection,
                describe(build["settings"]["target"]),
                build["target"],
            )
            _drop(ctx, collection, build, explicit=False)
            build = None
    if not due(ctx, collection):
        return set()
    migration = Migration(ctx, collection, build)
    running[collection] = migration
    try:
        return migration.run()
    finally:
        running.pop(collection, None)


class Migration:
    """One migration of a collection to the configured profile, in this process.

    Args:
        ctx: the engine's context (its configured profile is the target).
        collection: the collection.
        build: the recorded build when resuming, else ``None``.

    Attributes:
        progress: where it stands (``status`` shows it).
        aborting: set by :func:`abort`; the migration drops its version at its next
            checkpoint.
    """

    def __init__(self, ctx: SyncContext, collection: str, build: dict[str, Any] | None) -> None:
        self.ctx = ctx
        self.collection = collection
        self.previous = ctx.profiles.profile_of(collection)
        self.target = ctx.profiles.profile
        self.build = build
        self.aborting = False
        self.progress = BuildProgress(collection)
        self.writer: VersionWriter | None = None
        self._logged = time.monotonic()

    def run(self) -> set[tuple[str, str]]:
        """Build, check and switch; or stop at a checkpoint (abort, stop request, waiting).

        Returns:
            See :func:`advance`.
        """
        ctx, name = self.ctx, self.collection
        versions = CollectionVersions(ctx.store, ctx.manifest)
        dim = self.target.model.dim
        if self.build is None:
            cost = estimate(
                ctx.cfg,
                ctx.state_dir,
                ctx.manifest,
                name,
                self.previous.settings,
                self.target.settings,
                cache=ctx.resources.cache,
            )
            logger.info("%s; searches answer from the current version meanwhile", cost.summary())
            settings = {"previous": self.previous.settings, "target": self.target.settings}
            physical = versions.begin(
                name,
                dim,
                MIGRATE,
                route=False,
                settings=settings,
                tag=self.target.model.fingerprint[:12],
            )
            ctx.step(name, "begun")
        else:
            physical = versions.begin(name, dim, MIGRATE, route=False)
            logger.info(
                "collection %s: resuming its migration to %s in %s",
                name,
                self.target.describe(),
                physical,
            )
        self.writer = VersionWriter(
            ctx, name, physical, self.target, self._checkpoint, self.progress
        )
        try:
            return self._run(versions, physical)
        except MigrationAborted:
            build = migration_build(ctx.manifest, name)
            if build is not None:
                _drop(ctx, name, build, explicit=True)
            return set()

    def _run(self, versions: CollectionVersions, physical: str) -> set[tuple[str, str]]:
        ctx, name = self.ctx, self.collection
        assert self.writer is not None
        sources = sorted(n for n, s in ctx.sources.items() if s.collection == name)
        files = self._scan(sources)
        todo: dict[str, list[str]] = {}
        for source, found in files.items():
            todo[source], gone = self.writer.stale(source, found)
            self.writer.delete(source, gone)
        self.progress.docs_total = sum(map(len, files.values()))
        self.progress.docs_done = self.progress.docs_total - sum(map(len, todo.values()))
        self.progress.docs_at_start = self.progress.docs_done
        for source, paths in sorted(todo.items()):
            self.writer.write(source, paths, serve_changes=True)
        ctx.step(name, "built")
        waiting = self._waiting_for(sources, files)
        if waiting:
            self.progress.phase, self.progress.waiting_for = "waiting", waiting
            logger.warning(
                "collection %s: the new version %s is built, but the switch waits: %s "
                "(searches keep answering from the current version)",
                name,
                physical,
                waiting,
            )
            return set()
        # the last pass: checkpoints serve searches only, so nothing changes under it
        # (changes wait in the queue and are applied to the new version after the switch)
        self.progress.phase = "checking"
        files = self._scan(sources)
        for source, found in files.items():
            paths, gone = self.writer.stale(source, found)
            self.writer.delete(source, gone)
            self.writer.write(source, paths, serve_changes=False)
        self.writer.check_points(serve_changes=False)
        self._check_abort()
        self.progress.phase = "switching"
        from ingestd.store.vectors.base import LAYOUT

        BuildDocuments(ctx.manifest).adopt(name, self.target.settings, LAYOUT)
        ctx.profiles.forget_current(name)
        ctx.step(name, "switching")
        versions.switch(name, on_switched=lambda: ctx.step(name, "switched"))
        ctx.profiles.release()
        logger.info(
            "collection %s: now version %s, made by %s (%d documents; %d chunks embedded "
            "by this process); the previous version is dropped",
            name,
            physical,
            self.target.describe(),
            self.progress.docs_total,
            self.progress.chunks_embedded,
        )
        return {(s, p) for s, found in files.items() for p in found}

    def follow(self, source: str, written: list[str], deleted: list[str]) -> None:
        """Write changes the current version just got into the new version too.

        Documents the migration is writing right now are left to its last pass.
        """
        if self.writer is None or self.aborting:
            return
        src = self.ctx.source(source)
        gone = [p for p in deleted if src.stat(p) is None]
        back = [p for p in deleted if p not in gone]  # re-created meanwhile
        paths = [p for p in [*written, *back] if (source, p) not in self.writer.in_flight]
        self.writer.delete(source, gone)
        self.writer.write(source, paths, serve_changes=False)

    def _scan(self, sources: list[str]) -> dict[str, dict[str, FileStat]]:
        ctx = self.ctx
        return {s: ctx.source(s).scan() for s in sources if ctx.source(s).missing() is None}

    def _waiting_for(self, sources: list[str], files: dict[str, dict[str, FileStat]]) -> str:
        """Why the switch must wait, or ``""``: it would drop documents searched now."""
        ctx = self.ctx
        reasons = [f"the root of source {s} is missing" for s in sources if s not in files]
        for s in sources:
            if ctx.held.get(s):
                reasons.append(
                    f"{len(ctx.held[s])} deletions of source {s} are held by the "
                    "mass-deletion guard (`ingestd resync --allow-mass-delete` applies them)"
                )
        for rec in ctx.manifest.sources():
            if rec["collection"] == self.collection and rec["name"] not in ctx.sources:
                if ctx.manifest.counts(rec["name"])["documents"]:
                    reasons.append(
                        f"source {rec['name']} of this collection is not configured "
                        "(configure it again, or `ingestd forget` it)"
                    )
        return "; ".join(reasons)

    def _checkpoint(self, serve_changes: bool) -> None:
        self.ctx.step(self.collection, "checkpoint")
        self.ctx.checkpoints.checkpoint(serve_changes=serve_changes)
        self._check_abort()
        now = time.monotonic()
        if now - self._logged >= PROGRESS_LOG_S:
            self._logged = now
            p = self.progress
            eta = p.eta_seconds()
            logger.info(
                "collection %s: migration %d/%d documents, %d chunks embedded%s",
                self.collection,
                p.docs_done,
                p.docs_total,
                p.chunks_embedded,
                f", about {eta:.0f} s left" if eta is not None else "",
            )

    def _check_abort(self) -> None:
        if self.aborting:
            raise MigrationAborted(f"the migration of {self.collection} was aborted")


def _finish_switch(ctx: SyncContext, collection: str, build: dict[str, Any]) -> None:
    """Finish a switch a crash interrupted (the manifest already describes the new version)."""
    CollectionVersions(ctx.store, ctx.manifest).switch(collection)
    ctx.profiles.forget_current(collection)
    ctx.profiles.release()
    logger.info("collection %s: finished switching to %s", collection, build["target"])


def _drop(ctx: SyncContext, collection: str, build: dict[str, Any], *, explicit: bool) -> None:
    """Drop the partial version; with ``explicit``, remember the aborted profile."""
    if explicit:
        ctx.manifest.set_collection_aborted(collection, build["settings"]["target"])
    BuildDocuments(ctx.manifest).clear(collection)
    dropped = CollectionVersions(ctx.store, ctx.manifest).abort(collection)
    logger.warning(
        "collection %s: migration to %s %s; %s dropped, %s untouched",
        collection,
        describe(build["settings"]["target"]),
        "aborted" if explicit else "given up",
        dropped,
        build["previous"],
    )


def abort(
    ctx: SyncContext, running: dict[str, Migration], collections: list[str]
) -> list[dict[str, Any]]:
    """Abort the migrations of ``collections`` (``ingestd migrate --abort``).

    A migration running right now (this is served at one of its checkpoints) drops its
    version when it resumes; one not running is dropped here. Either way the abort is
    recorded first, so a crash finishes it.

    Returns:
        Per collection with a migration: ``collection``, ``aborted`` (bool), ``dropped``
        (the partial version), ``kept`` (the current version) or ``reason``.
    """
    out = []
    for name in collections:
        build = migration_build(ctx.manifest, name)
        if build is None:
            continue
        entry: dict[str, Any] = {"collection": name, "aborted": False}
        if build["phase"] == "switching":
            entry["reason"] = "it is switching already; it finishes"
        else:
            ctx.manifest.update_collection_build(name, phase="aborting")
            migration = running.get(name)
            if migration is not None:
                migration.aborting = True
            else:
                _drop(ctx, name, build, explicit=True)
            entry.update(aborted=True, dropped=build["target"], kept=build["previous"])
        out.append(entry)
    return out


def forget_source(ctx: SyncContext, collection: str, source: str) -> None:
    """Delete ``source``'s documents from the version a migration builds, if any."""
    build = migration_build(ctx.manifest, collection)
    if build is None:
        return
    record = BuildDocuments(ctx.manifest)
    docs = record.documents(collection, source)
    ids = [pid for d in docs.values() for pid in d.ids]
    if ids and ctx.store.has_collection(build["target"]):
        ctx.store.delete(build["target"], ids)
    record.delete(collection, source, list(docs))


def costs(cfg: Config, state_dir: Path, manifest: Manifest) -> list[MigrationCost]:
    """What ``cfg`` would cost: one entry per configured collection it would migrate.

    Reads the manifest, the embedding cache and the model folders only, so it answers
    beside a running daemon, for a config the daemon has not loaded (yet).

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the configured model is not found.
    """
    target = settings_of(cfg, model_of(cfg))
    out = []
    for collection in sorted({s.collection for s in cfg.sources}):
        rec = manifest.collection_record(collection)
        if rec is None:
            continue
        previous = recorded_settings(rec, target)
        build = migration_build(manifest, collection)
        if build is not None:
            previous = build["settings"]["previous"]
        if profile_key(previous) != profile_key(target):
            out.append(estimate(cfg, state_dir, manifest, collection, previous, target))
    return out
