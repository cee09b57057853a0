"""Page-level metrics of graded judgements: nDCG@k, Hit@k, Recall@k and MRR@10.

A question's *qrels* map targets to grades 1-3 (3: the page that answers; 1: a page
that helps). A target is a document path relative to the corpus root, or a folder
(``docs/collector`` or ``docs/collector/``): a folder is satisfied by any page below
it. A ranking is scored as a list of distinct pages, best first (a chunk ranking gives
its pages in the order of their first chunk, :func:`pages_of`).

Walking the ranking, each page takes its own judgement, else the best-graded folder
above it, that no page before it took: its gain is that grade (0 when it takes none),
so a folder counts once, like a page, and a second page of a folder gains nothing.
Then, for cut-off k:

* **nDCG@k** (Järvelin and Kekäläinen, "Cumulated gain-based evaluation of IR
  techniques", ACM TOIS 20(4), 2002), as trec_eval's ``ndcg_cut`` computes it
  (``m_ndcg_cut.c``: the gain is the judged grade, "i+2 since doc i has rank i+1")
  and BEIR reports it through pytrec_eval::

      DCG@k  = sum over ranks r = 1..k of gain(r) / log2(r + 1)
      nDCG@k = DCG@k / DCG@k of the targets' grades sorted best first

* **Hit@k**: 1 when a page within the first k has a gain, else 0;
* **Recall@k**: targets taken within the first k, over all targets (trec_eval's
  ``recall_k`` with every grade >= 1 relevant);
* **MRR@10**: 1 / the rank of the first page with a gain, 0 past rank 10
  (trec_eval's ``recip_rank`` cut at 10, as MS MARCO reports it).

Each is a per-question value in [0, 1]; a set's metric is their mean, in percent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "GRADES",
    "PAGE_DEPTH",
    "PAGE_METRICS",
    "gains",
    "matches",
    "page_values",
    "pages_of",
]

#: The grades a judgement may give.
GRADES = (1, 2, 3)
#: Pages of a ranking looked at: no metric needs more.
PAGE_DEPTH = 10
#: Page-level metric names, in table order.
PAGE_METRICS = ("nDCG@5", "nDCG@10", "Hit@5", "Hit@10", "R@5", "R@10", "MRR@10")


def matches(target: str, page: str) -> bool:
    """Whether ``page`` is ``target`` or lies below folder ``target``."""
    return page == target or page.startswith(target.rstrip("/") + "/")


def pages_of(paths: Iterable[str], depth: int = PAGE_DEPTH) -> list[str]:
    """The distinct pages of a ranking of ``paths``, in order of first appearance."""
    out: list[str] = []
    for p in paths:
        if p not in out:
            out.append(p)
            if len(out) == depth:
                break
    return out


def gains(pages: Sequence[str], qrels: Mapping[str, int]) -> list[int]:
    """Each page's gain: its own judgement, else its best folder's, each taken once.

    Args:
        pages: distinct pages, best first.
        qrels: target (path or folder) -> grade.

    Returns:
        One gain per page (0: it takes no target).
    """
    taken: set[str] = set()
    out = []
    for page in pages:
        free = [t for t in qrels if t not in taken and matches(t, page)]
        if not free:
            out.append(0)
            continue
        best = max(free, key=lambda t: (t == page, qrels[t], t))
        taken.add(best)
        out.append(int(qrels[best]))
    return out


def _dcg(grades: Sequence[int], k: int) -> float:
    return sum(g / math.log2(r + 1) for r, g in enumerate(grades[:k], 1))


def page_values(pages: Sequence[str], qrels: Mapping[str, int]) -> dict[str, float]:
    """One question's value of every metric of :data:`PAGE_METRICS`, each in [0, 1].

    Args:
        pages: the ranking's distinct pages, best first.
        qrels: the question's judgements (target -> grade, at least one).

    Raises:
        ValueError: no judgement.
    """
    if not qrels:
        raise ValueError("a question scored at page level needs at least one judgement")
    g = gains(pages, qrels)
    ideal = sorted(qrels.values(), reverse=True)
    out: dict[str, float] = {}
    for name in PAGE_METRICS:
        metric, k = name.split("@")
        cut = g[: int(k)]
        if metric == "nDCG":
            out[name] = _dcg(cut, int(k)) / _dcg(ideal, int(k))
        elif metric == "Hit":
            out[name] = float(any(cut))
        elif metric == "R":
            out[name] = sum(1 for x in cut if x) / len(qrels)
        else:  # MRR
            first = next((r for r, x in enumerate(cut, 1) if x), None)
            out[name] = 1.0 / first if first else 0.0
    return out
