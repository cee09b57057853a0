"""Health during an outage that passes by itself: healthy until ``watch.max_lag_s``.

An embedding server or a git server down leaves what is indexed searchable, so the
daemon stays healthy while its documents wait, up to ``watch.max_lag_s``; the vector
store down, a refused key or a missing model make it unhealthy at once. The remote
embedding server's outage end to end is in tests/daemon/test_remote_embedding.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ingestd.chunkers.errors import UnavailableError
from ingestd.daemon.service.jobs import Backoff, Job, JobQueue, is_outage
from ingestd.daemon.service.status import health_problems
from ingestd.daemon.sources.gitcmd import GitError
from ingestd.store.embedding.remote_backend import EndpointError
from ingestd.store.vectors.base import StoreUnavailableError


class _Watches:
    """The part of :class:`~ingestd.daemon.service.watches.Watches` health reads."""

    missing_roots: dict[str, str] = {}
    unwatched: set[str] = set()

    def dead(self) -> list[str]:
        return []


@pytest.mark.parametrize(
    ("exc", "outage"),
    [
        (EndpointError("embedding endpoint x cannot be reached", transient=True), True),
        (EndpointError("answered HTTP 503", 503, transient=True), True),
        (EndpointError("refused the API key (HTTP 401)", 401), False),
        (EndpointError("has no model 'm' (HTTP 404)", 404), False),
        (GitError("could not read from remote repository"), True),
        (StoreUnavailableError("Qdrant at localhost:6333 does not answer"), False),
        (UnavailableError("a server"), True),
        (ConnectionError("reset"), False),
        (ValueError("a bug"), False),
    ],
)
def test_which_failures_are_outages(exc: Exception, outage: bool) -> None:
    assert is_outage(exc) is outage


def _backoff() -> Backoff:
    jobs = JobQueue(after_job=lambda job: None, on_unhandled=lambda exc: None)
    return Backoff(jobs, on_failure=lambda: None)


def _failed(b: Backoff, source: str, exc: Exception) -> None:
    b.failed(source, "sync", exc, retry=Job(0, 0, lambda: None))


def test_an_outage_is_healthy_until_max_lag_then_says_since_when(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b = _backoff()
    clock = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    down = EndpointError("embedding endpoint x cannot be reached", transient=True)
    _failed(b, "docs", down)
    clock[0] += 30
    _failed(b, "docs", down)  # the streak keeps its start
    assert b.failing_since == {"docs": 1_000_000.0} == b.outage_since

    def problems(max_lag: float) -> list[str]:
        return health_problems(_Watches(), b.last_error, 0.0, max_lag, {}, b.outage_since)  # type: ignore[arg-type]

    assert problems(60) == []
    assert problems(0) == []  # no max_lag: an outage alone never makes it unhealthy
    clock[0] += 31
    (line,) = problems(60)
    assert line.startswith("source docs: failing for 61 s (watch.max_lag_s 60): EndpointError")
    # a refused key in the same streak needs a person: unhealthy at once
    _failed(b, "docs", EndpointError("refused the API key (HTTP 401)", 401))
    assert b.outage_since == {} and b.failing_since == {"docs": 1_000_000.0}
    (line,) = problems(3600)
    assert line == "source docs: EndpointError: refused the API key (HTTP 401)"
    b.succeeded("docs")
    assert (b.last_error, b.failing_since, b.outage_since) == ({}, {}, {})
    assert problems(60) == []


def test_the_vector_store_down_is_unhealthy_at_once() -> None:
    b = _backoff()
    _failed(b, "docs", StoreUnavailableError("Qdrant does not answer"))
    problems: Any = health_problems(_Watches(), b.last_error, 0.0, 3600, {}, b.outage_since)  # type: ignore[arg-type]
    assert problems == ["source docs: StoreUnavailableError: Qdrant does not answer"]


@pytest.mark.timeout(300)
def test_documents_a_failed_batch_left_are_counted_until_they_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding server down: status said "0 documents left to scan" while new
    documents waited for their retry; it counts them, and stops once they are written."""
    import ingestd.daemon.service.jobs as jobs_mod
    from ingestd.daemon.commands.status_text import status_lines
    from tests.daemon.harness import FAST_WATCH, Harness
    from tests.helpers import CountingEmbedder, copy_tree, fake_vectors, wait_for

    monkeypatch.setattr(jobs_mod, "RETRY_MIN_S", 0.2)
    monkeypatch.setattr(jobs_mod, "RETRY_MAX_S", 1.0)
    down = threading.Event()

    def embed(texts: Sequence[str]) -> Any:
        if down.is_set():
            raise EndpointError("embedding endpoint 127.0.0.1:9 cannot be reached", transient=True)
        return fake_vectors(texts)

    tree = copy_tree(tmp_path / "docs", ("docs/concepts/glossary.md",))
    new = copy_tree(
        tmp_path / "later", ("docs/collector/deploy/gateway.md", "docs/collector/architecture.md")
    )
    with Harness(tree, tmp_path / "state", CountingEmbedder(embed), watch=FAST_WATCH) as h:
        h.settle(timeout=120)
        down.set()
        for f in sorted(new.rglob("*.md")):
            (tree / "docs" / f.name).write_bytes(f.read_bytes())
        waiting = wait_for(
            lambda: h.service.status()["daemon"]["documents_waiting"].get(h.source),
            60,
            "the documents left by the failed batch in status",
        )
        assert waiting == 2
        text = "\n".join(status_lines(h.service.status(), time.time()))
        assert "2 waiting for a retry after an error" in text, text
        down.clear()
        wait_for(
            lambda: not h.service.status()["daemon"]["documents_waiting"],
            60,
            "the retry to write them",
        )
        h.settle(timeout=120)
        assert {f"docs/{f.name}" for f in new.rglob("*.md")} <= {
            p["path"] for p in h.points().values()
        }
