"""Pages from chunks: a page's score from its hits, and the page order of a search.

The index ranks chunks; a reader picks pages. A page that answers in three places is
a better page to open than one with a single chunk that ranks a little higher, and a
ranking read page by page in order of each page's first chunk cannot see that. A
page's score here is a decayed sum of its hits' scores, best first::

    score(page) = sum over its hits i = 1, 2, ... of score_i * decay ** (i - 1)

``decay`` 0 is the page's best hit alone (MaxP: Dai and Callan, "Deeper Text
Understanding for IR with Contextual Neural Language Modeling", SIGIR 2019); 1 is the
sum of its hits (CombSUM: Fox and Shaw, TREC-2 1994); between them each further hit
adds less. Scores are the search's own (the fused RRF score in ``hybrid``; a cosine
or BM25 score otherwise), over the hits the search ranked.

:data:`PAGE_DECAY` is 0, MaxP: pages in the order of their best hit. Both sums,
settled before measuring, lost on the five dev sets (``bench/retrieval.py
--ranking``, 336 page-level questions): a decay of 0.5 cost 6.3 points of pooled
page nDCG@5 in hybrid mode (90.8 to 84.5, interval -8.9 to -3.7) and pushed the gold
page out of the first 5 for 12 questions; a long page's many middling chunks
outweigh the one chunk that answers (docs/benchmarks.md). Evidence at the level of
the page fused with MaxP by RRF lost or tied too (``bench/retrieval.py
--page-evidence``): BM25 and BM25F over whole pages, the page's title and heading
outline embedded, the mean of its three best chunks (docs/benchmarks.md, "Page-level
evidence").
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = ["PAGE_DECAY", "page_scores"]

#: Weight of a page's second hit relative to its first (its third: the square; ...):
#: 0, the best hit alone (module docstring).
PAGE_DECAY = 0.0

K = TypeVar("K", bound=Hashable)


def page_scores(
    hits: Iterable[tuple[K, float]], decay: float = PAGE_DECAY
) -> list[tuple[K, float]]:
    """Each page of ``hits`` with its score (module docstring), best first.

    Args:
        hits: ``(page, score)`` of each hit, best first (a page: any key, such as a
            path or ``(source, path)``); scores higher is better.
        decay: weight of each further hit of a page, in ``[0, 1]``.

    Returns:
        ``(page, score)`` per distinct page, by score, equal scores in order of the
        page's first hit.

    Raises:
        ValueError: ``decay`` outside ``[0, 1]``.
    """
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"decay must lie in [0, 1] (got {decay})")
    per: dict[K, list[float]] = {}
    for page, score in hits:
        per.setdefault(page, []).append(score)
    scored = []
    for page, scores in per.items():
        scores.sort(reverse=True)
        scored.append((page, sum(s * decay**i for i, s in enumerate(scores))))
    order = {page: i for i, page in enumerate(per)}
    return sorted(scored, key=lambda ps: (-ps[1], order[ps[0]]))
