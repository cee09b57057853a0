"""The report of ``ingestd eval``: metrics per row, differences with intervals, the table.

:func:`summarise` turns the ranks of a run into the metrics of each row (rule set x
mode, :mod:`ingestd.daemon.evaluation.scoring`) and each row's difference to the first row with
its paired-bootstrap interval; :func:`format_table` prints them side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ingestd.daemon.evaluation.questions import Question
from ingestd.daemon.evaluation.scoring import (
    LEVELS,
    METRICS,
    metrics,
    paired_bootstrap,
    per_question,
)

__all__ = ["format_table", "summarise"]


def summarise(
    raw: dict[str, Any],
    questions: Sequence[Question],
    *,
    resamples: int,
    seed: int,
    question_set: str = "",
) -> dict[str, Any]:
    """Metrics per row and each row's difference to the first row, with intervals.

    Args:
        raw: the raw results of a run.
        questions: its questions, in the order of ``raw["questions"]``.
        resamples: bootstrap samples.
        seed: bootstrap seed.
        question_set: the question file, for the report.

    Returns:
        The JSON report: ``questions``, ``question_set``, ``corpus``, ``bootstrap``
        (``resamples``, ``seed``, ``confidence``), ``questions_embedded``,
        ``rule_sets`` (per rule set: documents, chunks, embedded, reused, failed,
        unreadable, unindexed, split) and ``rows``: per rule set and mode, ``rules``,
        ``mode``, ``path`` and ``span`` (metric -> percent), ``vs_first`` (level ->
        metric -> ``{diff, low, high}`` in points; ``null`` for the first row) and
        ``ranks`` (per question: ``id``, ``path_rank``, ``span_rank``).
    """
    ids = [q.id for q in questions]
    rows: list[dict[str, Any]] = []
    for rs in raw["rule_sets"]:
        for mode in raw["modes"]:
            pairs = rs["ranks"][mode]
            ranks = {"path": [p for p, _ in pairs], "span": [s for _, s in pairs]}
            row: dict[str, Any] = {"rules": rs["label"], "mode": mode}
            for level in LEVELS:
                row[level] = {m: round(v, 2) for m, v in metrics(ranks[level]).items()}
            row["_ranks"] = ranks
            row["ranks"] = [
                {"id": i, "path_rank": p, "span_rank": s}
                for i, (p, s) in zip(ids, pairs, strict=True)
            ]
            rows.append(row)
    base = rows[0]["_ranks"]
    for i, row in enumerate(rows):
        row["vs_first"] = None
        if i:
            row["vs_first"] = {
                level: {
                    m: paired_bootstrap(
                        per_question(base[level], m),
                        per_question(row["_ranks"][level], m),
                        resamples=resamples,
                        seed=seed,
                    ).as_dict()
                    for m in METRICS
                }
                for level in LEVELS
            }
    for row in rows:
        del row["_ranks"]
    return {
        "questions": len(ids),
        "question_set": question_set,
        "corpus": raw["corpus"],
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": 0.95},
        "questions_embedded": raw["questions_embedded"],
        "rule_sets": [{k: v for k, v in rs.items() if k != "ranks"} for rs in raw["rule_sets"]],
        "rows": rows,
    }


def format_table(report: dict[str, Any]) -> str:
    """The report as text: the rule sets, the metrics table, the differences."""
    rows = report["rows"]
    n = report["questions"]
    lines = [
        f"{n} questions ({report['question_set'] or 'question set'}) over {report['corpus']}; "
        f"one question is {100 / n:.2f} points",
        "",
    ]
    for rs in report["rule_sets"]:
        lines.append(
            f"{rs['label']}: {_count(rs['documents'], 'document')}, "
            f"{_count(rs['chunks'], 'chunk')} ({rs['embedded']} embedded, {rs['reused']} "
            f"from the cache); {_count(len(rs['split']), 'answer')} split across chunks"
        )
        if rs["unindexed"]:
            lines.append(
                "  questions whose file has no chunks (not indexed, or failed): "
                + " ".join(rs["unindexed"])
            )
        for path, error in rs["failed"].items():
            lines.append(f"  failed {path}: {error}")
        for path in rs["unreadable"]:
            lines.append(f"  could not read {path}")
    w = max(5, *(len(r["rules"]) for r in rows))
    cells = "".join(f"{m:>8}" for m in METRICS)
    lines += [
        "",
        f"{'':<{w}}  {'':<6}  {'path level':^32}  {'span level':^32}",
        f"{'rules':<{w}}  {'mode':<6}  {cells}  {cells}",
    ]
    for r in rows:
        vals = "  ".join("".join(f"{r[lv][m]:>8.1f}" for m in METRICS) for lv in LEVELS)
        lines.append(f"{r['rules']:<{w}}  {r['mode']:<6}  {vals}")
    if len(rows) > 1:
        b = report["bootstrap"]
        first = rows[0]
        lines += [
            "",
            f"difference to the first row ({first['rules']}, {first['mode']}) in points, "
            f"paired bootstrap {b['confidence']:.0%} interval "
            f"({b['resamples']:,} resamples, seed {b['seed']}):",
            f"{'rules':<{w}}  {'mode':<6}  {'level':<5}" + "".join(f"{m:>21}" for m in METRICS),
        ]
        for r in rows[1:]:
            for lv in LEVELS:
                d = r["vs_first"][lv]
                vals = "".join(_interval(d[m]).rjust(21) for m in METRICS)
                label = f"{r['rules']:<{w}}  {r['mode']:<6}" if lv == LEVELS[0] else " " * (w + 8)
                lines.append(f"{label}  {lv:<5}{vals}")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _interval(d: dict[str, float]) -> str:
    return f"{_signed(d['diff']):>6} [{_signed(d['low'])}, {_signed(d['high'])}]"


def _signed(x: float) -> str:
    return f"{x:+.1f}" if round(x, 1) != 0 else "0.0"
