"""The git source against real git: refs as versions, moving refs, servers that go away.

Every repository is made at test time from the real commits of the rust-book history
(``../shared/corpora/history``, :mod:`tests.gitrepos`). After every change the store
must equal a from-scratch ingest of the same refs (ids and payloads), ``verify`` must
be clean, and a search filtered to a version must return that version's text only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.commands.query.search import search
from ingestd.daemon.commands.status import status_of
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources.git import GitSource
from ingestd.daemon.sources.gitcmd import GitError
from ingestd.daemon.sources.versions import payload_versions, version_view
from ingestd.daemon.sync.types import SyncResult
from tests.gitrepos import HistoryRepo, git
from tests.gitserver import GitDaemon, HttpBackend
from tests.helpers import fake_vectors, store_snapshot, without_provenance


def _config(state: Path, url: str, refs: tuple[str, ...] = ("main", "v*"), **extra: Any) -> Any:
    source = {"kind": "git", "name": "book", "url": url, "refs": list(refs), **extra}
    top = {k: extra.pop(k) for k in list(extra) if k in ("mass_delete",)}
    source = {k: v for k, v in source.items() if k not in top}
    return load_config(None, overrides={"state_dir": str(state), "sources": [source], **top})


def _sync(
    state: Path,
    url: str,
    allow_mass_delete: bool = False,
    reads: list[str] | None = None,
    check: bool = True,
    **kw: Any,
) -> SyncResult:
    """Fetch and sync the ``book`` source in a fresh engine; ``verify`` must be clean.

    ``reads``: filled with the documents the sync read (before the verify).
    """
    eng = Engine(_config(state, url, **kw), state, embed_model=fake_vectors)
    try:
        src = eng.context.source("book")
        assert isinstance(src, GitSource)
        src.refresh()
        if reads is not None:
            real = src.read
            src.read = lambda rel: reads.append(rel) or real(rel)  # type: ignore[method-assign]
        res = eng.sync("book", allow_mass_delete=allow_mass_delete)
        if reads is not None:
            del src.read
        assert eng.verify("book").clean or not check
        return res
    finally:
        eng.close()


def _scratch(tmp: Path, url: str, **kw: Any) -> dict[str, dict[str, Any]]:
    """A from-scratch ingest of the same refs into a state dir of its own."""
    state = tmp / f"scratch-{len(list(tmp.glob('scratch-*')))}"
    _sync(state, url, allow_mass_delete=True, **kw)
    return without_provenance(store_snapshot(state))


def _manifest_keys(state: Path) -> list[str]:
    """The document keys (``version:path``) the manifest of ``state`` holds for ``book``."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(state / "manifest.db")) as db:
        rows = db.execute("SELECT path FROM documents WHERE source = 'book'").fetchall()
    return [str(r[0]) for r in rows]


def _versions(points: dict[str, dict[str, Any]]) -> Counter[str]:
    """Points per version (a point versions share counts for each of them)."""
    return Counter(v for p in points.values() for v in payload_versions(p))


def _assert_is_versions_text(
    points: dict[str, dict[str, Any]], repo: HistoryRepo, refs: dict[str, str]
) -> None:
    """Every point's text is in its file at its version; every file of it has points."""
    for version, ref in refs.items():
        files = repo.snapshot(ref)
        mine = [version_view(p, version) for p in points.values() if version in payload_versions(p)]
        assert {p["path"] for p in mine} == set(files), version
        for p in mine:
            assert p["text"] in files[p["path"]].decode(), (version, p["path"])


def _search_version(state: Path, url: str, version: str, query: str) -> list[dict[str, Any]]:
    eng = Engine(_config(state, url), state, embed_model=fake_vectors)
    try:
        return search(eng, query, k=20, source="book", version=version, mode="sparse")
    finally:
        eng.close()


def test_tags_and_a_branch_are_versions_equal_to_a_from_scratch_ingest(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repo")
    repo.tag("v1")
    repo.next_commit()
    repo.next_commit()
    repo.tag("v2", "the second release")  # annotated: peeled to its commit
    repo.next_commit()
    repo.push()
    url = str(repo.origin)
    state = tmp_path / "state"
    # one version first, then a second: only the chunk texts v1 lacks are embedded
    first = _sync(state, url, refs=("v1",))
    v1_points = store_snapshot(state)
    assert first.embedded == len({p["chunk_hash"] for p in v1_points.values()})
    second = _sync(state, url, refs=("v1", "v2"))
    both = store_snapshot(state)
    new_texts = {p["chunk_hash"] for p in both.values()} - {
        p["chunk_hash"] for p in v1_points.values()
    }
    assert second.embedded == len(new_texts) > 0
    # v2 shares most of v1's text: its shared points are not written again, only told
    assert second.reused == 0 and second.chunks_written == len(set(both) - set(v1_points))
    assert len(both) < 1.5 * len(v1_points)
    # the branch too
    _sync(state, url)
    got = without_provenance(store_snapshot(state))
    assert got == _scratch(tmp_path, url)
    assert set(_versions(got)) == {"main", "v1", "v2"}
    _assert_is_versions_text(got, repo, {"v1": "v1", "v2": "v2", "main": "main"})
    payload = next(
        version_view(p, "v2") for p in store_snapshot(state).values() if "v2" in p["version"]
    )
    assert payload["commit"] == git(repo.work, "rev-parse", "v2^{commit}").strip()
    assert not payload["path"].startswith("v2")  # the path in the repository
    # a search filtered to a version returns that version's chunks only
    for version in ("v1", "v2", "main"):
        hits = _search_version(state, url, version, "cargo build hello world")
        assert hits and {h["version"] for h in hits} == {version}
        files = repo.snapshot(version)
        assert all(h["text"] in files[h["path"]].decode() for h in hits)


def test_moving_refs_advance_force_push_moved_and_deleted_tags(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repo")
    repo.tag("v1")
    repo.next_commit()
    repo.tag("v2")
    repo.push()
    url = str(repo.origin)
    state = tmp_path / "state"
    _sync(state, url)
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, url)

    # a branch that advances: only the paths the commit changed are read
    before = git(repo.work, "rev-parse", "HEAD").strip()
    repo.next_commit()
    repo.push()
    changed = set(git(repo.work, "diff", "--name-only", before, "HEAD").split())
    reads: list[str] = []
    res = _sync(state, url, reads=reads)
    assert set(reads) == {f"main:{p}" for p in changed} and res.indexed == len(changed)
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, url)
    _assert_is_versions_text(store_snapshot(state), repo, {"main": "main", "v1": "v1"})

    # a force-push: main rewritten from v1 on (the commits indexed before are gone)
    git(repo.work, "reset", "-q", "--hard", "v1")
    (repo.work / "src" / "ch01-00-getting-started.md").write_text(
        "# Getting Started\n\nA rewritten history: this text is in no release.\n"
    )
    repo.commit("rewritten")
    repo.push("main", force=True)
    _sync(state, url)
    got = without_provenance(store_snapshot(state))
    assert got == _scratch(tmp_path, url)
    hits = _search_version(state, url, "main", "rewritten history release")
    assert hits[0]["text"].endswith("this text is in no release.")
    assert not _search_version(state, url, "v2", "rewritten history release")[0]["text"].endswith(
        "this text is in no release."
    )

    # a moved tag: v2 now names main's commit
    git(repo.work, "tag", "-f", "v2", "main")
    repo.push("--tags", force=True)
    _sync(state, url)
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, url)
    _assert_is_versions_text(store_snapshot(state), repo, {"v2": "v2"})

    # a deleted tag is its owner's intent: its documents go at once, held by no guard
    # (one version of three is a third of the source's documents)
    repo.delete_remote("refs/tags/v1")
    guard = {"mass_delete": {"min_count": 2, "max_share": 0.2}}
    v1_docs = sum(1 for k in _manifest_keys(state) if k.startswith("v1:"))
    gone = _sync(state, url, **guard)
    assert not gone.held and gone.removed_versions == {"v1": v1_docs} and v1_docs > 2
    got = without_provenance(store_snapshot(state))
    assert set(_versions(got)) == {"main", "v2"}
    assert got == _scratch(tmp_path, url)

    # a tree that vanished within a version is held: the guard counts per version
    for f in (repo.work / "src").glob("ch0*.md"):
        f.unlink()
    repo.commit("the chapters deleted")
    repo.push()
    held = _sync(state, url, check=False, **guard)  # held deletions: verify says orphans
    assert held.held and all(p.startswith("main:") for p in held.held)
    assert not held.removed_versions
    _sync(state, url, allow_mass_delete=True, **guard)
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, url)


def test_an_unreachable_server_deletes_nothing_and_a_return_catches_up(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    repo.push()
    server = GitDaemon(tmp_path / "repos" / "book").start()
    url = server.url("origin.git")
    state = tmp_path / "state"
    try:
        _sync(state, url)
        indexed = store_snapshot(state)
        server.stop()
        repo.next_commit()
        repo.push()
        cfg = _config(state, url)
        eng = Engine(cfg, state, embed_model=fake_vectors)
        try:
            src = eng.context.source("book")
            assert isinstance(src, GitSource)
            with pytest.raises(GitError, match="fetch|ls-remote"):
                src.refresh()
            assert src.poll_s == 5.0  # the back-off, not poll_s
            with pytest.raises(GitError):
                src.refresh()
            assert src.poll_s == 10.0
            res = eng.sync("book")
            assert (res.indexed, res.deleted, res.root_missing) == (0, 0, False)
            assert eng.verify("book").clean
            (st,) = status_of(eng.resources.manifest, eng, state)["sources"]
            assert st["failing_since"] and "127.0.0.1" in st["fetch_error"]
            assert {r["version"] for r in st["refs"]} == {"main", "v1"}
        finally:
            eng.close()
        assert store_snapshot(state) == indexed  # nothing deleted, nothing rewritten
        server.start()  # the same port again
        _sync(state, url)
        got = without_provenance(store_snapshot(state))
        assert got == _scratch(tmp_path, url)
        _assert_is_versions_text(got, repo, {"main": "main", "v1": "v1"})
        eng = Engine(cfg, state, embed_model=fake_vectors)
        try:
            (st,) = status_of(eng.resources.manifest, eng, state)["sources"]
            assert st["failing_since"] is None and st["fetched_at"]
        finally:
            eng.close()
    finally:
        server.stop()


def test_a_credential_from_the_environment_is_used_and_appears_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    token = "tok-Recognisable-7f3a9c1e5b"
    repo = HistoryRepo(tmp_path / "repos")
    repo.tag("v1")
    repo.push()
    git(repo.origin, "update-server-info")
    creds = {"credentials": {"token_env": "INGESTD_TEST_GIT_TOKEN"}}
    state = tmp_path / "state"
    caplog.set_level(logging.DEBUG)
    with HttpBackend(tmp_path / "repos", token) as server:
        url = server.url("origin.git")
        # without the variable: a clear error naming it (never a value)
        monkeypatch.delenv("INGESTD_TEST_GIT_TOKEN", raising=False)
        eng = Engine(_config(state, url, **creds), state, embed_model=fake_vectors)
        try:
            with pytest.raises(GitError, match="INGESTD_TEST_GIT_TOKEN"):
                eng.context.source("book").refresh()  # type: ignore[attr-defined]
        finally:
            eng.close()
        # a wrong one: refused by the server, the message holds no token
        monkeypatch.setenv("INGESTD_TEST_GIT_TOKEN", token + "-wrong")
        eng = Engine(_config(state, url, **creds), state, embed_model=fake_vectors)
        try:
            with pytest.raises(GitError) as err:
                eng.context.source("book").refresh()  # type: ignore[attr-defined]
            assert token not in str(err.value)
        finally:
            eng.close()
        monkeypatch.setenv("INGESTD_TEST_GIT_TOKEN", token)
        _sync(state, url, **creds)
        assert f"Bearer {token}" in server.auth_seen  # it was sent
        eng = Engine(_config(state, url, **creds), state, embed_model=fake_vectors)
        try:
            status = json.dumps(status_of(eng.resources.manifest, eng, state))
        finally:
            eng.close()
    points = store_snapshot(state)
    assert set(_versions(points)) == {"main", "v1"}
    assert token not in status
    assert token not in json.dumps(points)
    assert all(token not in r.getMessage() for r in caplog.records)
    for f in (state / "git").rglob("*"):  # the mirror is state: private
        assert f.stat().st_mode & 0o077 == 0, f"{f} is not private"
    for f in state.rglob("*"):
        if f.is_file():
            assert token.encode() not in f.read_bytes(), f
    assert not any(k for k, v in os.environ.items() if k.startswith("GIT_CONFIG") and token in v)


def test_lfs_pointers_submodules_and_links_are_skipped_and_no_driver_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = HistoryRepo(tmp_path / "repo")
    marker = tmp_path / "a-driver-ran"
    # the user's git config names a smudge filter and a hook folder: neither may run
    home = tmp_path / "home"
    hooks = home / "hooks"
    hooks.mkdir(parents=True)
    for hook in ("post-checkout", "post-merge", "reference-transaction", "post-fetch"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    (home / ".gitconfig").write_text(
        f'[filter "evil"]\n\tsmudge = touch {marker}\n\tclean = cat\n'
        f"[core]\n\thooksPath = {hooks}\n"
    )
    (repo.work / ".gitattributes").write_text("*.md filter=evil\n")
    (repo.work / "src" / "big.md").write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
        "size 12345\n"
    )
    (repo.work / "src" / "link.md").symlink_to("ch01-00-getting-started.md")
    sub = git(repo.work, "rev-parse", "HEAD").strip()
    git(repo.work, "add", "-A")
    git(repo.work, "update-index", "--add", "--cacheinfo", f"160000,{sub},src/vendored.md")
    git(repo.work, "commit", "-q", "-m", "an LFS pointer, a link and a submodule entry")
    repo.push("main")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    state = tmp_path / "state"
    _sync(state, str(repo.origin), refs=("main",))
    points = store_snapshot(state)
    paths = {p["path"] for p in points.values()}
    assert "src/ch01-00-getting-started.md" in paths
    assert not {"src/big.md", "src/link.md", "src/vendored.md"} & paths
    assert not marker.exists()
    eng = Engine(_config(state, str(repo.origin), refs=("main",)), state, embed_model=fake_vectors)
    try:
        eng.sync("book")
        skipped = {k["path"]: k["reason"] for k in eng.failures.skipped_entries("book")}
    finally:
        eng.close()
    assert "LFS pointer" in skipped["main:src/big.md"]
    assert "symbolic link" in skipped["main:src/link.md"]
    assert "submodule" in skipped["main:src/vendored.md"]


def test_a_repository_over_the_size_bound_is_refused(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repo")
    repo.push("main")
    state = tmp_path / "state"
    eng = Engine(
        _config(state, str(repo.origin), refs=("main",), max_repo_bytes=10_000),
        state,
        embed_model=fake_vectors,
    )
    try:
        with pytest.raises(GitError, match="over max_repo_bytes 10000"):
            eng.context.source("book").refresh()  # type: ignore[attr-defined]
        res = eng.sync("book")
        assert res.root_missing and res.indexed == 0
        (st,) = status_of(eng.resources.manifest, eng, state)["sources"]
        assert st["root_missing"] and "max_repo_bytes" in st["fetch_error"]
    finally:
        eng.close()
    assert not store_snapshot(state)


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    from ingestd.daemon.config import ConfigError

    with pytest.raises(ConfigError, match="needs url"):
        load_config(None, overrides={"sources": [{"kind": "git", "name": "x", "refs": ["main"]}]})
    with pytest.raises(ConfigError, match="needs refs"):
        load_config(None, overrides={"sources": [{"kind": "git", "name": "x", "url": "/r"}]})
    with pytest.raises(ConfigError, match="root"):
        load_config(None, overrides={"sources": [{"name": "x"}]})
    cfg = _config(tmp_path, "relative/repo.git")
    assert cfg.sources[0].url == str(Path.cwd() / "relative" / "repo.git")


def test_a_version_no_source_holds_is_a_usage_error_that_names_the_versions(
    tmp_path: Path,
) -> None:
    """Exit 2 as an unknown source, from the CLI as from the engine; the message names the
    filter, not a flag of one front end (the MCP tool's argument is ``version``)."""
    from ingestd.daemon.commands.query.search import answer
    from ingestd.daemon.wire.errors import DaemonError
    from tests.helpers import run_cli

    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    repo.push()
    state = tmp_path / "state"
    _sync(state, str(repo.origin))
    eng = Engine(_config(state, str(repo.origin)), state, embed_model=fake_vectors)
    try:
        with pytest.raises(DaemonError) as err:
            answer(eng, "ownership", version="v9", mode="sparse")
        assert err.value.exit_code == 2
        assert str(err.value) == "unknown version v9; known versions: book: main, v1"
        assert answer(eng, "ownership", version="v1", mode="sparse")["hits"]
        got = answer(eng, "ownership", version="v1", path="src/nope", mode="sparse")
        assert any(n.startswith("nothing matches path src/nope") for n in got["notes"])
    finally:
        eng.close()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"sources:\n  - {{kind: git, name: book, url: '{repo.origin}', refs: [main, 'v*']}}\n"
    )
    common = ("--config", str(config), "--state-dir", str(state), "--mode", "sparse", "ownership")
    res = run_cli("search", "--version", "v9", *common)
    assert res.returncode == 2, res.stderr
    assert res.stderr == "Error: unknown version v9; known versions: book: main, v1\n"
    assert run_cli("search", "--source", "nope", *common).returncode == 2  # alike


def test_a_repository_with_no_matching_file_says_so_by_its_url_and_versions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = HistoryRepo(tmp_path / "repo")
    repo.push("main")
    state = tmp_path / "state"
    url = str(repo.origin)
    eng = Engine(
        _config(state, url, refs=("main",), include=["**/*.adoc"]), state, embed_model=fake_vectors
    )
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        with caplog.at_level(logging.WARNING, logger="ingestd"):
            res = eng.sync("book")
        (st,) = status_of(eng.resources.manifest, eng, state)["sources"]
    finally:
        eng.close()
    why = f"repository {url} has no file its include globs (**/*.adoc) match at main"
    assert res.indexed == 0 and f"source book: {why}" in caplog.messages
    assert st["warnings"] == [why]
    assert not [m for m in caplog.messages if str(state) in m]
