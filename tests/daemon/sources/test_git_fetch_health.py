"""A running daemon whose git server goes away: healthy for ``max_lag_s``, then not.

A real ``git daemon`` on loopback serves the repository; the daemon indexes it, the
server stops, and the daemon keeps retrying the fetch with back-off. Nothing indexed
is deleted, ``status`` says since when fetches fail, and the daemon stays healthy
until they have failed for longer than ``watch.max_lag_s``; when the server comes
back, the next fetch succeeds and the daemon is healthy again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sources.versions import payload_versions
from tests.daemon.harness import FAST_WATCH, Harness
from tests.gitrepos import HistoryRepo
from tests.gitserver import GitDaemon
from tests.helpers import CountingEmbedder, fake_vectors, wait_for

MAX_LAG_S = 4.0


def _book(h: Harness) -> dict[str, Any]:
    (book,) = h.service.status()["sources"]
    return dict(book)


@pytest.mark.timeout(300)
def test_a_server_that_goes_away_is_healthy_for_max_lag_then_not(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    repo.push()
    server = GitDaemon(tmp_path / "repos" / "book").start()
    config = tmp_path / "ingestd.yaml"
    config.write_text(
        "sources:\n"
        f"  - {{kind: git, name: book, url: '{server.url('origin.git')}', "
        "refs: [main, 'v*'], poll_s: 1}\n"
    )
    state = tmp_path / "state"
    watch = {**FAST_WATCH, "max_lag_s": MAX_LAG_S}
    try:
        with Harness(
            tmp_path, state, CountingEmbedder(fake_vectors), config_path=config, watch=watch
        ) as h:
            wait_for(
                lambda: (
                    {v for p in h.points().values() for v in payload_versions(p)} == {"main", "v1"}
                ),
                120,
                "both versions to be fetched and indexed",
            )
            h.wait_idle(60)
            assert h.verify().clean
            indexed = h.points()
            assert h.service.healthy()
            server.stop()
            book = wait_for(
                lambda: (b := _book(h))["failing_since"] and b,
                60,
                "status to say the fetches fail",
            )
            since = book["failing_since"]
            assert "127.0.0.1" in book["fetch_error"]
            # within max_lag_s of the first failure: healthy (retried with back-off)
            if time.time() - since < MAX_LAG_S - 1:
                st = h.service.status()["daemon"]
                assert st["healthy"], st["problems"]
            wait_for(lambda: not h.service.healthy(), 60, "the daemon to turn unhealthy")
            problems = h.service.status()["daemon"]["problems"]
            assert any("book" in p and "fetches have failed" in p for p in problems), problems
            assert _book(h)["failing_since"] == since  # since the first failure, not the last
            assert h.points() == indexed  # nothing deleted, nothing rewritten
            server.start()  # the same port again
            wait_for(h.service.healthy, 60, "the daemon to be healthy again")
            assert _book(h)["failing_since"] is None
            assert h.verify().clean
    finally:
        server.stop()
