"""The sync engine: plan a source's changes from the manifest, then apply them.

The engine stands above the packages whose parts it composes, :mod:`~ingestd.daemon.sync`
and :mod:`~ingestd.daemon.migration` (collection versions, which themselves use the sync
parts): neither imports it.

Everything here is an optimisation of "ingest everything from scratch" that must not
change its result (DESIGN.md, the invariant): the store ends up holding exactly the
points :meth:`Engine.expected_points` derives from the current files.

:class:`Engine` composes small parts and hands each the narrow context it uses
(:class:`~ingestd.daemon.sync.context.SyncContext`), never itself:

* :class:`~ingestd.daemon.sync.state.resources.Resources`: the manifest, the vector store
  and the embedding cache;
* :class:`~ingestd.daemon.sync.profiles.profiles.Profiles`: each collection's profile, models
  and rules;
* :class:`~ingestd.daemon.sync.checkpoints.Checkpoints`: where long work pauses
  (DESIGN.md, "Long work is sliced"), and the running syncs' progress;
* :class:`~ingestd.daemon.sync.planning.planner.Planner`, then
  :class:`~ingestd.daemon.sync.writing.applier.Applier` with its
  :class:`~ingestd.daemon.sync.preparing.preparer.Preparer` and
  :class:`~ingestd.daemon.sync.writing.writer.Writer`;
* :class:`~ingestd.daemon.migration.lifecycle.Collections`: collection versions and
  migrations, reached through the typed
  :class:`~ingestd.daemon.sync.context.CollectionLifecycle` interface;
* :class:`~ingestd.daemon.sync.failures.ReadFailures`,
  :func:`~ingestd.daemon.sync.healing.repair.check_store` and
  :class:`~ingestd.daemon.sync.healing.verify.Verifier`.

A :class:`Engine` and the vector store it opens are owned by one thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.config import Config
from ingestd.daemon.migration.lifecycle import Collections
from ingestd.daemon.sources.base import open_source
from ingestd.daemon.sync.checkpoints import Checkpoints
from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.failures import ReadFailures
from ingestd.daemon.sync.healing.holdings import check_holdings
from ingestd.daemon.sync.healing.repair import StoreCheck, check_store
from ingestd.daemon.sync.healing.verify import Verifier, VerifyReport
from ingestd.daemon.sync.healing.version_keys import rekey_versions
from ingestd.daemon.sync.planning.planner import Planner
from ingestd.daemon.sync.preparing.preparer import Preparer
from ingestd.daemon.sync.profiles.profiles import EmbedFn, ModelFactory, Profiles
from ingestd.daemon.sync.state.resources import Resources
from ingestd.daemon.sync.types import Plan, ProgressFn, SyncInterrupted, SyncResult
from ingestd.daemon.sync.writing.applier import Applier
from ingestd.daemon.sync.writing.long_writes import LongWrites
from ingestd.daemon.sync.writing.writer import Writer
from ingestd.store.vectors.base import VectorStore

if TYPE_CHECKING:
    pass

__all__ = ["Engine"]

logger = logging.getLogger(__name__)


class Engine:
    """Plans and applies syncs of the configured sources.

    Args:
        cfg: validated config.
        state_dir: the state dir (created if missing).
        embed_model: embedding callable overriding every profile's model (tests).
        model_factory: makes the embedding callable of a model (tests: a loaded model
            shared by several engines); default: the configured backend, loaded lazily.
        store: vector store overriding the configured one (tests, fault injection).
        now: the clock, seconds since the epoch.
        cache_path: the embedding cache file, instead of ``<state dir>/embeddings.db``
            (``ingestd eval`` indexes from a scratch state dir with the real cache).
        read_only: a reader's engine (``search``, ``read``, ``verify``), under the
            readers' lock: manifest and store opened to read only, nothing recorded.

    Attributes:
        cfg: the config.
        context: what the engine's parts share.
        resources: the manifest, the vector store and the embedding cache.
        profiles: each collection's profile (the configured one is ``profiles.profile``).
        checkpoints: where long work pauses; ``stop`` ends it.
        failures: files retried and entries skipped, per source.
        collections: collection versions and migrations.
        writer: writes prepared documents (its ``in_flight`` documents are shown in
            ``status``).
        long_writes: long documents written in the background, one slice per step
            (the daemon enables it).
        preparer: reads, decodes and chunks one file (``prepare``).
        planner: compares the files with the manifest (what :meth:`plan` asks).
        applier: carries out a plan (what :meth:`apply` asks; ``busy`` paths).
        verifier: what :meth:`verify` asks.
        serving: the engine of a running daemon (``ingestd run``), not of one command.

    The engine's own behaviour is planning, applying and checking a sync (:meth:`plan`,
    :meth:`apply`, :meth:`sync`, :meth:`expected_points`, :meth:`check_store`,
    :meth:`verify`, :meth:`forget`); anything else is asked of the part that does it
    (``engine.resources.manifest``, ``engine.profiles.profile.embedder``,
    ``engine.context.sources``, ``engine.checkpoints.stop``...).

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not available locally.
        ingestd.chunkers.sizing.tokenizers.TokenizerError: the tokenizer is not bundled.
        ingestd.daemon.sync.profiles.profile.ProfileUnavailableError: the model that made a
            collection is gone (it is needed until the collection is migrated).
        ingestd.store.common.damage.StateDamagedError: the manifest's file is damaged.
    """

    def __init__(
        self,
        cfg: Config,
        state_dir: Path,
        *,
        embed_model: EmbedFn | None = None,
        model_factory: ModelFactory | None = None,
        store: VectorStore | None = None,
        now: Callable[[], float] = time.time,
        cache_path: Path | None = None,
        read_only: bool = False,
    ) -> None:
        self.cfg = cfg
        self.resources = Resources(
            cfg, state_dir, now=now, store=store, cache_path=cache_path, read_only=read_only
        )
        try:
            self.checkpoints = Checkpoints()
            self.profiles = Profiles(
                cfg,
                self.resources.manifest,
                self.checkpoints,
                embed_model=embed_model,
                model_factory=model_factory,
            )
            self.resources.on_cache_open = self.profiles.attach_cache
            for w in self.profiles.profile.rule_warnings:
                logger.warning("%s", w)
            self.failures = ReadFailures(cfg.files, now)
            self.context = SyncContext(
                cfg=cfg,
                sources={s.name: s for s in cfg.sources},
                handles={s.name: open_source(s, self.resources.paths.root) for s in cfg.sources},
                resources=self.resources,
                profiles=self.profiles,
                checkpoints=self.checkpoints,
                failures=self.failures,
                now=now,
            )
            self.collections = Collections(self.context, self)
            self.writer = Writer(self.context, self.collections)
            self.preparer = Preparer(self.context)
            self.planner = Planner(self.context, lambda s: self.check_store(s).repairs())
            self.long_writes = LongWrites(
                self.context, self.preparer, self.writer, self.collections
            )
            self.applier = Applier(
                self.context, self.preparer, self.writer, self.collections, self.long_writes
            )
            self._hidden: set[str] = set()  # sources whose pending points were hidden
            self._deep_checked: set[str] = set()  # collections checked point by point
            #: the engine of a running daemon (``ingestd run``), not of one command
            self.serving = False
            self._holdings_checked = False
            self.verifier = Verifier(
                self.context, self.preparer, self, self.collections, self.long_writes.paths
            )
            for s in cfg.sources if not read_only else ():
                self.resources.manifest.ensure_source(
                    s.name, str(self.context.handles[s.name].root), s.collection
                )
            for collection in sorted({s.collection for s in cfg.sources}):
                self.profiles.profile_of(collection, check=not read_only)
        except BaseException:
            self.resources.manifest.close()
            raise

    # -- the engine's own (its parts are reached as attributes: resources, profiles...) --

    def check_holdings(self, collections: Iterable[str]) -> None:
        """Before the first answer of a command: does the store hold what was recorded?

        A daemon's engine skips it (see :mod:`~ingestd.daemon.sync.healing.holdings`); a
        command's engine counts once.

        Raises:
            ingestd.store.common.damage.StoreLostError: a collection lost points.
        """
        if self.serving or self._holdings_checked:
            return
        self._holdings_checked = True
        recorded = {c: self.resources.manifest.collection_counts(c)[0] for c in collections}
        check_holdings(
            self.resources.store,
            {c: n for c, n in recorded.items() if n},
            self.resources.paths.root,
        )

    def open_collections(self) -> None:
        """Open the store and, at ``ingestd run``'s start, its collections that may be damaged.

        See :meth:`Resources.open_collections`.
        """
        self.resources.open_collections(sorted({s.collection for s in self.cfg.sources}))

    def close(self, *, record: bool = True) -> None:
        """Close the store, the cache and the manifest (see :meth:`Resources.close`)."""
        self.resources.close(record=record)

    def take_over(self, old: Engine) -> None:
        """Go on from ``old``, the engine a reload replaces (then ``old.close(record=False)``)."""
        self.resources.take_over(old.resources)

    # -- syncing --------------------------------------------------------------------------

    def plan(
        self,
        source: str,
        paths: Iterable[str] | None = None,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        check_store: bool = True,
    ) -> Plan:
        """Compare the files with the manifest (see :meth:`Planner.plan`).

        Raises:
            KeyError: unknown source.
            SyncInterrupted: a stop was requested while planning.
        """
        return self.planner.plan(
            source, paths, full=full, allow_mass_delete=allow_mass_delete, check_store=check_store
        )

    def apply(
        self,
        plan: Plan,
        *,
        progress: ProgressFn | None = None,
        force: bool = False,
        background: bool = False,
    ) -> SyncResult:
        """Carry out ``plan``; a stop request ends it at the next checkpoint.

        See :meth:`Applier.apply`.
        """
        return self.applier.apply(plan, progress=progress, force=force, background=background)

    def sync(
        self,
        source: str,
        paths: Iterable[str] | None = None,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        progress: ProgressFn | None = None,
        background: bool = False,
    ) -> SyncResult:
        """Plan and apply.

        Args:
            source: a configured source name.
            paths: changed relative paths, or ``None`` for a scan (see :meth:`plan`).
            full: re-hash every file (no stat fast path).
            allow_mass_delete: release deletions the guard would hold.
            progress: called with a :class:`SyncProgress` after every write slice.
            background: hand long documents to :attr:`long_writes` (see
                :meth:`Applier.apply`).

        Returns:
            The counts; ``interrupted`` when a stop request ended it early.
        """
        try:
            plan = self.plan(source, paths, full=full, allow_mass_delete=allow_mass_delete)
        except SyncInterrupted:
            return SyncResult(source, interrupted=True)
        return self.apply(plan, progress=progress, background=background)

    def expected_points(
        self, source: str, sparse: dict[str, Any] | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
        """What a from-scratch ingest would store (see :meth:`Preparer.expected_points`)."""
        return self.preparer.expected_points(source, sparse)

    def check_store(self, source: str, *, deep: bool | None = None) -> StoreCheck:
        """Compare the store with the manifest for ``source``'s collection and repair.

        See :func:`ingestd.daemon.sync.healing.repair.check_store`; an interrupted switch is
        finished first.

        Args:
            source: a configured source name.
            deep: compare every point's fields; ``None``: with pending rows (a write
                that did not finish), and at the collection's first check by this engine
                unless :meth:`Resources.proven` says nothing can be torn.
        """
        collection = self.context.collection_of(source)
        self.collections.before_check(collection)
        crashed = self.resources.manifest.collection_counts(collection)[1] > 0
        if source not in self._hidden:  # a crash may have left a version half committed
            self._hidden.add(source)
            self.writer.hide_pending(source)
            rekey_versions(self.context, source)  # a store from before shared points
        if deep is None:  # pending rows, or the first check with nothing proving it whole
            checked = collection in self._deep_checked or self.resources.proven(collection)
            deep = crashed or not checked
        chk = check_store(self.context, self, self.collections, source, deep=deep)
        if deep:
            self._deep_checked.add(collection)
            self.resources.mark_checked(collection)
        return chk

    # -- verify and forget ----------------------------------------------------------------

    def verify(self, source: str, *, repair: bool = False) -> VerifyReport:
        """Compare expected points with the manifest and the store; optionally repair."""
        return self.verifier.verify(source, repair=repair)

    def forget(self, source: str) -> int:
        """Delete every point and row of ``source``; returns the number of points deleted."""
        rows = self.resources.manifest.chunks_of_source(source)
        collection = None
        for s in self.resources.manifest.sources():
            if s["name"] == source:
                collection = s["collection"]
        if rows and collection and self.resources.store.has_collection(collection):
            self.resources.store.delete(collection, list(rows))
        if collection:
            self.collections.forget_source(collection, source)
        self.resources.manifest.forget_source(source)
        return len(rows)
