"""Points shared by versions, against real git, on every embedded engine.

A chunk that several versions hold at the same path is one point whose ``version``
is the list of those versions. The store then holds as many points as there are
distinct chunks over the versions (not one copy per version), a search filtered to a
version returns that version's chunks with that version's offsets, a version that goes
away only leaves the points it shared, and the store still equals a from-scratch
ingest of the same refs (``verify`` clean) after every change. A store written before
points were shared is written again at its first check, with nothing embedded again.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ingestd.daemon.commands.query.read import read
from ingestd.daemon.commands.query.search import search
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources.versions import BY_VERSION_KEY, payload_versions, version_view
from ingestd.daemon.sync.types import SyncResult
from ingestd.store.vectors.ids import point_ids
from tests.gitrepos import HistoryRepo, git
from tests.helpers import (
    CountingEmbedder,
    fake_vectors,
    run_cli,
    store_snapshot,
    without_provenance,
)

QUERY = "cargo build hello world"


def _engine(state: Path, url: str, refs: tuple[str, ...], embed: Any = fake_vectors) -> Engine:
    source = {"kind": "git", "name": "book", "url": url, "refs": list(refs)}
    cfg = load_config(
        None,
        overrides={
            "state_dir": str(state),
            "sources": [source],
            "mass_delete": {"min_count": 1_000_000},
        },
    )
    return Engine(cfg, state, embed_model=embed)


def _sync(state: Path, url: str, refs: tuple[str, ...], embed: Any = fake_vectors) -> SyncResult:
    """Fetch and sync in a fresh engine; ``verify`` must be clean."""
    eng = _engine(state, url, refs, embed)
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        res = eng.sync("book")
        report = eng.verify("book")
        assert report.clean, report.as_dict()
        return res
    finally:
        eng.close()


def _scratch(tmp: Path, url: str, refs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    state = tmp / f"scratch-{len(list(tmp.glob('scratch-*')))}"
    _sync(state, url, refs)
    return without_provenance(store_snapshot(state))


def _search(state: Path, url: str, refs: tuple[str, ...], version: str) -> list[dict[str, Any]]:
    eng = _engine(state, url, refs)
    try:
        return search(eng, QUERY, k=50, source="book", version=version, mode="sparse")
    finally:
        eng.close()


def _assert_hits_are_the_versions(
    hits: list[dict[str, Any]], repo: HistoryRepo, version: str
) -> None:
    """Each hit is of ``version``, its text at its offsets in that version's file and in
    the file at its ``commit``."""
    files = {p: b.decode() for p, b in repo.snapshot(version).items()}
    assert hits
    for h in hits:
        assert h["version"] == version
        text = files[h["path"]]
        assert text[h["start_char"] : h["end_char"]] == h["text"], (version, h["path"])
        # the commit its file was read at (a file unchanged since keeps an older one)
        at = git(repo.work, "show", f"{h['commit']}:{h['path']}")
        assert at[h["start_char"] : h["end_char"]] == h["text"]


def _assert_commits_on_versions(points: dict[str, dict[str, Any]], repo: HistoryRepo) -> None:
    """Each version of each point names a commit on that version's history (the version's
    commit or an ancestor of it) whose file holds the chunk's text at its offsets."""
    commits: dict[tuple[str, str], bool] = {}
    for p in points.values():
        for v in payload_versions(p):
            view = version_view(p, v)
            key = (view["commit"], v)
            if key not in commits:
                ancestor = subprocess.run(
                    ["git", "merge-base", "--is-ancestor", view["commit"], v], cwd=repo.work
                )
                commits[key] = ancestor.returncode == 0
            assert commits[key], (v, view["path"], view["commit"], "not on the version")
            at = git(repo.work, "show", f"{view['commit']}:{view['path']}")
            assert at[view["start_char"] : view["end_char"]] == view["text"]


def _by_id(hits: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Hits by id, without what a write or the ranking sets (time, score, rank)."""
    drop = {"score", "rank", "indexed_at"}
    return {h["id"]: {k: v for k, v in h.items() if k not in drop} for h in hits}


def _two_tags(tmp: Path) -> HistoryRepo:
    """v1, then v2 three history steps later (most text shared, some moved)."""
    repo = HistoryRepo(tmp / "repo")
    repo.tag("v1")
    for _ in range(3):
        repo.next_commit()
    repo.tag("v2")
    repo.push()
    return repo


def test_two_tags_sharing_text_hold_one_point_per_distinct_chunk(
    tmp_path: Path, qdrant_engine: str
) -> None:
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    alone = {v: _scratch(tmp_path, url, (v,)) for v in ("v1", "v2")}
    state = tmp_path / "state"
    _sync(state, url, ("v1", "v2"))
    got = without_provenance(store_snapshot(state))
    # one point per distinct chunk over the versions, not one per version
    assert set(got) == set(alone["v1"]) | set(alone["v2"])
    assert len(got) < len(alone["v1"]) + len(alone["v2"])
    shared = [p for p in got.values() if p["version"] == ["v1", "v2"]]
    assert len(shared) > len(got) / 2
    # each version's view of its points is what that version alone stores
    for v in ("v1", "v2"):
        mine = {pid: version_view(p, v) for pid, p in got.items() if v in p["version"]}
        assert mine == {pid: version_view(p, v) for pid, p in alone[v].items()}
    # a shared chunk whose offsets moved keeps each version's own
    assert any("start_char" in d for p in shared for d in p.get(BY_VERSION_KEY, {}).values())
    assert got == _scratch(tmp_path, url, ("v1", "v2"))
    for v in ("v1", "v2"):
        _assert_hits_are_the_versions(_search(state, url, ("v1", "v2"), v), repo, v)


def test_a_deleted_tag_leaves_only_the_points_it_shared(tmp_path: Path, qdrant_engine: str) -> None:
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    both = ("v1", "v2")
    _sync(state, url, both)
    before = _search(state, url, both, "v2")
    repo.delete_remote("refs/tags/v1")
    res = _sync(state, url, both)
    assert res.deleted and res.embedded == 0
    got = without_provenance(store_snapshot(state))
    assert {v for p in got.values() for v in payload_versions(p)} == {"v2"}
    assert all(p["version"] == ["v2"] and BY_VERSION_KEY not in p for p in got.values())
    assert got == _scratch(tmp_path, url, ("v2",))
    after = _search(state, url, both, "v2")
    # the other version's results: the same chunks, fields and offsets (the scores
    # move: BM25's IDF is over the live collection, which lost v1's own points)
    assert _by_id(after) == _by_id(before)
    _assert_hits_are_the_versions(after, repo, "v2")


def test_a_force_push_and_a_moved_tag_keep_the_union(tmp_path: Path, qdrant_engine: str) -> None:
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    refs = ("main", "v*")
    _sync(state, url, refs)
    # main rewritten from v1 on
    git(repo.work, "reset", "-q", "--hard", "v1")
    (repo.work / "src" / "ch01-00-getting-started.md").write_text(
        "# Getting Started\n\nA rewritten history: this text is in no release.\n"
    )
    repo.commit("rewritten")
    repo.push("main", force=True)
    _sync(state, url, refs)
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, url, refs)
    _assert_commits_on_versions(store_snapshot(state), repo)
    # v2 moved to main's commit: v2 and main now share every point
    git(repo.work, "tag", "-f", "v2", "main")
    repo.push("--tags", force=True)
    res = _sync(state, url, refs)
    assert res.embedded == 0  # every text of main's commit was indexed already
    got = without_provenance(store_snapshot(state))
    assert got == _scratch(tmp_path, url, refs)
    assert all(("main" in p["version"]) == ("v2" in p["version"]) for p in got.values())
    for v in ("main", "v1", "v2"):
        _assert_hits_are_the_versions(_search(state, url, refs, v), repo, v)
    _assert_commits_on_versions(store_snapshot(state), repo)


def test_a_force_push_moves_the_commit_of_unchanged_files_without_embedding(
    tmp_path: Path, qdrant_engine: str
) -> None:
    """A branch rewritten with its files as they were (a squash): no file changed, yet the
    commit each point named is on the branch no more; it names one that is, and nothing
    is embedded."""
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    refs = ("main", "v*")
    repo.next_commit()  # main one commit past v2
    repo.push()
    _sync(state, url, refs)
    before = without_provenance(store_snapshot(state))
    git(repo.work, "reset", "-q", "--soft", "v1")  # v1's parent, main's files
    squashed = repo.commit("squashed")
    repo.push("main", force=True)
    embed = CountingEmbedder(fake_vectors)
    res = _sync(state, url, refs, embed)
    assert embed.texts == [] and res.embedded == 0
    got = store_snapshot(state)
    assert without_provenance(got) == before == _scratch(tmp_path, url, refs)
    _assert_commits_on_versions(got, repo)
    mains = {version_view(p, "main")["commit"] for p in got.values() if "main" in p["version"]}
    assert mains == {squashed}
    # a further push that is no rewrite leaves the commits it need not change
    repo.next_commit()
    repo.push()
    _sync(state, url, refs)
    _assert_commits_on_versions(store_snapshot(state), repo)


def test_read_gives_the_versions_own_lines(tmp_path: Path, qdrant_engine: str) -> None:
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    both = ("v1", "v2")
    _sync(state, url, both)
    got = store_snapshot(state)
    pid, p = next(
        (pid, p)
        for pid, p in got.items()
        if "start_line" in p.get(BY_VERSION_KEY, {}).get("v2", {})
    )
    eng = _engine(state, url, both)
    try:
        for v in both:
            out = read(eng, id=pid, version=v)
            view = version_view(p, v)
            assert out["version"] == v
            assert (out["hit"]["start_line"], out["hit"]["end_line"]) == (
                view["start_line"],
                view["end_line"],
            )
            lines = repo.snapshot(v)[view["path"]].decode().split("\n")
            assert out["lines"]["text"].split("\n")[0] in lines
    finally:
        eng.close()


def test_a_store_from_before_shared_points_is_written_again_without_embedding(
    tmp_path: Path, qdrant_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    both = ("v1", "v2")
    with monkeypatch.context() as m:  # the writer as it was: one point per version
        import ingestd.daemon.engine as engine
        import ingestd.daemon.sync.preparing.preparer as preparer
        import ingestd.daemon.sync.writing.applier as applier
        import ingestd.daemon.sync.writing.writer as writer

        prepare = preparer.prepare_document

        def per_version(src: Any, rel: str, *a: Any, **kw: Any) -> Any:
            prep = prepare(src, rel, *a, **kw)
            old = dict(zip(prep.ids, point_ids(src.name, rel, prep.hashes), strict=True))
            prep.ids = [old[i] for i in prep.ids]
            for payload in prep.payloads:
                if "parent_id" in payload:
                    payload["parent_id"] = old[payload["parent_id"]]
            return prep

        m.setattr(preparer, "prepare_document", per_version)
        m.setattr(writer, "is_versioned", lambda _src: False)
        m.setattr(applier, "is_versioned", lambda _src: False)
        m.setattr(engine, "rekey_versions", lambda *_a: 0)
        eng = _engine(state, url, both)
        try:
            eng.context.source("book").refresh()  # type: ignore[attr-defined]
            eng.sync("book")
        finally:
            eng.close()
    old = store_snapshot(state)
    assert all(isinstance(p["version"], str) for p in old.values())
    embed = CountingEmbedder(fake_vectors)
    _sync(state, url, both, embed)
    assert embed.texts == []  # vectors from the cache: nothing embedded again
    got = without_provenance(store_snapshot(state))
    assert got == _scratch(tmp_path, url, both)
    assert len(got) < len(old)


def test_a_lost_manifest_is_rebuilt_from_shared_points(tmp_path: Path, qdrant_engine: str) -> None:
    """Each version of a shared point is adopted as its own document's; nothing embedded."""
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    both = ("v1", "v2")
    _sync(state, url, both)
    n = len(store_snapshot(state))
    for f in state.glob("manifest.db*"):
        f.unlink()
    embed = CountingEmbedder(fake_vectors)
    res = _sync(state, url, both, embed)
    assert res.repaired == {"adopted": n}
    assert embed.texts == [] and res.indexed == 0
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, url, both)


@pytest.mark.slow  # an ingestd process (the CLI), on the real engines
def test_status_without_a_daemon_counts_shared_points_once(
    tmp_path: Path, qdrant_engine: str
) -> None:
    """``status`` with no daemon compares the store with the points the manifest records:
    a point two tags share is one point, as the writer counts it, never two rows."""
    repo = _two_tags(tmp_path)
    url = str(repo.origin)
    state = tmp_path / "state"
    both = ("v1", "v2")
    _sync(state, url, both)
    held = len(store_snapshot(state))
    source = {"kind": "git", "name": "book", "url": url, "refs": list(both)}
    cfg = tmp_path / "ingestd.yaml"
    cfg.write_text(yaml.safe_dump({"state_dir": str(state), "sources": [source]}))
    proc = run_cli("status", "--config", str(cfg), "--json", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (src,) = json.loads(proc.stdout)["sources"]
    assert src["chunks"] == held  # distinct points, not one row per version
    text = run_cli("status", "--config", str(cfg), timeout=60)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "damaged" not in text.stdout + text.stderr
