"""The sync engine: plan a source's changes from the manifest, then apply them.

Everything here is an optimisation of "ingest everything from scratch" that must not
change its result (DESIGN.md, the invariant): the store ends up holding exactly the
points :meth:`Engine.expected_points` derives from the current files.

Documents are prepared by :mod:`~ingestd.daemon.documents` and written by
:mod:`~ingestd.daemon.writer` in the crash-safe write order, slice by slice. Long work
reaches a *checkpoint* every slice (and every half second while planning): the owner
of the engine (the daemon) pings the systemd watchdog there and serves other jobs, and
a stop request ends the work with :class:`SyncInterrupted` (DESIGN.md, "Long work is
sliced").

A :class:`Engine` and the vector store it opens are owned by one thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.store.ids import content_hash
from ingestd.store.manifest import DocRow, Manifest, sqlite_url

from .backoff import Backoff
from .config import Config, SourceConfig
from .documents import (
    PreparedDocument,
    SyncInterrupted,
    UnreadableFile,
    prepare_document,
    sparse_vector,
    strip_provenance,
)
from .memory import release_free_memory
from .migration_status import describe, recorded_settings
from .profile import Profile, ProfileUnavailableError, config_for, profile_key
from .repair import HealingCache, StoreCheck, check_store, damaged_store_error
from .rules import Rule
from .scanner import (
    FileStat,
    Scan,
    SourceFilter,
    display_path,
    git_head,
    name_problem,
    scan,
    stat_file,
)
from .statedir import secure_state_dir
from .verify import VerifyReport
from .verify import verify as verify_source
from .writer import InFlight, Writer

__all__ = [
    "Engine",
    "Plan",
    "SyncInterrupted",
    "SyncProgress",
    "SyncResult",
    "VerifyReport",
    "strip_provenance",
]

logger = logging.getLogger(__name__)

GROUP_DOCS = 16  # documents per manifest commit
GROUP_CHUNKS = 128  # new chunks per manifest commit (embedding batches span documents)
HEARTBEAT_S = 0.5  # seconds between checkpoints of a long planning or verify loop
#: Target duration of one call of the embedding model, in seconds: calls shrink below
#: ``embedding.batch_size`` texts when the machine is slow, so that pings and stop
#: requests are never far apart.
SECONDS_PER_EMBED_CALL = 1.0
#: Files from this size on (bytes) are chunked in a worker thread while the engine thread
#: keeps reaching checkpoints: a slow chunker on a big file takes seconds.
THREADED_PREPARE_BYTES = 64 * 1024
#: Longest a chunker may run on one file with checkpoints (pings) going on meanwhile;
#: past it the pings stop, so a chunker that hangs trips the systemd watchdog.
PREPARE_GRACE_S = 300.0


@dataclass
class Plan:
    """What a sync of one source would do.

    Attributes:
        source: the source name.
        index: paths to (re)chunk: new, changed content, changed rule, or interrupted.
        stat_only: paths whose bytes are unchanged (only the stat is recorded).
        delete: paths whose documents are gone.
        moves: ``(old, new)`` pairs among ``delete`` x ``index`` with equal content:
            re-keyed with vectors from the cache, never re-embedded.
        held: deletions held by the mass-deletion guard (not applied).
        unchanged: documents skipped by the stat fast path or an equal hash.
        hashes: content hash of each path in ``index`` / ``stat_only`` when read.
        sizes: size in bytes of each path in ``index`` (for progress and its ETA).
        root_missing: the source's root folder is missing (unmounted?): nothing planned.
        scan: planned from a scan of the whole source (the guard applied).
        repaired: what the check of the store before the scan repaired (counts), empty
            when the store and the manifest agreed.
        scope: the changed paths planned for, when not a scan.
    """

    source: str
    index: list[str] = field(default_factory=list)
    stat_only: list[tuple[str, FileStat]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    moves: list[tuple[str, str]] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    unchanged: int = 0
    hashes: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    root_missing: bool = False
    scan: bool = False
    repaired: dict[str, int] = field(default_factory=dict)
    scope: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether nothing would be written."""
        return not (self.index or self.stat_only or self.delete)

    def summary(self) -> dict[str, Any]:
        """Counts and paths, for ``--dry-run`` and JSON output."""
        moved_new = {n for _, n in self.moves}
        moved_old = {o for o, _ in self.moves}
        return {
            "source": self.source,
            "add": sorted(p for p in self.index if p not in moved_new and p not in self._updates),
            "update": sorted(p for p in self.index if p in self._updates),
            "rekey": [{"from": o, "to": n} for o, n in sorted(self.moves)],
            "delete": sorted(p for p in self.delete if p not in moved_old),
            "held_deletes": sorted(self.held),
            "stat_only": len(self.stat_only),
            "unchanged": self.unchanged,
            "root_missing": self.root_missing,
        }

    _updates: set[str] = field(default_factory=set)


@dataclass
class SyncResult:
    """Counts of one sync (documents unless noted).

    Attributes:
        source: the source name.
        indexed: documents written.
        deleted: documents deleted.
        failed: documents recorded as failed (no chunks; their error in ``status``).
        retry: paths that could not be read (vanished or locked): retried later.
        held: deletions held by the mass-deletion guard.
        deferred: paths left for later because another job was writing them.
        chunks_written: points upserted.
        chunks_deleted: points deleted.
        embedded: chunks embedded by the model.
        reused: vectors taken from the embedding cache or the store.
        root_missing: the source's root folder is missing: nothing was synced.
        interrupted: a stop request ended the sync before it was complete.
        repaired: what the check of the store repaired first (see :class:`Plan`).
    """

    source: str
    indexed: int = 0
    deleted: int = 0
    failed: int = 0
    retry: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    chunks_written: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    reused: int = 0
    root_missing: bool = False
    interrupted: bool = False
    repaired: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts."""
        return {k: dict(v) if isinstance(v, dict) else v for k, v in self.__dict__.items()}


@dataclass
class SyncProgress:
    """Where a running sync stands, reported after every slice.

    Attributes:
        source: the source name.
        phase: ``"indexing"``, or ``"loading embedding model"`` while the model loads.
        docs_done: documents of the plan written (or failed) so far.
        docs_total: documents the plan indexes.
        bytes_done: bytes of those documents done, the document in flight pro rata.
        bytes_total: bytes of the documents the plan indexes.
        chunks_written: points upserted so far.
        chunks_embedded: chunks embedded by the model so far (the costly unit of work).
        path: the document in flight, if any.
        started: when the sync started (``time.monotonic()`` seconds).
    """

    source: str
    phase: str = "indexing"
    docs_done: int = 0
    docs_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    path: str | None = None
    started: float = field(default_factory=time.monotonic)

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left at the rate so far, or ``None`` before anything was done.

        Embedding dominates the cost, and a document's chunks grow with its bytes, so
        the bytes still to do are timed at the rate bytes were done so far.
        """
        elapsed = (time.monotonic() if now is None else now) - self.started
        if self.bytes_done <= 0 or elapsed <= 0:
            return None
        return max(0.0, (self.bytes_total - self.bytes_done) * elapsed / self.bytes_done)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with ``eta_seconds``."""
        out = {k: v for k, v in self.__dict__.items() if k != "started"}
        eta = self.eta_seconds()
        out["eta_seconds"] = None if eta is None else round(eta, 1)
        return out


ProgressFn = Callable[[SyncProgress], None]


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

    Attributes:
        cache_path: the embedding cache file.
        profile: the configured profile (:class:`~ingestd.daemon.profile.Profile`);
            ``model``, ``rules``, ``embedder``, ... are its parts. A collection whose
            points another profile made keeps that one until its migration switches
            (:meth:`profile_of`).
        stop: set to end long work at its next checkpoint (:class:`SyncInterrupted`).
        on_checkpoint: called at every checkpoint with ``serve_changes``: ``True``
            between write slices (other files' changes may be written there),
            ``False`` inside planning and verify loops (searches only).
        migration_hook: called with ``(collection, step)`` at the steps of a migration
            (``begun``, ``checkpoint`` after every slice written into the new version,
            ``built``, ``switching``, ``switched``): a test hook.

    Raises:
        ingestd.store.embedder.ModelNotFoundError: the model is not available locally.
        ingestd.chunkers.tokenizers.TokenizerError: the tokenizer is not bundled.
        ingestd.daemon.profile.ProfileUnavailableError: the model that made a
            collection is gone (it is needed until the collection is migrated).
    """

    def __init__(
        self,
        cfg: Config,
        state_dir: Path,
        *,
        embed_model: Callable[[Sequence[str]], Any] | None = None,
        model_factory: Callable[[Any], Callable[[Sequence[str]], Any]] | None = None,
        store: Any = None,
        now: Callable[[], float] = time.time,
        cache_path: Path | None = None,
    ) -> None:
        from ingestd.store.embedding_cache import EmbedStats

        self.cfg = cfg
        self.state_dir = Path(state_dir)
        secure_state_dir(self.state_dir)  # created 0700 when missing
        self.now = now
        self.manifest = Manifest(
            cfg.manifest.url or sqlite_url(self.state_dir / "manifest.db"), now=now
        )
        self._store = store
        self._embed_override = embed_model
        self._model_factory = model_factory
        self._cache: Any = None
        self.cache_path = cache_path or self.state_dir / "embeddings.db"
        self._wrap_model: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None
        self.stats = EmbedStats()
        self._profiles: dict[str, Profile] = {}
        self.profile = self._profile(cfg)
        self.model = self.profile.model
        self.embedder = self.profile.embedder
        self.sentence_embedder = self.profile.sentence_embedder
        self.ctx = self.profile.ctx
        self.rules = self.profile.rules
        self.rule_warnings = self.profile.rule_warnings
        for w in self.rule_warnings:
            logger.warning("%s", w)
        self.sources = {s.name: s for s in cfg.sources}
        self.filters = {s.name: SourceFilter(s, self.state_dir) for s in cfg.sources}
        #: files that could not be read, by (source, path): tried again with back-off
        self.retry: Backoff[tuple[str, str]] = Backoff(
            cfg.files.retry_initial_s, cfg.files.retry_max_s
        )
        #: per source: what scans left out (names that are not UTF-8, unreadable
        #: folders, documents that could not be recorded), by display path -> reason
        self.skipped: dict[str, dict[str, str]] = {}
        self.held: dict[str, list[str]] = {}
        self.last_error: dict[str, str] = {}
        self.roots_missing: set[str] = set()  # sources whose root was missing at the last look
        self.stop = threading.Event()
        self.on_checkpoint: Callable[[bool], None] | None = None
        self.migration_hook: Callable[[str, str], None] | None = None
        self.writer = Writer(self)
        self._collections_checked: set[str] = set()
        self._current: dict[str, Profile] = {}  # collection -> profile of its current version
        self.migrations: dict[str, Any] = {}  # collection -> its migration, while it runs
        self._progress: list[tuple[SyncProgress, ProgressFn | None]] = []
        self._queued: list[tuple[str, set[str]]] = []  # per running apply: paths not yet read
        self._last_heartbeat = time.monotonic()
        try:
            for s in cfg.sources:
                self.manifest.ensure_source(s.name, str(s.root), s.collection)
            for collection in sorted({s.collection for s in cfg.sources}):
                self.profile_of(collection, check=True)
        except BaseException:
            self.manifest.close()
            raise

    # -- lazily opened parts ---------------------------------------------------------------

    @property
    def cache(self) -> Any:
        """The embedding cache (:attr:`cache_path`), opened on first use.

        A damaged file is moved aside and replaced by an empty cache, with a warning
        (:class:`~ingestd.daemon.repair.HealingCache`): never a fatal error.
        """
        if self._cache is None:
            self._cache = HealingCache(self.cache_path, self.cfg.embedding.cache_max_entries)
            for p in self._profiles.values():
                p.embedder.cache = p.sentence_embedder.cache = self._cache
        return self._cache

    @property
    def qdrant_path(self) -> Path:
        """The embedded store's folder (``qdrant.path``, default ``<state dir>/qdrant``)."""
        return Path(self.cfg.qdrant.path or self.state_dir / "qdrant")

    @property
    def store(self) -> Any:
        """The vector store, opened on first use (imports qdrant-client).

        Raises:
            ingestd.store.vectors.StoreUnavailableError: locked by another process.
            ingestd.store.damage.StateDamagedError: the embedded store's files are damaged.
        """
        if self._store is None:
            import os

            from ingestd.store.vectors import QdrantStore, StoreUnavailableError

            q = self.cfg.qdrant
            if q.url:
                self._store = QdrantStore(
                    url=q.url, api_key=os.environ.get(q.api_key_env), retry_seconds=q.retry_seconds
                )
            else:
                try:
                    self._store = QdrantStore(path=str(self.qdrant_path))
                except StoreUnavailableError:
                    raise
                except Exception as exc:
                    damage = damaged_store_error(self.qdrant_path, exc)
                    if damage is None:
                        raise
                    raise damage from exc
        return self._store

    @property
    def store_open(self) -> bool:
        """Whether the vector store has been opened."""
        return self._store is not None

    # -- profiles and models ------------------------------------------------------------

    def _profile(self, cfg: Config) -> Profile:
        """The profile of ``cfg`` (one instance per profile key)."""
        for p in self._profiles.values():
            if p.cfg == cfg:
                return p
        prof = Profile(
            cfg,
            self._new_model,
            self._embed,
            self.stats,
            max_texts_per_call=cfg.embedding.batch_size,
            seconds_per_call=SECONDS_PER_EMBED_CALL,
        )
        known = self._profiles.get(prof.key)
        if known is not None:
            return known
        if self._cache is not None:
            prof.embedder.cache = prof.sentence_embedder.cache = self._cache
        if self._wrap_model is not None:
            self._wrap(prof, self._wrap_model)
        self._profiles[prof.key] = prof
        return prof

    def profile_for(self, settings: dict[str, Any]) -> Profile:
        """The profile recorded as ``settings`` (loaded once; the configured one if equal).

        Raises:
            ProfileUnavailableError: its model is not found, or its files changed.
        """
        from ingestd.store.embedder import ModelNotFoundError

        key = profile_key(settings)
        if key in self._profiles:
            return self._profiles[key]
        try:
            prof = self._profile(config_for(self.cfg, settings))
        except ModelNotFoundError as exc:
            raise ProfileUnavailableError(_unavailable(settings, str(exc))) from None
        if prof.key != key:
            why = f"its files changed (fingerprint now {prof.model.fingerprint[:12]})"
            raise ProfileUnavailableError(_unavailable(settings, why))
        return prof

    def profile_of(self, collection: str, *, check: bool = False) -> Profile:
        """The profile that made the current version of ``collection``.

        The configured one, unless the manifest records another (a migration to the
        configured one is due, running, or was aborted: see :mod:`ingestd.daemon.migrate`).

        Args:
            collection: the collection name.
            check: read the manifest again, and forget an aborted migration when the
                config went back to the profile of the current version.

        Raises:
            ProfileUnavailableError: the recorded profile's model cannot be loaded.
        """
        if not check and collection in self._current:
            return self._current[collection]
        rec = self.manifest.collection_record(collection)
        if rec is None:
            return self.profile
        settings = recorded_settings(rec, self.profile.settings)
        if profile_key(settings) == self.profile.key:
            prof = self.profile
            if check and rec.get("aborted"):  # the config went back: nothing is pending
                self.manifest.set_collection_aborted(collection, None)
        else:
            aborted = rec.get("aborted")
            if check and aborted and profile_key(aborted) == self.profile.key:
                logger.error(
                    "collection %s: its migration to the configured %s was aborted "
                    "(`ingestd migrate --abort`); it keeps %s. Set the config back to that, "
                    "or run `ingestd migrate` to start the migration again",
                    collection,
                    self.profile.describe(),
                    describe(settings),
                )
            prof = self.profile_for(settings)
        self._current[collection] = prof
        return prof

    def recheck_collection(self, collection: str, *, keep_checked: bool = False) -> None:
        """Read ``collection``'s profile from the manifest again.

        After a switch, or when an aborted migration is restarted. Unless
        ``keep_checked``, what builds are due is checked again at its next write.
        """
        self._current.pop(collection, None)
        if not keep_checked:
            self._collections_checked.discard(collection)

    def profile_of_source(self, source: str) -> Profile:
        """The profile of the current version of ``source``'s collection."""
        return self.profile_of(self.sources[source].collection)

    def _new_model(self, profile: Profile) -> Any:
        if self._embed_override is not None:
            return self._embed_override
        if self._model_factory is not None:
            return self._model_factory(profile.model)
        from ingestd.store.embedder import load_embedder

        e = profile.cfg.embedding
        return load_embedder(
            profile.model,
            device=e.device,
            batch_size=e.batch_size,
            threads=e.threads,
            cache_dir=e.cache_dir,
        )

    def _embed(self, profile: Profile, texts: Sequence[str]) -> Any:
        """Run ``profile``'s model (a stop request ends work here too: see :meth:`checkpoint`)."""
        if self.stop.is_set():
            raise SyncInterrupted("stop requested")
        model = profile.embed_model()
        if not getattr(model, "loaded", True):
            self._set_phase(f"loading embedding model {profile.model.name}")
        try:
            return model(texts)
        finally:
            self._set_phase("indexing")

    def instrument_models(self, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Wrap every model call of every profile, present and future, with ``wrap``.

        The daemon counts calls and pings the watchdog around them this way.
        """
        self._wrap_model = wrap
        for p in self._profiles.values():
            self._wrap(p, wrap)

    @staticmethod
    def _wrap(profile: Profile, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        for emb in (profile.embedder, profile.sentence_embedder):
            emb.model = wrap(emb.model)

    def active_profiles(self) -> list[Profile]:
        """The configured profile, then those of current versions that differ."""
        out = [self.profile]
        for p in self._current.values():
            if p not in out:
                out.append(p)
        return out

    def release_profiles(self) -> None:
        """Forget profiles no collection uses any more (their models' memory is freed).

        Called when a migration has switched: the previous model is no longer needed.
        """
        active = {p.key for p in self.active_profiles()}
        for key in [k for k in self._profiles if k not in active]:
            del self._profiles[key]

    @property
    def model_loaded(self) -> bool:
        """Whether the configured model's weights are loaded."""
        return self.profile.loaded

    def embed_query(self, text: str) -> Any:
        """The vector of a search query by the configured model, shape ``(dim,)``."""
        return self.profile.embed_model()([text])[0]

    def query_target(self, collection: str) -> tuple[str | None, Profile]:
        """Where a search of ``collection`` reads, and the profile that made it.

        Resolves the alias to its physical version once, so that the query vector and
        the version it is compared with always come from the same model, even while a
        migration switches the alias.

        Returns:
            ``(physical collection or None when missing, its profile)``.
        """
        from . import migrate

        physical = self.store.layout(collection).physical
        return physical, migrate.profile_of_version(self, collection, physical)

    def load_model(self) -> bool:
        """Load the models now (thread-safe; the daemon preloads them in the background).

        Loads the configured model and, while a collection is not yet migrated to it,
        the model of its current version (searches and changes need both).

        Returns:
            ``True`` when a model was loaded, ``False`` when there was nothing to load
            (already loaded, or an injected embedding callable).
        """
        loaded = False
        for p in self.active_profiles():
            loaded = p.load() or loaded
        return loaded

    def close(self) -> None:
        """Close the store, the cache and the manifest."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        self.manifest.close()

    # -- checkpoints and progress -------------------------------------------------------------

    def checkpoint(self, *, serve_changes: bool = True) -> None:
        """A point where long work may pause: the owner serves jobs, a stop ends the work.

        Raises:
            SyncInterrupted: :attr:`stop` is set.
        """
        self._last_heartbeat = time.monotonic()
        if self.on_checkpoint is not None:
            self.on_checkpoint(serve_changes)
        if self.stop.is_set():
            raise SyncInterrupted("stop requested")

    def heartbeat(self) -> None:
        """A :meth:`checkpoint` (searches only) when the last one is over 0.5 s old.

        Raises:
            SyncInterrupted: :attr:`stop` is set.
        """
        if self.stop.is_set() or time.monotonic() - self._last_heartbeat >= HEARTBEAT_S:
            self.checkpoint(serve_changes=False)

    @property
    def in_flight(self) -> list[InFlight]:
        """Documents being written right now (pending until their group commits)."""
        return list(self.writer.in_flight.values())

    @property
    def progress(self) -> list[SyncProgress]:
        """The running syncs, outermost first (a nested one serves a change mid-way)."""
        return [p for p, _ in self._progress]

    def _set_phase(self, phase: str) -> None:
        if not self._progress:
            return
        prog, fn = self._progress[-1]
        if prog.phase != phase:
            prog.phase = phase
            if fn is not None:
                fn(prog)

    def _report(
        self, prog: SyncProgress, fn: ProgressFn | None, e0: int, bytes_before: int
    ) -> None:
        prog.chunks_embedded = self.embedder.stats.embedded - e0
        flying = [f for f in self.writer.in_flight.values() if f.source == prog.source]
        prog.path = flying[-1].path if flying else None
        partial = sum(f.size * f.chunks_done // f.chunks_total for f in flying if f.chunks_total)
        prog.bytes_done = bytes_before + partial
        if fn is not None:
            fn(prog)

    # -- planning --------------------------------------------------------------------------

    def git_commit(self, source: str) -> str | None:
        """HEAD's commit of ``source`` when it is a git checkout, else ``None``."""
        return self._git(self.sources[source])

    def _git(self, src: SourceConfig) -> str | None:
        is_git = src.git if src.git is not None else (Path(src.root) / ".git").exists()
        return git_head(Path(src.root)) if is_git else None

    def _needs_work(self, doc: DocRow | None, st: FileStat, rule: Rule, pending: set[int]) -> bool:
        return (
            doc is None
            or doc.state == "new"
            or doc.id in pending
            or doc.rule_fingerprint != rule.fingerprint
            or _stat_of(doc) != st
        )

    def plan(
        self,
        source: str,
        paths: Iterable[str] | None = None,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        check_store: bool = True,
    ) -> Plan:
        """Compare the files with the manifest.

        A scan first checks the store against the manifest (:meth:`check_store`: a
        count, and a repair when they differ), so that it plans from a manifest that
        tells the truth about the store.

        Args:
            source: a configured source name.
            paths: relative paths (files or folders) that changed, or ``None`` for a
                scan of the whole source (the mass-deletion guard applies to scans only).
            full: re-hash every file (no stat fast path).
            allow_mass_delete: release deletions the guard would hold.
            check_store: check (and repair) the store before a scan; ``False`` for a
                plan that must write nothing (``--dry-run``).

        Raises:
            KeyError: unknown source.
            SyncInterrupted: a stop was requested while planning.
        """
        plan = Plan(source, scan=paths is None)
        root = Path(self.sources[source].root)
        if not root.is_dir():
            # an unmounted volume is not a deletion of every document: do nothing
            if source not in self.roots_missing:
                logger.error(
                    "source %s: root %s is missing; nothing synced or deleted", source, root
                )
            self.roots_missing.add(source)
            plan.root_missing = True
            return plan
        if source in self.roots_missing:
            self.roots_missing.discard(source)
            logger.info("source %s: root %s is back", source, root)
        if paths is None and check_store:
            plan.repaired = self.check_store(source).repairs()
        pending = self.manifest.pending_doc_ids(source)
        known, found = self._observe(source, paths)
        if paths is not None:
            plan.scope = sorted({p.strip("/") for p in paths})
        for rel, st in sorted(found.items()):
            self._classify(plan, rel, st, known.get(rel), pending, full=full)
            self.heartbeat()
        # a document in a folder that cannot be read is not gone: it stays as it is
        gone = sorted(p for p in known if p not in found and not found.covers(p))
        by_hash: dict[str, list[str]] = {}
        for p in gone:
            by_hash.setdefault(known[p].content_hash, []).append(p)
        for rel in plan.index:
            # a new path, one written but not committed (a move interrupted), or one
            # overwritten by the moved file
            olds = by_hash.get(plan.hashes.get(rel, ""))
            if olds:
                plan.moves.append((olds.pop(0), rel))
        plan.delete = gone
        if paths is None and not allow_mass_delete:
            self._guard(plan, known, found, pending)
        return plan

    def _observe(self, source: str, paths: Iterable[str] | None) -> tuple[dict[str, DocRow], Scan]:
        """Manifest rows and on-disk stats of the whole source, or of ``paths``.

        A path may be a folder: it covers every document under it, on disk and in the
        manifest (a folder moved out leaves no event for its files). What the walk
        skipped (names that are not UTF-8, unreadable folders) goes to :attr:`skipped`.
        """
        flt = self.filters[source]
        if paths is None:
            found = scan(flt)
            self._note_skipped(source, None, found)
            return self.manifest.documents(source), found
        root = Path(self.sources[source].root)
        known: dict[str, DocRow] = {}
        found = Scan()
        scope = sorted({p.strip("/") for p in paths})
        for rel in scope:
            full_path = root / rel
            is_dir = full_path.is_dir() and not full_path.is_symlink()
            problem = name_problem(rel)
            if problem is not None:  # never a manifest key (see scanner.name_problem)
                if is_dir and not flt.ignores_dir(rel):
                    found.skipped[display_path(rel) + "/"] = (
                        f"folder {problem}: nothing in it is indexed"
                    )
                elif not is_dir and flt.accepts(rel) and stat_file(full_path) is not None:
                    found.skipped[display_path(rel)] = f"file {problem}; skipped"
                continue
            known.update(self.manifest.documents(source, prefix=rel))
            if is_dir:
                if not flt.ignores_dir(rel):
                    sub = scan(flt, rel)
                    found.update(sub)
                    found.skipped.update(sub.skipped)
                    found.unreadable.update(sub.unreadable)
            elif flt.accepts(rel):
                st = stat_file(full_path)
                if st is not None:
                    found[rel] = st
        self._note_skipped(source, scope, found)
        return known, found

    def _note_skipped(self, source: str, scope: list[str] | None, found: Scan) -> None:
        """Update :attr:`skipped` of ``source`` for the ``scope`` observed (``None``: all).

        Logs one warning when an entry is first skipped (or for another reason), and
        one line when it no longer is.
        """
        now = dict(found.skipped)
        for folder, error in found.unreadable.items():
            key = display_path(folder) + "/" if folder else "./"
            now[key] = f"folder cannot be read ({error}): nothing in it is indexed or deleted"
        book = self.skipped.setdefault(source, {})
        tops = None if scope is None else [display_path(p) for p in scope]
        for key in list(book):
            if key not in now and (tops is None or any(_within(key, t) for t in tops)):
                del book[key]
                logger.info("source %s: %s is no longer skipped", source, key)
        for key, reason in now.items():
            if book.get(key) != reason:
                logger.warning("source %s: skipping %s: %s", source, key, reason)
                book[key] = reason

    def _classify(
        self,
        plan: Plan,
        rel: str,
        st: FileStat,
        doc: DocRow | None,
        pending: set[int],
        *,
        full: bool,
    ) -> None:
        """Put one present file into ``plan``: unchanged, stat-only or to index."""
        rule = self.profile_of_source(plan.source).rules.match(rel)
        if not full and not self._needs_work(doc, st, rule, pending):
            plan.unchanged += 1
            return
        plan.sizes[rel] = st.size
        try:
            data = (Path(self.sources[plan.source].root) / rel).read_bytes()
        except OSError:
            plan.index.append(rel)  # read again when applied; retried if it fails
            return
        h = content_hash(data)
        plan.hashes[rel] = h
        if (
            doc is not None
            and doc.state != "new"
            and not (full and doc.state == "failed")  # the file policy may have changed
            and doc.id not in pending
            and doc.content_hash == h
            and doc.rule_fingerprint == rule.fingerprint
        ):
            if _stat_of(doc) != st:
                plan.stat_only.append((rel, st))
            else:
                plan.unchanged += 1
            return
        plan.index.append(rel)
        if doc is not None:
            plan._updates.add(rel)

    def _guard(
        self,
        plan: Plan,
        known: dict[str, DocRow],
        found: dict[str, FileStat],
        pending: set[int],
    ) -> None:
        """Hold the deletions of a scan that would delete too much (a vanished tree).

        Moves are not deletions: neither those planned here, nor *completed* ones, whose
        document (same content hash) the manifest already holds, committed, under a
        path that still exists. A move interrupted after its new paths were written
        leaves exactly those; finishing it deletes nothing that is not elsewhere. Nor
        are documents never committed (state ``new``: a first write interrupted): their
        deletion only clears what that write left.
        """
        n_known = len(known)
        moved = {o for o, _ in plan.moves}
        kept = {
            doc.content_hash
            for rel, doc in known.items()
            if rel in found and doc.state != "new" and doc.id not in pending
        }
        moved.update(
            p for p in plan.delete if known[p].state == "new" or known[p].content_hash in kept
        )
        real = [p for p in plan.delete if p not in moved]
        md = self.cfg.mass_delete
        if len(real) > md.min_count and len(real) > md.max_share * n_known:
            logger.warning(
                "source %s: holding %d deletions of %d documents (over %.0f%% and %d); "
                "run `ingestd resync --allow-mass-delete` to apply them",
                plan.source,
                len(real),
                n_known,
                md.max_share * 100,
                md.min_count,
            )
            plan.held = real
            plan.delete = [p for p in plan.delete if p in moved]
            self.held[plan.source] = real
        else:
            self.held.pop(plan.source, None)

    # -- documents ------------------------------------------------------------------------------

    def prepare(self, source: str, rel: str, git_commit: str | None = None) -> PreparedDocument:
        """Read, decode and chunk one file; compute its point ids and payloads.

        Raises:
            UnreadableFile: the file vanished or could not be opened (retry later).
            SyncInterrupted: a stop was requested while the chunker embedded sentences.
        """
        src = self.sources[source]
        rule = self.profile_of(src.collection).rules.match(rel)
        return prepare_document(source, Path(src.root), rel, rule, self.cfg.files, git_commit)

    def _prepare_watched(
        self, source: str, rel: str, git_commit: str | None, size: int
    ) -> PreparedDocument:
        """:meth:`prepare`, in a worker thread for a big file, with checkpoints meanwhile.

        Chunking is the one step of a document that cannot be sliced: a big file is
        chunked in a daemon thread while this (the engine) thread reaches a checkpoint
        every half second (searches are served, a stop request returns at once and
        leaves the thread to finish on its own), for at most :data:`PREPARE_GRACE_S`.
        """
        if self.on_checkpoint is None or size < THREADED_PREPARE_BYTES:
            return self.prepare(source, rel, git_commit)
        box: list[Any] = []
        done = threading.Event()

        def work() -> None:
            try:
                box.append(self.prepare(source, rel, git_commit))
            except BaseException as exc:  # re-raised on the engine thread
                box.append(exc)
            finally:
                done.set()

        threading.Thread(target=work, name="ingestd-prepare", daemon=True).start()
        deadline = time.monotonic() + PREPARE_GRACE_S
        overdue = False
        while not done.wait(HEARTBEAT_S):
            if self.stop.is_set():
                raise SyncInterrupted("stop requested")
            if time.monotonic() < deadline:
                self.checkpoint(serve_changes=False)
            elif not overdue:
                overdue = True
                logger.warning("chunking %s takes over %.0f s", rel, PREPARE_GRACE_S)
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        assert isinstance(result, PreparedDocument)
        return result

    def expected_points(
        self, source: str, sparse: dict[str, Any] | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
        """What a from-scratch ingest of the current files would store for ``source``.

        Args:
            source: a configured source name.
            sparse: filled, when given, with each point's expected sparse vector
                (:func:`~ingestd.daemon.documents.sparse_vector`) by point id.

        Returns:
            ``(points, docs)``: point id -> payload (provenance keys removed), and
            path -> error (``None`` for documents that chunked fine).

        Raises:
            SyncInterrupted: a stop was requested.
        """
        points: dict[str, dict[str, Any]] = {}
        docs: dict[str, str | None] = {}
        for rel in sorted(scan(self.filters[source])):
            self.heartbeat()
            try:
                prep = self.prepare(source, rel)
            except UnreadableFile:
                continue
            docs[rel] = prep.error
            for pid, payload in zip(prep.ids, prep.payloads, strict=True):
                points[pid] = strip_provenance(payload)
            if sparse is not None:
                sparse.update(zip(prep.ids, map(sparse_vector, prep.chunks), strict=True))
        return points, docs

    # -- applying -------------------------------------------------------------------------------

    def sync(
        self,
        source: str,
        paths: Iterable[str] | None = None,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        progress: ProgressFn | None = None,
    ) -> SyncResult:
        """Plan and apply.

        Args:
            source: a configured source name.
            paths: changed relative paths, or ``None`` for a scan (see :meth:`plan`).
            full: re-hash every file (no stat fast path).
            allow_mass_delete: release deletions the guard would hold.
            progress: called with a :class:`SyncProgress` after every write slice.

        Returns:
            The counts; ``interrupted`` when a stop request ended it early.
        """
        try:
            plan = self.plan(source, paths, full=full, allow_mass_delete=allow_mass_delete)
        except SyncInterrupted:
            return SyncResult(source, interrupted=True)
        return self.apply(plan, progress=progress)

    def apply(
        self,
        plan: Plan,
        *,
        progress: ProgressFn | None = None,
        force: bool = False,
    ) -> SyncResult:
        """Carry out ``plan``; a stop request ends it at the next checkpoint.

        Paths another sync is writing right now (this one runs nested inside its
        checkpoint) are left out and listed in ``deferred``.

        Args:
            plan: from :meth:`plan` (or built by hand, e.g. for a repair).
            progress: called with a :class:`SyncProgress` after every write slice.
            force: re-upsert every point of the indexed documents (repair).

        Returns:
            The counts; ``interrupted`` when a stop request ended it early (nothing of
            the documents in flight is committed: the next sync finishes them).
        """
        source = plan.source
        res = SyncResult(
            source, held=list(plan.held), root_missing=plan.root_missing, repaired=plan.repaired
        )
        self._leave_to_running(plan, res)
        queued = set(plan.index)
        self._queued.append((source, queued))
        e0, r0 = self.embedder.stats.embedded, self.embedder.stats.reused
        prog = SyncProgress(
            source,
            docs_total=len(plan.index),
            bytes_total=sum(plan.sizes.get(p, 0) for p in plan.index),
        )
        self._progress.append((prog, progress))
        collection = self.sources[source].collection
        if plan.scan and collection not in self.migrations:
            from . import migrate

            if migrate.due(self, collection):  # a migration that waited may go on
                self._collections_checked.discard(collection)
        try:
            if plan.index or plan.delete or self._layout_due(source):
                rebuilt = self.ensure_collection(collection)
                plan.index = [p for p in plan.index if (source, p) not in rebuilt]
            self._index(plan, res, prog, progress, force)
            for rel in plan.delete:
                self.heartbeat()
                self._delete(source, rel, res)
            running = self.migrations.get(collection)
            if running is not None:  # changes land in the version being built too
                running.follow(source, [p for p in plan.index if p not in res.retry], plan.delete)
            for rel, st in plan.stat_only:
                self.heartbeat()
                doc = self.manifest.document(source, rel)
                if doc is not None:
                    self.manifest.update_document(
                        doc.id, size=st.size, mtime_ns=st.mtime_ns, ctime_ns=st.ctime_ns,
                        inode=st.inode,
                    )  # fmt: skip
        except SyncInterrupted:
            res.interrupted = True
        finally:
            self._progress.pop()
            self._queued.pop()
            res.embedded = self.embedder.stats.embedded - e0
            res.reused = self.embedder.stats.reused - r0
        self._settle_retries(plan, res)
        if (plan.index or plan.delete) and not self._queued:
            release_free_memory()  # see ingestd.daemon.memory
        if plan.scan and not plan.root_missing:
            self.manifest.set_held_deletes(source, len(plan.held))
        if paths_complete(plan, res):
            self.manifest.set_last_sync(source, self.now())
        return res

    def _leave_to_running(self, plan: Plan, res: SyncResult) -> None:
        """Keep a sync nested in another one's checkpoint off the other one's documents.

        Documents the running sync has in flight are *deferred* (the caller syncs them
        again once it ends); documents it has yet to read are left to it (it reads them
        after this change, so each is processed once).
        """
        busy = {p for s, p in self.writer.in_flight if s == plan.source}
        ahead = set().union(*(q for s, q in self._queued if s == plan.source))
        if not busy and not ahead:
            return
        res.deferred = sorted(
            busy & (set(plan.index) | set(plan.delete) | {p for p, _ in plan.stat_only})
        )
        skip = busy | ahead
        plan.index = [p for p in plan.index if p not in skip]
        plan.delete = [p for p in plan.delete if p not in skip]
        plan.stat_only = [(p, st) for p, st in plan.stat_only if p not in skip]

    # -- files that cannot be read -----------------------------------------------------------

    def _unreadable(self, source: str, rel: str, error: str) -> None:
        """Record a failed read of ``rel``; log only when its state changes."""
        if self.retry.failed((source, rel), error, self.now()):
            logger.warning(
                "source %s: %s; tried again after %.0f s, then less and less often (every "
                "%.0f s at most); `ingestd status` lists it",
                source,
                error,
                self.retry.delay(1),
                self.retry.cap,
            )

    def _readable(self, source: str, rel: str) -> None:
        failing = self.retry.succeeded((source, rel))
        if failing is not None:
            logger.info(
                "source %s: %s can be read again (after %d failed tries)",
                source,
                rel,
                failing.attempts,
            )

    def _settle_retries(self, plan: Plan, res: SyncResult) -> None:
        """Forget failed reads that the plan covered and that did not fail again.

        A path that vanished for good is no longer retried; one that failed again
        keeps its back-off.
        """
        failed = set(res.retry)
        for source, rel in self.retry:
            if source != plan.source or rel in failed or res.interrupted:
                continue
            if plan.scan or any(_within(rel, top) for top in plan.scope):
                if self.retry.succeeded((source, rel)) is not None:
                    logger.info("source %s: %s is no longer retried (gone or read)", source, rel)

    def skipped_entries(self, source: str) -> list[dict[str, str]]:
        """What scans of ``source`` left out: ``{"path", "reason"}`` (display paths)."""
        return [{"path": k, "reason": v} for k, v in sorted(self.skipped.get(source, {}).items())]

    def retrying(self, source: str) -> list[dict[str, Any]]:
        """Files of ``source`` that could not be read: ``path``, error, tries, next try."""
        now = self.now()
        return [
            {"path": rel, **f.as_dict(now)}
            for (s, rel), f in sorted(self.retry.items())
            if s == source
        ]

    def _index(
        self,
        plan: Plan,
        res: SyncResult,
        prog: SyncProgress,
        progress: ProgressFn | None,
        force: bool,
    ) -> None:
        """Prepare and write ``plan.index`` in groups spanning documents, slice by slice."""
        source = plan.source
        git_commit = self._git(self.sources[source]) if plan.index else None
        group: list[PreparedDocument] = []
        new_chunks = 0
        bytes_before = 0
        e0 = self.embedder.stats.embedded

        def report() -> None:
            prog.chunks_written = res.chunks_written
            self._report(prog, progress, e0, bytes_before)

        def flush() -> None:
            nonlocal group, new_chunks, bytes_before
            self.writer.write(
                source, group, res, force=force, checkpoint=self.checkpoint, progress=report
            )
            prog.docs_done += len(group)
            bytes_before += sum(p.size for p in group)
            group, new_chunks = [], 0
            report()

        queued = self._queued[-1][1]
        for rel in plan.index:
            self.heartbeat()
            queued.discard(rel)
            try:
                prep = self._prepare_watched(source, rel, git_commit, plan.sizes.get(rel, 0))
            except UnreadableFile as exc:
                self._unreadable(source, rel, str(exc))
                res.retry.append(rel)
                prog.docs_done += 1
                continue
            self._readable(source, rel)
            group.append(prep)
            new_chunks += len(prep.ids)
            if len(group) >= GROUP_DOCS or new_chunks >= GROUP_CHUNKS:
                flush()
        if group:
            flush()

    def forget_collection_check(self, collection: str) -> None:
        """Check ``collection`` again before the next write (it was found missing)."""
        self._collections_checked.discard(collection)

    def check_store(self, source: str) -> StoreCheck:
        """Compare the store with the manifest for ``source``'s collection and repair.

        See :func:`ingestd.daemon.repair.check_store`. A migration's switch that a
        crash interrupted is finished first: the manifest already describes the new
        version, the alias may still name the previous one.
        """
        collection = self.sources[source].collection
        build = self.manifest.collection_build(collection)
        if build is not None and build["phase"] == "switching":
            self.ensure_collection(collection)
        return check_store(self, source)

    def ensure_collection(self, collection: str) -> set[tuple[str, str]]:
        """Record the collection's profile, create it in the store if new, build what is due.

        A collection of an older layout (no sparse vectors), or one whose new version
        was being built when the daemon stopped, is (re)built here first
        (:func:`ingestd.daemon.rebuild.build_version`); then the migration to the
        configured profile runs, when one is due (:func:`ingestd.daemon.migrate.advance`).

        Returns:
            The documents ``(source, path)`` a build or migration wrote just now, as
            they are on disk (usually none).

        Raises:
            SyncInterrupted: a stop was requested during a build (it resumes next time).
        """
        if collection in self._collections_checked:
            return set()
        from ingestd.store.collections import CollectionVersions

        from . import migrate
        from .rebuild import build_version

        current = self.profile_of(collection)
        rec = self.manifest.collection_record(collection)
        if rec is None or (rec["settings"] is None and current is self.profile):
            self.manifest.record_collection(collection, current.settings)
        self._collections_checked.add(collection)  # the builds write through here
        try:
            rebuilt: set[tuple[str, str]] = set()
            versions = CollectionVersions(self.store, self.manifest)
            reason = versions.pending(collection, current.model.dim)
            if reason is not None:
                rebuilt = build_version(self, collection, reason)
            return rebuilt | migrate.advance(self, collection)
        except BaseException:
            self._collections_checked.discard(collection)
            raise

    def _layout_due(self, source: str) -> bool:
        """Whether the manifest says the source's collection needs a new version.

        It predates the store layout, a build was interrupted, or a migration to the
        configured profile is due. Manifest reads only: a no-op sync of an up-to-date
        store never opens the store.
        """
        from ingestd.store.vectors import LAYOUT

        from . import migrate

        collection = self.sources[source].collection
        if collection in self._collections_checked:
            return False
        known = self.manifest.collection_layout(collection)
        return known is not None and (
            known != LAYOUT
            or self.manifest.collection_build(collection) is not None
            or migrate.due(self, collection)
        )

    def vectors_from_store(self, collection: str) -> Callable[[list[str]], dict[str, Any]]:
        """A lookup of vectors by chunk hash among the points already in ``collection``.

        Used when the embedding cache has evicted a vector: a point with the same chunk
        hash (a renamed or copied document) still holds it.
        """

        def fallback(hashes: list[str]) -> dict[str, Any]:
            import numpy as np

            ids = self.manifest.point_ids_for_hashes(hashes)
            if not ids:
                return {}
            by_id = {pid: h for h, pid in ids.items()}
            out: dict[str, Any] = {}
            recs = []
            # while a new version is built, its points are not behind the alias yet
            for name in dict.fromkeys([collection, self.store.write_target(collection)]):
                try:
                    recs += self.store.retrieve(name, list(by_id), with_vectors=True)
                except Exception:
                    logger.debug("vector lookup by chunk hash failed", exc_info=True)
            for pid, _payload, vec in recs:
                if vec is not None and not isinstance(vec, dict):
                    out[by_id[pid]] = np.asarray(vec, dtype=np.float32)
            return out

        return fallback

    def _delete(self, source: str, rel: str, res: SyncResult) -> None:
        """Delete the points and rows of a document that is gone.

        A file that is back by now (re-created while a long sync ran) is not deleted:
        its own change event, or the next scan, indexes it.
        """
        doc = self.manifest.document(source, rel)
        if doc is None:
            return
        if stat_file(Path(self.sources[source].root) / rel) is not None:
            logger.debug("%s is back; not deleted", rel)
            return
        ids = [c.point_id for c in self.manifest.chunks(doc.id)]
        if ids:
            collection = self.sources[source].collection
            self.ensure_collection(collection)
            self.store.delete(collection, ids)
        self.manifest.delete_document(doc.id)
        res.deleted += 1
        res.chunks_deleted += len(ids)

    # -- verify and reporting ----------------------------------------------------------------

    def verify(self, source: str, *, repair: bool = False) -> VerifyReport:
        """Compare expected points with the manifest and the store; optionally repair.

        See :func:`ingestd.daemon.verify.verify`.
        """
        return verify_source(self, source, repair=repair)

    def forget(self, source: str) -> int:
        """Delete every point and row of ``source``; returns the number of points deleted."""
        from . import migrate

        rows = self.manifest.chunks_of_source(source)
        collection = None
        for s in self.manifest.sources():
            if s["name"] == source:
                collection = s["collection"]
        if rows and collection and self.store.has_collection(collection):
            self.store.delete(collection, list(rows))
        if collection:
            migrate.forget_source(self, collection, source)
        self.manifest.forget_source(source)
        return len(rows)


def _within(key: str, top: str) -> bool:
    """Whether skipped entry ``key`` (a display path, folders end with ``/``) is under ``top``."""
    top = top.strip("/")
    return not top or key.rstrip("/") == top or key.startswith(top + "/")


def _unavailable(settings: dict[str, Any], why: str) -> str:
    return (
        f"the points of this collection were made by {describe(settings)}, which cannot be "
        f"loaded: {why}. It is needed until the collection is migrated to the configured "
        "model (searches of the current version embed the query with it, and changes are "
        "written with it): put it back, or `ingestd forget` the collection's sources and "
        "index them again"
    )


def _stat_of(doc: DocRow) -> FileStat:
    return FileStat(doc.size, doc.mtime_ns, doc.ctime_ns, doc.inode)


def paths_complete(plan: Plan, res: SyncResult) -> bool:
    """Whether a sync applied everything it planned (nothing held, deferred, to retry)."""
    return not (res.retry or res.deferred or res.interrupted or plan.held or plan.root_missing)
