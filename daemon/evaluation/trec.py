"""Run files in TREC format: what another system returned for the same questions.

A run file holds one line per retrieved item, ``QID Q0 DOCNO RANK SCORE TAG``
(whitespace-separated; the format of TREC's ad hoc tracks, which trec_eval and
pytrec_eval read). ``QID`` is a question's id; ``DOCNO`` a page, its path relative to
the corpus root (anything from a ``#`` on is left out, so ``guide/a.md#setup`` or a
chunk id after the path count for the page). As trec_eval does, the ``RANK`` column
is ignored and each question's items are ordered by score, highest first, equal
scores by document name in descending string order (``comp_sim_docno`` in
trec_eval's ``form_res_rels.c``); a page given twice keeps its first place.

:func:`write_run` writes ingestd's own ranking in the same format, so that two
systems are scored by one evaluator, here or with trec_eval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cmp_to_key
from pathlib import Path

from ingestd.daemon.evaluation.pages import PAGE_DEPTH
from ingestd.daemon.evaluation.questions import QuestionError

__all__ = ["read_run", "write_run"]


def _order(a: tuple[float, str], b: tuple[float, str]) -> int:
    """trec_eval's order: score descending, then document name descending."""
    if a[0] != b[0]:
        return -1 if a[0] > b[0] else 1
    return (a[1] < b[1]) - (a[1] > b[1])


def read_run(path: Path, depth: int = 1000) -> dict[str, list[str]]:
    """The pages each question of run file ``path`` ranks, best first (see the module).

    Args:
        path: the run file.
        depth: most pages kept per question.

    Returns:
        Question id -> distinct pages, best first.

    Raises:
        QuestionError: the file cannot be read, or lines that are not run lines (each
            named with its line number).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionError(f"{path}: cannot read the run file: {exc}") from None
    items: dict[str, list[tuple[float, str]]] = {}
    problems = []
    for no, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) != 6:
                raise ValueError
            score = float(parts[4])
        except ValueError:
            problems.append(f"{path}:{no}: expected QID Q0 DOCNO RANK SCORE TAG")
            continue
        page = parts[2].split("#", 1)[0]
        items.setdefault(parts[0], []).append((score, page))
    if problems:
        raise QuestionError("\n".join(problems[:20]))
    out: dict[str, list[str]] = {}
    for qid, got in items.items():
        pages: list[str] = []
        for _, page in sorted(got, key=cmp_to_key(_order)):
            if page not in pages:
                pages.append(page)
                if len(pages) == depth:
                    break
        out[qid] = pages
    return out


def write_run(
    path: Path, rankings: Mapping[str, Sequence[str]], tag: str, depth: int = PAGE_DEPTH
) -> None:
    """Write ``rankings`` (question id -> pages, best first) as a TREC run file.

    Scores are ``1 / rank``, so every evaluator reads the order given.
    """
    rows = []
    for qid, pages in rankings.items():
        for rank, page in enumerate(list(pages)[:depth], 1):
            rows.append(f"{qid} Q0 {page} {rank} {1.0 / rank:.6f} {tag}")
    Path(path).write_text("\n".join(rows) + ("\n" if rows else ""), encoding="utf-8")
