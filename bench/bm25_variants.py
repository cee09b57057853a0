"""Which BM25 tokeniser? Span/path recall of tokeniser variants on the dev question sets.

Chunks each corpus with the default rules (bench/retrieval.py's ``build_indexes``: the
rule each path matches, as the daemon would), scores every chunk's embedded text with
BM25 computed here in numpy exactly as Qdrant does it (IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the live chunks, times the
document-side values of :func:`ingestd.store.search.sparse.document_vector`), and prints
recall@1/5/10 and MRR@10 (span and path level, as bench/retrieval.py defines them) per
tokeniser variant, plus the mean number of terms per chunk (the fixed ``AVG_LEN``) and
the mean number of non-zero entries per vector (the cost of local mode's sparse search).

With ``--dense`` it also embeds the chunks (cached in ``--cache``, shared with
bench/retrieval.py) and reports dense and hybrid (RRF, k = 60 over the top 100 of each)
for each variant.

Usage::

    python bench/bm25_variants.py                       # md-docs and rst-docs
    python bench/bm25_variants.py --sets md-docs rst-docs rust-book --dense

Last, the shipped tokeniser with the document title and path as BM25 fields of their
own (bench/_ranking.py's ``fields`` variants).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from retrieval import CORPORA, DEFAULT_CACHE, Index, build_indexes, embed, load_questions, text_of

SETS = {
    "md-docs": (CORPORA / "md-docs", CORPORA / "qa" / "md-docs.jsonl"),
    "rst-docs": (CORPORA / "rst-docs", CORPORA / "qa" / "rst-docs.jsonl"),
    "rust-book": (CORPORA / "history" / "base", CORPORA / "qa" / "rust-book.jsonl"),
    "mkdocs-docs": (CORPORA / "mkdocs-docs", CORPORA / "qa" / "mkdocs-docs.jsonl"),
}


def _variants() -> dict[str, Callable[[], None]]:
    import re

    import snowballstemmer

    from ingestd.store.search import sparse

    lucene = sparse.STOP_WORDS
    stemmer = snowballstemmer.stemmer("english")
    plain = re.compile(r"\w+")
    ident = sparse._IDENT

    def set_(stop: frozenset[str], stem: bool, words: bool = False) -> Callable[[], None]:
        def apply() -> None:
            sparse.STOP_WORDS = stop
            sparse._stem = stemmer.stemWord if stem else (lambda w: w)
            sparse._IDENT = plain if words else ident
            sparse.term_id.cache_clear()

        return apply

    return {
        "plain lowercase words": set_(frozenset(), False, words=True),
        "identifiers": set_(frozenset(), False),
        "identifiers + stop words": set_(lucene, False),
        "identifiers + snowball stem": set_(frozenset(), True),
        "identifiers + stop + stem": set_(lucene, True),
    }


def bm25_scores(docs: list[Any], queries: list[Any], n_terms: int) -> Any:
    """Score matrix (queries x docs) with Qdrant's IDF over ``docs``."""
    df: Counter[int] = Counter()
    for d in docs:
        df.update(d.indices)
    n = len(docs)
    out = np.zeros((len(queries), len(docs)), dtype=np.float32)
    postings: dict[int, list[tuple[int, float]]] = {}
    for j, d in enumerate(docs):
        for i, v in zip(d.indices, d.values, strict=True):
            postings.setdefault(i, []).append((j, v))
    for qi, q in enumerate(queries):
        for t in q.indices:
            idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1)
            for j, v in postings.get(t, ()):
                out[qi, j] += idf * v
    return out


def ranks(idx: Index, qs: list[Any], scores: Any) -> tuple[list[Any], list[Any]]:
    paths, starts, ends = np.array(idx.paths), np.array(idx.starts), np.array(idx.ends)
    span, path = [], []
    for qi, q in enumerate(qs):
        order = np.argsort(-scores[qi], kind="stable")
        gold = paths[order] == q.path
        cover = gold & (starts[order] <= q.start) & (ends[order] >= q.end)
        span.append(_first(cover))
        path.append(_first(gold))
    return span, path


def _first(mask: Any) -> int | None:
    hit = np.flatnonzero(mask)
    return int(hit[0]) + 1 if hit.size else None


def rrf(a: Any, b: Any, k: int = 60, depth: int = 100) -> Any:
    """Reciprocal rank fusion of two score matrices, Qdrant's formula 1/(k + rank0)."""
    out = np.zeros_like(a)
    for m in (a, b):
        order = np.argsort(-m, axis=1, kind="stable")[:, :depth]
        for qi in range(m.shape[0]):
            out[qi, order[qi]] += 1.0 / (k + np.arange(order.shape[1]))
    return out


def fmt(span: list[Any], path: list[Any]) -> str:
    def r(rs: list[Any], k: int) -> float:
        return 100 * sum(x is not None and x <= k for x in rs) / len(rs)

    mrr = 100 * sum(1 / x for x in span if x is not None and x <= 10) / len(span)
    return (
        f"{r(span, 1):6.1f}{r(span, 5):6.1f}{r(span, 10):6.1f}{mrr:7.1f}"
        f"{r(path, 1):7.1f}{r(path, 5):6.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["md-docs", "rst-docs"], choices=list(SETS))
    ap.add_argument("--dense", action="store_true", help="also dense and hybrid (embeds)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = ap.parse_args()
    from ingestd.store.search import sparse

    variants = _variants()
    header = f"{'':<32}{'sR@1':>6}{'sR@5':>6}{'sR@10':>6}{'MRR':>7}{'pR@1':>7}{'pR@5':>6}"
    for name in args.sets:
        corpus, qa = SETS[name]
        qs = load_questions(qa, corpus, text_of(corpus))
        ns = argparse.Namespace(only={"default"}, variant=[], extra=[], anchors="", add=[])
        (idx,) = build_indexes(corpus, ns, set(), None)
        print(f"\n== {name}: {len(idx.texts)} chunks, {len(qs)} questions ==\n{header}")
        dense = None
        if args.dense:
            from ingestd.store.embedding.cache import CachedEmbedder, EmbeddingCache
            from ingestd.store.embedding.embedder import load_embedder, model_info
            from ingestd.store.vectors.ids import chunk_hash

            args.cache.mkdir(parents=True, exist_ok=True)
            info = model_info("all-MiniLM-L6-v2")
            model = load_embedder(info, batch_size=16)  # the default backend
            cache = EmbeddingCache(args.cache / "embeddings.db", max_entries=10_000_000)
            emb = CachedEmbedder(model, info.fingerprint, cache, chunk_hash)
            qv = embed([q.question for q in qs], emb, "questions")
            dv = embed(idx.texts, emb, name)
            cache.close()
            dense = qv @ dv.T
            print(f"{'dense':<32}{fmt(*ranks(idx, qs, dense))}")
        for label, apply in variants.items():
            apply()
            docs = [sparse.document_vector(t) for t in idx.texts]
            queries = [sparse.query_vector(q.question) for q in qs]
            lens = [len(sparse.terms(t)) for t in idx.texts]
            nnz = np.mean([len(d.indices) for d in docs])
            s = bm25_scores(docs, queries, 0)
            print(f"{label:<32}{fmt(*ranks(idx, qs, s))}   terms {np.mean(lens):.0f} nnz {nnz:.0f}")
            if dense is not None:
                print(f"{'  hybrid':<32}{fmt(*ranks(idx, qs, rrf(dense, s)))}")
        fields(idx, qs, dense)
        sys.stdout.flush()


def fields(idx: Index, qs: list[Any], dense: Any) -> None:
    """The shipped tokeniser with the title and path as BM25 fields (bench/_ranking.py)."""
    from _ranking import VARIANTS, field_vector

    from ingestd.store.search import sparse

    queries = [sparse.query_vector(q.question) for q in qs]
    for v in VARIANTS:
        if v.kind != "fields":
            continue
        triples = zip(idx.texts, idx.titles, idx.paths, strict=True)
        docs = [field_vector(text, title, path, v.a, v.b) for text, title, path in triples]
        s = bm25_scores(docs, queries, 0)
        nnz = np.mean([len(d.indices) for d in docs])
        print(f"{'  ' + v.name:<32}{fmt(*ranks(idx, qs, s))}   nnz {nnz:.0f}")
        if dense is not None:
            print(f"{'    hybrid':<32}{fmt(*ranks(idx, qs, rrf(dense, s)))}")


if __name__ == "__main__":
    main()
