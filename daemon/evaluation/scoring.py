"""Retrieval metrics of a question set: what ``ingestd eval`` and ``bench/`` report.

Two levels of a hit, for the ranked hits of one question (each a path and the
``[start_char, end_char)`` span of a chunk in its decoded file):

* **path**: the hit's path is the gold path (lenient: any chunk of the right file);
* **span**: it is, and the hit's span covers the whole answer span (strict).

Per level, over the questions: recall@k (share of questions with a hit in the top k,
k = 1, 5, 10) and MRR@10 (mean reciprocal rank of the first hit, 0 past rank 10), as
percentages. Two configurations are compared question by question with a paired
bootstrap: :func:`paired_bootstrap`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ingestd.daemon.evaluation.questions import Question

__all__ = [
    "DEPTH",
    "KS",
    "LEVELS",
    "METRICS",
    "Interval",
    "Ranks",
    "metrics",
    "paired_bootstrap",
    "per_question",
    "rank_hits",
]

#: Cut-offs of recall@k.
KS = (1, 5, 10)
#: Ranks looked at: MRR is MRR@10, and no metric needs more hits than this.
DEPTH = 10
#: Metric names, in table order.
METRICS = (*(f"R@{k}" for k in KS), f"MRR@{DEPTH}")
#: Hit levels, in table order.
LEVELS = ("path", "span")


@dataclass(frozen=True)
class Ranks:
    """Where one question's first hits are, 1-based; ``None`` past the hits looked at.

    Attributes:
        path: rank of the first hit in the gold file.
        span: rank of the first hit covering the whole answer span.
    """

    path: int | None
    span: int | None


def rank_hits(question: Question, hits: Iterable[tuple[str, int, int]]) -> Ranks:
    """The ranks of the first path hit and the first span hit among ``hits``.

    Args:
        question: the question (gold path and answer span).
        hits: ``(path, start_char, end_char)`` of each hit, best first; offsets in
            characters of the decoded file, end exclusive. A hit whose offsets are
            unknown (negative) can be a path hit, never a span hit.

    Returns:
        Both ranks.
    """
    path_rank = span_rank = None
    for rank, (path, start, end) in enumerate(hits, 1):
        if path != question.path:
            continue
        if path_rank is None:
            path_rank = rank
        if 0 <= start <= question.start and end >= question.end:
            span_rank = rank
            break
    return Ranks(path_rank, span_rank)


def per_question(ranks: Sequence[int | None], metric: str) -> Any:
    """Each question's value of ``metric``: 0/1 for ``R@k``, the reciprocal rank for MRR.

    Args:
        ranks: each question's rank of its first hit (``None``: none found).
        metric: ``R@k`` for any k, or ``MRR@10`` (see :data:`METRICS`).

    Returns:
        A float array of shape ``(len(ranks),)``; its mean is the metric as a fraction.

    Raises:
        ValueError: unknown metric.
    """
    if metric.startswith("R@") and metric[2:].isdigit():
        k = int(metric[2:])
        return np.array([r is not None and r <= k for r in ranks], dtype=float)
    if metric == f"MRR@{DEPTH}":
        return np.array([1.0 / r if r is not None and r <= DEPTH else 0.0 for r in ranks])
    raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """Recall@1/5/10 and MRR@10 of the first-hit ranks, in percent (0-100).

    Returns:
        Metric name (:data:`METRICS`) -> value; 0.0 for every metric without questions.
    """
    if not ranks:
        return dict.fromkeys(METRICS, 0.0)
    return {m: 100.0 * float(per_question(ranks, m).mean()) for m in METRICS}


@dataclass(frozen=True)
class Interval:
    """A difference of means with its bootstrap confidence interval, in percent points.

    Attributes:
        diff: mean of ``b - a`` over the questions.
        low: lower bound of the interval.
        high: upper bound of the interval.
    """

    diff: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        """JSON-ready fields, rounded to 0.01 point."""
        return {k: round(v, 2) for k, v in self.__dict__.items()}


def paired_bootstrap(
    a: Sequence[float] | Any,
    b: Sequence[float] | Any,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Paired-bootstrap confidence interval of ``mean(b) - mean(a)``, in percent points.

    The per-question differences ``b - a`` are resampled with replacement
    (``resamples`` samples of the same size as the set, drawn by numpy's PCG64 seeded
    with ``seed``: the same seed gives the same samples, so every comparison of one
    run uses the same resampled question sets); the interval is the percentile
    interval of the resampled means (Efron and Tibshirani, *An Introduction to the
    Bootstrap*, 1993, ch. 13; the paired form follows Koehn, "Statistical
    Significance Tests for Machine Translation Evaluation", EMNLP 2004).

    Args:
        a: each question's value under the baseline (0/1 hits or reciprocal ranks).
        b: the same questions' values under the other configuration.
        resamples: number of bootstrap samples.
        seed: seed of the random generator.
        confidence: coverage of the interval (0.95: the 2.5th and 97.5th percentiles).

    Returns:
        The observed difference and its interval, times 100.

    Raises:
        ValueError: ``a`` and ``b`` differ in length or are empty.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"need two equally long, non-empty series (got {x.shape}, {y.shape})")
    d = y - x
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, 1_000_000 // d.size)  # bounded memory: about 8 MB of indices at a time
    for i in range(0, resamples, step):
        n = min(step, resamples - i)
        means[i : i + n] = d[rng.integers(0, d.size, size=(n, d.size))].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(100 * float(d.mean()), 100 * float(low), 100 * float(high))
