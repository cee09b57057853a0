"""The report of ``ingestd eval``: metrics per row, differences with intervals, the table.

:func:`summarise` turns the ranks of a run into the metrics of each row (rule set x
mode, :mod:`ingestd.daemon.evaluation.scoring`) and each row's difference to the first row with
its paired-bootstrap interval; :func:`format_table` prints them side by side.

Path and span levels score the questions with a verbatim answer; the page level
(:mod:`ingestd.daemon.evaluation.pages`) scores every question by its judgements, each
row and each external run (a TREC run file, :mod:`ingestd.daemon.evaluation.trec`) with
a bootstrap interval of its mean, and each against the first row, paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ingestd.daemon.evaluation.pages import PAGE_METRICS, page_values
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
    runs: dict[str, dict[str, list[str]]] | None = None,
) -> dict[str, Any]:
    """Metrics per row and each row's difference to the first row, with intervals.

    Args:
        raw: the raw results of a run.
        questions: its questions, in the order of ``raw["questions"]``.
        resamples: bootstrap samples.
        seed: bootstrap seed.
        question_set: the question file, for the report.
        runs: external runs to score beside the rows: name -> question id -> pages,
            best first (:func:`~ingestd.daemon.evaluation.trec.read_run`); a question a
            run lacks scores 0 (trec_eval's ``-c``).

    Returns:
        The JSON report: ``questions``, ``question_set``, ``corpus``, ``bootstrap``
        (``resamples``, ``seed``, ``confidence``), ``questions_embedded``,
        ``rule_sets`` (per rule set: documents, chunks, embedded, reused, failed,
        unreadable, unindexed, split) and ``rows``: per rule set and mode, ``rules``,
        ``mode``, ``path`` and ``span`` (metric -> percent), ``vs_first`` (level ->
        metric -> ``{diff, low, high}`` in points; ``null`` for the first row) and
        ``ranks`` (per question: ``id``, ``path_rank``, ``span_rank``, ``pages``);
        with page rankings in ``raw``, ``answered`` (questions with a verbatim answer,
        which path and span levels score), each row's ``pages`` (metric -> percent),
        ``pages_ci`` (metric -> ``{low, high}``) and ``pages_vs_first``, and ``runs``
        (per run: ``run``, ``pages``, ``pages_ci``, ``vs_first``, ``missing`` ids).
    """
    ids = [q.id for q in questions]
    answered = [i for i, q in enumerate(questions) if q.has_answer]
    rows: list[dict[str, Any]] = []
    for rs in raw["rule_sets"]:
        for mode in raw["modes"]:
            pairs = rs["ranks"][mode]
            ranks = {
                "path": [pairs[i][0] for i in answered],
                "span": [pairs[i][1] for i in answered],
            }
            row: dict[str, Any] = {"rules": rs["label"], "mode": mode}
            for level in LEVELS:
                row[level] = {m: round(v, 2) for m, v in metrics(ranks[level]).items()}
            row["_ranks"] = ranks
            listed = (rs.get("pages") or {}).get(mode)
            row["ranks"] = [
                {"id": i, "path_rank": p, "span_rank": s}
                for i, (p, s) in zip(ids, pairs, strict=True)
            ]
            if listed is not None:
                for entry, pages in zip(row["ranks"], listed, strict=True):
                    entry["pages"] = pages
                row["_pages"] = _page_values(questions, listed)
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
    out_runs: list[dict[str, Any]] = []
    if "_pages" in rows[0]:
        boot = {"resamples": resamples, "seed": seed}
        first = rows[0]["_pages"]
        for i, row in enumerate(rows):
            _page_summary(row, row["_pages"], first if i else None, boot)
        for name, ranking in (runs or {}).items():
            listed = [ranking.get(q.id, []) for q in questions]
            run: dict[str, Any] = {
                "run": name,
                "missing": [q.id for q in questions if q.id not in ranking],
            }
            _page_summary(run, _page_values(questions, listed), first, boot)
            run["vs_first"] = run.pop("pages_vs_first")
            out_runs.append(run)
    for row in rows:
        del row["_ranks"]
        row.pop("_pages", None)
    return {
        "questions": len(ids),
        "answered": len(answered),
        "judged": sum(1 for q in questions if set(q.judgements) != {q.path}),
        "question_set": question_set,
        "corpus": raw["corpus"],
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": 0.95},
        "questions_embedded": raw["questions_embedded"],
        "rule_sets": [
            {k: v for k, v in rs.items() if k not in ("ranks", "pages")} for rs in raw["rule_sets"]
        ],
        "rows": rows,
        "runs": out_runs,
    }


def _page_values(questions: Sequence[Question], listed: Sequence[Sequence[str]]) -> Any:
    """Per metric, each question's page-level value: ``{metric: array}``."""
    import numpy as np

    per = [page_values(pages, q.judgements) for q, pages in zip(questions, listed, strict=True)]
    return {m: np.array([v[m] for v in per]) for m in PAGE_METRICS}


def _page_summary(
    row: dict[str, Any], values: dict[str, Any], first: dict[str, Any] | None, boot: dict[str, int]
) -> None:
    """Add ``pages``, ``pages_ci`` and ``pages_vs_first`` to ``row`` (percent, points)."""
    row["pages"] = {m: round(100 * float(v.mean()), 2) for m, v in values.items()}
    row["pages_ci"] = {}
    for m, v in values.items():
        iv = paired_bootstrap(v * 0.0, v, **boot).as_dict()
        row["pages_ci"][m] = {"low": iv["low"], "high": iv["high"]}
    row["pages_vs_first"] = None
    if first is not None:
        row["pages_vs_first"] = {
            m: paired_bootstrap(first[m], values[m], **boot).as_dict() for m in PAGE_METRICS
        }


def format_table(report: dict[str, Any]) -> str:
    """The report as text: the rule sets, the metrics table, the differences."""
    rows = report["rows"]
    n = report["questions"]
    answered = report.get("answered", n)
    lines = [
        f"{n} questions ({report['question_set'] or 'question set'}) over {report['corpus']}; "
        f"one question is {100 / n:.2f} points",
        "",
    ]
    if answered != n:
        lines[0] += f"; {answered} with a verbatim answer (path and span levels)"
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
    if answered:  # a set judged at page level only has no path or span level
        lines += [
            "",
            f"{'':<{w}}  {'':<6}  {'path level':^32}  {'span level':^32}",
            f"{'rules':<{w}}  {'mode':<6}  {cells}  {cells}",
        ]
    for r in rows if answered else []:
        vals = "  ".join("".join(f"{r[lv][m]:>8.1f}" for m in METRICS) for lv in LEVELS)
        lines.append(f"{r['rules']:<{w}}  {r['mode']:<6}  {vals}")
    if "pages" in rows[0]:
        lines += _page_table(report, w)
    if len(rows) > 1 and answered:
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


def _page_table(report: dict[str, Any], w: int) -> list[str]:
    """The page-level table: each row and run, then their differences to the first row."""
    rows, runs = report["rows"], report.get("runs") or []
    judged = report.get("judged", 0)
    labels = [f"{r['rules']}  {r['mode']:<6}" for r in rows]
    labels += [f"run {r['run']}" for r in runs]
    width = max(w + 8, *(len(label) for label in labels))
    cells = "".join(f"{m:>9}" for m in PAGE_METRICS)
    out = [
        "",
        f"page level: {report['questions']} questions by graded judgements "
        f"({judged} judged beyond their gold file); 95% bootstrap interval of nDCG@5 and Hit@5",
        f"{'':<{width}}  {cells}  {'nDCG@5 interval':>16}  {'Hit@5 interval':>16}",
    ]
    for label, r in zip(labels, [*rows, *runs], strict=True):
        vals = "".join(f"{r['pages'][m]:>9.1f}" for m in PAGE_METRICS)
        ci = "  ".join(
            f"[{r['pages_ci'][m]['low']:5.1f}, {r['pages_ci'][m]['high']:5.1f}]".rjust(16)
            for m in ("nDCG@5", "Hit@5")
        )
        lines = f"{label:<{width}}  {vals}  {ci}"
        out.append(lines)
    others = [(lab, r.get("pages_vs_first") or r.get("vs_first")) for lab, r in zip(
        labels[1:], [*rows[1:], *runs], strict=True
    )]  # fmt: skip
    if others:
        out.append(f"difference to {labels[0].strip()} in points, paired bootstrap 95% interval:")
        for label, d in others:
            vals = "".join(_interval(d[m]).rjust(21) for m in ("nDCG@5", "Hit@5", "R@5"))
            out.append(f"{label:<{width}}  nDCG@5, Hit@5, R@5:{vals}")
        missing = [r for r in runs if r["missing"]]
        for r in missing:
            out.append(
                f"run {r['run']} has no line for {len(r['missing'])} question(s) "
                f"(scored 0): {' '.join(r['missing'][:10])}"
            )
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _interval(d: dict[str, float]) -> str:
    return f"{_signed(d['diff']):>6} [{_signed(d['low'])}, {_signed(d['high'])}]"


def _signed(x: float) -> str:
    return f"{x:+.1f}" if round(x, 1) != 0 else "0.0"
