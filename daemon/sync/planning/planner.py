"""Planning a sync: compare a source's files with the manifest.

The fast path (DESIGN.md point 3): a document whose stat (size, mtime, ctime, inode)
and rule fingerprint equal the manifest's is skipped unread; one whose bytes hash equal
only gets its stat recorded. Paths that disappeared are deletions, or moves when a new
path has the same content. A document of a version whose recorded commit is on the
version's history no more (its branch was force-pushed, its file unchanged) is written
again: its points then name a commit of the version, with their stored vectors. A scan
of a whole source goes through the mass-deletion guard, which holds the deletions of a
scan that would delete too much (a vanished tree).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Iterable

from ingestd.daemon.sources.base import Fetched, FileStat, Scan, display_path, name_problem
from ingestd.daemon.sources.versions import commit_of, commits_off, is_versioned, split_document
from ingestd.daemon.sync.context import SyncContext
from ingestd.daemon.sync.preparing.rules import Rule
from ingestd.daemon.sync.types import Plan
from ingestd.store.manifest.manifest import DocRow
from ingestd.store.vectors.ids import content_hash

__all__ = ["Planner", "stat_of"]

logger = logging.getLogger(__name__)


def stat_of(doc: DocRow) -> FileStat:
    """The stat the manifest records for a document."""
    return FileStat(doc.size, doc.mtime_ns, doc.ctime_ns, doc.inode)


class Planner:
    """Plans the syncs of the configured sources.

    Args:
        ctx: the engine's context (sources, filters, manifest, profiles, failures).
        check_store: compares the store with the manifest before a scan, repairs what
            differs, and returns the repairs' counts (see
            :func:`ingestd.daemon.sync.healing.repair.check_store`).

    Attributes:
        roots_missing: sources whose root was missing at the last look.
        matching_nothing: sources whose last scan found no file its include globs
            match (a mistyped glob, the wrong root): warned about once, shown in
            ``status``.
    """

    def __init__(self, ctx: SyncContext, check_store: Callable[[str], dict[str, int]]) -> None:
        self.ctx = ctx
        self.check_store = check_store
        self.roots_missing: set[str] = set()
        self.matching_nothing: set[str] = set()

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

        A scan first checks the store against the manifest (a count, and a repair when
        they differ), so that it plans from a manifest that tells the truth about the
        store.

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
        src = self.ctx.source(source)
        missing = src.missing()
        if missing is not None:
            # an unmounted volume is not a deletion of every document: do nothing
            if source not in self.roots_missing:
                # a repository before its first fetch is no error: it is on its way
                on_its_way = isinstance(src, Fetched) and src.first_fetch_pending()
                level = logging.INFO if on_its_way else logging.ERROR
                logger.log(level, "source %s: %s; nothing synced or deleted", source, missing)
            self.roots_missing.add(source)
            plan.root_missing = True
            plan.why_missing = missing
            return plan
        if source in self.roots_missing:
            self.roots_missing.discard(source)
            if isinstance(src, Fetched):  # fetched (first, or again): never its mirror's path
                logger.info("source %s: %s is fetched; syncing", source, src.origin())
            else:
                logger.info("source %s: root %s is back", source, src.root)
        if paths is None and check_store:
            plan.repaired = self.check_store(source)
        pending = self.ctx.manifest.pending_doc_ids(source)
        known, found = self._observe(source, paths)
        if paths is None:
            self._note_matches(source, found)
        if paths is not None:
            plan.scope = sorted({p.strip("/") for p in paths})
        scope = None if paths is None else plan.scope
        new_links = self.ctx.links.observe(src, found, scope)
        if new_links and scope is not None:
            self._track_links(new_links)
        off = self._commits_off(source, known)
        for rel, st in sorted(found.items()):
            doc = known.get(rel)
            moved = (
                bool(off)
                and doc is not None
                and (split_document(src, rel)[0], doc.git_commit) in off
            )
            self._classify(plan, rel, st, doc, pending, full=full, rewrite=moved)
            self.ctx.checkpoints.heartbeat()
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

    def _commits_off(self, source: str, known: dict[str, DocRow]) -> set[tuple[str, str | None]]:
        """``(version, commit)`` of the documents whose commit is off their version now.

        A versioned source's documents record the commit they were written at; after a
        version's branch is rewritten, those its new commit does not descend from name a
        commit the version no longer has (asked once per version, of the source).
        """
        src = self.ctx.source(source)
        if not is_versioned(src):
            return set()
        by_version: dict[str, set[str]] = {}
        for rel, doc in known.items():
            version = split_document(src, rel)[0]
            if version is not None and doc.git_commit and doc.state == "ok":
                by_version.setdefault(version, set()).add(doc.git_commit)
        off: set[tuple[str, str | None]] = set()
        for version, commits in sorted(by_version.items()):
            tip = commit_of(src, version)
            if tip is None or commits <= {tip}:
                continue
            try:
                off.update((version, c) for c in commits_off(src, version, commits))
            except OSError as exc:  # git failed: the commits stay as they are until next time
                logger.warning(
                    "source %s: cannot check the commits of %s: %s", source, version, exc
                )
        return off

    def _track_links(self, inodes: set[int]) -> None:
        """Make the indexed names of ``inodes`` (hard links seen first in a change) known.

        A scan of a source sees each of its names; a change sees only the name that
        changed, so the other ones come from the manifest (any configured source).
        """
        by_source: dict[str, dict[str, FileStat]] = {}
        for doc in self.ctx.manifest.documents_with_inodes(inodes):
            if doc.source in self.ctx.sources:
                by_source.setdefault(doc.source, {})[doc.path] = stat_of(doc)
        for source, docs in by_source.items():
            self.ctx.links.track(self.ctx.source(source), docs)

    def _note_matches(self, source: str, found: Scan) -> None:
        """Warn (once) when a scan of ``source`` found no file its include globs match."""
        if found or found.skipped or found.unreadable:
            self.matching_nothing.discard(source)
            return
        if source not in self.matching_nothing:
            s = self.ctx.sources[source]
            src = self.ctx.source(source)
            if isinstance(src, Fetched):
                logger.warning("source %s: %s", source, src.empty_note())
                self.matching_nothing.add(source)
                return
            logger.warning(
                "source %s: no file under %s matches its include globs (%s); check the "
                "source's root, include and exclude globs (and .gitignore files)",
                source,
                s.root,
                ", ".join(s.include) or "none",
            )
        self.matching_nothing.add(source)

    def _observe(self, source: str, paths: Iterable[str] | None) -> tuple[dict[str, DocRow], Scan]:
        """Manifest rows and on-disk stats of the whole source, or of ``paths``.

        A path may be a folder: it covers every document under it, on disk and in the
        manifest (a folder moved out leaves no event for its files). What the walk
        skipped (names that are not UTF-8, unreadable folders) goes to the failures.
        """
        ctx = self.ctx
        src = ctx.source(source)
        if paths is None:
            found = src.scan()
            ctx.failures.note_skipped(source, None, found)
            return ctx.manifest.documents(source), found
        known: dict[str, DocRow] = {}
        found = Scan()
        scope = sorted({p.strip("/") for p in paths})
        for rel in scope:
            is_dir = src.is_folder(rel)
            problem = name_problem(rel)
            if problem is not None:  # never a manifest key (see walk.name_problem)
                if is_dir and not src.ignores_folder(rel):
                    found.skipped[display_path(rel) + "/"] = (
                        f"folder {problem}: nothing in it is indexed"
                    )
                elif not is_dir and src.accepts(rel) and src.stat(rel) is not None:
                    found.skipped[display_path(rel)] = f"file {problem}; skipped"
                continue
            known.update(ctx.manifest.documents(source, prefix=rel))
            if is_dir:
                if not src.ignores_folder(rel):
                    sub = src.scan(rel)
                    found.update(sub)
                    found.skipped.update(sub.skipped)
                    found.unreadable.update(sub.unreadable)
            elif src.accepts(rel):
                st = src.stat(rel)
                if st is not None:
                    found[rel] = st
        ctx.failures.note_skipped(source, scope, found)
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
        rewrite: bool = False,
    ) -> None:
        """Put one present file into ``plan``: unchanged, stat-only or to index.

        ``rewrite``: index it even when its bytes are unchanged (its commit moved off).
        """
        rule = self.ctx.rule_of(plan.source, rel)
        if not full and not rewrite and not _needs_work(doc, st, rule, pending):
            plan.unchanged += 1
            return
        plan.sizes[rel] = st.size
        try:
            data = self.ctx.source(plan.source).read(rel)
        except OSError:
            plan.index.append(rel)  # read again when applied; retried if it fails
            return
        h = content_hash(data)
        plan.hashes[rel] = h
        if (
            doc is not None
            and not rewrite
            and doc.state != "new"
            and not (full and doc.state == "failed")  # the file policy may have changed
            and doc.id not in pending
            and doc.content_hash == h
            and doc.rule_fingerprint == rule.fingerprint
        ):
            if stat_of(doc) != st:
                plan.stat_only.append((rel, st))
            else:
                plan.unchanged += 1
            return
        plan.index.append(rel)
        if doc is not None:
            plan.updates.add(rel)

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
        leaves exactly those; finishing it deletes nothing that is not elsewhere (in
        the same version, for a versioned source: a version that vanished is a
        deletion however much of its text another version holds). Nor are documents
        never committed (state ``new``: a first write interrupted): their
        deletion only clears what that write left.

        A versioned source is guarded version by version: the share is of the
        documents of the version that loses them. A version whose ref is gone (a
        deleted tag, a branch taken out of ``refs``) is what its owner asked for: its
        documents are deleted, not held, and the plan says so
        (:attr:`~ingestd.daemon.sync.types.Plan.removed_versions`), unless the
        source has no version left at all (a repository that lost every ref looks
        like an accident).
        """
        src = self.ctx.source(plan.source)

        def version(rel: str) -> str | None:  # a move stays within its version
            return split_document(src, rel)[0]

        moved = {o for o, n in plan.moves if version(o) == version(n)}
        kept = {
            (version(rel), doc.content_hash)
            for rel, doc in known.items()
            if rel in found and doc.state != "new" and doc.id not in pending
        }
        moved.update(
            p
            for p in plan.delete
            if known[p].state == "new" or (version(p), known[p].content_hash) in kept
        )
        real = [p for p in plan.delete if p not in moved]
        live = _live_versions(src)
        gone_versions: dict[str, int] = {}
        by_version: dict[str | None, list[str]] = {}
        for p in real:
            v = version(p)
            if v is not None and live and v not in live:
                gone_versions[v] = gone_versions.get(v, 0) + 1
            else:
                by_version.setdefault(v, []).append(p)
        sizes: dict[str | None, int] = {}
        for rel in known:
            v = version(rel)
            sizes[v] = sizes.get(v, 0) + 1
        md = self.ctx.cfg.mass_delete
        held = [
            p
            for v, paths in sorted(by_version.items(), key=lambda kv: str(kv[0]))
            if len(paths) > md.min_count and len(paths) > md.max_share * sizes.get(v, 0)
            for p in paths
        ]
        for v, n in sorted(gone_versions.items()):
            logger.info(
                "source %s: version %s is gone from the repository (its ref was deleted or "
                "left out of refs): deleting its %d documents",
                plan.source,
                v,
                n,
            )
        plan.removed_versions = gone_versions
        if held:
            hint = shlex.join(
                ["ingestd", "resync", "--state-dir", str(self.ctx.state_dir)]
                + ["--allow-mass-delete", plan.source]
            )
            logger.warning(
                "source %s: holding %d deletions of %d documents (over %.0f%% and %d of %s); "
                "run `%s` to apply them",
                plan.source,
                len(held),
                len(known),
                md.max_share * 100,
                md.min_count,
                "a version's documents" if live else "its documents",
                hint,
            )
            plan.held = held
            plan.delete = [p for p in plan.delete if p not in set(held)]
            self.ctx.held[plan.source] = held
        else:
            self.ctx.held.pop(plan.source, None)


def _live_versions(src: object) -> set[str]:
    """The versions a versioned source holds now (its refs), else an empty set."""
    return set(src.versions()) if is_versioned(src) else set()


def _needs_work(doc: DocRow | None, st: FileStat, rule: Rule, pending: set[int]) -> bool:
    return (
        doc is None
        or doc.state == "new"
        or doc.id in pending
        or doc.rule_fingerprint != rule.fingerprint
        or stat_of(doc) != st
    )
