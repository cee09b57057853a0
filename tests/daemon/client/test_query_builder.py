"""QueryBuilder: an application's own Qdrant query ranks exactly as ``ingestd search``.

The end-to-end test indexes md-docs pages that hold the answers of their dev-set
questions with the real model on the default embedded engine (Qdrant Edge, which
qdrant-client cannot open), then copies the points into a qdrant-client local-mode
store created as ingestd creates a server's collection (:func:`local_mode_copy`). The
builder's search goes to that store through qdrant-client's Query API and must rank
exactly as ``ingestd search`` on the copy, and as ``ingestd search`` on the Edge store
(equal scores come by point id in both); its single fused ``QueryRequest`` (the object
a Qdrant server would get) ranks the same up to the order of equal scores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import QueryBuilder
from ingestd.daemon.commands.query.search import search as search_cmd
from tests.helpers import (
    CORPORA,
    copy_tree,
    fake_vectors,
    local_mode_copy,
    make_engine,
    run_cli,
    sync_once,
)

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
        for name in eng.context.sources:
            eng.sync(name)
        fingerprint = eng.profiles.profile.model.fingerprint
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


Ranking = list[tuple[str, float]]
#: ``search.candidates``: points each ranking gives the hybrid fusion.
CANDIDATES = 50


@pytest.fixture(scope="module")
def rankings(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, dict[tuple[str, str, str], Ranking]]]:
    """The md-docs subset indexed with the real model; ``ingestd search``'s rankings.

    Returns the local-mode copy's state dir and ``(engine, mode, question) -> [(id,
    score)]`` for the Edge store (``edge``) and the copy (``local``), with the
    ``dense@50`` and ``sparse@50`` rankings the hybrid fusion gets. The rankings are
    asked of stores opened afresh, as an ``ingestd search`` process opens them.
    """
    tmp = tmp_path_factory.mktemp("qb")
    root = copy_tree(tmp / "docs", PAGES, CORPORA / "md-docs")
    state = tmp / "state"
    # the configured backend's model, as `ingestd search` and the builder load it: the
    # rankings compared must come from the same query vectors
    sync_once(root, state, None, qdrant={"engine": "edge"})
    assert (state / "edge").is_dir() and not (state / "qdrant").exists()
    local = local_mode_copy(state, tmp / "local")
    want: dict[tuple[str, str, str], Ranking] = {}
    for engine, where in (("edge", state), ("local", local)):
        eng = make_engine(root, where, None, qdrant={"engine": engine})
        try:
            for q in _questions():
                for mode in ("hybrid", "dense", "sparse"):
                    hits = search_cmd(eng, q, k=10, mode=mode)
                    want[engine, mode, q] = [(h["id"], h["score"]) for h in hits]
                for mode in ("dense", "sparse"):  # what the hybrid fusion gets
                    hits = search_cmd(eng, q, k=CANDIDATES, mode=mode)
                    want[engine, f"{mode}@{CANDIDATES}", q] = [(h["id"], h["score"]) for h in hits]
        finally:
            eng.close()
    yield local, want


def _tie_groups(ranking: Ranking) -> list[set[str]]:
    """The ids of a ranking in runs of equal scores (within 1e-5), best first."""
    groups: list[set[str]] = []
    last: float | None = None
    for pid, score in ranking:
        if last is None or abs(score - last) > 1e-5:
            groups.append(set())
        groups[-1].add(pid)
        last = score
    return groups


def _same_up_to_ties(got: Ranking, want: Ranking) -> bool:
    """Same scores rank by rank, the same ids in each run of equal scores.

    The last run may be cut by ``k`` differently: only its size must agree.
    """
    if [s for _, s in got] != pytest.approx([s for _, s in want], abs=1e-5):
        return False
    a, b = _tie_groups(got), _tie_groups(want)
    return a[:-1] == b[:-1] and len(a[-1]) == len(b[-1]) if a else not b


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_a_direct_qdrant_query_ranks_exactly_as_ingestd_search(rankings: Any, mode: str) -> None:
    from qdrant_client import QdrantClient, models

    local, want = rankings
    questions = _questions()
    assert len(questions) >= 10
    qb = QueryBuilder.from_state_dir(local)  # loads the recorded model itself
    client = QdrantClient(path=str(local / "qdrant"))
    one_request_exact = one_request_fused_differently = 0
    try:
        for q in questions:
            hits = qb.search(client, q, k=10, mode=mode)
            got = [(h.id, h.score) for h in hits]
            assert [i for i, _ in got] == [i for i, _ in want["local", mode, q]], q
            scores = [s for _, s in want["local", mode, q]]
            assert [s for _, s in got] == pytest.approx(scores, abs=1e-6)
            assert all(h.payload["text"] for h in hits)
            # the default engine ranks the same points; its float32 sums may differ in
            # the last bits, so scores within 1e-5 may come in either order
            assert _same_up_to_ties(got, want["edge", mode, q]), (q, got, want["edge", mode, q])

            # the one fused request: the same ranking up to the order of equal scores
            req = qb.request(q, k=10, mode=mode)
            assert isinstance(req, models.QueryRequest)
            points = client.query_batch_points(qb.collection, requests=[req])[0].points
            one = [(str(p.id), p.score) for p in points]
            assert all(p.payload and p.payload["text"] for p in points)
            one_request_exact += [i for i, _ in one] == [i for i, _ in got]
            if _same_up_to_ties(one, got):
                continue
            # RRF fuses ranks: equal scores that Qdrant orders by its hashing inside a
            # prefetch give different fused scores. That, and nothing else.
            assert mode == "hybrid", (q, one, got)
            parts = [f"{m}@{CANDIDATES}" for m in ("dense", "sparse")]
            assert any(len(set(s for _, s in want["local", p, q])) < CANDIDATES for p in parts)
            one_request_fused_differently += 1
    finally:
        client.close()
    print(
        f"{mode}: {len(questions)} questions; one fused request identical "
        f"{one_request_exact}, fused differently after tied prefetch ranks "
        f"{one_request_fused_differently}"
    )
    # the shared search command is what `ingestd search` runs: one question, one process
    env = {"INGESTD_QDRANT_ENGINE": "local"}
    args = ("search", "--state-dir", str(local), "--json", "--mode", mode, "-k", "10")
    proc = run_cli(*args, questions[0], env=env, timeout=600, check=True)
    cli = [h["id"] for h in json.loads(proc.stdout)]
    assert cli == [i for i, _ in want["local", mode, questions[0]]]


def test_the_version_filter_ranks_as_ingestd_search_version_on_both_engines(
    tmp_path: Path,
) -> None:
    """``QueryBuilder`` limited to a git version finds what ``ingestd search --version``
    finds on the Edge store and on the local-mode copy, and that version's points only."""
    from qdrant_client import QdrantClient

    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from ingestd.daemon.sources.versions import payload_versions
    from tests.gitrepos import HistoryRepo

    query = "the ownership of a value, a reference and its borrow"
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    for _ in range(3):
        repo.next_commit()
    repo.push()
    source = {"kind": "git", "name": "book", "url": str(repo.origin), "refs": ["main", "v*"]}

    def engine(state: Path, kind: str) -> Engine:
        overrides = {"state_dir": str(state), "sources": [source], "qdrant": {"engine": kind}}
        return Engine(load_config(None, overrides=overrides), state, embed_model=fake_vectors)

    state = tmp_path / "state"
    eng = engine(state, "edge")
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        eng.sync("book")
    finally:
        eng.close()
    local = local_mode_copy(state, tmp_path / "local")
    want: dict[tuple[str, str], list[str]] = {}
    for kind, where in (("edge", state), ("local", local)):
        eng = engine(where, kind)
        try:
            for version in ("v1", "main"):
                hits = search_cmd(eng, query, k=50, version=version, mode="sparse")
                want[kind, version] = [h["id"] for h in hits]
        finally:
            eng.close()
    qb = QueryBuilder(embed=fake_vectors)
    client = QdrantClient(path=str(local / "qdrant"))
    try:
        for version in ("v1", "main"):
            hits = qb.search(client, query, k=50, mode="sparse", version=version)
            assert hits and all(version in payload_versions(h.payload) for h in hits)
            got = [h.id for h in hits]
            assert got == want["edge", version] == want["local", version], version
            req = qb.request(query, k=50, mode="sparse", version=version)
            points = client.query_batch_points(qb.collection, requests=[req])[0].points
            assert {str(p.id) for p in points} == set(got)
        assert want["edge", "v1"] != want["edge", "main"]  # the filter limits something
    finally:
        client.close()
