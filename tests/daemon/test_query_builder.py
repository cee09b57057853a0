"""QueryBuilder: an application's own Qdrant query ranks exactly as ``ingestd search``.

The end-to-end test indexes md-docs pages that hold the answers of their dev-set
questions with the real model, then sends the builder's request to the embedded store
opened with qdrant-client directly (the request a Qdrant server would get), and
compares it with the shared ``search`` command, which ``ingestd search`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import QueryBuilder
from ingestd.daemon.commands import commands
from tests.helpers import CORPORA, copy_tree, fake_vectors, make_engine

#: md-docs pages whose questions the test asks (small ones: the real model embeds them).
PAGES = (
    "docs/collector/resiliency.md",
    "docs/concepts/glossary.md",
    "docs/concepts/sampling/index.md",
    "docs/zero-code/python/troubleshooting.md",
    "docs/concepts/signals/baggage.md",
    "docs/languages/go/sampling.md",
    "docs/languages/rust/exporters.md",
)


def _questions() -> list[str]:
    lines = (CORPORA / "qa" / "md-docs.jsonl").read_text().splitlines()
    qs = [json.loads(line) for line in lines if line.strip()]
    return [q["question"] for q in qs if q["path"] in PAGES]


def test_the_request_is_ingestds_hybrid_query_with_filters_in_each_prefetch() -> None:
    qb = QueryBuilder(rrf_k=30, candidates=20, embed=fake_vectors)
    req = qb.request("batch processor", k=7, source="docs", path="./guide/")
    assert req.limit == 7 and req.with_payload is True
    assert req.query.rrf.k == 30
    dense, sparse = req.prefetch
    assert (dense.limit, sparse.limit, sparse.using) == (20, 20, "bm25")
    assert dense.query == [float(x) for x in fake_vectors(["batch processor"])[0]]
    for p in (dense, sparse):
        keys = {(c.key, c.match.value) for c in p.filter.must}
        assert keys == {("source", "docs"), ("path_prefixes", "guide")}
        assert p.filter.must_not[0].key == "is_parent"
    assert qb.request("x", mode="sparse").using == "bm25"
    assert qb.request("x", mode="dense").query == qb.dense("x")
    with pytest.raises(ValueError, match="unknown search mode"):
        qb.request("x", mode="fuzzy")


def test_from_config_takes_the_collection_model_and_ranking(tmp_path: Path) -> None:
    conf = tmp_path / "config.yaml"
    conf.write_text(
        "sources:\n  - {name: docs, root: /srv/docs, collection: handbook}\n"
        "search: {mode: dense, rrf_k: 10, candidates: 99}\n"
    )
    qb = QueryBuilder.from_config(conf)
    assert (qb.collection, qb.mode, qb.rrf_k, qb.candidates) == ("handbook", "dense", 10, 99)
    assert qb.model.name == "all-MiniLM-L6-v2"


def test_from_state_dir_reads_the_recorded_profile_and_refuses_another_model(
    tree: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_vectors)
    try:
        for name in eng.sources:
            eng.sync(name)
        fingerprint = eng.model.fingerprint
    finally:
        eng.close()
    qb = QueryBuilder.from_state_dir(state)
    assert qb.collection == "ingestd" and qb.model.fingerprint == fingerprint
    with pytest.raises(ValueError, match="no collection 'nope'"):
        QueryBuilder.from_state_dir(state, collection="nope")
    with pytest.raises(ValueError, match="nothing indexed"):
        QueryBuilder.from_state_dir(tmp_path / "empty")
    with pytest.raises(ValueError, match="is not the one that made collection"):
        QueryBuilder(fingerprint="0" * 64)


@pytest.fixture(scope="module")
def rankings(tmp_path_factory: pytest.TempPathFactory, real_model: Any) -> Iterator[Any]:
    """The md-docs subset indexed with the real model; ``ingestd search``'s rankings.

    The rankings are asked of a store opened afresh, as an ``ingestd search`` process
    opens it: points with equal scores (BM25 ties are common) come in the order the
    embedded store holds them, which is the order of its files once reopened.
    """
    tmp = tmp_path_factory.mktemp("qb")
    root = copy_tree(tmp / "docs", PAGES, CORPORA / "md-docs")
    state = tmp / "state"
    eng = make_engine(root, state, real_model)
    try:
        for name in eng.sources:
            eng.sync(name)
    finally:
        eng.close()
    want: dict[tuple[str, str], list[tuple[str, float]]] = {}
    eng = make_engine(root, state, real_model)
    try:
        for mode in ("hybrid", "dense", "sparse"):
            for q in _questions():
                hits = commands.search(eng, q, k=10, mode=mode)
                want[mode, q] = [(h["id"], h["score"]) for h in hits]
    finally:
        eng.close()
    yield state, want


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_a_direct_qdrant_query_ranks_exactly_as_ingestd_search(rankings: Any, mode: str) -> None:
    from qdrant_client import QdrantClient

    state, want = rankings
    questions = _questions()
    assert len(questions) >= 10
    qb = QueryBuilder.from_state_dir(state)  # loads the recorded model itself
    client = QdrantClient(path=str(state / "qdrant"))
    try:
        for q in questions:
            points = qb.search(client, q, k=10, mode=mode)
            assert [str(p.id) for p in points] == [i for i, _ in want[mode, q]], q
            scores = [s for _, s in want[mode, q]]
            assert [p.score for p in points] == pytest.approx(scores, abs=1e-6)
            assert all(p.payload and p.payload["text"] for p in points)
    finally:
        client.close()
