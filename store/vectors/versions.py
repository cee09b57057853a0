"""Collection versions behind an alias: build a new version, switch atomically, drop the old.

A collection name (``ingestd`` by default) is a Qdrant alias of a physical collection
``<name>__v<N>``. When the stored layout must change in a way Qdrant cannot apply in
place (a sparse vector cannot be added to an existing collection; a new embedding
model changes the dense vectors), a new version is built beside the current one:

1. :meth:`CollectionVersions.begin` records the build in the manifest
   (``collection_builds``: target, previous, phase ``building``), creates
   ``<name>__v<N+1>`` with the current layout and routes the store's writes for the name
   to it. Searches keep reading the alias, so they answer from the current version
   while the build runs.
2. The caller writes every document into the new version (the engine re-chunks the
   files: the embedded text is not in the payload) and records each finished source
   with :meth:`CollectionVersions.source_done`.
3. :meth:`CollectionVersions.finish` copies what the caller could not write (points the
   manifest still knows, e.g. of a source whose root is missing, taken from the previous
   version with the payload key :data:`~ingestd.store.search.query.PATH_KEY` added), records
   phase ``switching``, points the alias at the new version (one atomic alias update),
   drops the previous version and forgets the build.

Every step is idempotent and recorded first, so a crash or SIGTERM at any point resumes:
a build in phase ``building`` continues (sources already done are skipped, the others
re-written; upserts of deterministic ids replay harmlessly), one in phase ``switching``
finishes the switch. The previous version is dropped only after the alias points at the
new one.

A *migration* to another profile (embedding model, tokenizer, ``fit_model``: see
:mod:`ingestd.daemon.migration.migrate`) builds its version the same way with reason
:data:`MIGRATE`, but writes are not routed (the current version stays in sync with the
files, with the model that made it), nothing is carried over (that would mix two
models' vectors), and it may be aborted (:meth:`CollectionVersions.abort`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ingestd.store.manifest.manifest import Manifest
from ingestd.store.search.query import PATH_KEY, path_prefixes
from ingestd.store.vectors.base import LAYOUT, Layout, Point, VectorStore, physical_name
from ingestd.store.vectors.switch import ENGINE

__all__ = ["COPY_SLICE", "ENGINE", "MIGRATE", "CollectionVersions"]

logger = logging.getLogger(__name__)

#: Reason of a build that migrates a collection to another profile.
MIGRATE = "migrate"
#: Points copied from the previous version per call (and between two checkpoints).
COPY_SLICE = 256


class CollectionVersions:
    """Builds and switches versions of the collections of one store.

    Args:
        store: the vector store.
        manifest: where builds are recorded, and which point ids each source holds.
    """

    def __init__(self, store: VectorStore, manifest: Manifest) -> None:
        self.store = store
        self.manifest = manifest

    def pending(self, name: str, dim: int) -> str | None:
        """Why collection ``name`` needs a new version now, or ``None``.

        Records the layout in the manifest once the collection has the current one
        (``Manifest.collection_layout``), so a later start can tell without opening
        the store whether a build is due.

        ``"resume"``: a build was interrupted; ``"upgrade"``: the collection predates
        the current layout (no alias or no sparse vector); :data:`ENGINE`: another
        engine than the configured one holds it (see
        :class:`~ingestd.store.vectors.switch.EngineSwitch`). A missing collection is
        created (version 1, nothing to build). A migration's build is not reported
        here (see :mod:`ingestd.daemon.migration.migrate`).

        Raises:
            ValueError: the collection exists with another dimension than ``dim``.
        """
        build = self.manifest.collection_build(name)
        if build is not None and build["reason"] != MIGRATE:
            return "resume"
        lay = self.store.ensure_collection(name, dim)
        if not lay.current:
            return "upgrade"
        if lay.engine is not None and lay.engine != self.store.engine:
            return ENGINE
        self.manifest.set_collection_layout(name, LAYOUT)
        return None

    def begin(
        self,
        name: str,
        dim: int,
        reason: str,
        *,
        route: bool = True,
        settings: dict[str, Any] | None = None,
        tag: str | None = None,
    ) -> str:
        """Start (or resume) building a new version of ``name``.

        Args:
            name: the collection name.
            dim: dimension of the new version's dense vectors.
            reason: why (``upgrade``, ``resume``, :data:`MIGRATE`), recorded.
            route: send the store's writes for ``name`` to the new version meanwhile.
            settings: a migration's ``{"previous": profile, "target": profile}``.
            tag: ends the new version's name (a migration: the new model's short
                fingerprint), see :func:`~ingestd.store.vectors.base.physical_name`.

        Returns:
            The physical name of the version being built.
        """
        build = self.manifest.collection_build(name)
        if build is None:
            lay = self.store.layout(name)
            versions = self.store.versions(name)
            target = physical_name(name, max([1, *versions]) + 1, tag)
            self.manifest.start_collection_build(name, target, lay.physical, reason, settings)
            logger.info(
                "collection %s: building version %s (%s); searches use %s meanwhile",
                name,
                target,
                reason,
                lay.physical,
            )
            build = self.manifest.collection_build(name)
            assert build is not None
        else:
            logger.info("collection %s: resuming the build of %s", name, build["target"])
        target = str(build["target"])
        if build["phase"] == "building":
            self.store.create_physical(target, dim)
        if route:
            self.store.route_writes(name, target)
        return target

    def phase(self, name: str) -> str | None:
        """``building`` or ``switching`` while a build of ``name`` runs, else ``None``."""
        build = self.manifest.collection_build(name)
        return str(build["phase"]) if build else None

    def done_sources(self, name: str) -> set[str]:
        """Sources already written into the version being built."""
        build = self.manifest.collection_build(name)
        return set(build["done_sources"]) if build else set()

    def source_done(self, name: str, source: str) -> None:
        """Record that every document of ``source`` is in the version being built."""
        self.manifest.update_collection_build(name, done_source=source)

    def finish(self, name: str, checkpoint: Callable[[], None] | None = None) -> int:
        """Copy the rest, switch the alias to the new version, drop the previous one.

        Args:
            name: the collection name.
            checkpoint: called after every slice of points copied (searches may be
                served there; writes may not, or the copy could bring back a point
                deleted meanwhile).

        Returns:
            Number of points copied from the previous version.
        """
        build = self.manifest.collection_build(name)
        if build is None:
            return 0
        target, previous = str(build["target"]), build["previous"]
        copied = 0
        if build["phase"] == "building":
            copied = self._copy_rest(name, target, previous, checkpoint)
            self.manifest.update_collection_build(name, phase="switching")
        self.switch(name)
        logger.info(
            "collection %s: now version %s (%d points carried over from %s)",
            name,
            target,
            copied,
            previous,
        )
        return copied

    def switch(self, name: str, on_switched: Callable[[], None] | None = None) -> None:
        """Point the alias at the new version, drop the previous one, forget the build.

        The build must be in phase ``switching`` (recorded by the caller, with whatever
        the manifest must say of the new version). Idempotent: a crash anywhere in it
        is finished by calling it again.

        Args:
            name: the collection name.
            on_switched: called once the alias points at the new version, before the
                previous one is dropped (a test hook).
        """
        build = self.manifest.collection_build(name)
        if build is None:
            return
        target, previous = str(build["target"]), build["previous"]
        lay = self.store.layout(name)
        if lay.physical != target:
            self.store.point_alias(name, target)
        if on_switched is not None:
            on_switched()
        if previous and previous not in (name, target) and self.store.has_collection(previous):
            self.store.drop_collection(previous)
        self.store.route_writes(name, None)
        self.manifest.set_collection_layout(name, LAYOUT)
        self.manifest.end_collection_build(name)

    def abort(self, name: str) -> str | None:
        """Drop the version being built and forget the build; the current one is untouched.

        Returns:
            The physical name of the dropped version, or ``None`` when there was no build.

        Raises:
            ValueError: the build is switching already (it can only be finished).
        """
        build = self.manifest.collection_build(name)
        if build is None:
            return None
        if build["phase"] == "switching":
            raise ValueError(f"collection {name}: the build of {build['target']} is switching")
        target = str(build["target"])
        if target != self.store.layout(name).physical and self.store.has_collection(target):
            self.store.drop_collection(target)
        self.store.route_writes(name, None)
        self.manifest.end_collection_build(name)
        return target

    def _copy_rest(
        self,
        name: str,
        target: str,
        previous: str | None,
        checkpoint: Callable[[], None] | None = None,
    ) -> int:
        """Copy points the manifest knows that the new version lacks from ``previous``."""
        if previous is None or not self.store.has_collection(previous):
            return 0
        known: list[str] = []
        for s in self.manifest.sources():
            if s["collection"] == name:
                known.extend(self.manifest.chunks_of_source(s["name"]))
        present = self.store.existing(target, known)
        todo = [pid for pid in known if pid not in present]
        copied = 0
        for i in range(0, len(todo), COPY_SLICE):
            points = [
                _with_path_key(p)
                for p in self.store.retrieve_points(previous, todo[i : i + COPY_SLICE])
                if p.vector is not None
            ]
            self.store.upsert(target, points)
            copied += len(points)
            if checkpoint is not None:
                checkpoint()
        return copied

    def layout(self, name: str) -> Layout:
        """The layout behind ``name`` (see :class:`~ingestd.store.vectors.base.Layout`)."""
        return self.store.layout(name)


def _with_path_key(p: Point) -> Point:
    payload: dict[str, Any] = dict(p.payload)
    if PATH_KEY not in payload and "path" in payload:
        payload[PATH_KEY] = path_prefixes(str(payload["path"]))
    return Point(p.id, p.vector, payload, p.sparse)
