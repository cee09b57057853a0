"""A store made with qdrant-client's local mode moves to Qdrant Edge when configured.

The move is a collection-version build (reason ``engine``): the new version is made in
the Edge store, every point is copied with its dense and sparse vectors (nothing is
chunked or embedded again), searches answer from the local version until the atomic
switch, and the local store's folder is removed once it holds nothing. A crash anywhere
in it is finished by the next start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ingestd.store.vectors import versions as collections_mod
from tests.helpers import (
    CountingEmbedder,
    assert_matches_oracle,
    fake_vectors,
    make_engine,
    store_snapshot,
    without_provenance,
)


def _local_store(tree: Path, state: Path) -> dict[str, dict[str, Any]]:
    eng = make_engine(tree, state, fake_vectors, qdrant={"engine": "local"})
    try:
        assert not eng.sync(next(iter(eng.context.sources))).interrupted
    finally:
        eng.close()
    assert (state / "qdrant/meta.json").is_file() and not (state / "edge").exists()
    return store_snapshot(state)


@pytest.mark.engine("edge")
def test_a_local_store_moves_to_edge_with_searches_answered_meanwhile(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    before = _local_store(tree, state)
    monkeypatch.setattr(collections_mod, "COPY_SLICE", 10)  # several slices, checkpoints
    emb = CountingEmbedder(fake_vectors)
    eng = make_engine(tree, state, emb, qdrant={"engine": "edge"})
    seen: list[tuple[str | None, int]] = []

    def search_meanwhile(serve_changes: bool) -> None:
        if eng.resources.manifest.collection_build("ingestd") is None:
            return  # not during the move
        assert not serve_changes, "no change is written while points are copied"
        lay = eng.resources.store.layout("ingestd")
        hits = eng.resources.store.search(
            "ingestd", dense=fake_vectors(["collector"])[0], sparse=None, limit=3, mode="dense"
        )
        seen.append((lay.engine, len(hits)))

    eng.checkpoints.on_checkpoint = search_meanwhile
    try:
        res = eng.sync(next(iter(eng.context.sources)))
        assert not res.interrupted and res.indexed == 0
        lay = eng.resources.store.layout("ingestd")
        assert (lay.engine, lay.physical, lay.current) == ("edge", "ingestd__v2", True)
        assert eng.verify(next(iter(eng.context.sources))).clean
    finally:
        eng.close()
    assert emb.texts == [], "nothing is embedded: vectors move with their points"
    assert len(seen) >= 3 and all(e == "local" and n == 3 for e, n in seen), seen
    assert not (state / "qdrant").exists(), "the emptied local store is removed"
    assert without_provenance(store_snapshot(state)) == without_provenance(before)
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


@pytest.mark.engine("edge")
@pytest.mark.parametrize("crash_at", ["copy", "alias", "drop"])
def test_an_interrupted_move_is_finished_by_the_next_start(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: str
) -> None:
    from ingestd.store.vectors.client.qdrant import QdrantStore
    from ingestd.store.vectors.edge.edge import EdgeStore

    state = tmp_path / "state"
    before = _local_store(tree, state)

    class Crash(Exception):
        pass

    owner, method = {
        "copy": (EdgeStore, "upsert"),
        "alias": (EdgeStore, "point_alias"),
        "drop": (QdrantStore, "drop_collection"),
    }[crash_at]

    def crash(*_a: Any, **_k: Any) -> Any:
        raise Crash

    with monkeypatch.context() as m:
        m.setattr(owner, method, crash)
        eng = make_engine(tree, state, fake_vectors, qdrant={"engine": "edge"})
        try:
            with pytest.raises(Crash):
                eng.sync(next(iter(eng.context.sources)))
        finally:
            eng.close()
    emb = CountingEmbedder(fake_vectors)
    eng = make_engine(tree, state, emb, qdrant={"engine": "edge"})
    try:
        assert not eng.sync(next(iter(eng.context.sources))).interrupted
        assert eng.resources.store.layout("ingestd").engine == "edge"
        assert eng.verify(next(iter(eng.context.sources))).clean
    finally:
        eng.close()
    assert emb.texts == []
    # provenance aside: a float crosses the engines' JSON 1 ulp apart at times
    assert without_provenance(store_snapshot(state)) == without_provenance(before)
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


@pytest.mark.engine("local")
def test_a_local_store_stays_local_without_a_setting(tree: Path, tmp_path: Path) -> None:
    """``qdrant.engine`` unset: a store made with local mode keeps working with it."""
    state = tmp_path / "state"
    _local_store(tree, state)
    eng = make_engine(tree, state, fake_vectors, qdrant={"engine": None})
    try:
        (tree / "docs/new.md").write_text("# New\n\nA page added later.\n")
        res = eng.sync(next(iter(eng.context.sources)))
        assert res.indexed == 1
        assert eng.resources.store.layout("ingestd").engine == "local"
    finally:
        eng.close()
    assert not (state / "edge").exists()
