"""Before and after: a run of bench/retrieval.py against an earlier run's ``--json`` file.

``retrieval.py --json FILE`` writes every question's ranks per set and row
(``"<strategy> [<mode>]"``), and, for the default rules, each page-level question's
values (``"pages <strategy> [<mode>]"``: nDCG@5, Hit@5... of
:func:`ingestd.daemon.evaluation.pages.page_values`, the set's questions and those
``bench/qrels`` adds). ``--baseline FILE`` prints, for every row both runs hold, per
set and pooled: span R@1, R@5 and MRR@10 and page nDCG@5 and Hit@5 before -> after,
each with its paired-bootstrap 95% interval (the same questions resampled on both
sides; Efron and Tibshirani 1993, ch. 13), and the net number of questions the change
wins at span R@5. Questions are matched by id; a set or a question only one run holds
is left out (and counted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from _context import paired_interval

__all__ = ["SPAN_STATS", "PAGE_STATS", "compare"]

SPAN_STATS = ("R@1", "R@5", "MRR@10")
PAGE_STATS = ("nDCG@5", "Hit@5")


def _span_value(rank: int | None, stat: str) -> float:
    if stat == "MRR@10":
        return 1 / rank if rank is not None and rank <= 10 else 0.0
    return float(rank is not None and rank <= int(stat[2:]))


def _paired(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> tuple[list, list, int]:
    """The records of the questions both lists hold, in one order, and how many were not."""
    old = {r["id"]: r for r in before}
    both = [(old[r["id"]], r) for r in after if r["id"] in old]
    return [a for a, _ in both], [b for _, b in both], len(before) + len(after) - 2 * len(both)


def _cell(a: list[float], b: list[float]) -> str:
    """``before -> after (lo..hi)`` in points."""
    lo, hi = paired_interval(b, a)
    return f"{100 * np.mean(a):.1f} -> {100 * np.mean(b):.1f} ({lo:+.1f}..{hi:+.1f})"


def compare(path: Path, dump: dict[str, Any]) -> None:
    """Print this run (``dump``, as ``--json`` writes it) against the run saved at ``path``."""
    before = json.loads(path.read_text(encoding="utf-8"))
    sets = [s for s in dump if s in before]
    left = sorted(set(dump) ^ set(before))
    print(f"\n== against the baseline {path} (paired bootstrap 95% intervals, in points)")
    if left:
        print(f"  sets only one run holds, left out: {', '.join(left)}")
    rows = [r for r in dump[sets[0]] if all(r in dump[s] and r in before[s] for s in sets)]
    for row in rows:
        page = row.startswith("pages ")
        stats = PAGE_STATS if page else SPAN_STATS
        print(f"\n  {row}" + ("" if page else "   (span; net: questions won - lost at R@5)"))
        head = f"    {'set':<14}{'n':>5}" + "".join(f"{s:>30}" for s in stats)
        print(head + ("" if page else "   net"))
        pooled: dict[str, tuple[list[float], list[float]]] = {s: ([], []) for s in stats}
        for name in [*sets, "pooled"]:
            if name == "pooled":
                if len(sets) < 2:
                    break
                cols = pooled
                n = len(next(iter(pooled.values()))[0])
                unmatched = 0
            else:
                a, b, unmatched = _paired(before[name][row], dump[name][row])
                cols = {}
                for s in stats:
                    if page:
                        va, vb = [r[s] for r in a], [r[s] for r in b]
                    else:
                        va = [_span_value(r["span_rank"], s) for r in a]
                        vb = [_span_value(r["span_rank"], s) for r in b]
                    cols[s] = (va, vb)
                    pooled[s][0].extend(va)
                    pooled[s][1].extend(vb)
                n = len(a)
            cells = "".join(f"{_cell(*cols[s]):>30}" for s in stats)
            net = ""
            if not page:
                va, vb = cols["R@5"]
                net = f"{int(round(sum(vb) - sum(va))):>+6d}"
            note = f"   ({unmatched} unmatched)" if unmatched else ""
            print(f"    {name:<14}{n:>5}{cells}{net}{note}")
