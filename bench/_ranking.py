"""Ranking variants of the default rules for bench/retrieval.py (``--ranking``).

Each variant changes one part of the hybrid ranking ``ingestd search`` computes and is
scored beside it on the same chunks, questions and embeddings (paired):

* **BM25 fields** (``fields T/P``): the document's title and path as fields of their
  own in each chunk's BM25 vector, BM25F style (Robertson, Zaragoza and Taylor,
  "Simple BM25 extension to multiple weighted fields", CIKM 2004; Robertson and
  Zaragoza 2009, section 3.7): a term's pseudo-frequency is its body count over the
  body's length norm plus ``T`` x its count in the title plus ``P`` x its count in the
  path (short fields: no length norm), saturated once with ``K1``. With ``T = P = 0``
  it is :func:`ingestd.store.search.sparse.document_vector`. The body is the embedded
  text as today (its heading prefix already holds the title once); the title is the
  front matter's ``title``, else the outermost heading of the chunk; the path's terms
  are those of its folders and file name without the extension.
* **Fusion**: weighted RRF ``(w_dense, w_sparse)`` (Qdrant's formula, as
  ``--rrf-weights``), or a convex combination ``a * dense + (1 - a) * sparse`` of each
  ranking's scores min-max normalised over its own candidates, a candidate missing
  from a ranking taking 0 there (Bruch, Gai and Ingber, "An Analysis of Fusion
  Functions for Hybrid Retrieval", ACM TOIS 2023). Candidates as the search takes
  them: the best ``CANDIDATES`` of each ranking.
* **Fusion over the union** (``union``): every candidate of either ranking gets its
  exact score in the other (the dense similarity, the BM25 score; 0 when it shares no
  term with the query), both rankings are ranked again over the union of candidates,
  and RRF fuses those ranks, so a candidate missing from one ranking's best
  ``CANDIDATES`` gets its rank among the candidates there instead of nothing
  (:func:`ingestd.store.search.fusion.union_rrf`, what ``ingestd search`` does).
* **Page score** (``pages``): the chunk order unchanged, the pages ranked by a
  decayed sum of their chunks' fused scores over the first :data:`PAGE_HITS`
  (:func:`ingestd.store.search.pages.page_scores`, decay ``a``; ``b`` 1: over union
  fusion); only the page-level scores of the ranking's pages can move.
* **Page diversity**, over the fused ranking: a cap of ``c`` chunks per page (a page's
  further chunks move after every other candidate, in their order), or maximal
  marginal relevance (Carbonell and Goldstein, SIGIR 1998) over the fused candidates,
  ``lambda * relevance - (1 - lambda) * max cosine to a chunk already taken``,
  relevance the fused score min-max normalised; and the passages' existing
  ``per_page`` cap (``fill``) at the context budgets.

The settings are fixed here, chosen before measuring (:data:`VARIANTS`), never tuned
to the sets. Each is compared with plain RRF (k = 60, best 50 of each): span R@1,
R@5 and MRR@10 pooled with the paired-bootstrap 95% interval, the net number of
questions each set gains or loses, and for the diversity variants the page-level
scores (nDCG@5, Hit@5, R@5 of the distinct pages, and of the pages the first 5
chunks hold) and span recall at 1,024 / 2,048 tokens of passages.

The bar for keeping a variant (issue 31): the pooled interval of span R@5 or MRR@10
lies above 0, neither lies below 0, and no set loses more than one question (the net
change of its R@5 count, or of its summed reciprocal ranks for MRR@10, under -1).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["VARIANTS", "Variant", "compare", "field_vector", "path_terms"]

RRF_K, CANDIDATES, DEPTH = 60, 50, 100
MMR_PICKS = 20  # ranks MMR chooses; the rest follow in fused order
_STATS = ("R@1", "R@5", "MRR@10")
PASSAGE_BUDGET = 2048  # tokens of passages scored at page level
MAX_HITS = 52  # hits a search fills 2,048 tokens from (commands/query/search.py: budget / 40)
PAGE_HITS = 50  # hits ingestd eval ranks pages from (daemon/evaluation/evaluate.py)


@dataclass(frozen=True)
class Variant:
    """One ranking variant: ``kind`` and its fixed settings."""

    name: str
    kind: str  # "fields", "rrf", "cc", "union", "cap", "mmr", "per_page"
    a: float = 0.0
    b: float = 0.0


#: The variants, settings chosen up front (see the module docstring).
VARIANTS = (
    Variant("fields title 1", "fields", 1.0, 0.0),
    Variant("fields title 2", "fields", 2.0, 0.0),
    Variant("fields path 1", "fields", 0.0, 1.0),
    Variant("fields title 2, path 1", "fields", 2.0, 1.0),
    Variant("weighted RRF dense 2, sparse 1", "rrf", 2.0, 1.0),
    Variant("weighted RRF dense 1, sparse 2", "rrf", 1.0, 2.0),
    Variant("convex a=0.5 (min-max)", "cc", 0.5),
    Variant("convex a=0.7 (min-max)", "cc", 0.7),
    Variant("RRF over the union, exact scores", "union"),
    Variant("page cap 1", "cap", 1),
    Variant("page cap 2", "cap", 2),
    Variant("page cap 1 in the top 5", "cap", 1, 5),
    Variant("page cap 2 in the top 5", "cap", 2, 5),
    Variant("MMR lambda 0.7", "mmr", 0.7),
    Variant("MMR lambda 0.5", "mmr", 0.5),
    Variant("passages per_page 1", "per_page", 1),
    Variant("passages per_page 2", "per_page", 2),
    Variant("page score: decayed sum 0.5", "pages", 0.5),
    Variant("page score: decayed sum 1 (sum)", "pages", 1.0),
    Variant("page score: decayed sum 0.5, union fusion", "pages", 0.5, 1.0),
    Variant("page score: decayed sum 0.25, union fusion", "pages", 0.25, 1.0),
    Variant("page score: decayed sum 0.1, union fusion", "pages", 0.1, 1.0),
)


def path_terms(path: str) -> list[str]:
    """BM25 terms of a document path: its folders' and file name's (no extension)."""
    from ingestd.store.search.sparse import terms

    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    return terms(stem.replace("/", " "))


def field_vector(text: str, title: str, path: str, w_title: float, w_path: float) -> Any:
    """The BM25F document vector of a chunk (module docstring), a ``SparseVec``."""
    from ingestd.store.search import sparse

    body = Counter(sparse.term_id(t) for t in sparse.terms(text))
    norm = 1 - sparse.B + sparse.B * sum(body.values()) / sparse.AVG_LEN
    tf = {i: c / norm for i, c in body.items()}
    for w, ts in ((w_title, sparse.terms(title)), (w_path, path_terms(path))):
        if w:
            for i, c in Counter(sparse.term_id(t) for t in ts).items():
                tf[i] = tf.get(i, 0.0) + w * c
    k1, ids = sparse.K1, sorted(tf)
    # float32 values, as Qdrant stores them and document_vector gives them
    values = array("f", [tf[i] * (k1 + 1) / (tf[i] + k1) for i in ids]).tolist()
    return sparse.SparseVec(ids, values)


def bm25_matrix(vectors: Sequence[Any], queries: Sequence[Any]) -> Any:
    """BM25 scores ``(n_queries, n_chunks)`` with Qdrant's IDF over ``vectors``."""
    from scipy.sparse import csr_matrix

    cols: dict[int, int] = {}
    rows, cs, vals = [], [], []
    for i, v in enumerate(vectors):
        rows.extend([i] * len(v.indices))
        cs.extend(cols.setdefault(t, len(cols)) for t in v.indices)
        vals.extend(v.values)
    m = csr_matrix((vals, (rows, cs)), shape=(len(vectors), len(cols)))
    n = m.shape[0]
    df = np.bincount(m.indices, minlength=m.shape[1])
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    qr, qc, qv = [], [], []
    for qi, q in enumerate(queries):
        for t in q.indices:
            if t in cols:
                qr.append(qi)
                qc.append(cols[t])
                qv.append(idf[cols[t]])
    q = csr_matrix((qv, (qr, qc)), shape=(len(queries), m.shape[1]))
    return np.asarray((q @ m.T).todense(), dtype=np.float32)


def _top(row: Any, n: int) -> list[int]:
    """The ``n`` best positions of ``row``, best first (stable on ties)."""
    return [int(j) for j in np.argsort(-row, kind="stable")[:n]]


def fuse(dense: Any, sparse: Any, kind: str = "rrf", a: float = 1.0, b: float = 1.0) -> Any:
    """Per query: ``(order, fused)``: chunk positions best first (:data:`DEPTH`), and the
    fused score of each candidate (a dict), as the search fuses the best
    :data:`CANDIDATES` of each ranking; past the candidates, the dense order."""
    out = []
    for qi in range(dense.shape[0]):
        d = _top(dense[qi], CANDIDATES)
        s = [j for j in _top(sparse[qi], CANDIDATES) if sparse[qi, j] > 0]
        fused: dict[int, float] = {}
        if kind == "union":
            both = list(dict.fromkeys(d + s))
            ranked_d = sorted(both, key=lambda j: -dense[qi, j])
            ranked_s = [j for j in sorted(both, key=lambda j: -sparse[qi, j]) if sparse[qi, j] > 0]
            for ranked in (ranked_d, ranked_s):
                for r, j in enumerate(ranked, 1):
                    fused[j] = fused.get(j, 0.0) + 1.0 / (RRF_K + r - 1)
        elif kind == "rrf":
            for w, ranked in ((a, d), (b, s)):
                for r, j in enumerate(ranked, 1):
                    fused[j] = fused.get(j, 0.0) + 1.0 / (r / w + RRF_K - 1)
        else:
            for w, ranked, row in ((a, d, dense[qi]), (1 - a, s, sparse[qi])):
                if not ranked:
                    continue
                vals = np.array([row[j] for j in ranked], dtype=float)
                lo, span = vals.min(), vals.max() - vals.min()
                for j, v in zip(ranked, vals, strict=True):
                    x = (v - lo) / span if span > 0 else 1.0
                    fused[j] = fused.get(j, 0.0) + w * x
                for j in d + s:
                    fused.setdefault(j, 0.0)
        head = sorted(fused, key=lambda j: -fused[j])  # stable: dense order on ties
        rest = [j for j in _top(dense[qi], DEPTH + len(head)) if j not in fused]
        out.append(((head + rest)[:DEPTH], fused))
    return out


class _PageOrder(list):  # type: ignore[type-arg]
    """A chunk order (unchanged) that also carries its fused scores and a page decay."""

    def __init__(self, order: Sequence[int], fused: dict[int, float], decay: float) -> None:
        super().__init__(order)
        self.fused, self.decay = fused, decay


def page_order(order: Any, paths: Sequence[str]) -> list[str]:
    """The distinct pages of ``order``: by first chunk, or (a :class:`_PageOrder`) by
    page score (:func:`ingestd.store.search.pages.page_scores`) over the fused candidates."""
    if not isinstance(order, _PageOrder):
        return list(dict.fromkeys(paths[j] for j in order))
    from ingestd.store.search.pages import page_scores

    hits = list(order)[:PAGE_HITS]  # as ingestd eval ranks pages (PAGE_HITS hits)
    scored = page_scores([(paths[j], order.fused[j]) for j in hits], order.decay)
    return list(dict.fromkeys([p for p, _ in scored] + [paths[j] for j in order]))


def cap(order: Sequence[int], paths: Sequence[str], per_page: int, top: int = 0) -> list[int]:
    """``order`` with each page's chunks past its first ``per_page`` moved down.

    ``top`` 0: to the end of the ranking; else only out of the first ``top`` ranks (the
    top ``top`` hold at most ``per_page`` chunks of a page, the chunks passed over come
    right after them, in their order).
    """
    seen: Counter[str] = Counter()
    taken: list[int] = []
    later: list[int] = []
    for j in order:
        if top and len(taken) == top:
            break
        seen[paths[j]] += 1
        (taken if seen[paths[j]] <= per_page else later).append(j)
    if top:
        chosen = set(taken)
        return taken + [j for j in order if j not in chosen]
    return taken + later


def mmr(order: Sequence[int], fused: dict[int, float], vecs: Any, lam: float) -> list[int]:
    """Maximal marginal relevance over the fused candidates (module docstring)."""
    cands = [j for j in order if j in fused]
    if not cands:
        return list(order)
    rel = np.array([fused[j] for j in cands])
    span = rel.max() - rel.min()
    rel = (rel - rel.min()) / span if span > 0 else np.ones_like(rel)
    v = vecs[cands]
    sims = v @ v.T
    picked: list[int] = []
    best_sim = np.full(len(cands), -np.inf)
    free = np.ones(len(cands), dtype=bool)
    for _ in range(min(MMR_PICKS, len(cands))):
        penalty = np.where(np.isfinite(best_sim), best_sim, 0.0)
        score = np.where(free, lam * rel - (1 - lam) * penalty, -np.inf)
        i = int(np.argmax(score))
        picked.append(i)
        free[i] = False
        best_sim = np.maximum(best_sim, sims[i])
    chosen = [cands[i] for i in picked]
    return chosen + [j for j in order if j not in set(chosen)]


def rankings(idx: Any, queries: Any, variant: Variant | None) -> Any:
    """Each question's chunk order (positions in ``idx``) under ``variant`` (``None``:
    plain RRF, as bench/retrieval.py's ``rank_hybrid`` with ``--fusion rrf``)."""
    from ingestd.store.search.sparse import document_vector

    dense = queries.vecs @ idx.vecs.T
    if variant is not None and variant.kind == "fields":
        docs = [
            field_vector(t, title, p, variant.a, variant.b)
            for t, title, p in zip(idx.texts, idx.titles, idx.paths, strict=True)
        ]
    else:
        if getattr(idx, "_plain", None) is None:
            idx._plain = [document_vector(t) for t in idx.texts]
        docs = idx._plain
    scores = bm25_matrix(docs, queries.sparse)
    if variant is not None and variant.kind in ("rrf", "cc", "union"):
        return [o for o, _ in fuse(dense, scores, variant.kind, variant.a, variant.b)]
    if variant is not None and variant.kind == "pages":
        kind = "union" if variant.b else "rrf"
        return [_PageOrder(o, f, variant.a) for o, f in fuse(dense, scores, kind, 1.0, 1.0)]
    fused = fuse(dense, scores)
    if variant is not None and variant.kind == "cap":
        return [cap(o, idx.paths, int(variant.a), int(variant.b)) for o, _ in fused]
    if variant is not None and variant.kind == "mmr":
        return [mmr(o, f, idx.vecs, variant.a) for o, f in fused]
    return [o for o, _ in fused]


# ---------------------------------------------------------------------------- scoring


def _span_values(results: Sequence[Any]) -> dict[str, Any]:
    def r(k: int) -> Any:
        return np.array([x.span_rank is not None and x.span_rank <= k for x in results], float)

    mrr = [1 / x.span_rank if x.span_rank and x.span_rank <= 10 else 0.0 for x in results]
    return {"R@1": r(1), "R@5": r(5), "MRR@10": np.array(mrr)}


def _page_values(
    idx: Any, orders: Any, pqs: Sequence[Any], make: Any, per_page: int | None
) -> dict[str, Any]:
    """Page-level values: of the distinct pages, of the pages of the first 5 chunks, and
    of the pages of the passages :data:`PASSAGE_BUDGET` tokens hold (``make``: the
    ``_context.Hits`` of ``idx``)."""
    from ingestd.daemon.evaluation.pages import page_values, pages_of
    from ingestd.store.search.passages import fill

    paths = np.array(idx.paths)
    out: dict[str, list[float]] = {}
    for q, order in zip(pqs, orders, strict=True):
        ranked = paths[np.asarray(order)]
        passages = fill(
            make(order[:MAX_HITS]),
            PASSAGE_BUDGET,
            make.count,
            per_page=per_page,
            between=make.between,
        )
        tags = [("", pages_of(page_order(order, idx.paths))), ("top5 ", pages_of(ranked[:5]))]
        tags.append((f"passages@{PASSAGE_BUDGET} ", pages_of(p.path for p in passages)))
        for tag, pages in tags:
            v = page_values(pages, q.qrels)
            for m in ("nDCG@5", "Hit@5", "R@5"):
                out.setdefault(f"page {tag}{m}", []).append(v[m])
    return {k: np.array(v) for k, v in out.items()}


@dataclass
class _Scored:
    span: dict[str, dict[str, Any]]  # set -> stat -> per question
    page: dict[str, dict[str, Any]]
    context: dict[str, dict[str, Any]]


def _score(
    variant: Variant | None,
    sets: Sequence[str],
    data: dict[str, tuple[Any, Any, Any, Any, Any, Any]],
    evaluate: Callable[..., Any],
    count: Callable[[str], int],
    diversity: bool,
) -> _Scored:
    import _context

    out = _Scored({}, {}, {})
    for name in sets:
        idx, qs, queries, pqs, added, corpus = data[name]
        orders = rankings(idx, queries, variant)
        out.span[name] = _span_values(evaluate(idx, qs, np.array(orders)))
        if not diversity:
            continue
        all_orders = list(orders)
        if added.texts:
            all_orders += list(rankings(idx, added, variant))
        per_page = int(variant.a) if variant is not None and variant.kind == "per_page" else None
        make = _context.Hits(idx, corpus, count)
        out.page[name] = _page_values(idx, all_orders, pqs, make, per_page)
        ctx = _context.context_rows(idx, qs, orders, corpus, count, per_page=per_page)
        out.context[name] = {k: np.array(v) for k, v in ctx.items() if k.startswith("passages")}
    return out


def _interval(a: Any, b: Any) -> tuple[float, float]:
    import _context

    return _context.paired_interval(list(a), list(b))


def _verdict(base: _Scored, var: _Scored, sets: Sequence[str]) -> tuple[bool, str]:
    lows, highs, worst = [], [], 0.0
    for stat in ("R@5", "MRR@10"):
        a = np.concatenate([var.span[s][stat] for s in sets])
        b = np.concatenate([base.span[s][stat] for s in sets])
        lo, hi = _interval(a, b)
        lows.append(lo)
        highs.append(hi)
        for s in sets:
            worst = min(worst, float((var.span[s][stat] - base.span[s][stat]).sum()))
    above = any(lo > 0 for lo in lows)
    below = any(hi < 0 for hi in highs)
    keep = above and not below and worst >= -1.0
    why = "KEEP" if keep else "drop"
    return keep, f"{why} (worst set net {worst:+.1f} questions)"


def compare(
    sets: Sequence[str],
    data: dict[str, tuple[Any, Any, Any, Any, Any, Any]],
    evaluate: Callable[..., Any],
    count: Callable[[str], int],
    names: Sequence[str] | None = None,
) -> None:
    """Score each variant of :data:`VARIANTS` (or those ``names`` start) against plain RRF.

    Args:
        sets: the set names, in order.
        data: set -> ``(default index, questions, their Queries, page questions with
            judgements, the added questions' Queries, corpus folder)``.
        evaluate: bench/retrieval.py's ``evaluate(idx, questions, ranked)``.
        count: tokens of a text (cl100k_base), for the context budgets.
        names: variant name prefixes to run (``None``: all).
    """
    chosen = [v for v in VARIANTS if names is None or any(v.name.startswith(n) for n in names)]
    diversity = any(v.kind in ("cap", "mmr", "per_page", "pages") for v in chosen)
    base = _score(None, sets, data, evaluate, count, diversity)
    print(f"\n== ranking variants (hybrid, default rules) against plain RRF k={RRF_K}, "
          f"best {CANDIDATES} of each; pooled over {', '.join(sets)}")  # fmt: skip
    _show_base(base, sets, diversity)
    for v in chosen:
        var = _score(v, sets, data, evaluate, count, v.kind in ("cap", "mmr", "per_page", "pages"))
        _show(v, base, var, sets)


def _pooled(vals: dict[str, dict[str, Any]], sets: Sequence[str], stat: str) -> Any:
    return np.concatenate([vals[s][stat] for s in sets])


def _show_base(base: _Scored, sets: Sequence[str], diversity: bool) -> None:
    cells = ", ".join(
        f"span {st} {100 * _pooled(base.span, sets, st).mean():.1f}"
        for st in ("R@1", "R@5", "MRR@10")
    )
    print(f"  plain RRF: {cells}")
    for s in sets:
        per = ", ".join(f"{st} {100 * base.span[s][st].mean():.1f}" for st in _STATS)
        print(f"    {s}: {per}")
    if diversity:
        for group in (base.page, base.context):
            keys = list(next(iter(group.values())))
            print("  " + ", ".join(f"{k} {100 * _pooled(group, sets, k).mean():.1f}" for k in keys))


def _show(v: Variant, base: _Scored, var: _Scored, sets: Sequence[str]) -> None:
    _, verdict = _verdict(base, var, sets)
    print(f"\n  {v.name}: {verdict}")
    for st in ("R@1", "R@5", "MRR@10"):
        a, b = _pooled(var.span, sets, st), _pooled(base.span, sets, st)
        lo, hi = _interval(a, b)
        per = ", ".join(f"{s} {(var.span[s][st] - base.span[s][st]).sum():+.1f}" for s in sets)
        print(
            f"    span {st:<7}{100 * a.mean():6.1f} ({100 * (a.mean() - b.mean()):+5.1f}, "
            f"95% [{lo:+.1f}, {hi:+.1f}]); net questions per set: {per}"
        )
    for group_v, group_b in ((var.page, base.page), (var.context, base.context)):
        if not group_v:
            continue
        for k in group_v[sets[0]]:
            a, b = _pooled(group_v, sets, k), _pooled(group_b, sets, k)
            lo, hi = _interval(a, b)
            per = ", ".join(f"{s} {(group_v[s][k] - group_b[s][k]).sum():+.1f}" for s in sets)
            print(
                f"    {k:<18}{100 * a.mean():6.1f} ({100 * (a.mean() - b.mean()):+5.1f}, "
                f"95% [{lo:+.1f}, {hi:+.1f}]); per set: {per}"
            )
