"""One search from the engine's rankings: ties settled by point id, RRF fused here.

A store answers a search with one batch call of one or two rankings (``dense``,
``sparse``), each filtered by the store before ranking and cut at a number of points.
This module turns them into the result, the same for every engine:

* **Ties by point id.** Qdrant's engines order points of equal score by hashing seeded
  anew each time a store is opened, so the same query on the same points could answer
  in another order, or with another member of a tie at the cut, in another process (the
  daemon and ``ingestd search``; two runs of ``ingestd eval``). Equal scores are common:
  identical chunks have identical vectors, and many chunks share a BM25 score.
  :func:`settle` orders each ranking by score then id, fetching past a cut that falls
  inside a tie until the tie is whole.
* **Fusion after settling.** Reciprocal rank fusion turns rank order into score, so a
  tie ordered by the engine's hashing inside a prefetch became different fused scores,
  and hybrid results that differed from one opening to the next and between the engines
  (6 of 260 dev-set questions). :func:`rrf` fuses the settled rankings:
  ``score = sum over rankings of 1 / (rrf_k + rank - 1)``, 1-based ranks, the formula
  of Qdrant's ``Fusion.RRF`` (Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion
  outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009).
* **Fusion over the union of candidates** (``fusion: union``, the default). A ranking's
  best ``candidates`` leave out points the other ranking found: plain RRF gives such a
  point nothing from the ranking that missed it, so a chunk that is BM25's first but
  outside the dense top 50 fused below fifty chunks BM25 barely matched. :func:`union_rrf`
  first asks the engine, in one more call, for the exact score of every such point in
  the ranking that missed it (its cosine to the query embedding, its BM25 score: a
  ranking restricted to those ids), ranks each ranking again over the union of both
  candidate lists, then fuses those ranks with the same formula. A point keeps its rank
  where it was a candidate; a point that shares no term with the query has no BM25
  rank, as in Qdrant. Over the five dev sets: see docs/benchmarks.md.

A fusion reads its rankings without payloads (``2 x candidates`` points) and then the
payloads of the hits it keeps, by id: at 100,000 points a hybrid search took the store
10 ms at the median against 16 ms reading every candidate's payload (``bench/store.py``,
the fused query of one call took 9 ms).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from ingestd.store.search.query import HIDDEN_KEYS, Hit, Mode, Ranking

__all__ = [
    "ATTEMPTS",
    "MAX_TIE_FETCH",
    "RANKINGS",
    "FUSIONS",
    "Fetch",
    "Fusion",
    "Payloads",
    "Score",
    "available",
    "rank_and_fuse",
    "rrf",
    "settle",
    "union_rrf",
]

#: The most points one ranking fetches past its cut to settle a tie there; a tie reaching
#: further (a thousand identical chunks) is cut in the engine's order.
MAX_TIE_FETCH = 1024

RANKINGS: tuple[Ranking, ...] = ("dense", "sparse")

#: ``fetch(requests, with_payload)``: ONE engine call answering each ``(ranking, n)``
#: request with its best ``n`` hits, best first, filtered as the search is (payloads
#: empty unless ``with_payload``).
Fetch = Callable[[Sequence[tuple[Ranking, int]], bool], list[list[Hit]]]
#: ``score(requests)``: ONE engine call answering each ``(ranking, ids)`` request with the
#: ranking's exact score of each point of ``ids`` it scores, filtered as the search is
#: (the sparse ranking scores only points sharing a term with the query).
Score = Callable[[Sequence[tuple[Ranking, Sequence[str]]]], list[dict[str, float]]]
#: How ``hybrid`` fuses: ``union`` (:func:`union_rrf`) or ``rrf`` (:func:`rrf`, each
#: ranking's candidates alone).
Fusion = Literal["union", "rrf"]
FUSIONS: tuple[Fusion, ...] = ("union", "rrf")
#: ``payloads(ids)``: the payload of each existing point among ``ids``, by id.
Payloads = Callable[[Sequence[str]], dict[str, dict[str, Any]]]
#: Searches made again when a hit's point is gone (or pending) before its payload is
#: read (its document written anew in between); after them, such hits are left out.
ATTEMPTS = 3


def settle(
    fetch: Fetch, wanted: Sequence[tuple[Ranking, int]], *, with_payload: bool = True
) -> list[list[Hit]]:
    """Each ``(ranking, limit)`` of ``wanted``: its best ``limit`` hits by score, then id.

    The first call asks for ``limit + 1`` hits of each ranking; while a ranking's last
    hit ties its ``limit``-th (the tie may reach past the cut), the call is made again
    with twice as many of that ranking, up to ``limit +`` :data:`MAX_TIE_FETCH`. One
    call in the usual case, where the hit after the cut scores lower.

    Args:
        fetch: the engine's batch call.
        wanted: the rankings and how many hits of each (>= 1).
        with_payload: read the hits' payloads in the same call.

    Returns:
        One list per request, at most ``limit`` hits, best first, ``rank`` from 1.
    """
    sizes = [limit + 1 for _, limit in wanted]
    while True:
        asked = [(name, n) for (name, _), n in zip(wanted, sizes, strict=True)]
        results = fetch(asked, with_payload)
        again = False
        for i, ((_, limit), hits) in enumerate(zip(wanted, results, strict=True)):
            cap = limit + MAX_TIE_FETCH
            full = len(hits) == sizes[i] and sizes[i] < cap
            if full and hits[-1].score == hits[limit - 1].score:
                sizes[i] = min(2 * sizes[i], cap)
                again = True
        if not again:
            break
    settled = []
    for (_, limit), hits in zip(wanted, results, strict=True):
        best = sorted(hits, key=lambda h: (-h.score, h.id))[:limit]
        for i, h in enumerate(best, 1):
            h.rank = i
        settled.append(best)
    return settled


def rrf(rankings: dict[Ranking, list[Hit]], rrf_k: int, limit: int) -> list[Hit]:
    """The reciprocal rank fusion of settled ``rankings``: best ``limit``, ties by id.

    Args:
        rankings: each ranking's hits, best first (``rank`` from 1); a hit's payload,
            if any, is carried over.
        rrf_k: the RRF constant (60 in Cormack et al.).
        limit: number of hits.

    Returns:
        New hits: ``score`` the fused score, ``rank`` from 1, and each ranking's
        ``(rank, score)`` of the point in ``dense`` / ``sparse`` (``None``: not in it).
    """
    fused: dict[str, Hit] = {}
    for name, hits in rankings.items():
        for h in hits:
            got = fused.get(h.id)
            if got is None:
                got = fused[h.id] = Hit(h.id, 0.0, h.payload, 0)
            got.score += 1.0 / (rrf_k + h.rank - 1)
            setattr(got, name, (h.rank, h.score))
    best = sorted(fused.values(), key=lambda h: (-h.score, h.id))[:limit]
    for i, h in enumerate(best, 1):
        h.rank = i
    return best


def union_rrf(
    rankings: dict[Ranking, list[Hit]],
    scores: dict[Ranking, dict[str, float]],
    rrf_k: int,
    limit: int,
) -> list[Hit]:
    """RRF over the union of the rankings' candidates, each scored in every ranking.

    Each ranking is ranked again over every candidate it has a score for: its own hits
    and the points of ``scores`` (the exact scores of the other rankings' candidates
    it did not hold), by score then id; a point then scores
    ``sum over rankings of 1 / (rrf_k + rank - 1)``, as in :func:`rrf`.

    Args:
        rankings: each ranking's settled hits, best first (``rank`` from 1).
        scores: per ranking, the score of each other candidate it scores (a point
            missing there has no rank in it: a sparse ranking without a shared term).
        rrf_k: the RRF constant.
        limit: number of hits.

    Returns:
        New hits: ``score`` the fused score, ``rank`` from 1, and each ranking's
        ``(rank over the union, score)`` of the point (``None``: not scored there).
    """
    fused: dict[str, Hit] = {}
    for hits in rankings.values():
        for h in hits:
            if h.id not in fused:
                fused[h.id] = Hit(h.id, 0.0, h.payload, 0)
    for name, hits in rankings.items():
        scored = {h.id: h.score for h in hits}
        scored.update({pid: s for pid, s in scores.get(name, {}).items() if pid in fused})
        for rank, pid in enumerate(sorted(scored, key=lambda p: (-scored[p], p)), 1):
            got = fused[pid]
            got.score += 1.0 / (rrf_k + rank - 1)
            setattr(got, name, (rank, scored[pid]))
    best = sorted(fused.values(), key=lambda h: (-h.score, h.id))[:limit]
    for n, h in enumerate(best, 1):
        h.rank = n
    return best


def rank_and_fuse(
    fetch: Fetch,
    payloads: Payloads,
    mode: Mode,
    available: Sequence[Ranking],
    *,
    limit: int,
    candidates: int,
    rrf_k: int,
    ranks: bool,
    score: Score | None = None,
    fusion: Fusion = "union",
) -> list[Hit]:
    """The result of one search, from the rankings ``fetch`` gives.

    ``dense`` and ``sparse`` ask for their ranking alone, payloads included (one call).
    ``hybrid`` (and ``ranks``) asks for every ranking in ``available``,
    ``max(candidates, limit)`` hits each without payloads, in one call; ``hybrid`` with
    ``fusion="union"`` and a ``score`` then asks for the exact score of each candidate in
    the ranking that missed it (a second call) and fuses over the union
    (:func:`union_rrf`), else fuses each ranking's candidates (:func:`rrf`); last it
    reads the payloads of the hits kept (one more call).

    Args:
        fetch: the engine's batch call.
        payloads: the engine's payload read by id.
        mode: ``hybrid``, ``dense`` or ``sparse``.
        available: the rankings the query has vectors for (``hybrid`` needs both).
        limit: number of hits.
        candidates: hits each ranking gives the fusion (at least ``limit``).
        rrf_k: the RRF constant.
        ranks: report each hit's ``(rank, score)`` in every available ranking.
        score: the engine's exact scores of given points (``None``: plain RRF).
        fusion: ``union`` or ``rrf`` (see the module docstring).

    Returns:
        At most ``limit`` hits, best first, equal scores by id.

    Raises:
        ValueError: the mode's ranking (both, for ``hybrid``) is not available.
    """
    needed: tuple[Ranking, ...] = ("dense", "sparse") if mode == "hybrid" else (mode,)
    for name in needed:
        if name not in available:
            what = "embedding" if name == "dense" else "sparse vector"
            raise ValueError(f"{mode} search needs the query's {what}")
    if limit <= 0:
        return []
    if mode != "hybrid" and not ranks:
        return settle(fetch, [(mode, limit)])[0]
    n = max(candidates, limit)
    names = [name for name in RANKINGS if name in available]
    for _ in range(ATTEMPTS):
        settled = settle(fetch, [(name, n) for name in names], with_payload=False)
        rankings = dict(zip(names, settled, strict=True))
        scores = (
            _missing_scores(rankings, score) if mode == "hybrid" and fusion == "union" else None
        )
        hits = _combined(rankings, mode, rrf_k, limit, scores)
        found = {i: p for i, p in payloads([h.id for h in hits]).items() if _searchable(p)}
        if all(h.id in found for h in hits):
            break
    hits = [h for h in hits if h.id in found]
    for i, h in enumerate(hits, 1):
        h.rank = i
        h.payload = found[h.id]
        if not ranks:
            h.dense = h.sparse = None
    return hits


def _searchable(payload: dict[str, Any]) -> bool:
    """Whether a point read by id still passes the conditions every search has.

    Point ids come from content, so a point ranked a moment ago may since have been
    written anew as a parent section or marked pending (the flags of
    :data:`~ingestd.store.search.query.HIDDEN_KEYS`).
    """
    return not any(payload.get(key) for key in HIDDEN_KEYS)


def _missing_scores(
    rankings: dict[Ranking, list[Hit]], score: Score | None
) -> dict[Ranking, dict[str, float]] | None:
    """Each ranking's exact scores of the other rankings' candidates it did not hold.

    One engine call; ``None`` without a ``score``.
    """
    if score is None:
        return None
    every = {h.id for hits in rankings.values() for h in hits}
    wanted: list[tuple[Ranking, list[str]]] = []
    for name, hits in rankings.items():
        held = {h.id for h in hits}
        missing = sorted(every - held)
        if missing:
            wanted.append((name, missing))
    if not wanted:
        return {}
    return {name: got for (name, _), got in zip(wanted, score(wanted), strict=True)}


def _combined(
    rankings: dict[Ranking, list[Hit]],
    mode: Mode,
    rrf_k: int,
    limit: int,
    scores: dict[Ranking, dict[str, float]] | None = None,
) -> list[Hit]:
    """The ``mode`` ranking's best ``limit``, with each hit's ranks in each ranking.

    ``hybrid``: RRF, over the union of candidates when ``scores`` are given.
    """
    if mode == "hybrid":
        return (
            rrf(rankings, rrf_k, limit)
            if scores is None
            else union_rrf(rankings, scores, rrf_k, limit)
        )
    hits = [Hit(h.id, h.score, h.payload, h.rank) for h in rankings[mode][:limit]]
    for name, ranking in rankings.items():
        by_id = {h.id: (h.rank, h.score) for h in ranking}
        for h in hits:
            setattr(h, name, by_id.get(h.id))
    return hits


def available(dense: object | None, sparse: object | None) -> list[Ranking]:
    """The rankings a query has vectors for: ``dense`` if ``dense`` is given, likewise."""
    return [name for name, vec in zip(RANKINGS, (dense, sparse), strict=True) if vec is not None]
