"""Hybrid retrieval end to end through the engine, in embedded mode.

* every searchable point carries the BM25 vector of its embedded text, and ``verify``
  recomputes it from the text;
* a store written before sparse vectors existed (a legacy physical collection, dense
  only, no ``path_prefixes``) is upgraded by building a new version behind the alias:
  no chunk is embedded again, the result equals a from-scratch ingest, and a stop
  request mid-build resumes on the next start;
* ``search --path X -k 1`` finds a chunk of X for random files and folders.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.store.search.query import PATH_KEY
from ingestd.store.search.sparse import SparseVec, terms
from tests.helpers import (
    MD_DOCS,
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    make_engine,
)


def _sync(eng: Any) -> None:
    for name in eng.context.sources:
        res = eng.sync(name)
        assert not res.interrupted


def _make_legacy(state: Path) -> None:
    """Turn a current store into one as written before versions and sparse vectors."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(state / "qdrant"))
    physical = client.get_aliases().aliases[0].collection_name
    recs, offset = [], None
    while True:
        part, offset = client.scroll(physical, limit=1000, offset=offset, with_vectors=True)
        recs += part
        if offset is None:
            break
    client.delete_collection(physical)  # its alias goes with it
    size = len(next(iter(recs)).vector[""])
    client.create_collection(
        "ingestd", vectors_config=models.VectorParams(size=size, distance=models.Distance.COSINE)
    )
    client.upsert(
        "ingestd",
        [
            models.PointStruct(
                id=r.id,
                vector=r.vector[""] if isinstance(r.vector, dict) else r.vector,
                payload={k: v for k, v in (r.payload or {}).items() if k != PATH_KEY},
            )
            for r in recs
        ],
    )
    client.close()
    import sqlite3

    with sqlite3.connect(state / "manifest.db") as db:  # a manifest of that time
        db.execute("UPDATE collections SET layout = NULL")


def test_verify_recomputes_sparse_vectors(tree: Path, tmp_path: Path, fake_embedder: Any) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    source = next(iter(eng.context.sources))
    assert eng.verify(source).clean
    pid = next(pid for pid, p in eng.resources.store.scroll("ingestd") if not p.get("is_parent"))
    eng.resources.store.set_sparse("ingestd", [(pid, SparseVec([1, 2], [0.5, 0.5]))])
    rep = eng.verify(source)
    assert rep.sparse == [pid] and not rep.stale and not rep.clean
    assert rep.as_dict()["n_sparse"] == 1
    assert eng.verify(source, repair=True).clean
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


@pytest.mark.engine("local")  # a legacy store is one of qdrant-client's local mode
def test_legacy_store_upgrades_without_embedding(
    tree: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    eng.close()
    _make_legacy(state)
    (state / "embeddings.db").unlink()  # vectors must come from the legacy points
    for f in state.glob("embeddings.db-*"):
        f.unlink()
    (tree / "docs/collector/quick-start.md").unlink()  # and the files moved on meanwhile
    embedded = CountingEmbedder(fake_vectors)
    eng = make_engine(tree, state, embedded)
    source = next(iter(eng.context.sources))
    before = eng.verify(source)
    assert len(before.sparse) == before.expected - len(before.missing) > 0  # none has one
    _sync(eng)
    assert embedded.texts == []
    assert eng.resources.store.aliases() == {"ingestd": "ingestd__v2"}
    assert set(eng.resources.store.versions("ingestd")) == {2}
    assert eng.resources.manifest.collection_build("ingestd") is None
    assert eng.verify(source).clean
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


@pytest.mark.engine("local")  # a legacy store is one of qdrant-client's local mode
def test_a_stopped_upgrade_resumes_on_the_next_start(
    tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    """Two sources share the collection; a stop during the second leaves a build to resume."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    roots = [copy_tree(tmp_path / "a"), copy_tree(tmp_path / "b")]
    state = tmp_path / "state"
    cfg = load_config(None, roots=roots)
    eng = Engine(cfg, state, embed_model=fake_embedder)
    _sync(eng)
    eng.close()
    _make_legacy(state)

    eng = Engine(cfg, state, embed_model=fake_embedder)
    first, second = sorted(eng.context.sources)
    seen: list[str] = []

    def stop_in_second_source(serve: bool) -> None:
        seen.extend(sorted({s for s, _ in eng.writer.in_flight}))
        if second in seen:
            eng.checkpoints.stop.set()

    eng.checkpoints.on_checkpoint = stop_in_second_source
    res = eng.sync(first)
    assert res.interrupted
    build = eng.resources.manifest.collection_build("ingestd")
    assert build is not None and build["done_sources"] == [first]
    assert (
        eng.resources.store.aliases() == {}
    )  # still the legacy collection: searches answer from it
    hits = search_cmd(eng, "collector architecture", k=3)
    assert hits and all(h["mode"] == "dense" for h in hits)
    eng.close()

    eng = Engine(cfg, state, embed_model=fake_embedder)
    _sync(eng)
    assert eng.resources.store.aliases() == {"ingestd": "ingestd__v2"}
    assert all(eng.verify(s).clean for s in eng.context.sources)
    eng.close()


SUBSET_DIRS = ("docs/collector", "docs/concepts", "docs/languages/python")


def _subset() -> list[str]:
    files = []
    for d in SUBSET_DIRS:
        files += sorted(str(p.relative_to(MD_DOCS)) for p in (MD_DOCS / d).rglob("*.md"))[:8]
    return files


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_path_filter_finds_every_file_and_folder_at_k_1(
    tmp_path: Path, fake_embedder: CountingEmbedder, mode: str
) -> None:
    files = _subset()
    root = copy_tree(tmp_path / "docs", files)
    eng = make_engine(root, tmp_path / "state", fake_embedder)
    _sync(eng)
    texts: dict[str, str] = {}
    for _, p in eng.resources.store.scroll("ingestd"):
        if not p.get("is_parent"):
            texts.setdefault(p["path"], p["text"])
    folders = sorted({f.rsplit("/", 1)[0] for f in files} | {"docs", "docs/languages"})
    rng = random.Random(10)
    for target in rng.sample(sorted(texts), 10) + folders:
        query = "how do I configure it"
        if mode == "sparse":  # BM25 ranks only chunks sharing a term with the query
            some = next(t for p, t in sorted(texts.items()) if p.startswith(target))
            query = next(w for w in some.split() if len(w) > 3 and terms(w))
        hits = search_cmd(eng, query, k=1, path=target, mode=mode)
        path = hits[0]["path"] if hits else None
        assert path is not None, f"--path {target} -k 1 ({mode}) found nothing"
        assert path == target or path.startswith(target + "/"), (target, path)
    assert search_cmd(eng, "collector", k=1, path="docs/nowhere", mode=mode) == []
    eng.close()


@pytest.mark.slow
def test_search_cli_real_model_modes_filters_and_ranks(tmp_path: Path) -> None:
    """``ingestd search`` as a process, with the real model: hybrid by default, exact filters."""
    import json

    from tests.helpers import run_cli

    files = ("docs/collector/quick-start.md", "docs/concepts/glossary.md", *_subset()[:4])
    root = copy_tree(tmp_path / "docs", files)
    state = tmp_path / "state"
    proc = run_cli("resync", "--state-dir", str(state), str(root), timeout=600)
    assert proc.returncode == 0, proc.stderr

    def search(*args: str) -> list[dict[str, Any]]:
        proc = run_cli("search", "--state-dir", str(state), *args, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    hits = search("--json", "-k", "1", "--path", "docs/concepts/glossary.md", "docker compose")
    assert [h["path"] for h in hits] == ["docs/concepts/glossary.md"]
    h = hits[0]
    assert h["mode"] == "hybrid" and h["rank"] == 1
    assert {"dense_rank", "dense_score", "sparse_rank", "sparse_score"} <= set(h)
    assert h["path_prefixes"] == ["docs", "docs/concepts", "docs/concepts/glossary.md"]
    hits = search(
        "--json", "-k", "3", "--mode", "sparse", "--path", "./docs/collector/", "telemetrygen"
    )
    assert hits and all(h["path"].startswith("docs/collector/") for h in hits)
    assert all(h["mode"] == "sparse" and h["sparse_rank"] is not None for h in hits)
    proc = run_cli("verify", "--state-dir", str(state), str(root), "--json", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["sources"][0]["n_sparse"] == 0
