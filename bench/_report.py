"""Scores and reports of bench/retrieval.py: metrics, paired bootstrap, tables, targets.

A question's result is the 1-based rank of the first chunk of its gold file (path level)
and of the first chunk that covers the whole answer (span level), ``None`` past the
ranks looked at. Metrics are in percent: recall@k (a hit within the first k) and MRR@10
(mean of 1/rank, 0 past rank 10).

The targets are issue 23's, each mode against the anchors ranked the same way (dense
against dense; hybrid against the anchors given our BM25 over their chunks and fused
the same way):

* dense: per set, span R@5 of the default rules at least the best anchor's plus
  :data:`DENSE_MARGIN` points;
* hybrid: per set, span R@5 at least the best anchor's; pooled over the sets, at least
  the best anchor's plus :data:`HYBRID_POOLED_MARGIN` points;
* both modes: pooled span R@1 and MRR@10 at least the best anchor's.

Each comparison gets a paired-bootstrap 95% interval of the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT",
    "DENSE_MARGIN",
    "HYBRID_POOLED_MARGIN",
    "KS",
    "Result",
    "best_anchor",
    "bootstrap",
    "metrics",
    "show_targets",
    "summary",
    "table",
]

DEFAULT = "ingestd default rules"
KS = (1, 5, 10)
DENSE_MARGIN = 3.0  # dense span R@5 over the best dense anchor's, per set, in points
HYBRID_POOLED_MARGIN = 3.0  # pooled hybrid span R@5 over the best hybrid anchor's, in points
_STATS = ("R@1", "R@5", "MRR@10")


@dataclass
class Result:
    """One question ranked by one strategy in one mode."""

    path_rank: int | None  # 1-based rank of the first chunk of the gold file
    span_rank: int | None  # 1-based rank of the first chunk covering the answer
    coverable: bool  # some chunk of the gold file covers the whole answer
    top1: str
    cover_head: str
    added_rank: int | None = None  # 1-based rank of the first chunk of an --add file


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """Recall@1/5/10 and MRR@10 of ``ranks``, in percent."""
    n = len(ranks) or 1
    m = {f"R@{k}": 100 * sum(r is not None and r <= k for r in ranks) / n for k in KS}
    m["MRR@10"] = 100 * sum(1 / r for r in ranks if r is not None and r <= 10) / n
    return m


def _per_question(res: Sequence[Result], stat: str) -> Any:
    """Each question's share of span ``stat`` (``R@k``: 0 or 1; ``MRR@10``: 1/rank or 0)."""
    if stat == "MRR@10":
        return np.array(
            [1 / r.span_rank if r.span_rank and r.span_rank <= 10 else 0.0 for r in res]
        )
    k = int(stat[2:])
    return np.array([r.span_rank is not None and r.span_rank <= k for r in res], dtype=float)


def bootstrap(
    a: Sequence[Result], b: Sequence[Result], stat: str = "R@5", n: int = 10_000
) -> tuple[float, float]:
    """Paired-bootstrap 95% interval of span ``stat`` of ``a`` minus ``b``, in points.

    ``a`` and ``b`` hold the same questions in the same order. Questions are resampled
    with replacement ``n`` times (seed 0); the interval is the 2.5 and 97.5 percentiles
    of the difference (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993,
    ch. 13).
    """
    xa, xb = _per_question(a, stat), _per_question(b, stat)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(a), size=(n, len(a)))
    diff = 100 * (xa[idx].mean(axis=1) - xb[idx].mean(axis=1))
    lo, hi = np.percentile(diff, [2.5, 97.5])
    return float(lo), float(hi)


def table(title: str, rows: list[tuple[str, dict[str, float], dict[str, float]]]) -> None:
    """Path and span recall@1/5/10 and MRR@10 of each ``(label, path, span)`` row."""
    print(f"\n== {title}")
    head = f"{'strategy':<42}" + "".join(f"{'path ' + k:>10}" for k in ("R@1", "R@5", "R@10"))
    head += f"{'path MRR':>10}" + "".join(f"{'span ' + k:>10}" for k in ("R@1", "R@5", "R@10"))
    print(head + f"{'span MRR':>10}")
    for label, pm, sm in rows:
        cells = [pm["R@1"], pm["R@5"], pm["R@10"], pm["MRR@10"]]
        cells += [sm["R@1"], sm["R@5"], sm["R@10"], sm["MRR@10"]]
        print(f"{label[:41]:<42}" + "".join(f"{c:>10.1f}" for c in cells))


Results = dict[str, dict[str, list[Result]]]  # set -> "label [mode]" -> per question


def _pooled(sets: list[str], results: Results, row: str) -> list[Result]:
    return [r for name in sets for r in results[name][row]]


def best_anchor(
    res: dict[str, list[Result]], mode: str, anchors: Sequence[str], stat: str = "R@5"
) -> tuple[float, str]:
    """The anchor with the highest span ``stat`` in ``mode``: ``(value in points, label)``."""
    return max(
        (
            (metrics([r.span_rank for r in res[f"{a} [{mode}]"]])[stat], a)
            for a in anchors
            if f"{a} [{mode}]" in res
        ),
        default=(0.0, "none"),
    )


def _line(
    label: str, ours: list[Result], theirs: list[Result], who: str, stat: str, need: float
) -> None:
    a = metrics([r.span_rank for r in ours])[stat]
    b = metrics([r.span_rank for r in theirs])[stat]
    lo, hi = bootstrap(ours, theirs, stat)
    ok = "MET" if a - b >= need - 1e-9 else "NOT MET"
    print(
        f"  {label:<22} span {stat:<6} {a:5.1f} vs {b:5.1f} {who[:34]:<34} "
        f"{a - b:+5.1f} (95% CI {lo:+5.1f}..{hi:+5.1f}) target >= {need:+g}: {ok}"
    )


def show_targets(
    sets: list[str], results: Results, modes: list[str], anchors: Sequence[str]
) -> None:
    """Issue 23's targets (module docstring), with paired-bootstrap intervals."""
    print("\n== targets (issue 23): the default rules against the best anchor ranked the same way")
    for mode in [m for m in ("dense", "hybrid") if m in modes]:
        row = f"{DEFAULT} [{mode}]"
        need = DENSE_MARGIN if mode == "dense" else 0.0
        for name in sets:
            res = results[name]
            _, who = best_anchor(res, mode, anchors)
            if who == "none":
                continue
            _line(f"{mode} {name}", res[row], res[f"{who} [{mode}]"], who, "R@5", need)
        if len(sets) < 2:
            continue
        pooled = {
            a: _pooled(sets, results, f"{a} [{mode}]")
            for a in anchors
            if f"{a} [{mode}]" in results[sets[0]]
        }
        if not pooled:
            continue
        ours = _pooled(sets, results, row)
        for stat in _STATS:
            who = max(pooled, key=lambda a: metrics([r.span_rank for r in pooled[a]])[stat])
            need = HYBRID_POOLED_MARGIN if (mode == "hybrid" and stat == "R@5") else 0.0
            if mode == "dense" and stat == "R@5":
                need = 0.0  # for information: the dense target is per set
            _line(f"{mode} pooled", ours, pooled[who], who, stat, need)
    if "hybrid" in modes and "dense" in modes:
        h = _pooled(sets, results, f"{DEFAULT} [hybrid]")
        d = _pooled(sets, results, f"{DEFAULT} [dense]")
        for stat in _STATS:
            gain = metrics([r.span_rank for r in h])[stat] - metrics([r.span_rank for r in d])[stat]
            lo, hi = bootstrap(h, d, stat)
            print(
                f"  (information) default rules hybrid - dense, pooled span {stat}: "
                f"{gain:+.1f} (95% CI {lo:+.1f}..{hi:+.1f})"
            )


def summary(
    sets: list[str],
    results: Results,
    fills: dict[str, dict[str, float]],
    labels: list[str],
    modes: list[str],
) -> None:
    """A markdown table: per set and strategy, span R@1 / R@5 / MRR@10 in each mode, fill."""
    ms = [m for m in ("hybrid", "dense") if m in modes]
    print(
        f"\n== summary (markdown; span R@1 / R@5 / MRR@10, {' | '.join(ms)}; fill % of the budget)"
    )
    print("| set | strategy | " + " | ".join(f"{m} R@1 / R@5 / MRR" for m in ms) + " | fill % |")
    print("| --- | --- | " + " | ".join("---" for _ in ms) + " | --- |")
    for name in [*sets, "pooled"] if len(sets) > 1 else sets:
        for label in labels:
            cells = []
            for m in ms:
                row = f"{label} [{m}]"
                res = _pooled(sets, results, row) if name == "pooled" else results[name][row]
                s = metrics([r.span_rank for r in res])
                cells.append(" / ".join(f"{s[k]:.1f}" for k in _STATS))
            fill = "" if name == "pooled" else f"{fills[name][label]:.1f}"
            strong = "**" if label == DEFAULT else ""
            print(f"| {name} | {strong}{label}{strong} | " + " | ".join(cells) + f" | {fill} |")
