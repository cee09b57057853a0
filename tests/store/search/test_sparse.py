"""The BM25 contract: tokeniser, term ids, document and query vectors, Qdrant's IDF.

The values pinned here are a stored format: every point's sparse vector depends on
them, and they are part of every rule fingerprint. A change that makes one of these
tests fail must bump :data:`ingestd.store.search.sparse.TOKENIZER` (or change the constant
on purpose) and update the test.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingestd.store.search import sparse
from ingestd.store.search.sparse import (
    AVG_LEN,
    K1,
    B,
    contract,
    document_vector,
    query_vector,
    term_id,
    terms,
)
from tests.helpers import open_store


def test_contract_values_are_pinned() -> None:
    assert (K1, B, AVG_LEN) == (1.2, 0.75, 60.0)
    assert sparse.TOKENIZER == "ingestd-identifiers/1"
    assert sparse.SPARSE_VECTOR == "bm25"
    c = contract()
    assert c["k1"] == K1 and c["b"] == B and c["avg_len"] == AVG_LEN
    assert c["tokenizer"] == sparse.TOKENIZER
    assert c["stem"].startswith("snowball-english:")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("snake_case", ["snake_case", "snake", "case"]),
        ("dotted.names", ["dotted.names", "dot", "name"]),
        ("--dry-run", ["--dry-run", "dry-run", "dri", "run"]),
        ("$OTEL_NAME", ["$otel_name", "otel_name", "otel", "name"]),
        ("getUserName", ["getusername", "get", "user", "name"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("std::io::Result", ["std::io::result", "std", "io", "result"]),
        ("-v", ["-v"]),
        ("The exporters of the Collector.", ["export", "collector"]),
        ("e.g. a b", ["e.g"]),
    ],
)
def test_identifiers_stay_findable_whole_and_in_parts(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


@pytest.mark.parametrize(
    ("doc", "query"),
    [
        ("set OTEL_EXPORTER_OTLP_ENDPOINT first", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ("run `ingestd resync --allow-mass-delete`", "allow-mass-delete"),
        ("export $HOME before", "HOME variable"),
        ("call tracer_provider.force_flush()", "force_flush"),
        ("the BatchSpanProcessor batches spans", "batch span processor"),
    ],
)
def test_a_query_shares_terms_with_the_identifier_it_names(doc: str, query: str) -> None:
    assert set(document_vector(doc).indices) & set(query_vector(query).indices)


def test_term_ids_are_stable_31_bit_hashes() -> None:
    # blake2b(digest_size=4), little-endian, masked to 31 bits: fixed forever
    import hashlib

    for t in ("collector", "--dry-run", "$home", "日本"):
        d = hashlib.blake2b(t.encode(), digest_size=4).digest()
        assert term_id(t) == int.from_bytes(d, "little") & 0x7FFFFFFF
    assert term_id("collector") == 1646540544


def test_document_values_are_bm25_term_frequency_with_the_fixed_average_length() -> None:
    vec = document_vector("alpha alpha beta")
    n = 3
    norm = K1 * (1 - B + B * n / AVG_LEN)
    want = {
        term_id("alpha"): 2 * (K1 + 1) / (2 + norm),
        term_id("beta"): 1 * (K1 + 1) / (1 + norm),
    }
    assert dict(zip(vec.indices, vec.values, strict=True)) == pytest.approx(want, rel=1e-6)


def test_query_vector_has_one_unit_weight_per_distinct_term() -> None:
    vec = query_vector("span span exporters")
    assert sorted(vec.indices) == sorted({term_id("span"), term_id("export")})
    assert vec.values == [1.0, 1.0]


@given(st.text(max_size=400))
def test_vectors_are_sorted_positive_and_bounded(text: str) -> None:
    for vec in (document_vector(text), query_vector(text)):
        assert vec.indices == sorted(set(vec.indices))
        assert all(0 <= i < 2**31 for i in vec.indices)
        assert all(0 < v <= K1 + 1 for v in vec.values)
    assert len(document_vector(text).indices) <= len(terms(text))


def test_changing_the_contract_changes_every_rule_fingerprint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context

    cfg = load_config(None, roots=[Path(".")])
    ctx, tok = build_context(cfg)
    before = [r.fingerprint for r in RuleSet(cfg.rules, ctx, tok, "m").rules]
    monkeypatch.setattr(sparse, "K1", 1.5)
    after = [r.fingerprint for r in RuleSet(cfg.rules, ctx, tok, "m").rules]
    assert all(a != b for a, b in zip(before, after, strict=True))


def test_qdrant_scores_are_bm25_with_its_own_idf(tmp_path: Path, qdrant_engine: str) -> None:
    """Qdrant (Modifier.IDF) multiplies our document values by the BM25 IDF."""
    from ingestd.store.search.query import Filters
    from ingestd.store.vectors.base import Point

    docs = [
        "the collector receives spans",
        "the collector exports metrics",
        "baggage propagates context",
        "spans and spans and spans",
    ]
    store = open_store(tmp_path / "q", qdrant_engine)
    try:
        store.ensure_collection("c", 4)
        ids = [f"00000000-0000-0000-0000-{i:012d}" for i in range(len(docs))]
        store.upsert(
            "c",
            [
                Point(pid, [1.0, 0, 0, 0], {"path": f"f{i}"}, document_vector(t))
                for i, (pid, t) in enumerate(zip(ids, docs, strict=True))
            ],
        )
        hits = store.search(
            "c", dense=None, sparse=query_vector("spans"), limit=10, mode="sparse",
            filters=Filters(),
        )  # fmt: skip
        n, df = len(docs), 2
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        sid = term_id("span")
        want = {
            ids[i]: idf * dict(zip(v.indices, v.values, strict=True))[sid]
            for i in (0, 3)
            for v in [document_vector(docs[i])]
        }
        assert {h.id: h.score for h in hits} == pytest.approx(want, rel=1e-5)
        assert hits[0].id == ids[3]  # three occurrences beat one
    finally:
        store.close()
