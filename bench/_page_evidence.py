"""Page-level evidence beside the page ranking of the search (``--page-evidence``).

The search ranks pages by their best hit (MaxP, :mod:`ingestd.store.search.pages`):
the distinct pages of the first :data:`PAGE_HITS` hits, in the order of their best
fused (or cosine) score. Every page score tried so far (decayed sums, plain sum, page
caps, MMR) used only those chunk scores. The variants here add evidence at the level
of the page, which the chunk ranking cannot see, and fuse page rankings by RRF:

* **page BM25** (``bm25``): BM25 with the page as one document: its text is the
  embedded texts of its chunks joined (what the index holds of it); document-level
  term statistics: IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the set's pages,
  length normalisation against the mean page length, ``k1`` 1.2, ``b`` 0.75
  (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
  2009); the query one weight per distinct term, terms and stemming as
  :func:`ingestd.store.search.sparse.terms`;
* **page BM25F** (``bm25f``): the same body plus the page title (weight 2), its
  heading outline (every distinct heading of its chunks once, weight 1) and its path
  words (folders and file name, weight 1) as fields: a term's pseudo-frequency is its
  body count over the body's length norm plus each field's weight times its count
  there (short fields: no length norm), saturated once with ``k1`` (Robertson,
  Zaragoza and Taylor, "Simple BM25 extension to multiple weighted fields", CIKM 2004);
* **page outline, dense** (``outline``): the cosine of the question to the page's
  title and heading outline (title, then each distinct heading, one a line) embedded
  once per page with the same model (truncated by the model at its 256 word pieces);
* **page chunks, mean top 3** (``mean3``): the mean cosine of the question to the
  page's three best chunks (every chunk of the page, exact; fewer if it has fewer).

Each variant re-ranks the candidate pages (the distinct pages of the first
:data:`PAGE_HITS` hits of the mode's ranking: what ``ingestd eval`` and budgeted
passages rank) by RRF, ``sum 1 / (K + rank - 1)`` with ``K`` 60 (1-based ranks, as
the search fuses), over the MaxP page order and each evidence's order of those pages
(a BM25 order leaves out pages sharing no term with the question; ties keep the MaxP
order). Pages past the candidates follow in the order of their first hit, as before.
The chunk ranking is never touched, so span metrics are equal by construction.

Settings, chosen before measuring and the same for every set and both modes (hybrid:
union fusion, the default; dense: cosine), each against the shipped MaxP of that mode:

=====================================  ====================================
variant                                page rankings fused
=====================================  ====================================
page BM25                              MaxP, bm25
page BM25F                             MaxP, bm25f
page outline                           MaxP, outline
page mean top 3                        MaxP, mean3
page BM25F + outline                   MaxP, bm25f, outline
page BM25 + mean top 3                 MaxP, bm25, mean3
page BM25F + outline + mean top 3      MaxP, bm25f, outline, mean3
=====================================  ====================================

The bar (issue 46): pooled page nDCG@5 up by at least 3 points with its paired-
bootstrap 95 % interval above 0, and no set down by more than one question at page
Hit@5 or page R@5 (the net of per-question differences).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["VARIANTS", "PageIndex", "compare", "outlines"]

RRF_K = 60
PAGE_HITS = 50  # hits pages are ranked from (ingestd eval's PAGE_HITS)
K1, B = 1.2, 0.75
W_TITLE, W_HEADINGS, W_PATH = 2.0, 1.0, 1.0
MEAN_TOP = 3
METRICS = ("nDCG@5", "Hit@5", "R@5", "MRR@10")

#: name -> the evidence fused with MaxP (module docstring), fixed before measuring.
VARIANTS: dict[str, tuple[str, ...]] = {
    "page BM25": ("bm25",),
    "page BM25F": ("bm25f",),
    "page outline": ("outline",),
    "page mean top 3": ("mean3",),
    "page BM25F + outline": ("bm25f", "outline"),
    "page BM25 + mean top 3": ("bm25", "mean3"),
    "page BM25F + outline + mean top 3": ("bm25f", "outline", "mean3"),
}


def outlines(idx: Any) -> tuple[list[str], list[str]]:
    """The pages of ``idx`` (first appearance) and each one's title and heading outline."""
    pages: dict[str, list[str]] = {}
    for path, title, heads in zip(idx.paths, idx.titles, idx.heads, strict=True):
        lines = pages.setdefault(path, [title] if title else [])
        for h in heads:
            if h and h not in lines:
                lines.append(h)
    return list(pages), ["\n".join(lines) or path for path, lines in pages.items()]


@dataclass
class PageIndex:
    """One set's pages: their chunks, BM25 and BM25F matrices, and outline vectors."""

    pages: list[str]
    chunks: dict[str, list[int]]
    bm25: Any  # (n_pages, n_terms) saturated BM25 values, csr
    bm25f: Any
    idf: Any  # per term column
    terms: dict[int, int]  # term id -> column
    outline_vecs: Any  # (n_pages, dim)

    @classmethod
    def build(cls, idx: Any, outline_vecs: Any) -> PageIndex:
        """The page index of ``idx`` (an ``Index`` with ``heads``), outlines embedded."""
        from _ranking import path_terms

        from ingestd.store.search.sparse import term_id, terms

        pages, texts = outlines(idx)
        chunks: dict[str, list[int]] = {}
        for j, p in enumerate(idx.paths):
            chunks.setdefault(p, []).append(j)
        bodies = [
            Counter(term_id(t) for j in chunks[p] for t in terms(idx.texts[j])) for p in pages
        ]
        lens = np.array([sum(c.values()) for c in bodies], dtype=float)
        avg = float(lens.mean()) if len(lens) else 1.0
        fields = []
        for p, outline in zip(pages, texts, strict=True):
            title = idx.titles[chunks[p][0]]
            heads = outline.split("\n")[1:] if title else outline.split("\n")
            fields.append(
                [
                    (W_TITLE, Counter(term_id(t) for t in terms(title))),
                    (W_HEADINGS, Counter(term_id(t) for h in heads for t in terms(h))),
                    (W_PATH, Counter(term_id(t) for t in path_terms(p))),
                ]
            )
        cols: dict[int, int] = {}
        plain = _entries(bodies, lens, avg, [[] for _ in pages], cols)
        fielded = _entries(bodies, lens, avg, fields, cols)
        plain, fielded = (_csr(e, len(pages), len(cols)) for e in (plain, fielded))
        n = len(pages)
        df = np.bincount(fielded.indices, minlength=len(cols))  # any field holds it
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        return cls(pages, chunks, plain, fielded, idf, cols, outline_vecs)

    def lexical(self, query: Any, kind: str) -> dict[str, float]:
        """Each page's BM25 (``bm25``) or BM25F (``bm25f``) score for a query vector."""
        m = self.bm25 if kind == "bm25" else self.bm25f
        q = np.zeros(m.shape[1])
        for t in set(query.indices):
            col = self.terms.get(t)
            if col is not None:
                q[col] = self.idf[col]
        scores = m @ q
        return {p: float(s) for p, s in zip(self.pages, scores, strict=True)}


def _entries(
    bodies: Sequence[Counter[int]],
    lens: Any,
    avg: float,
    fields: Sequence[Sequence[tuple[float, Counter[int]]]],
    cols: dict[int, int],
) -> Any:
    """Saturated BM25(F) term weights (module docstring): ``(rows, columns, values)``."""
    rows, cs, vals = [], [], []
    for i, (body, extra) in enumerate(zip(bodies, fields, strict=True)):
        norm = 1 - B + B * lens[i] / avg
        tf = {t: c / norm for t, c in body.items()}
        for w, counts in extra:
            for t, c in counts.items():
                tf[t] = tf.get(t, 0.0) + w * c
        for t, x in tf.items():
            rows.append(i)
            cs.append(cols.setdefault(t, len(cols)))
            vals.append(x * (K1 + 1) / (x + K1))
    return rows, cs, vals


def _csr(entries: tuple[list[int], list[int], list[float]], n: int, m: int) -> Any:
    from scipy.sparse import csr_matrix

    rows, cs, vals = entries
    return csr_matrix((vals, (rows, cs)), shape=(n, m))


def evidence(pi: PageIndex, kind: str, qvec: Any, qsparse: Any, cos: Any) -> dict[str, float]:
    """One question's score of every page by evidence ``kind`` (``cos``: its chunk cosines)."""
    if kind in ("bm25", "bm25f"):
        return pi.lexical(qsparse, kind)
    if kind == "outline":
        return dict(zip(pi.pages, (pi.outline_vecs @ qvec).tolist(), strict=True))
    out = {}
    for p, js in pi.chunks.items():
        best = np.sort(cos[js])[::-1][:MEAN_TOP]
        out[p] = float(best.mean())
    return out


def fuse(maxp: list[str], scores: Sequence[tuple[str, dict[str, float]]]) -> list[str]:
    """The candidate pages ``maxp`` re-ranked by RRF of MaxP and each evidence's order."""
    fused = {p: 1.0 / (RRF_K + r) for r, p in enumerate(maxp)}
    for kind, s in scores:
        ranked = sorted(maxp, key=lambda p: -s.get(p, 0.0))  # stable: MaxP order on ties
        if kind in ("bm25", "bm25f"):
            ranked = [p for p in ranked if s.get(p, 0.0) > 0]
        for r, p in enumerate(ranked):
            fused[p] += 1.0 / (RRF_K + r)
    return sorted(maxp, key=lambda p: -fused[p])


def compare(
    modes: Sequence[str],
    sets: Sequence[str],
    data: dict[str, Any],
    scored: Any,
    show_misses: int = 0,
) -> dict[str, Any]:
    """Score every variant of :data:`VARIANTS` against MaxP in each mode and print it.

    Args:
        modes: ``hybrid``, ``dense``.
        sets: the set names, in order.
        data: set -> ``(Index, PageIndex, [(Queries, page questions)])``: the set's
            questions and the ones bench/qrels adds, each with their judgements.
        scored: bench/retrieval.py's ``scored(mode, idx, queries)``.
        show_misses: print this many questions per set whose gold page is not first.

    Returns:
        mode -> variant -> set -> metric -> per-question values (MaxP under ``MaxP``).
    """
    import _context

    from ingestd.daemon.evaluation.pages import page_values, pages_of
    from ingestd.store.search.pages import page_scores

    out: dict[str, Any] = {}
    for mode in modes:
        vals: dict[str, dict[str, dict[str, list[float]]]] = {}
        for name in sets:
            idx, pi, groups = data[name]
            for queries, pqs in groups:
                if not pqs:
                    continue
                ranked, chunk_scores = scored(mode, idx, queries)
                cos = queries.vecs @ idx.vecs.T
                for qi, q in enumerate(pqs):
                    order = [int(j) for j in ranked[qi]]
                    hits = [(idx.paths[j], chunk_scores[qi][j]) for j in order[:PAGE_HITS]]
                    maxp = [p for p, _ in page_scores(hits)]
                    rest = [idx.paths[j] for j in order]
                    ev = {
                        k: evidence(pi, k, queries.vecs[qi], queries.sparse[qi], cos[qi])
                        for k in ("bm25", "bm25f", "outline", "mean3")
                    }
                    lists = {"MaxP": maxp}
                    for v, kinds in VARIANTS.items():
                        lists[v] = fuse(maxp, [(k, ev[k]) for k in kinds])
                    for v, listed in lists.items():
                        pv = page_values(pages_of(listed + rest), q.qrels)
                        row = vals.setdefault(v, {}).setdefault(name, {})
                        for m in METRICS:
                            row.setdefault(m, []).append(pv[m])
                    if show_misses and pages_of(maxp)[:1] and q.qrels.get(maxp[0], 0) < 3:
                        _miss(mode, name, q, maxp, lists, ev)
        out[mode] = vals
        _show(mode, sets, vals, _context.paired_interval)
    return out


def _miss(mode: str, name: str, q: Any, maxp: list[str], lists: Any, ev: Any) -> None:
    gold = [p for p, g in q.qrels.items() if g >= 3]
    ranks = {v: [i + 1 for i, p in enumerate(lst) if p in gold][:1] for v, lst in lists.items()}
    print(f"  miss [{mode}] {name} {q.id}: {q.question}")
    print(f"    gold {gold}; MaxP top 3 {maxp[:3]}")
    for k in ("bm25f", "outline", "mean3"):
        best = sorted(maxp, key=lambda p: -ev[k].get(p, 0.0))[:3]
        print(f"    {k} top 3 {best}")
    print(f"    gold rank per variant: {ranks}")


def _show(mode: str, sets: Sequence[str], vals: Any, interval: Any) -> None:
    base = vals["MaxP"]
    n = sum(len(base[s]["nDCG@5"]) for s in sets)
    print(f"\n== page evidence ({mode}): page rankings fused by RRF against MaxP; {n} "
          f"page-level questions of {', '.join(sets)}")  # fmt: skip
    cells = ", ".join(
        f"{m} {100 * np.mean(np.concatenate([base[s][m] for s in sets])):.1f}" for m in METRICS
    )
    print(f"  MaxP: {cells}")
    per = ", ".join(f"{s} {100 * np.mean(base[s]['nDCG@5']):.1f}" for s in sets)
    print(f"    per set nDCG@5: {per}")
    for v in VARIANTS:
        var = vals[v]
        print(f"\n  {v}:")
        worst = 0.0
        for m in METRICS:
            a = np.concatenate([var[s][m] for s in sets])
            b = np.concatenate([base[s][m] for s in sets])
            lo, hi = interval(a, b)
            per = ", ".join(f"{s} {np.sum(np.subtract(var[s][m], base[s][m])):+.1f}" for s in sets)
            if m in ("Hit@5", "R@5"):
                worst = min(worst, *(np.sum(np.subtract(var[s][m], base[s][m])) for s in sets))
            print(f"    {m:<7}{100 * a.mean():6.1f} ({100 * (a.mean() - b.mean()):+5.1f}, "
                  f"95% [{lo:+.1f}, {hi:+.1f}]); net per set: {per}")  # fmt: skip
        a = np.concatenate([var[s]["nDCG@5"] for s in sets])
        b = np.concatenate([base[s]["nDCG@5"] for s in sets])
        lo, _ = interval(a, b)
        keep = 100 * (a.mean() - b.mean()) >= 3.0 and lo > 0 and worst >= -1.0
        print(f"    {'PASSES' if keep else 'fails'} the bar (worst set Hit@5/R@5 net {worst:+.1f})")
