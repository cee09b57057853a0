"""A git source in a running daemon, with the real model: a push made searchable by sync.

The daemon fetches the repository in a thread of its own at start-up and indexes every
ref; a commit pushed later is searchable when ``sync`` (what a post-receive hook
calls) returns, through the daemon's control socket; a search filtered to a version
answers from that version only, and the store equals a from-scratch ingest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import Client
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources.versions import payload_versions
from tests.daemon.harness import Harness
from tests.gitrepos import HistoryRepo
from tests.helpers import (
    CountingEmbedder,
    fake_vectors,
    store_snapshot,
    wait_for,
    without_provenance,
)

NEW_TEXT = "Ferris the crab recommends the quokka installer: it installs Rust on a calculator."


def _scratch(tmp: Path, url: str) -> dict[str, dict[str, Any]]:
    """A from-scratch ingest of the same refs (ids and payloads need no real model)."""
    state = tmp / "scratch"
    source = {"kind": "git", "name": "book", "url": url, "refs": ["main", "v*"]}
    cfg = load_config(None, overrides={"state_dir": str(state), "sources": [source]})
    eng = Engine(cfg, state, embed_model=fake_vectors)
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        eng.sync("book")
    finally:
        eng.close()
    return without_provenance(store_snapshot(state))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_push_is_searchable_when_sync_returns(
    tmp_path: Path, scratch: Path, real_embedder: CountingEmbedder
) -> None:
    repo = HistoryRepo(tmp_path / "repo")
    repo.tag("v1.0")
    repo.push()
    config = tmp_path / "ingestd.yaml"
    config.write_text(
        "sources:\n"
        f"  - {{kind: git, name: book, url: '{repo.origin}', refs: [main, 'v*'], poll_s: 3600}}\n"
    )
    state = scratch / "state"
    with Harness(tmp_path, state, real_embedder, config_path=config) as h:
        wait_for(
            lambda: (
                {v for p in h.points().values() for v in payload_versions(p)} == {"main", "v1.0"}
            ),
            120,
            "both versions to be fetched and indexed",
        )
        page = repo.work / "src" / "ch01-04-quokkas.md"
        page.write_text(f"# Installing Rust on a Calculator\n\n{NEW_TEXT}\n")
        commit = repo.commit("a new section")
        repo.push("main")
        client = Client(state, local=False)  # through the daemon's control socket
        report = client.sync(sources=["book"], timeout_s=300)
        assert report["complete"] and report["through_daemon"], report["summary"]
        hits = client.search("which installer does the crab recommend?", k=3, version="main")
        assert NEW_TEXT in hits[0]["text"] and hits[0]["commit"] == commit
        older = client.search("which installer does the crab recommend?", k=5, version="v1.0")
        assert older and all(h["version"] == "v1.0" for h in older)
        assert not any(NEW_TEXT in x["text"] for x in older)
        # read needs the version of a file of a versioned source
        got = client.read(path="src/ch01-04-quokkas.md", version="main")
        assert got["version"] == "main" and got["lines"] is not None
        assert NEW_TEXT in got["lines"]["text"] and got["commit"] == commit
        st = client.status()
        (book,) = st["sources"]
        assert {r["version"]: r["commit"] for r in book["refs"]}["main"] == commit
        assert book["fetched_at"] and book["failing_since"] is None
        h.settle()
        assert h.points() == _scratch(tmp_path, str(repo.origin))
