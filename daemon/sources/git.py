"""The git source: a repository's branches and tags, each a version, read from objects.

A ``kind: git`` source names a repository (``url``: a local path, ``file://``,
``https://``, ``ssh://``) and the refs to index (``refs``: branch names and tag globs
such as ``v*``; ``max_tags``: the newest tags only). :meth:`GitSource.refresh` fetches
them into a bare mirror in the state dir (``git/<name>-<digest>.git``, one per source
name: :func:`~ingestd.daemon.sources.mirror.mirror_dir`) with the hardened
``git`` of :mod:`~ingestd.daemon.sources.gitcmd`; no working tree is ever checked out.

Each selected ref is a *version* of the source. A document of the source is a file of
a version, named ``<version>:<path>`` (``:`` cannot occur in a ref name, so the name
splits back without ambiguity; :func:`~ingestd.daemon.sources.versions.split_document`).
Its identity (:class:`~ingestd.daemon.sources.base.FileStat`) is its blob id, so a
file whose blob did not change between two commits is never read again: listing a
commit costs one ``git ls-tree`` (or, when the commit indexed before is known, one
``git diff-tree`` of the two commits applied to its listing), and only changed blobs
are read, with ``git cat-file``. The planner compares with the manifest (what is
indexed), so a force-push or a moved tag is a diff like any other, and a ref that
vanished takes its documents with it (the mass-deletion guard applies). A document
records the commit it was read at; one whose commit a rewritten branch no longer holds
(:meth:`GitSource.commits_off`) is written again by the planner.

Skipped with a note (``status`` lists them): submodule entries, symbolic links, and
Git LFS pointer files (the file itself is not fetched). A repository whose objects
exceed ``max_repo_bytes`` is refused. A fetch that fails (an unreachable server)
deletes nothing: the mirror keeps the refs of the last fetch, ``status`` says since
when fetches fail, and the next try comes after a back-off (5 s doubling, at most
``poll_s``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ingestd.daemon.sources.base import (
    DRY_RUN_FIRST_FETCH,
    ChangeMode,
    Fetched,
    FileStat,
    Scan,
    Versioned,
    display_path,
    name_problem,
)
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.gitcmd import (
    GitError,
    GitRunner,
    credential_header,
    diffed_entries,
    lfs_pointers,
    not_ancestors,
    output_lines,
    redact_url,
    repo_bytes,
    selected_refs,
    split_login,
    tree_entries,
)
from ingestd.daemon.sources.gitconfig import GitSourceConfig
from ingestd.daemon.sources.mirror import (
    STATE_FILE,
    adopt_legacy_mirror,
    mirror_dir,
    mirror_status,
    repo_empty_note,
)
from ingestd.daemon.sources.versions import VERSION_SEP, split_document

__all__ = ["GitSource", "RefState", "mirror_dir", "mirror_status"]

logger = logging.getLogger(__name__)

#: Blobs up to this size (bytes) are checked for being an LFS pointer (a pointer is ~130).
LFS_POINTER_MAX = 1024
#: Most bytes of recently read blobs kept (a document is read to be hashed, then chunked).
BLOB_CACHE_BYTES = 8 * 1024 * 1024
#: First delay after a failed fetch, seconds; doubled at every further failure.
RETRY_FIRST_S = 5.0
_HEADS_TAGS = ("refs/heads/*", "refs/tags/*")


@dataclass(frozen=True)
class _Entry:
    oid: str
    size: int


@dataclass(frozen=True)
class RefState:
    """One indexed ref: its version name, full ref name and commit id."""

    version: str
    ref: str
    commit: str


class GitSource(Fetched, Versioned):
    """The versions of a git repository, read from a bare mirror (a polled ``Source``).

    Its powers: it is :class:`~ingestd.daemon.sources.base.Fetched` (from its
    repository) and :class:`~ingestd.daemon.sources.base.Versioned` (each ref a version).

    Args:
        config: the source's configuration (``url``, ``refs``, ``max_tags``, ``poll_s``,
            ``credentials``, ``max_repo_bytes``, ``include``/``exclude``).
        state_dir: ingestd's state dir (the mirror lives in it).

    Raises:
        ValueError: no state dir was given.
    """

    kind: ClassVar[str] = "git"
    changes: ChangeMode = "polled"

    def __init__(self, config: GitSourceConfig, state_dir: Path | None = None) -> None:
        if state_dir is None:
            raise ValueError("a git source needs a state dir for its mirror")
        self.name = config.name
        self.config = config
        self.url = str(config.url or "")
        # a credential in the URL's user info goes to git through its environment
        self._remote, self._login = split_login(self.url)
        self.root = adopt_legacy_mirror(Path(state_dir), config.name)
        self.filter = SourceFilter(config.model_copy(update={"gitignore": False}))
        self._lock = threading.Lock()  # one fetch at a time
        self._listings: dict[str, tuple[dict[str, _Entry], dict[str, str]]] = {}
        self._raw: dict[str, dict[str, tuple[str, str, int]]] = {}  # commit -> path -> entry
        self._listed: dict[str, str] = {}  # version -> the commit listed last
        self._lfs: dict[str, bool] = {}
        # the blobs read last: a sync reads a changed document twice (to hash it, then
        # to chunk it), and versions share blobs
        self._blobs: dict[str, bytes] = {}
        #: blobs read from git so far (the others came from the recent ones)
        self.blobs_read = 0
        self._versions: dict[str, RefState] | None = None
        self._failures = int(self.fetch_state().get("failures") or 0)  # in a row

    def __repr__(self) -> str:
        return f"GitSource(name={self.name!r}, url={redact_url(self.url)!r})"

    # -- fetching -------------------------------------------------------------------------

    def _runner(self) -> GitRunner:
        creds = self.config.credentials
        header = None
        secrets: list[str] = []
        if creds is not None and creds.token_env:
            header = credential_header(os.environ, creds.username_env, creds.token_env)
            secrets = [os.environ.get(creds.token_env, "")]
        return GitRunner(self.root, header=header, login=self._login, secrets=secrets)

    @property
    def _state_file(self) -> Path:
        return self.root / STATE_FILE

    def fetch_state(self) -> dict[str, Any]:
        """What the last fetches did: ``fetched_at``, ``failing_since``, ``error``, ``failures``."""
        try:
            data = json.loads(self._state_file.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_state(self, **update: Any) -> None:
        state = {**self.fetch_state(), **update, "url": redact_url(self.url)}
        tmp = self._state_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self._state_file)

    @property
    def poll_s(self) -> float:
        """Seconds until the next fetch: ``poll_s``, or the back-off while fetches fail."""
        failures = self._failures
        if not failures:
            return float(self.config.poll_s)
        return float(min(self.config.poll_s, RETRY_FIRST_S * 2 ** (failures - 1)))

    def refresh(self) -> bool:
        """Fetch the configured refs into the mirror; whether any ref moved, came or went.

        Raises:
            GitError: the fetch failed (recorded: ``status`` shows it and since when);
                the mirror keeps the refs of the last good fetch.
        """
        with self._lock:
            before = {v: r.commit for v, r in self.versions().items()}
            try:
                self._fetch()
            except GitError as exc:
                st = self.fetch_state()
                self._failures += 1
                if self.root.is_dir():
                    self._write_state(
                        failing_since=st.get("failing_since") or time.time(),
                        error=str(exc),
                        failures=int(st.get("failures") or 0) + 1,
                    )
                logger.warning("source %s: cannot fetch %s: %s", self.name, self.origin(), exc)
                raise
            self._versions = None
            self._failures = 0
            after = {v: r.commit for v, r in self.versions().items()}
            self._write_state(
                fetched_at=time.time(),
                failing_since=None,
                error=None,
                failures=0,
                refused=None,
                refs=[
                    {"version": r.version, "ref": r.ref, "commit": r.commit}
                    for r in sorted(self.versions().values(), key=lambda r: r.version)
                ],
            )
            return before != after

    def _fetch(self) -> None:
        fresh = not (self.root / "HEAD").is_file()
        if fresh:
            self.root.parent.mkdir(exist_ok=True, mode=0o700)
            self.root.mkdir(exist_ok=True, mode=0o700)
            self._runner().run("init", "--bare", "-q")
        home = self.root / "ingestd-home" / "no-hooks"
        home.parent.mkdir(exist_ok=True, mode=0o700)
        home.mkdir(exist_ok=True, mode=0o700)
        git = self._runner()
        remote = self._selected(git.run("ls-remote", "--refs", "--", self._remote, *_HEADS_TAGS))
        if remote:
            specs = [f"+{ref}:{ref}" for ref in sorted(remote)]
            git.run(
                "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
                "--no-auto-gc", "--", self._remote, *specs,
            )  # fmt: skip
        keep = set(remote)
        tags = [r for r in keep if r.startswith("refs/tags/")]
        limit = self.config.max_tags
        if limit is not None and len(tags) > limit:
            newest = output_lines(
                git.run("for-each-ref", "--sort=-creatordate", "--format=%(refname)", *tags)
            )
            keep -= set(newest[limit:])
        for ref in output_lines(
            git.run("for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags")
        ):
            if ref not in keep:
                git.run("update-ref", "-d", ref)
        size = repo_bytes(git)
        bound = self.config.max_repo_bytes
        if size > bound:
            for ref in keep:
                git.run("update-ref", "-d", ref)
            shutil.rmtree(self.root / "objects", ignore_errors=True)
            shutil.rmtree(self.root, ignore_errors=True)
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._write_state(
                refused=f"the repository holds {size} bytes of objects, over "
                f"max_repo_bytes {bound}; it is not indexed (raise max_repo_bytes to allow it)"
            )
            raise GitError(self.fetch_state()["refused"])

    def _selected(self, listing: bytes) -> dict[str, str]:
        """The remote refs the config selects: full ref name -> commit (``ls-remote`` output)."""
        return selected_refs(listing, self.config.refs)

    # -- the versions -----------------------------------------------------------------------

    def versions(self) -> dict[str, RefState]:
        """The versions in the mirror now: version name -> :class:`RefState` (tags peeled)."""
        if self._versions is not None:
            return self._versions
        if not (self.root / "HEAD").is_file():
            return {}
        fmt = "%(refname)%09%(objectname)%09%(*objectname)"
        out: dict[str, RefState] = {}
        try:
            raw = self._runner().run("for-each-ref", f"--format={fmt}", "refs/heads", "refs/tags")
        except GitError:
            return {}
        for line in output_lines(raw):
            ref, oid, peeled = (line.split("\t") + ["", ""])[:3]
            version = ref.split("/", 2)[2]
            if version in out and ref.startswith("refs/tags/"):
                continue  # a branch and a tag of one name: the branch
            out[version] = RefState(version, ref, peeled or oid)
        self._versions = out
        return out

    def commit_of(self, version: str) -> str | None:
        """The commit version ``version`` is at, or ``None`` when it is not indexed."""
        r = self.versions().get(version)
        return r.commit if r else None

    def commits_off(self, version: str, commits: Iterable[str]) -> set[str]:
        """Those of ``commits`` that are neither ``version``'s commit nor an ancestor of it.

        Raises:
            GitError: ``git`` failed.
        """
        tip = self.commit_of(version)
        wanted = set(commits) - {tip}
        if tip is None or not wanted:
            return wanted
        return not_ancestors(self._runner(), tip, wanted)

    def _listing(
        self, commit: str, base: str | None = None
    ) -> tuple[dict[str, _Entry], dict[str, str]]:
        """The documents of ``commit``: path -> blob, and the entries skipped -> why.

        With ``base``, a commit listed before, the listing is ``base``'s with the diff
        of the two commits applied (``git diff-tree``: only the changed paths).
        """
        cached = self._listings.get(commit)
        if cached is not None:
            return cached
        git = self._runner()
        before = self._raw.get(base) if base else None
        if before is not None and base is not None:
            raw = diffed_entries(git, before, base, commit, self.filter.accepts)
        else:
            raw = tree_entries(git, commit, self.filter.accepts)
        files: dict[str, _Entry] = {}
        skipped: dict[str, str] = {}
        for path, (mode, oid, size) in raw.items():
            if name_problem(path) is not None:
                skipped[display_path(path)] = "name is not valid UTF-8"
            elif mode == "160000":
                skipped[path] = "a submodule; its repository is not fetched"
            elif mode == "120000":
                skipped[path] = "a symbolic link; skipped"
            else:
                files[path] = _Entry(oid, size)
        small = {e.oid for e in files.values() if e.size <= LFS_POINTER_MAX} - set(self._lfs)
        if small:
            self._lfs.update(lfs_pointers(git, sorted(small)))
        for path, e in list(files.items()):
            if self._lfs.get(e.oid):
                del files[path]
                skipped[path] = "a Git LFS pointer; the file it points to is not fetched"
        if len(self._listings) > 64:
            self._listings.clear()
            self._raw.clear()
        self._listings[commit] = (files, skipped)
        self._raw[commit] = raw
        return files, skipped

    def _entry(self, rel: str) -> _Entry | None:
        version, path = split_document(self, rel)
        commit = self.commit_of(version or "")
        if commit is None:
            return None
        try:
            return self._listing(commit)[0].get(path)
        except GitError:
            return None

    # -- the Source interface -----------------------------------------------------------------

    def missing(self) -> str | None:
        """Why nothing can be listed now (never fetched, refused), else ``None``."""
        self._versions = None  # a scan reads the refs afresh
        st = self.fetch_state()
        if st.get("refused"):
            return str(st["refused"])
        if not (self.root / "HEAD").is_file() or not st.get("fetched_at"):
            why = f" ({st['error']})" if st.get("error") else ""
            return f"repository {redact_url(self.url)} is not fetched yet{why}"
        return None

    def first_fetch_pending(self) -> bool:
        """Whether the repository was never fetched and no fetch has failed yet."""
        st = self.fetch_state()
        return not st.get("fetched_at") and not st.get("error") and not st.get("refused")

    def origin(self) -> str:
        """The repository's URL, without user info."""
        return redact_url(self.url)

    def empty_note(self) -> str:
        """Which versions hold no file the include globs match (:func:`repo_empty_note`)."""
        c = self.config
        return repo_empty_note(self.origin(), sorted(self.versions()), c.refs, c.include)

    def dry_run(self) -> dict[str, Any]:
        """What a dry run says of the repository before a fetch: what ``git ls-remote`` lists.

        Returns ``remote_ok`` and ``remote_versions`` (version -> commit) when refs are
        selected; fetches and writes nothing.
        """
        url = redact_url(self.url)
        if self.fetch_state().get("refused"):
            return {"dry_run_note": str(self.fetch_state()["refused"])}
        try:
            listing = self._runner().run("ls-remote", "--refs", "--", self._remote, *_HEADS_TAGS)
        except GitError as exc:
            return {"dry_run_note": f"repository {url} cannot be listed: {exc}"}
        versions = {ref.split("/", 2)[2]: oid for ref, oid in self._selected(listing).items()}
        if not versions:
            refs = ", ".join(self.config.refs)
            why = f"has no branch or tag that refs [{refs}] selects"
            return {"dry_run_note": f"repository {url} {why}"}
        note = f"repository {url} answers; {len(versions)} version(s) to index: "
        return {
            "remote_ok": True,
            "remote_versions": versions,
            "dry_run_note": note + ", ".join(sorted(versions)) + ". " + DRY_RUN_FIRST_FETCH,
        }

    def scan(self, under: str = "") -> Scan:
        """Every document of every version (or of ``under``: a version, or a document prefix)."""
        out = Scan()
        for version, r in sorted(self.versions().items()):
            prefix = version + VERSION_SEP
            if under and not (
                under == version or prefix.startswith(under) or under.startswith(prefix)
            ):
                continue
            try:
                files, skipped = self._listing(r.commit, self._listed.get(version))
                self._listed[version] = r.commit
            except GitError as exc:
                out.unreadable[prefix] = str(exc)
                continue
            for path, e in files.items():
                rel = prefix + path
                if (
                    not under
                    or under == version
                    or rel == under
                    or rel.startswith(under.rstrip("/") + "/")
                ):
                    out[rel] = _stat(e)
            for path, why in skipped.items():
                out.skipped[prefix + path] = why
        return out

    def is_folder(self, rel: str) -> bool:
        """Whether ``rel`` is a version or a folder of one."""
        if rel in self.versions():
            return True
        version, path = split_document(self, rel)
        commit = self.commit_of(version or "")
        if commit is None or not path:
            return False
        return any(p.startswith(path.rstrip("/") + "/") for p in self._listing(commit)[0])

    def stat(self, rel: str) -> FileStat | None:
        """The identity of document ``rel`` (its blob id and size), or ``None``."""
        e = self._entry(rel)
        return _stat(e) if e else None

    def accepts(self, rel: str) -> bool:
        """Whether ``rel`` would be a document (its path within the version passes the filter)."""
        version, path = split_document(self, rel)
        return version is not None and self.filter.accepts(path)

    def ignores_folder(self, rel: str) -> bool:
        """Whether folder ``rel`` of a version is left out by the filter."""
        _, path = split_document(self, rel)
        return bool(path) and self.filter.ignores_dir(path)

    def read(self, rel: str) -> bytes:
        """The bytes of document ``rel`` (its blob).

        Raises:
            FileNotFoundError: no such document in the version's commit.
            OSError: ``git`` failed to read it.
        """
        e = self._entry(rel)
        if e is None:
            raise FileNotFoundError(rel)
        data = self._blobs.pop(e.oid, None)
        if data is None:
            data = self._runner().run("cat-file", "blob", e.oid)
            self.blobs_read += 1
        self._blobs[e.oid] = data  # the most recent last
        while len(self._blobs) > 1 and sum(map(len, self._blobs.values())) > BLOB_CACHE_BYTES:
            del self._blobs[next(iter(self._blobs))]
        return data

    def revision(self) -> str | None:
        """``None``: each version has its own commit (:meth:`commit_of`)."""
        return None


def _stat(e: _Entry) -> FileStat:
    # a blob id in the fields the fast path compares: same blob, same "stat"
    return FileStat(e.size, int(e.oid[:15], 16), int(e.oid[15:30], 16), 0)
