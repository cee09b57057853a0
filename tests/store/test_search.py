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

from ingestd.store.qdrant_store import QdrantStore
from ingestd.store.search import PATH_KEY, Filters, path_prefixes
from ingestd.store.sparse import document_vector, query_vector
from ingestd.store.vectors import Point
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
    hits = store.search("c", dense=q, sparse=sv, limit=10, rrf_k=k, candidates=30, ranks=True)
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
    store = QdrantStore(client=client)
    store.local = True
    lay = store.layout("old")
    assert lay.exists and not lay.aliased and not lay.sparse and not lay.current
    q = _unit([1.0] * DIM)
    sv = query_vector("t")
    assert [h.id for h in store.search("old", dense=q, sparse=sv, limit=1)] == [_pid(1)]
    got = store.search("old", dense=q, sparse=sv, limit=1, filters=Filters(path="docs/x.md"))
    assert [h.id for h in got] == [_pid(1)]
    store.close()
