"""The sync engine: plan a source's changes from the manifest, then apply them.

Everything here is an optimisation of "ingest everything from scratch" that must not
change its result (DESIGN.md, the invariant): the store ends up holding exactly the
points :meth:`Engine.expected_points` derives from the current files.

Write order per batch of documents (DESIGN.md point 5), which makes a crash at any
point harmless:

a. record the documents' new point ids as *pending* in the manifest;
b. upsert the new points (``wait=True``) and refresh the payload of kept points;
c. delete every id the manifest holds for the documents (committed or pending) that
   is not in the new set;
d. commit: the new ids become the documents' ids.

A :class:`Engine` and the vector store it opens are owned by one thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.chunkers.base import Chunk
from ingestd.chunkers.text import UndecodableError, decode
from ingestd.store.ids import chunk_hash, content_hash, point_ids
from ingestd.store.manifest import ChunkRow, DocRow, Manifest, sqlite_url

from .config import Config, SourceConfig
from .rules import Rule, RuleSet, build_context
from .scanner import FileStat, SourceFilter, git_head, scan, stat_file

__all__ = ["Engine", "Plan", "SyncResult", "VerifyReport"]

logger = logging.getLogger(__name__)

#: Payload keys that say when and from where a point was written; outside comparisons.
PROVENANCE_KEYS = frozenset({"indexed_at", "git_commit"})
GROUP_DOCS = 16  # documents per write batch: SIGTERM finishes at most one batch
GROUP_CHUNKS = 128  # new chunks per write batch (embedding batches span documents)


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
        root_missing: the source's root folder is missing (unmounted?): nothing planned.
        scan: planned from a scan of the whole source (the guard applied).
    """

    source: str
    index: list[str] = field(default_factory=list)
    stat_only: list[tuple[str, FileStat]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    moves: list[tuple[str, str]] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    unchanged: int = 0
    hashes: dict[str, str] = field(default_factory=dict)
    root_missing: bool = False
    scan: bool = False

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
    """Counts of one sync (documents unless noted)."""

    source: str
    indexed: int = 0
    deleted: int = 0
    failed: int = 0
    retry: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    chunks_written: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    reused: int = 0
    root_missing: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts."""
        return dict(self.__dict__)


@dataclass
class VerifyReport:
    """Differences between the files, the manifest and the store for one source.

    ``missing``: expected points absent from the store; ``orphans``: store points no
    file produces; ``stale``: points whose payload differs; ``manifest``: paths whose
    manifest record disagrees with the files.
    """

    source: str
    expected: int = 0
    missing: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    manifest: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Whether files, manifest and store agree."""
        return not (self.missing or self.orphans or self.stale or self.manifest)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready report (lists capped at 100 ids each, with totals)."""
        out: dict[str, Any] = {
            "source": self.source,
            "expected": self.expected,
            "clean": self.clean,
        }
        for k in ("missing", "orphans", "stale", "manifest"):
            v = getattr(self, k)
            out[k] = v[:100]
            out[f"n_{k}"] = len(v)
        return out


@dataclass
class _Prepared:
    path: str
    stat: FileStat
    content_hash: str
    rule: Rule
    chunks: list[Chunk] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    payloads: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


class _Unreadable(Exception):
    """A file vanished or could not be opened mid-read: retried, never a delete."""


class Engine:
    """Plans and applies syncs of the configured sources.

    Args:
        cfg: validated config.
        state_dir: the state dir (created if missing).
        embed_model: embedding callable overriding the configured model (tests).
        store: vector store overriding the configured one (tests, fault injection).
        now: the clock, seconds since the epoch.

    Raises:
        ingestd.store.embedder.ModelNotFoundError: the model is not available locally.
        ingestd.chunkers.tokenizers.TokenizerError: the tokenizer is not bundled.
    """

    def __init__(
        self,
        cfg: Config,
        state_dir: Path,
        *,
        embed_model: Callable[[Sequence[str]], Any] | None = None,
        store: Any = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        from ingestd.store.embedder import CachedEmbedder, model_info

        self.cfg = cfg
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.now = now
        self.model = model_info(cfg.embedding.model)
        self.manifest = Manifest(
            cfg.manifest.url or sqlite_url(self.state_dir / "manifest.db"), now=now
        )
        self._store = store
        self._embed_model = embed_model
        self._cache: Any = None
        self.embedder = CachedEmbedder(self._embed, self.model.fingerprint, None, chunk_hash)
        self.sentence_embedder = CachedEmbedder(
            self._embed, self.model.fingerprint + ":sentence", None, chunk_hash
        )
        ctx, tok = build_context(cfg, embed=self.sentence_embedder.embed_texts)
        self.ctx = ctx
        self.rules = RuleSet(cfg.rules, ctx, tok, self.model.fingerprint)
        self.rule_warnings = self.rules.fit_warnings(ctx)
        for w in self.rule_warnings:
            logger.warning("%s", w)
        self.sources = {s.name: s for s in cfg.sources}
        self.filters = {s.name: SourceFilter(s, self.state_dir) for s in cfg.sources}
        self.retry: dict[str, set[str]] = {}
        self.held: dict[str, list[str]] = {}
        self.last_error: dict[str, str] = {}
        self.stop = threading.Event()
        self._collections_checked: set[str] = set()
        self._model_obj: Any = None
        for s in cfg.sources:
            self.manifest.ensure_source(s.name, str(s.root), s.collection)

    # -- lazily opened parts ---------------------------------------------------------------

    @property
    def cache(self) -> Any:
        """The embedding cache (``embeddings.db``), opened on first use."""
        if self._cache is None:
            from ingestd.store.embedder import EmbeddingCache

            self._cache = EmbeddingCache(
                self.state_dir / "embeddings.db", self.cfg.embedding.cache_max_entries
            )
            self.embedder.cache = self._cache
            self.sentence_embedder.cache = self._cache
        return self._cache

    @property
    def store(self) -> Any:
        """The vector store, opened on first use (imports qdrant-client)."""
        if self._store is None:
            import os

            from ingestd.store.vectors import QdrantStore

            q = self.cfg.qdrant
            if q.url:
                self._store = QdrantStore(
                    url=q.url, api_key=os.environ.get(q.api_key_env), retry_seconds=q.retry_seconds
                )
            else:
                path = q.path or self.state_dir / "qdrant"
                self._store = QdrantStore(path=str(path))
        return self._store

    @property
    def store_open(self) -> bool:
        """Whether the vector store has been opened."""
        return self._store is not None

    def _embed(self, texts: Sequence[str]) -> Any:
        if self._embed_model is None:
            from ingestd.store.embedder import SentenceTransformerEmbedder

            e = self.cfg.embedding
            self._embed_model = SentenceTransformerEmbedder(
                self.model, device=e.device, batch_size=e.batch_size, threads=e.threads
            )
        return self._embed_model(texts)

    def close(self) -> None:
        """Close the store, the cache and the manifest."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        self.manifest.close()

    # -- planning --------------------------------------------------------------------------

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
    ) -> Plan:
        """Compare the files with the manifest.

        Args:
            source: a configured source name.
            paths: relative paths (files or folders) that changed, or ``None`` for a
                scan of the whole source (the mass-deletion guard applies to scans only).
            full: re-hash every file (no stat fast path).
            allow_mass_delete: release deletions the guard would hold.

        Raises:
            KeyError: unknown source.
        """
        plan = Plan(source, scan=paths is None)
        root = Path(self.sources[source].root)
        if not root.is_dir():
            # an unmounted volume is not a deletion of every document: do nothing
            logger.warning("source %s: root %s is missing; nothing synced or deleted", source, root)
            plan.root_missing = True
            return plan
        pending = self.manifest.pending_doc_ids(source)
        known, found = self._observe(source, paths)
        for rel, st in sorted(found.items()):
            self._classify(plan, rel, st, known.get(rel), pending, full=full)
        gone = sorted(p for p in known if p not in found)
        by_hash = {known[p].content_hash: p for p in gone}
        for rel in plan.index:
            if rel not in known and plan.hashes.get(rel) in by_hash:
                plan.moves.append((by_hash.pop(plan.hashes[rel]), rel))
        plan.delete = gone
        if paths is None and not allow_mass_delete:
            self._guard(plan, len(known))
        return plan

    def _observe(
        self, source: str, paths: Iterable[str] | None
    ) -> tuple[dict[str, DocRow], dict[str, FileStat]]:
        """Manifest rows and on-disk stats of the whole source, or of ``paths``.

        A path may be a folder: it covers every document under it, on disk and in the
        manifest (a folder moved out leaves no event for its files).
        """
        flt = self.filters[source]
        if paths is None:
            return self.manifest.documents(source), scan(flt)
        root = Path(self.sources[source].root)
        known: dict[str, DocRow] = {}
        found: dict[str, FileStat] = {}
        for rel in sorted({p.strip("/") for p in paths}):
            known.update(self.manifest.documents(source, prefix=rel))
            full_path = root / rel
            if full_path.is_dir() and not full_path.is_symlink():
                if not flt.ignores_dir(rel):
                    found.update(scan(flt, rel))
            elif flt.accepts(rel):
                st = stat_file(full_path)
                if st is not None:
                    found[rel] = st
        return known, found

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
        rule = self.rules.match(rel)
        if not full and not self._needs_work(doc, st, rule, pending):
            plan.unchanged += 1
            return
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

    def _guard(self, plan: Plan, n_known: int) -> None:
        moved = {o for o, _ in plan.moves}
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

    # -- preparing documents ------------------------------------------------------------------

    def prepare(self, source: str, rel: str, git_commit: str | None = None) -> _Prepared:
        """Read, decode and chunk one file; compute its point ids and payloads.

        Raises:
            _Unreadable: the file vanished or could not be opened (retry later).
        """
        src = self.sources[source]
        path = Path(src.root) / rel
        st = stat_file(path)
        if st is None:
            raise _Unreadable(f"{rel}: vanished before it could be read")
        rule = self.rules.match(rel)
        try:
            if st.size > self.cfg.files.max_bytes:
                return _Prepared(
                    rel,
                    st,
                    "",
                    rule,
                    error=f"file too large ({st.size} bytes > files.max_bytes "
                    f"{self.cfg.files.max_bytes}); skipped",
                )
            data = path.read_bytes()
        except FileNotFoundError:
            raise _Unreadable(f"{rel}: vanished while being read") from None
        except OSError as exc:
            raise _Unreadable(
                f"{rel}: cannot be read ({exc.strerror or exc}); will retry"
            ) from None
        h = content_hash(data)
        prep = _Prepared(rel, st, h, rule)
        try:
            text = decode(data)
        except UndecodableError as exc:
            prep.error = str(exc)
            return prep
        try:
            chunks = rule.chunker.chunk(text)
        except Exception as exc:
            logger.exception("chunker %s failed on %s", rule.name, rel)
            prep.error = f"chunker {rule.name!r} failed: {type(exc).__name__}: {exc}"
            return prep
        prep.chunks = chunks
        prep.hashes = [chunk_hash(c.embed_text) for c in chunks]
        prep.ids = point_ids(source, rel, prep.hashes)
        base = {
            "source": source,
            "path": rel,
            "doc_hash": h,
            "chunker": rule.chunker_name,
            "rule": rule.name,
            "rule_fingerprint": rule.fingerprint,
        }
        for i, c in enumerate(chunks):
            # strategy extras, as JSON types: a server returns lists, never tuples
            p: dict[str, Any] = json.loads(json.dumps(dict(c.meta))) if c.meta else {}
            p.update(base)
            p.update(
                chunk_hash=prep.hashes[i],
                ordinal=i,
                start_char=c.start,
                end_char=c.end,
                start_line=c.start_line,
                end_line=c.end_line,
                n_tokens=c.n_tokens,
                heading_path=list(c.heading_path),
                text=c.text,
            )
            if c.parent is not None:
                p["parent_id"] = prep.ids[c.parent]
            if c.is_parent:
                p["is_parent"] = True
            if git_commit:
                p["git_commit"] = git_commit
            prep.payloads.append(p)
        return prep

    def expected_points(
        self, source: str
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
        """What a from-scratch ingest of the current files would store for ``source``.

        Returns:
            ``(points, docs)``: point id -> payload (provenance keys removed), and
            path -> error (``None`` for documents that chunked fine).
        """
        points: dict[str, dict[str, Any]] = {}
        docs: dict[str, str | None] = {}
        for rel in sorted(scan(self.filters[source])):
            try:
                prep = self.prepare(source, rel)
            except _Unreadable:
                continue
            docs[rel] = prep.error
            for pid, payload in zip(prep.ids, prep.payloads, strict=True):
                points[pid] = strip_provenance(payload)
        return points, docs

    # -- applying -------------------------------------------------------------------------------

    def sync(
        self,
        source: str,
        paths: Iterable[str] | None = None,
        *,
        full: bool = False,
        allow_mass_delete: bool = False,
        progress: Callable[[int, int], None] | None = None,
        between: Callable[[], None] | None = None,
    ) -> SyncResult:
        """Plan and apply.

        Args:
            source: a configured source name.
            paths: changed relative paths, or ``None`` for a scan (see :meth:`plan`).
            full: re-hash every file (no stat fast path).
            allow_mass_delete: release deletions the guard would hold.
            progress: called with (documents done, documents to do) after each batch.
            between: called between write batches (e.g. to serve searches).
        """
        plan = self.plan(source, paths, full=full, allow_mass_delete=allow_mass_delete)
        return self.apply(plan, progress=progress, between=between)

    def apply(
        self,
        plan: Plan,
        *,
        progress: Callable[[int, int], None] | None = None,
        between: Callable[[], None] | None = None,
        force: bool = False,
    ) -> SyncResult:
        """Carry out ``plan``. Stops early (between batches) when :attr:`stop` is set.

        Args:
            plan: from :meth:`plan` (or built by hand, e.g. for a repair).
            progress: called with (documents done, documents to do) after each batch.
            between: called between write batches (e.g. to serve searches).
            force: re-upsert every point of the indexed documents (repair).
        """
        source = plan.source
        res = SyncResult(source, held=list(plan.held), root_missing=plan.root_missing)
        e0, r0 = self.embedder.stats.embedded, self.embedder.stats.reused
        self._index(plan, res, progress, between, force)
        if not self.stop.is_set():
            for rel in plan.delete:
                self._delete(source, rel, res)
            for rel, st in plan.stat_only:
                doc = self.manifest.document(source, rel)
                if doc is not None:
                    self.manifest.update_document(
                        doc.id,
                        size=st.size,
                        mtime_ns=st.mtime_ns,
                        ctime_ns=st.ctime_ns,
                        inode=st.inode,
                    )
        for rel in plan.index:
            if rel not in res.retry:
                self.retry.get(source, set()).discard(rel)
        res.embedded = self.embedder.stats.embedded - e0
        res.reused = self.embedder.stats.reused - r0
        if plan.scan and not plan.root_missing:
            self.manifest.set_held_deletes(source, len(plan.held))
        if paths_complete(plan, res) and not self.stop.is_set():
            self.manifest.set_last_sync(source, self.now())
        return res

    def _index(
        self,
        plan: Plan,
        res: SyncResult,
        progress: Callable[[int, int], None] | None,
        between: Callable[[], None] | None,
        force: bool,
    ) -> None:
        """Prepare and write ``plan.index`` in batches spanning documents."""
        source = plan.source
        git_commit = self._git(self.sources[source]) if plan.index else None
        done, total = 0, len(plan.index)
        batch: list[_Prepared] = []
        new_chunks = 0
        for rel in plan.index:
            if self.stop.is_set():
                break
            try:
                prep = self.prepare(source, rel, git_commit)
            except _Unreadable as exc:
                logger.warning("%s", exc)
                res.retry.append(rel)
                self.retry.setdefault(source, set()).add(rel)
                continue
            batch.append(prep)
            new_chunks += len(prep.ids)
            if len(batch) >= GROUP_DOCS or new_chunks >= GROUP_CHUNKS:
                self._write(source, batch, res, force=force)
                done += len(batch)
                batch, new_chunks = [], 0
                if progress:
                    progress(done, total)
                if between:
                    between()
        if batch:  # prepared before a stop request: finish it
            self._write(source, batch, res, force=force)
            done += len(batch)
            if progress:
                progress(done, total)

    def _ensure_collection(self, collection: str) -> None:
        if collection in self._collections_checked:
            return
        self.manifest.check_collection(
            collection, self.model.name, self.model.fingerprint, self.model.dim
        )
        self.store.ensure_collection(collection, self.model.dim)
        self._collections_checked.add(collection)

    def _vectors_from_store(
        self, source: str, collection: str
    ) -> Callable[[list[str]], dict[str, Any]]:
        def fallback(hashes: list[str]) -> dict[str, Any]:
            import numpy as np

            ids = self.manifest.point_ids_for_hashes(hashes)
            if not ids:
                return {}
            by_id = {pid: h for h, pid in ids.items()}
            out: dict[str, Any] = {}
            try:
                recs = self.store.retrieve(collection, list(by_id), with_vectors=True)
            except Exception:
                logger.debug("vector lookup by chunk hash failed", exc_info=True)
                return {}
            for pid, _payload, vec in recs:
                if vec is not None and not isinstance(vec, dict):
                    out[by_id[pid]] = np.asarray(vec, dtype=np.float32)
            return out

        return fallback

    def _write(self, source: str, batch: list[_Prepared], res: SyncResult, *, force: bool) -> None:
        from ingestd.store.vectors import Point

        collection = self.sources[source].collection
        self._ensure_collection(collection)
        _ = self.cache  # open the cache before the first lookup
        plans = []
        # (a) pending ids, one transaction for the batch
        doc_ids = self.manifest.upsert_documents(source, [p.path for p in batch])
        known_rows = self.manifest.chunks_of_docs(list(doc_ids.values()))
        for prep in batch:
            doc_id = doc_ids[prep.path]
            known = known_rows[doc_id]
            committed = {c.point_id for c in known if not c.pending}
            rows = [
                ChunkRow(pid, h, i, c.start, c.end)
                for i, (pid, h, c) in enumerate(
                    zip(prep.ids, prep.hashes, prep.chunks, strict=True)
                )
            ]
            fresh = [r for r in rows if force or r.point_id not in committed]
            stale = {c.point_id for c in known} - set(prep.ids)
            plans.append((prep, doc_id, rows, fresh, stale))
        self.manifest.add_pending_many({doc_id: fresh for _, doc_id, _, fresh, _ in plans})
        # (b) upsert new points, refresh payload of kept ones
        want = [
            (prep.hashes[r.ordinal], prep.chunks[r.ordinal].embed_text)
            for prep, _, _, fresh, _ in plans
            for r in fresh
        ]
        vectors = (
            self.embedder.vectors(want, self._vectors_from_store(source, collection))
            if want
            else {}
        )
        points: list[Point] = []
        updates: list[tuple[str, dict[str, Any]]] = []
        for prep, _, rows, fresh, _ in plans:
            fresh_ids = {r.point_id for r in fresh}
            for r in rows:
                payload = dict(prep.payloads[r.ordinal])
                if r.point_id in fresh_ids:
                    payload["indexed_at"] = self.now()
                    points.append(Point(r.point_id, vectors[prep.hashes[r.ordinal]], payload))
                else:
                    updates.append((r.point_id, strip_provenance(payload) | _git_of(payload)))
        if points:
            self.store.upsert(collection, points)
        if updates:
            self.store.set_payload(collection, updates)
        # (c) delete stale ids
        stale_ids = [pid for *_, stale in plans for pid in stale]
        if stale_ids:
            self.store.delete(collection, stale_ids)
        # (d) commit, one transaction for the batch
        now = self.now()
        commits = []
        for prep, doc_id, rows, _, _ in plans:
            st = prep.stat
            commits.append(
                (
                    doc_id,
                    rows,
                    {
                        "size": st.size,
                        "mtime_ns": st.mtime_ns,
                        "ctime_ns": st.ctime_ns,
                        "inode": st.inode,
                        "content_hash": prep.content_hash,
                        "rule_fingerprint": prep.rule.fingerprint,
                        "state": "failed" if prep.error else "ok",
                        "error": prep.error,
                        "git_commit": prep.payloads[0].get("git_commit") if prep.payloads else None,
                        "indexed_at": now,
                    },
                )
            )
            if prep.error:
                logger.warning("%s: %s", prep.path, prep.error)
                res.failed += 1
            else:
                res.indexed += 1
        self.manifest.commit_documents(commits)
        res.chunks_written += len(points)
        res.chunks_deleted += len(stale_ids)

    def _delete(self, source: str, rel: str, res: SyncResult) -> None:
        doc = self.manifest.document(source, rel)
        if doc is None:
            return
        ids = [c.point_id for c in self.manifest.chunks(doc.id)]
        if ids:
            collection = self.sources[source].collection
            self._ensure_collection(collection)
            self.store.delete(collection, ids)
        self.manifest.delete_document(doc.id)
        res.deleted += 1
        res.chunks_deleted += len(ids)

    # -- verify -----------------------------------------------------------------------------------

    def verify(self, source: str, *, repair: bool = False) -> VerifyReport:
        """Compare expected points with the manifest and the store; optionally repair.

        Repair deletes orphans by id, re-writes documents with missing or stale points
        (vectors from the cache when known), and re-records drifted manifest rows.
        """
        rep = VerifyReport(source)
        expected, docs = self.expected_points(source)
        rep.expected = len(expected)
        collection = self.sources[source].collection
        stored: dict[str, dict[str, Any]] = {}
        if self.store.has_collection(collection):
            stored = {pid: strip_provenance(p) for pid, p in self.store.scroll(collection, source)}
        known_docs = self.manifest.documents(source)
        rep.missing = sorted(set(expected) - set(stored))
        rep.orphans = sorted(set(stored) - set(expected))
        rep.stale = sorted(
            pid for pid in set(expected) & set(stored) if expected[pid] != stored[pid]
        )
        expected_by_path: dict[str, set[str]] = {}
        for pid, p in expected.items():
            expected_by_path.setdefault(p["path"], set()).add(pid)
        rows_by_doc: dict[int, set[str]] = {}
        pending_docs: set[int] = set()
        for pid, doc_id, pending in self.manifest.point_rows(source):
            rows_by_doc.setdefault(doc_id, set()).add(pid)
            if pending:
                pending_docs.add(doc_id)
        drift = []
        for rel in sorted(set(docs) | set(known_docs)):
            doc = known_docs.get(rel)
            if doc is None or rel not in docs:
                drift.append(rel)
                continue
            have = rows_by_doc.get(doc.id, set())
            if have != expected_by_path.get(rel, set()) or doc.id in pending_docs:
                drift.append(rel)
            elif (doc.state == "failed") != (docs[rel] is not None):
                drift.append(rel)
        rep.manifest = drift
        if repair and not rep.clean:
            self._repair(source, rep, expected)
            return self.verify(source, repair=False)
        return rep

    def _repair(self, source: str, rep: VerifyReport, expected: dict[str, dict[str, Any]]) -> None:
        collection = self.sources[source].collection
        if rep.orphans:
            self._ensure_collection(collection)
            self.store.delete(collection, rep.orphans)
        paths = set(rep.manifest)
        for pid in rep.missing + rep.stale:
            paths.add(expected[pid]["path"])
        on_disk = scan(self.filters[source])
        plan = Plan(source)
        for rel in sorted(paths):
            if rel in on_disk:
                plan.index.append(rel)
            else:
                plan.delete.append(rel)
        res = self.apply(plan, force=True)
        logger.info(
            "repaired source %s: %d documents re-written, %d deleted, %d orphans removed",
            source,
            res.indexed + res.failed,
            res.deleted,
            len(rep.orphans),
        )

    # -- reporting -----------------------------------------------------------------------------

    def forget(self, source: str) -> int:
        """Delete every point and row of ``source``; returns the number of points deleted."""
        rows = self.manifest.chunks_of_source(source)
        collection = None
        for s in self.manifest.sources():
            if s["name"] == source:
                collection = s["collection"]
        if rows and collection and self.store.has_collection(collection):
            self.store.delete(collection, list(rows))
        self.manifest.forget_source(source)
        return len(rows)


def _stat_of(doc: DocRow) -> FileStat:
    return FileStat(doc.size, doc.mtime_ns, doc.ctime_ns, doc.inode)


def strip_provenance(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` without the provenance keys (``indexed_at``, ``git_commit``)."""
    return {k: v for k, v in payload.items() if k not in PROVENANCE_KEYS}


def _git_of(payload: dict[str, Any]) -> dict[str, Any]:
    return {"git_commit": payload["git_commit"]} if "git_commit" in payload else {}


def paths_complete(plan: Plan, res: SyncResult) -> bool:
    """Whether a sync applied everything it planned (nothing held, missing or to retry)."""
    return not res.retry and not plan.held and not plan.root_missing
