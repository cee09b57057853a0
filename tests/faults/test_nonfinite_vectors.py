"""No vector with NaN, infinity or no length is stored or cached, whatever made it.

Before, an OpenAI-compatible server that answered NaN in one component for one request
had its document indexed at once with a stored dense vector of NaN (normalising spread
it), which dense search never returned, and the NaN vector sat in ``embeddings.db``:
after the store was deleted and the source synced again against a healthy server, no
request was made and the vector was NaN again. ``verify`` said clean. Now a bad answer
is a failed request, tried again; a local model's bad vector is asked again, and a
text whose vector stays bad fails its document alone; ``verify`` finds bad vectors
already stored or cached, and ``--repair`` embeds them again.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.store.embedding.finite import rejected_total
from tests.helpers import make_engine, open_state_store, state_dense_vectors
from tests.remote_server import EmbeddingServer, Gateway, remote_embedding, small_tree

pytestmark = pytest.mark.slow


@pytest.fixture
def open_gateway(embedding_server: EmbeddingServer) -> Iterator[Gateway]:
    """A gateway without a key in front of the session's embedding server."""
    gw = Gateway(embedding_server.url)
    try:
        yield gw
    finally:
        gw.close()


def cli_run(state: Path, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
    res = CliRunner().invoke(cli, [*args, "--state-dir", str(state)])
    assert res.exit_code in ok, res.output
    return res


def write_config(path: Path, root: Path, url: str) -> Path:
    embedding = remote_embedding(url, batch_size=4, concurrency=1)
    path.write_text(
        json.dumps({"sources": [{"name": "docs", "root": str(root)}], "embedding": embedding})
    )
    return path


def cached_vectors(state: Path) -> dict[str, Any]:
    """Every vector in the state dir's embedding cache: chunk hash -> float32 array."""
    db = sqlite3.connect(state / "embeddings.db")
    try:
        rows = db.execute("SELECT hash, vector FROM vectors").fetchall()
    finally:
        db.close()
    return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}


def finite(vectors: dict[str, Any]) -> bool:
    return bool(vectors) and all(
        np.isfinite(v).all() and np.linalg.norm(v) > 0 for v in vectors.values()
    )


def test_a_nan_answer_is_a_retried_request_and_is_never_stored_or_cached(
    tmp_path: Path, scratch: Path, open_gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    tree = small_tree(tmp_path / "docs")
    cfg = write_config(tmp_path / "config.yaml", tree, open_gateway.url)
    open_gateway.poison = 1  # the first answer holds a NaN
    before = rejected_total()
    with caplog.at_level(logging.WARNING):
        out = cli_run(scratch, "resync", "-c", str(cfg)).output
    assert "4 indexed" in out
    assert open_gateway.poison == 0 and rejected_total() == before + 1
    said = out + caplog.text
    assert "NaN" in said and "attempt 2 of 2" in said, said
    # one request more than the texts need: the poisoned one, asked again
    texts = sum(n for _, _, n in open_gateway.log)
    chunks = json.loads(cli_run(scratch, "status", "--json", "-c", str(cfg)).stdout)
    n_chunks = chunks["sources"][0]["chunks"]
    assert len(open_gateway.log) == -(-n_chunks // 4) + 1 and texts > n_chunks
    stored, cached = state_dense_vectors(scratch), cached_vectors(scratch)
    assert len(stored) == n_chunks and finite(stored) and finite(cached)
    cli_run(scratch, "verify", "-c", str(cfg))
    # every document is found by dense search with its own text (a NaN vector never ranks)
    texts_by_path = {p["path"]: p["text"] for p in reversed(_payloads(scratch))}
    assert len(texts_by_path) == 4
    for path, text in texts_by_path.items():
        args = ("search", "--json", "--mode", "dense", "-k", "10", "-c", str(cfg))
        hits = json.loads(cli_run(scratch, *args, text[:300].lstrip("-")).stdout)
        assert path in {h["path"] for h in hits}, path


def _poison(state: Path, in_store: list[str], in_cache: list[str]) -> None:
    """The dense vectors of points ``in_store`` and the cached vectors of the chunks of
    points ``in_cache`` made non-finite."""
    store = open_state_store(state)
    try:
        points = store.retrieve_points("ingestd", in_store)
        # infinity in one component: the local engine refuses NaN itself, but stores the
        # NaN its normalising makes of infinity
        bad = [replace(p, vector=[float("inf"), *list(p.vector)[1:]]) for p in points]
        with warnings.catch_warnings():  # the local engine's own division by infinity
            warnings.simplefilter("ignore", RuntimeWarning)
            store.upsert("ingestd", bad)
        hashes = [p["chunk_hash"] for _, p, _ in store.retrieve("ingestd", in_cache)]
    finally:
        store.close()
    db = sqlite3.connect(state / "embeddings.db")
    try:
        nan = np.full(384, np.nan, dtype=np.float32).tobytes()
        db.executemany("UPDATE vectors SET vector = ? WHERE hash = ?", [(nan, h) for h in hashes])
        db.commit()
    finally:
        db.close()


def test_verify_finds_nan_vectors_stored_or_cached_and_repair_embeds_them_again(
    tmp_path: Path, scratch: Path, open_gateway: Gateway
) -> None:
    tree = small_tree(tmp_path / "docs", chars=600)
    cfg = write_config(tmp_path / "config.yaml", tree, open_gateway.url)
    cli_run(scratch, "resync", "-c", str(cfg))
    good = state_dense_vectors(scratch)
    first, both, last = sorted(good)[0], sorted(good)[1], sorted(good)[-1]
    # one point bad in the store only, one in the cache only, one in both
    _poison(scratch, in_store=[first, both], in_cache=[both, last])
    rep = json.loads(cli_run(scratch, "verify", "--json", "-c", str(cfg), ok=(1,)).stdout)
    report = rep["sources"][0]
    assert report["nonfinite"] == sorted([first, both]) and report["n_cache"] == 2
    text = cli_run(scratch, "verify", "-c", str(cfg), ok=(1,)).output
    assert "2 stored and 2 cached vector(s) with NaN" in text
    sent = sum(n for _, _, n in open_gateway.log)
    cli_run(scratch, "verify", "--repair", "-c", str(cfg))
    # the one bad in both is embedded again; the others come from their good copy
    assert sum(n for _, _, n in open_gateway.log) - sent == 1
    cli_run(scratch, "verify", "-c", str(cfg))
    repaired = state_dense_vectors(scratch)
    assert set(repaired) == set(good) and finite(repaired)
    for pid in (first, both, last):
        assert float(np.dot(repaired[pid], good[pid])) > 0.999
    cached = cached_vectors(scratch)
    assert finite(cached) and len(cached) >= len(good)


class PoisonedModel:
    """The real model, but the vector of each text in ``bad`` is NaN ``times`` times."""

    def __init__(self, model: Any, bad: set[str], times: int) -> None:
        self.model = model
        self.left = dict.fromkeys(bad, times)
        self.asked: list[str] = []

    def __call__(self, texts: Sequence[str]) -> Any:
        self.asked += texts
        out = np.array(self.model(texts), dtype=np.float32)
        for i, t in enumerate(texts):
            hit = next((b for b in self.left if b in t and self.left[b] > 0), None)
            if hit is not None:
                self.left[hit] -= 1
                out[i, 3] = np.nan if i % 2 == 0 else np.inf
        return out


@pytest.mark.parametrize("times", [1, 99])
def test_a_local_models_bad_vector_is_asked_again_and_never_written(
    tmp_path: Path, real_model: Any, times: int
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nThe alpha page explains the collector pipeline.\n")
    (root / "b.md").write_text("# Beta\n\nThe beta page explains exporters and receivers.\n")
    model = PoisonedModel(real_model, {"beta page"}, times)
    state = tmp_path / "state"
    eng = make_engine(root, state, model)
    try:
        res = eng.sync("docs" if "docs" in eng.context.sources else next(iter(eng.context.sources)))
        asked_beta = sum("beta page" in t for t in model.asked)
        assert eng.profiles.profile.embedder.stats.rejected == min(times, asked_beta)
        docs = eng.resources.manifest.documents(next(iter(eng.context.sources)))
    finally:
        eng.close()
    stored = state_dense_vectors(state)
    assert finite(stored) and finite(cached_vectors(state))
    paths = {p["path"] for p in _payloads(state)}
    if times == 1:  # asked again once: indexed
        assert res.failed == 0 and paths == {"a.md", "b.md"}
    else:  # bad on every attempt: that document fails alone, with the reason
        assert res.failed == 1 and paths == {"a.md"}
        assert "NonFiniteVectorError" in str(docs["b.md"].error)
        # 3 attempts in the group's write, 3 more when it is written alone
        assert asked_beta == 6


def _payloads(state: Path) -> list[dict[str, Any]]:
    store = open_state_store(state)
    try:
        return [p for _, p in store.scroll("ingestd")]
    finally:
        store.close()
