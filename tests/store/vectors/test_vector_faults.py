"""Transient vector-store failures lose nothing (DESIGN.md point 9).

No Qdrant server can run on these machines, so a fault-injecting proxy wraps the
qdrant-client of an embedded store: its writes raise what qdrant-client raises when a
server is unreachable or answers 503. A :class:`QdrantStore` built on a given client
behaves like server (``url``) mode: transient errors are retried with back-off up to
``retry_seconds``. Past that the error reaches the service, which keeps the batch and
queues it again with back-off until the store answers; the write order (pending ids
first) makes every replay idempotent. Each test ends with the store equal to a
from-scratch ingest.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ingestd.daemon.service import jobs as jobs_mod
from ingestd.store.vectors.client.qdrant import QdrantStore
from tests.daemon.harness import Harness
from tests.helpers import (
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    wait_for,
)

PAGES = (
    "blog/2023/php-beta-release.md",
    "blog/2023/integrations.md",
    "community/end-user/otel-in-practice.md",
)
WRITES = frozenset({"upsert", "delete", "batch_update_points"})


class FaultyClient:
    """A qdrant-client proxy whose write calls fail while :attr:`failures` > 0 or :attr:`down`.

    Args:
        inner: the real client.
        error: builds the exception to raise.
        ops: the client methods that fail.
    """

    def __init__(self, inner: QdrantClient, error: Any = None, ops: frozenset[str] = WRITES):
        self.inner = inner
        self.error = error or (lambda: ResponseHandlingException(httpx.ConnectError("refused")))
        self.ops = ops
        self.failures = 0
        self.down = False
        self.raised = 0
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.ops:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] = self.calls.get(name, 0) + 1
                fail = self.down or self.failures > 0
                if fail:
                    self.failures = max(0, self.failures - 1)
                    self.raised += 1
            if fail:
                raise self.error()
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "docs", PAGES)


def _engine(tree: Path, state: Path, client: FaultyClient, embed: Any, retry: float) -> Any:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    store = QdrantStore(client=client, retry_seconds=retry, engine="server")
    assert not store.local  # a given client gets server-mode retries
    return Engine(load_config(None, roots=[tree]), state, embed_model=embed, store=store)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
@pytest.mark.parametrize(
    "error",
    [
        lambda: ResponseHandlingException(httpx.ConnectError("connection refused")),
        lambda: UnexpectedResponse(503, "Service Unavailable", b"", httpx.Headers()),
        lambda: ConnectionResetError("reset by peer"),
    ],
    ids=["connect-error", "http-503", "connection-reset"],
)
def test_transient_errors_are_retried_and_nothing_is_lost(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder, error: Any
) -> None:
    state = scratch / "state"
    client = FaultyClient(QdrantClient(path=str(state / "qdrant")), error)
    eng = _engine(tree, state, client, fake_embedder, retry=30)
    (name,) = eng.context.sources
    try:
        client.failures = 2  # the first two writes fail, their retries succeed
        res = eng.sync(name)
        assert res.indexed == len(PAGES) and not res.retry
        assert client.raised == 2
        # an edit, a rename and a delete, each with a failing first write
        page = tree / PAGES[0]
        page.write_text(page.read_text() + "\n\nOne more paragraph.\n")
        (tree / PAGES[1]).rename(tree / "blog/renamed.md")
        (tree / PAGES[2]).unlink()
        client.failures = 2
        eng.sync(name)
        assert client.raised == 4
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(tree, state, scratch, fake_vectors)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_non_transient_errors_are_not_retried(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    state = scratch / "state"
    client = FaultyClient(
        QdrantClient(path=str(state / "qdrant")),
        lambda: UnexpectedResponse(400, "Bad Request", b"{}", httpx.Headers()),
    )
    eng = _engine(tree, state, client, fake_embedder, retry=30)
    (name,) = eng.context.sources
    try:
        client.failures = 1
        with pytest.raises(UnexpectedResponse):
            eng.sync(name)
        assert client.raised == 1 and client.calls["upsert"] == 1
        # the manifest recorded pending ids first: the next sync finishes the job
        res = eng.sync(name)
        assert res.indexed == len(PAGES)
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(tree, state, scratch, fake_vectors)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_store_down_past_retry_seconds_keeps_the_batch_queued(
    tree: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The daemon outlives an outage longer than ``retry_seconds``; the final state is exact."""
    monkeypatch.setattr(jobs_mod, "RETRY_MIN_S", 0.1)
    monkeypatch.setattr(jobs_mod, "RETRY_MAX_S", 0.4)
    clients: list[FaultyClient] = []

    def store(state: Path) -> QdrantStore:
        clients.append(FaultyClient(QdrantClient(path=str(state / "qdrant"))))
        return QdrantStore(client=clients[-1], retry_seconds=0.3, engine="server")

    with Harness(tree, scratch / "state", fake_embedder, store_factory=store) as h:
        client = clients[-1]
        client.down = True
        page = tree / PAGES[0]
        page.write_text(page.read_text() + "\n\nWritten while the store was down.\n")
        (tree / PAGES[1]).rename(tree / "blog/renamed.md")
        (tree / PAGES[2]).unlink()
        (tree / "blog/new.md").write_text("# New\n\nAdded during the outage.\n")
        wait_for(lambda: client.raised >= 6, 30, "several failed attempts")
        st = h.service.status()
        assert not st["daemon"]["healthy"]
        assert "ResponseHandlingException" in st["daemon"]["last_error"][h.source]
        assert h.alive
        assert "retrying in" in caplog.text
        assert "Traceback" not in caplog.text  # an outage is expected: no traceback spam
        client.down = False
        h.settle(timeout=30)
        assert h.service.status()["daemon"]["healthy"]
        h.assert_matches_oracle(scratch)
