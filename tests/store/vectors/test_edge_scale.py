"""Qdrant Edge's shard configuration for large stores: int8 scan, float32 rescoring.

After an optimisation, the older points of a shard live in an immutable segment that
is scanned on an int8 copy of the vectors and rescored from the float32 ones; the
results must stay those of an exact float scan. A shard made with the earlier
configuration (float32 only, never optimised) takes the current one when opened.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.store.search.query import INDEXED_KEYS
from ingestd.store.search.sparse import SparseVec
from ingestd.store.vectors.base import Point
from ingestd.store.vectors.edge import edge_shards as edge_collections
from ingestd.store.vectors.edge.edge import EdgeStore, _vector

pytestmark = pytest.mark.engine("edge")

DIM = 32
N = 3000


def _vectors(n: int = N, seed: int = 0) -> np.ndarray[Any, Any]:
    """``n`` clustered unit vectors (40 centres): near neighbours are close in score."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    v = centres[rng.integers(0, 40, n)] + 0.4 * rng.standard_normal((n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _points(vecs: np.ndarray[Any, Any]) -> list[Point]:
    return [
        Point(
            str(uuid.UUID(int=i + 1)),
            v,
            {"source": "s", "path": f"docs/d{i % 30}/f{i}.md", "path_prefixes": ["docs"]},
            SparseVec([i % 97, 100 + i % 13], [1.0, 2.0]),
        )
        for i, v in enumerate(vecs)
    ]


def _exact(vecs: np.ndarray[Any, Any], q: np.ndarray[Any, Any], k: int = 10) -> list[str]:
    return [str(uuid.UUID(int=int(i) + 1)) for i in np.argsort(-(vecs @ q), kind="stable")[:k]]


def _dense(store: EdgeStore, q: np.ndarray[Any, Any]) -> list[str]:
    return [h.id for h in store.search("ingestd", dense=q, sparse=None, limit=10, mode="dense")]


def _old_shard(root: Path, vecs: np.ndarray[Any, Any]) -> Path:
    """An Edge store as the first Edge release made it: float32 vectors, default config."""
    import qdrant_edge as q

    (root / "collections").mkdir(parents=True)
    aliases = {"format": 1, "aliases": {"ingestd": "ingestd__v1"}}
    (root / edge_collections.ALIASES_FILE).write_text(json.dumps(aliases))
    folder = root / "collections" / "ingestd__v1"
    config = q.EdgeConfig(
        vectors=q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine),
        sparse_vectors={"bm25": q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
    )
    shard = q.EdgeShard.create(str(folder), config)
    for key in INDEXED_KEYS:
        shard.update(q.UpdateOperation.create_field_index(key, q.PayloadSchemaType.Keyword))
    points = [
        q.Point(id=p.id, vector=_vector(p.vector, p.sparse), payload=p.payload)
        for p in _points(vecs)
    ]
    shard.update(q.UpdateOperation.upsert_points(points))
    shard.flush()
    shard.close()
    return folder


def test_old_shard_takes_the_int8_config_and_answers_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard of the earlier config opens, is converted by optimize(), searches exactly."""
    monkeypatch.setattr(edge_collections, "INDEXING_THRESHOLD_KB", 100)
    vecs = _vectors()
    folder = _old_shard(tmp_path / "edge", vecs)
    queries = _vectors(20, seed=1)
    store = EdgeStore(tmp_path / "edge", engine="edge")
    before = [_dense(store, q) for q in queries]
    config = json.loads((folder / "edge_config.json").read_text())
    assert "scalar" in config["quantization_config"]
    assert config["vectors"][""]["memory"] == "cold"
    assert store.optimize("ingestd__v1") is True
    assert store.shard("ingestd__v1").info().segments_count >= 2  # an immutable one
    after = [_dense(store, q) for q in queries]
    assert before == after == [_exact(vecs, q) for q in queries]
    assert store.point_count("ingestd") == N
    store.close()
    store = EdgeStore(tmp_path / "edge", engine="edge")  # reopens with the new config
    assert [_dense(store, q) for q in queries] == after
    store.close()


def test_upsert_optimizes_every_so_many_points_and_stays_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upserts optimise the shard every OPTIMIZE_EVERY points; searches stay exact."""
    monkeypatch.setattr(edge_collections, "INDEXING_THRESHOLD_KB", 100)
    monkeypatch.setattr("ingestd.store.vectors.edge.edge.OPTIMIZE_EVERY", 1000)
    vecs = _vectors()
    store = EdgeStore(tmp_path / "edge", engine="edge")
    store.ensure_collection("ingestd", DIM)
    points = _points(vecs)
    for i in range(0, N, 500):
        store.upsert("ingestd", points[i : i + 500])
    info = store.shard("ingestd__v1").info()
    assert info.segments_count >= 2 and info.points_count == N  # one not appendable
    queries = _vectors(20, seed=1)
    assert [_dense(store, q) for q in queries] == [_exact(vecs, q) for q in queries]
    hits = store.search("ingestd", dense=queries[0], sparse=SparseVec([5], [1.0]), limit=5)
    assert len(hits) == 5
    store.close()
