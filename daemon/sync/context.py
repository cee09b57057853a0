"""The seams of the sync engine: the context its parts share, and two typed interfaces.

:class:`SyncContext` is what every part of the engine (planner, writer, repairs,
verify) and every collection build or migration receives instead of the engine itself:
the configured sources, the state's handles, the profiles, the checkpoints and the
clock. Two Protocols are the only ways across the seam between syncing documents and
building collection versions:

* :class:`CollectionLifecycle`: what a sync asks of collection versions (create a
  collection, run a due upgrade or migration, keep a version being built in step);
  implemented by :class:`ingestd.daemon.migration.lifecycle.Collections`.
* :class:`Syncer`: what a build, a repair or ``verify`` asks of the sync engine (plan
  and apply a sync); implemented by :class:`ingestd.daemon.engine.Engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ingestd.daemon.config import Config, SourceConfig
from ingestd.daemon.sources.base import Source
from ingestd.daemon.sources.versions import split_document
from ingestd.daemon.sync.checkpoints import Checkpoints
from ingestd.daemon.sync.failures import ReadFailures
from ingestd.daemon.sync.planning.links import HardLinks
from ingestd.daemon.sync.preparing.rules import Rule
from ingestd.daemon.sync.profiles.profile import Profile
from ingestd.daemon.sync.profiles.profiles import Profiles
from ingestd.daemon.sync.state.resources import Resources
from ingestd.daemon.sync.types import Plan, ProgressFn, SyncResult
from ingestd.store.manifest.manifest import Manifest
from ingestd.store.vectors.base import VectorStore

__all__ = ["CollectionLifecycle", "SyncContext", "Syncer"]


@dataclass
class SyncContext:
    """What the parts of a sync engine share (one thread owns it, as the engine).

    Attributes:
        cfg: validated config.
        sources: configured sources by name.
        handles: each source's documents (:class:`~ingestd.daemon.sources.base.Source`).
        resources: the manifest, the vector store and the embedding cache.
        profiles: the profile of each collection, and their models.
        checkpoints: where long work pauses, and the running syncs' progress.
        failures: files to read again, entries scans skipped.
        now: the clock, seconds since the epoch (read nowhere else).
        held: deletions held by the mass-deletion guard at the last scan, per source.
        links: documents with more than one hard link, as the plans saw them.
        hook: called with ``(collection, step)`` at the steps of a collection build
            (``begun``, ``checkpoint``, ``built``, ``switching``, ``switched``): a test
            hook.
    """

    cfg: Config
    sources: dict[str, SourceConfig]
    handles: dict[str, Source]
    resources: Resources
    profiles: Profiles
    checkpoints: Checkpoints
    failures: ReadFailures
    now: Callable[[], float]
    held: dict[str, list[str]] = field(default_factory=dict)
    links: HardLinks = field(default_factory=HardLinks)
    hook: Callable[[str, str], None] | None = None

    @property
    def manifest(self) -> Manifest:
        """The manifest."""
        return self.resources.manifest

    @property
    def store(self) -> VectorStore:
        """The vector store (opened on first use)."""
        return self.resources.store

    @property
    def state_dir(self) -> Path:
        """The state dir."""
        return self.resources.paths.root

    def collection_of(self, source: str) -> str:
        """The collection of a configured source."""
        return self.sources[source].collection

    def source(self, name: str) -> Source:
        """The documents of configured source ``name``.

        Raises:
            KeyError: unknown source.
        """
        return self.handles[name]

    def profile_of_source(self, source: str) -> Profile:
        """The profile of the current version of ``source``'s collection."""
        return self.profiles.profile_of(self.collection_of(source))

    def rule_of(self, source: str, rel: str, profile: Profile | None = None) -> Rule:
        """The rule of document ``rel`` of ``source`` (matched on its path in its version).

        Args:
            source: a configured source name.
            rel: the document (``<version>:<path>`` in a versioned source).
            profile: whose rules (default: :meth:`profile_of_source`).
        """
        rules = (profile or self.profile_of_source(source)).rules
        return rules.match(split_document(self.source(source), rel)[1])

    def step(self, collection: str, name: str) -> None:
        """Call :attr:`hook` for a step of a collection build."""
        if self.hook is not None:
            self.hook(collection, name)


class Syncer(Protocol):
    """Planning and applying syncs: what builds, repairs and ``verify`` ask of the engine."""

    def plan(
        self,
        source: str,
        paths: Iterable[str] | None = None,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        check_store: bool = True,
    ) -> Plan:
        """Compare the files with the manifest (see ``Engine.plan``)."""
        ...

    def apply(
        self, plan: Plan, *, progress: ProgressFn | None = None, force: bool = False
    ) -> SyncResult:
        """Carry out ``plan`` (see ``Engine.apply``)."""
        ...


class CollectionLifecycle(Protocol):
    """What a sync asks of collection versions before and after it writes."""

    def ensure(self, collection: str) -> set[tuple[str, str]]:
        """Record the collection's profile, create it if new, run the build that is due.

        Returns:
            The documents ``(source, path)`` a build or migration wrote just now.

        Raises:
            SyncInterrupted: a stop was requested during a build.
        """
        ...

    def due(self, collection: str) -> bool:
        """Whether the manifest says ``collection`` needs a new version (no store read)."""
        ...

    def before_scan(self, collection: str) -> None:
        """A scan is applied: a migration that waited (a missing root) may go on."""
        ...

    def before_check(self, collection: str) -> None:
        """The store is about to be compared with the manifest: finish a switch."""
        ...

    def follow(self, collection: str, source: str, written: list[str], deleted: list[str]) -> None:
        """Documents changed in the current version: a version being built follows."""
        ...

    def forget_check(self, collection: str) -> None:
        """Check ``collection`` again before the next write (it was found missing)."""
        ...

    def forget_source(self, collection: str, source: str) -> None:
        """Delete ``source``'s documents from a version being built, if any."""
        ...

    def query_target(self, collection: str) -> tuple[str | None, Profile]:
        """The physical version a search of ``collection`` reads, and its profile."""
        ...

    def running(self) -> Mapping[str, Mapping[str, Any]]:
        """Progress of the migrations running in this process, by collection."""
        ...
