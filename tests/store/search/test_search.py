"""The query side on qdrant-client's embedded mode: exact filters, modes, RRF, ranks.

Filters are Qdrant conditions applied before ranking, inside each prefetch: a search
limited to a file or folder finds its points at any ``limit``, even when every other
point ranks above them (the bug this pins: an over-fetched top-k filtered afterwards
found nothing at ``-k 1`` and something at ``-k 50``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.store.search.query import PATH_KEY, Filters, path_prefixes
from ingestd.store.search.sparse import document_vector, query_vector
from ingestd.store.vectors.base import Point
from ingestd.store.vectors.client.qdrant import QdrantStore
from tests.helpers import open_store

DIM = 8


def _pid(i: int) -> str:
    return f"00000000-0000-0000-0000-{i:012d}"


def _unit(v: list[float]) -> list[float]:
    a = np.asarray(v, dtype=np.float64)
    return list(a / np.linalg.norm(a))


@pytest.fixture
def store(tmp_path: Path, qdrant_engine: str) -> Iterator[Any]:
    s = open_store(tmp_path / "q", qdrant_engine)
    s.ensure_collection("c", DIM)
    yield s
    s.close()


def _fill(store: Any) -> list[Point]:
    """40 points in docs/a (close to the query, both ways), 2 in docs/b (far)."""
    rng = np.random.default_rng(7)
    points = []
    for i in range(42):
        path = f"docs/a/f{i % 5}.md" if i < 40 else "docs/b/far.md"
        near = i < 40
        vec = _unit([1.0, *(rng.normal(0, 0.1 if near else 3, DIM - 1))])
        text = "collector pipeline exporter" if near else "collector"
        payload = {"source": "s", "path": path, PATH_KEY: path_prefixes(path), "text": text}
        points.append(Point(_pid(i), vec, payload, document_vector(text)))
    parent = {"source": "s", "path": "docs/b/far.md", "is_parent": True, "text": "collector"}
    parent[PATH_KEY] = path_prefixes("docs/b/far.md")
    points.append(Point(_pid(99), _unit([1.0] + [0.0] * (DIM - 1)), parent, None))
    store.upsert("c", points)
    return points


def test_path_prefixes_are_the_ancestors_and_the_path() -> None:
    assert path_prefixes("a/b/c.md") == ["a", "a/b", "a/b/c.md"]
    assert path_prefixes("c.md") == ["c.md"]


@pytest.mark.parametrize(
    ("given", "want"),
    [("./docs/b/", "docs/b"), ("docs/b", "docs/b"), ("", None), (".", None), (None, None)],
)
def test_path_filter_is_normalised(given: str | None, want: str | None) -> None:
    assert Filters(path=given).normalised_path() == want


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
@pytest.mark.parametrize("path", ["docs/b", "docs/b/far.md", "docs/b/"])
def test_filters_apply_before_ranking_at_k_1(store: Any, mode: str, path: str) -> None:
    _fill(store)
    q = _unit([1.0] + [0.0] * (DIM - 1))
    hits = store.search(
        "c", dense=q, sparse=query_vector("collector pipeline"), limit=1,
        filters=Filters(path=path), mode=mode,  # type: ignore[arg-type]
    )  # fmt: skip
    assert [h.payload["path"] for h in hits] == ["docs/b/far.md"]
    assert not hits[0].payload.get("is_parent")


def test_source_filter_and_a_path_of_nothing(store: Any) -> None:
    _fill(store)
    q = _unit([1.0] + [0.0] * (DIM - 1))
    sv = query_vector("collector")
    assert store.search("c", dense=q, sparse=sv, limit=3, filters=Filters(source="other")) == []
    assert store.search("c", dense=q, sparse=sv, limit=3, filters=Filters(path="docs/c")) == []
    assert store.search("c", dense=q, sparse=sv, limit=3, filters=Filters(path="docs/a/f")) == []
    hits = store.search("c", dense=q, sparse=sv, limit=50, filters=Filters(source="s"))
    assert len(hits) == 42  # every point but the parent


def test_hybrid_is_rrf_of_the_reported_rankings(store: Any) -> None:
    _fill(store)
    q = _unit([1.0, 0.3] + [0.0] * (DIM - 2))
    sv = query_vector("pipeline exporter")
    k = 60
    hits = store.search(
        "c", dense=q, sparse=sv, limit=10, rrf_k=k, candidates=30, ranks=True, fusion="rrf"
    )
    dense = store.search("c", dense=q, sparse=None, limit=30, mode="dense")
    sparse = store.search("c", dense=None, sparse=sv, limit=30, mode="sparse")
    want_dense = {h.id: h.rank for h in dense}
    want_sparse = {h.id: h.rank for h in sparse}
    for h in hits:
        assert (h.dense[0] if h.dense else None) == want_dense.get(h.id)
        assert (h.sparse[0] if h.sparse else None) == want_sparse.get(h.id)
        rrf = sum(1 / (k + r[0] - 1) for r in (h.dense, h.sparse) if r)
        assert h.score == pytest.approx(rrf, rel=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_fusion_scores_a_bm25_only_candidate_with_its_real_dense_score(store: Any) -> None:
    points = _fill(store)
    rare = _unit([-1.0, 0.5] + [0.0] * (DIM - 2))  # the farthest point from the query
    text = "collector pipeline exporter tail sampling"
    payload = {"source": "s", "path": "docs/c.md", PATH_KEY: path_prefixes("docs/c.md")}
    payload["text"] = text
    store.upsert("c", [Point(_pid(50), rare, payload, document_vector(text))])
    q = _unit([1.0, 0.3] + [0.0] * (DIM - 2))
    sv = query_vector("tail sampling")
    n, k = 10, 60
    union = store.search("c", dense=q, sparse=sv, limit=n, rrf_k=k, candidates=n, ranks=True)
    plain = store.search(
        "c", dense=q, sparse=sv, limit=n, rrf_k=k, candidates=n, ranks=True, fusion="rrf"
    )
    got = {h.id: h for h in union}
    only = got[_pid(50)]  # BM25's only match, far outside the dense top 10
    assert only.sparse is not None and only.sparse[0] == 1
    assert only.dense is not None
    assert only.dense[1] == pytest.approx(float(np.dot(q, rare)), abs=1e-5)
    assert {h.id: h for h in plain}[_pid(50)].dense is None  # plain RRF: no dense rank
    # its dense rank is among the union of candidates: the dense top 10 and itself
    assert only.dense[0] == n + 1
    assert only.score == pytest.approx(1 / k + 1 / (k + n), rel=1e-6)
    # every dense candidate that shares no term with the query has no BM25 rank
    for h in union:
        if h.id != _pid(50):
            assert h.sparse is None
            want = float(np.dot(q, next(p.vector for p in points if p.id == h.id)))
            if h.dense is not None:
                assert h.dense[1] == pytest.approx(want, abs=1e-5)
    assert union[0].id == _pid(50)


def test_ranks_leave_the_result_unchanged(store: Any) -> None:
    _fill(store)
    q = _unit([1.0, -0.2] + [0.0] * (DIM - 2))
    sv = query_vector("collector exporter")
    for mode in ("hybrid", "dense", "sparse"):
        plain = store.search("c", dense=q, sparse=sv, limit=7, mode=mode)  # type: ignore[arg-type]
        ranked = store.search("c", dense=q, sparse=sv, limit=7, mode=mode, ranks=True)  # type: ignore[arg-type]
        assert [h.id for h in plain] == [h.id for h in ranked]
        assert plain[0].dense is None and ranked[0].dense is not None


def test_a_query_without_terms_still_ranks_dense_in_hybrid(store: Any) -> None:
    _fill(store)
    q = _unit([1.0] + [0.0] * (DIM - 1))
    empty = query_vector("?! ...")
    assert empty.indices == []
    assert len(store.search("c", dense=q, sparse=empty, limit=3)) == 3
    assert store.search("c", dense=q, sparse=empty, limit=3, mode="sparse") == []


@pytest.mark.engine("local")  # a legacy store is one of qdrant-client's local mode
def test_a_legacy_collection_is_searched_dense(tmp_path: Path) -> None:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection(
        "old", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    payload = {"source": "s", "path": "docs/x.md", "text": "t"}
    client.upsert(
        "old", [models.PointStruct(id=_pid(1), vector=_unit([1.0] * DIM), payload=payload)]
    )
    store = QdrantStore(client=client, engine="server")
    store.local = True
    lay = store.layout("old")
    assert lay.exists and not lay.aliased and not lay.sparse and not lay.current
    q = _unit([1.0] * DIM)
    sv = query_vector("t")
    assert [h.id for h in store.search("old", dense=q, sparse=sv, limit=1)] == [_pid(1)]
    got = store.search("old", dense=q, sparse=sv, limit=1, filters=Filters(path="docs/x.md"))
    assert [h.id for h in got] == [_pid(1)]
    store.close()


def _tied(store: Any) -> list[str]:
    """12 points of one vector and one text (a tie in every mode), 4 nearer ones, 4 farther."""
    ids = []
    points = []
    rng = np.random.default_rng(3)
    for i in range(20):
        # ids not in insertion order, so the engine's own order is not the id order
        pid = _pid((i * 7919) % 1000)
        if i < 4:
            vec, text = _unit([1.0, 0.05 * (i + 1)] + [0.0] * (DIM - 2)), "tie tie tie near"
        elif i < 16:
            vec, text = _unit([1.0, 0.5] + [0.0] * (DIM - 2)), "tie"
            ids.append(pid)
        else:
            vec, text = _unit([0.0, 1.0, *rng.normal(0, 1, DIM - 2)]), "other"
        path = f"docs/f{i}.md"
        payload = {"source": "s", "path": path, PATH_KEY: path_prefixes(path), "text": text}
        points.append(Point(pid, vec, payload, document_vector(text)))
    store.upsert("c", points)
    return sorted(ids)


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_equal_scores_come_in_id_order_and_the_cut_takes_the_lowest_ids(
    store: Any, mode: str
) -> None:
    """A tie is ordered by point id, also where the cut falls inside it.

    The engines order equal scores by hashing seeded anew for each opening of a store,
    so without this the same query answered differently in another process.
    """
    tied = _tied(store)
    q = _unit([1.0, 0.0] + [0.0] * (DIM - 2))
    sv = query_vector("tie near")
    for limit in (6, 9, 16, 17):
        hits = store.search("c", dense=q, sparse=sv, limit=limit, mode=mode)  # type: ignore[arg-type]
        got = [h.id for h in hits if h.id in tied]
        assert got == tied[: min(limit - 4, len(tied))], (mode, limit)
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)


def test_a_tie_at_the_cut_is_fetched_whole_in_doubling_calls() -> None:
    from ingestd.store.search.fusion import MAX_TIE_FETCH, settle
    from ingestd.store.search.query import Hit

    def engine(scores: list[float]) -> tuple[list[list[int]], Any]:
        calls: list[list[int]] = []

        def fetch(wanted: list[tuple[str, int]], with_payload: bool) -> list[list[Hit]]:
            calls.append([n for _, n in wanted])
            # the engine's order of a tie: reverse id order
            ranked = sorted(enumerate(scores), key=lambda p: (-p[1], -p[0]))
            return [
                [Hit(_pid(i), s, {}, r) for r, (i, s) in enumerate(ranked[:n], 1)]
                for _, n in wanted
            ]

        return calls, fetch

    calls, fetch = engine([0.9, 0.8, 0.7, 0.6])
    (best,) = settle(fetch, [("dense", 2)])
    assert [h.id for h in best] == [_pid(0), _pid(1)]
    assert calls == [[3]]  # the hit after the cut scores lower: one call
    calls, fetch = engine([0.9] + [0.5] * 20 + [0.1])
    best, other = settle(fetch, [("sparse", 3), ("dense", 1)])
    assert [h.id for h in best] == [_pid(0), _pid(1), _pid(2)]
    assert [h.rank for h in best] == [1, 2, 3] and [h.id for h in other] == [_pid(0)]
    # until a lower score or the end of the store; the settled ranking keeps its size
    assert calls == [[4, 2], [8, 2], [16, 2], [32, 2]]
    calls, fetch = engine([0.5] * (MAX_TIE_FETCH + 10))
    assert len(settle(fetch, [("dense", 5)])[0]) == 5
    assert calls[-1] == [5 + MAX_TIE_FETCH]  # at most so far past the cut
    calls, fetch = engine([1.0 - i / 5000 for i in range(3000)])
    assert len(settle(fetch, [("dense", 2000)])[0]) == 2000  # large limits are whole
    assert calls == [[2001]]


def test_a_hit_whose_point_is_written_anew_meanwhile_is_searched_again() -> None:
    """A fusion reads payloads after its rankings: a point gone or pending in between (its
    document written anew) makes the search run again, and at worst leaves that hit out."""
    from ingestd.store.search.fusion import ATTEMPTS, rank_and_fuse
    from ingestd.store.search.query import Hit

    gone: set[str] = {_pid(1)}
    calls = {"fetch": 0, "payloads": 0}

    def fetch(wanted: list[tuple[str, int]], with_payload: bool) -> list[list[Hit]]:
        calls["fetch"] += 1
        assert not with_payload
        return [[Hit(_pid(i), 1.0 - i / 10, {}, i + 1) for i in range(n)] for _, n in wanted]

    def payloads(ids: Any) -> dict[str, dict[str, Any]]:
        calls["payloads"] += 1
        found = {i: {"text": i} for i in ids if i not in gone}
        gone.clear()  # the new version is committed: the next search no longer ranks it
        return found

    def search() -> list[Hit]:
        return rank_and_fuse(
            fetch, payloads, "hybrid", ["dense", "sparse"], limit=3, candidates=5, rrf_k=60,
            ranks=False,
        )  # fmt: skip

    hits = search()
    assert calls == {"fetch": 2, "payloads": 2}
    assert [h.id for h in hits] == [_pid(0), _pid(1), _pid(2)]
    assert [h.payload["text"] for h in hits] == [h.id for h in hits]
    assert hits[0].dense is None  # ranks not asked for
    calls.update(fetch=0, payloads=0)

    def payloads_always(ids: Any) -> dict[str, dict[str, Any]]:
        calls["payloads"] += 1  # a point still ranked, and pending since: left out
        return {i: {"text": i, **({"pending": True} if i == _pid(1) else {})} for i in ids}

    hits = rank_and_fuse(
        fetch, payloads_always, "hybrid", ["dense", "sparse"], limit=3, candidates=5,
        rrf_k=60, ranks=True,
    )  # fmt: skip
    assert calls["payloads"] == ATTEMPTS
    assert [h.id for h in hits] == [_pid(0), _pid(2)] and [h.rank for h in hits] == [1, 2]
    assert hits[1].dense == (3, pytest.approx(0.8))
