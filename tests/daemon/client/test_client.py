"""The Python API: :class:`Client` on a state dir (no daemon) and through a daemon.

Without a daemon the client opens the state itself for each call, as the CLI does;
with one, every call goes through the control socket. Either way the answers are the
shared commands' (``search`` is ``ingestd search``'s ranking). Sparse searches keep
the fast tests free of the embedding model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import Client, DaemonError, NoDaemon, StateLockedError, SyncTimeout
from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.wire.location import find_socket
from ingestd.daemon.wire.statelock import StateLock
from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, fake_vectors, make_engine, sync_once

QUESTIONS = ("collector pipeline exporters", "span attributes", "OTLP receiver port")


@pytest.fixture
def indexed(tree: Path, tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / "state"
    sync_once(tree, state)
    yield state


def _engine_search(tree: Path, state: Path, query: str, **kw: Any) -> list[dict[str, Any]]:
    eng = make_engine(tree, state, fake_vectors)
    try:
        return search_cmd(eng, query, **kw)
    finally:
        eng.close()


def test_search_without_a_daemon_is_the_engine_ranking(tree: Path, indexed: Path) -> None:
    client = Client(indexed)
    for q in QUESTIONS:
        got = client.search(q, k=5, mode="sparse")
        # the ranks `ingestd search --json` prints come by default
        assert got == _engine_search(tree, indexed, q, k=5, mode="sparse", ranks=True)
        assert got.mode == "sparse" and got.hits == list(got) and got.passages is None
        assert got and all(h["sparse_rank"] is not None for h in got)  # as --json prints
        bare = client.search(q, k=5, mode="sparse", ranks=False)
        assert bare == _engine_search(tree, indexed, q, k=5, mode="sparse")
        assert [h["rank"] for h in got] == list(range(1, len(got) + 1))
    only = client.search("collector", k=3, mode="sparse", path="docs/concepts")
    assert only and all(h["path"].startswith("docs/concepts/") for h in only)


def test_a_state_dir_with_nothing_indexed_says_so(tmp_path: Path) -> None:
    client = Client(tmp_path / "empty")
    with pytest.raises(
        DaemonError, match="nothing indexed in .*: run `ingestd resync --state-dir .* PATH`"
    ):
        client.search("anything", mode="sparse")
    assert client.status() == {
        "state_dir": str(tmp_path / "empty"),
        "sources": [],
        "daemon": None,
    }
    with pytest.raises(DaemonError, match="the query is empty") as err:
        client.search("  ")
    assert err.value.exit_code == 2


def test_local_status_read_sync_and_resync(tree: Path, indexed: Path) -> None:
    client = Client(indexed)
    (src,) = client.status()["sources"]
    assert src["documents"] == 6 and src["last_change_synced"] is not None
    hit = client.search("glossary", k=1, mode="sparse")[0]
    widened = client.read(hit["id"], context=1)
    assert widened["hit"] is not None and widened["hit"]["id"] == hit["id"]
    assert widened["lines"] is not None and hit["text"].strip() in widened["lines"]["text"]
    page = tree / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\n## Okapis\n\nOkapification explained.\n")
    before = time.time()
    report = client.sync(["docs/concepts/glossary.md"], timeout_s=120)
    assert report["complete"] and report["sources"][0]["indexed"] == 1
    assert "Okapification" in client.search("okapification", k=1, mode="sparse")[0]["text"]
    assert client.status()["sources"][0]["last_change_synced"] >= before
    assert client.resync()["exit_code"] == 0


def test_a_local_sync_that_runs_out_of_time_says_so(tree: Path, indexed: Path) -> None:
    with pytest.raises(SyncTimeout, match=r"sync did not finish within 0 s"):
        Client(indexed).sync(timeout_s=0)


def test_a_state_dir_held_by_another_process_is_an_error(indexed: Path) -> None:
    lock = StateLock(indexed)
    lock.acquire("ingestd resync")
    try:
        with pytest.raises(StateLockedError, match="in use by another ingestd process"):
            Client(indexed).search("collector", mode="sparse")
    finally:
        lock.release()


def test_without_local_access_no_daemon_is_an_error(indexed: Path, tmp_path: Path) -> None:
    with pytest.raises(NoDaemon):
        Client(indexed, local=False).search("collector", mode="sparse")
    with pytest.raises(NoDaemon):
        Client(indexed, socket=tmp_path / "nobody.sock").status()


@pytest.mark.slow
def test_through_a_daemon_sync_is_a_barrier_and_answers_match(
    tree: Path, tmp_path: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    state = scratch / "state"
    with Harness(tree, state, fake_embedder) as h:
        client = Client(state, local=False)
        by_socket = Client(socket=find_socket(state))
        for q in QUESTIONS:
            hits = client.search(q, k=5, mode="sparse", ranks=True)
            want = h.call(lambda e, q=q: search_cmd(e, q, k=5, mode="sparse", ranks=True))
            assert hits == want
            assert by_socket.search(q, k=5, mode="sparse", ranks=True) == hits
        st = client.status()
        assert st["daemon"]["healthy"] and st["sources"][0]["documents"] == 6
        page = tree / "docs/collector/quick-start.md"
        before = time.time()
        page.write_text(page.read_text() + "\n\n## Narwhals\n\nNarwhalisation of spans.\n")
        report = client.sync([str(page)], timeout_s=60)  # no wait for the watcher
        assert report["complete"] and report["sources"][0]["indexed"] == 1
        assert "Narwhalisation" in client.search("narwhalisation", k=1, mode="sparse")[0]["text"]
        assert client.status()["sources"][0]["last_change_synced"] >= before
        widened = client.read(path="docs/collector/quick-start.md", start_line=1, end_line=5)
        assert widened["lines"] is not None and widened["lines"]["start_line"] == 1
        with pytest.raises(DaemonError, match="unknown source: nope") as err:
            client.read(path="x.md", source="nope")
        assert err.value.exit_code == 2
