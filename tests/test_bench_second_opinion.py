"""bench/_second_opinion.py: a chunk ranking with a second opinion beside the shipped hybrid.

Three-list union fusion is the shipped two-list one when given the shipped two lists;
a rerank keeps the shipped order on ties and lets agreeing evidence move a chunk up;
Rocchio feedback moves the question vector toward the first chunks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.store.search.sparse import query_vector

BENCH = Path(__file__).resolve().parent.parent / "bench"

pytestmark = pytest.mark.engine("edge")  # no store here


@pytest.fixture
def so(monkeypatch: pytest.MonkeyPatch) -> Any:
    """bench/_second_opinion.py and bench/retrieval.py, importable while the test runs."""
    monkeypatch.syspath_prepend(str(BENCH))
    import _second_opinion
    import retrieval

    return _second_opinion, retrieval


def _unit(rng: Any, n: int) -> Any:
    v = rng.normal(size=(n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_union_fusion_of_the_shipped_two_lists_is_the_shipped_ranking(
    so: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod, retrieval = so
    for m in (mod, retrieval):  # 8 candidates a list out of 24 chunks: the union matters
        monkeypatch.setattr(m, "CANDIDATES", 8)
    words = ["padding", "margin", "border", "button", "label", "widget", "style", "cell"]
    rng = np.random.default_rng(3)
    idx = retrieval.Index("default")
    for i in range(24):  # a length of its own: no two chunks tie in BM25
        filler = " ".join(["filler"] * i)
        idx.add(f"p{i % 7}.md", 0, 1, " ".join(rng.choice(words, size=4)) + " " + filler)
    idx.vecs = _unit(rng, 24)
    texts = ["button padding", "margin of a cell", "border style"]
    queries = retrieval.Queries(texts, _unit(rng, 3), [query_vector(t) for t in texts])
    shipped, shipped_scores = retrieval.hybrid_scored(idx, queries)
    lists = [(queries.vecs @ idx.vecs.T, False), (retrieval.bm25_scores(idx, queries), True)]
    ranked, scores = mod.union_fuse(lists, shipped.shape[1])
    assert ranked.tolist() == shipped.tolist()
    for mine, theirs in zip(scores, shipped_scores, strict=True):
        assert len(mine) > 8  # candidates of both lists
        assert mine.keys() == theirs.keys()
        assert all(np.isclose(mine[j], theirs[j]) for j in mine)


def test_a_lexical_list_offers_no_chunk_that_shares_no_term(so: Any) -> None:
    mod, _ = so
    dense = np.array([[0.9, 0.8, 0.1]])
    lexical = np.array([[0.0, 0.0, 2.0]])
    ranked, scores = mod.union_fuse([(dense, False), (lexical, True)], 3)
    assert set(scores[0]) == {0, 1, 2}  # chunk 2 is a candidate by BM25
    assert scores[0][0] == pytest.approx(1 / 60)  # chunk 0 has a dense rank only
    assert ranked[0].tolist() == [2, 0, 1]  # ranks 3 + 1 beat rank 1 alone


def test_rerank_keeps_the_shipped_order_on_ties_and_lets_evidence_move_a_chunk_up(
    so: Any,
) -> None:
    mod, _ = so
    ranked = np.array([[4, 7, 1, 9]])
    same, _ = mod.rerank(ranked, lambda qi, c: [1.0] * len(c))
    assert same.tolist() == ranked.tolist()
    # evidence ranks 7 first: ranks 2 + 1 beat 1 + 2 only on ties, so the shipped first stays
    up, fused = mod.rerank(ranked, lambda qi, c: [0.5, 0.9, 0.1, 0.0])
    assert up[0].tolist() == [4, 7, 1, 9]
    assert fused[0][7] == pytest.approx(fused[0][4])
    up, _ = mod.rerank(ranked, lambda qi, c: [0.0, 0.2, 0.9, 0.1])  # 1: third and first
    assert up[0].tolist() == [1, 7, 4, 9]


def test_rocchio_moves_the_question_toward_the_first_chunks_at_unit_length(so: Any) -> None:
    mod, _ = so
    chunks = np.eye(3, dtype=np.float32)
    q = np.array([[1.0, 0.0, 0.0]], dtype=np.float32)
    moved = mod.rocchio(q, chunks, np.array([[1, 2, 0]]), k=1, alpha=1.0, beta=0.2)
    assert np.linalg.norm(moved) == pytest.approx(1.0)
    assert moved[0, 1] > 0 and moved[0, 2] == 0  # toward chunk 1 alone (k 1)
    assert moved[0, 0] > moved[0, 1]  # alpha 1 against beta 0.2: still mostly q
