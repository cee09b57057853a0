"""Pages from chunks: a page's score from its hits, and the page order of a search.

The index ranks chunks; a reader picks pages. A page that answers in three places is
a better page to open than one with a single chunk that ranks a little higher, and a
ranking read page by page in order of each page's first chunk cannot see that. A
page's score here is a decayed sum of its hits' scores, best first::

    score(page) = sum over its hits i = 1, 2, ... of score_i * decay ** (i - 1)

``decay`` 0 is the page's best hit alone (MaxP: Dai and Callan, "Deeper Text
Understanding for IR with Contextual Neural Language Modeling", SIGIR 2019); 1 is the
sum of its hits (CombSUM: Fox and Shaw, TREC-2 1994); between them each further hit
adds less (:data:`PAGE_DECAY`, fixed before measuring). Scores are the search's own
(the fused RRF score in ``hybrid``; a cosine or BM25 score otherwise), over the hits
the search ranked.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = ["PAGE_DECAY", "page_scores"]

#: Weight of a page's second hit relative to its first (its third: the square; ...).
PAGE_DECAY = 0.5

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
