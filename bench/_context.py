"""Context under a token budget, and page-level scores, for bench/retrieval.py.

**Span recall at a context budget.** An agent reads what fits its context, not a
fixed number of chunks. For each question and budget (:data:`BUDGETS`, cl100k_base
tokens of verbatim text), the default rules' ranking is walked best first, twice:

* *chunks*: each chunk's verbatim text is taken while the budget holds (a chunk that
  does not fit is passed over and the next one tried), as a plain top-k list gives
  them, overlaps and neighbours included;
* *passages*: the same hits go through :func:`ingestd.store.search.passages.fill`,
  what ``search --budget-tokens`` answers: hits of one document that overlap or touch
  are merged into one span, so no token is paid twice.

A question counts when a chunk (or passage) of its gold file covers the whole answer.
The pooled difference (passages minus chunks) gets a paired-bootstrap 95% interval.

**Page level.** The ranking's distinct pages (in order of their first chunk) are
scored with :mod:`ingestd.daemon.evaluation.pages` (nDCG@5 and Hit@5, trec_eval's
definitions) against graded judgements: each question's gold file at grade 3, plus
the judgements of ``bench/qrels/<set>.jsonl`` (other pages that answer or help, and
comparison questions that need two pages; the format of ``ingestd eval --qrels``).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BUDGETS",
    "Hits",
    "PageQuestion",
    "context_rows",
    "load_page_questions",
    "page_rows",
    "paired_interval",
    "show",
]

#: Context budgets, in cl100k_base tokens.
BUDGETS = (1024, 2048)
QRELS = Path(__file__).resolve().parent / "qrels"


@dataclass
class PageQuestion:
    """A question scored at page level: its id, text and judgements (path -> grade)."""

    id: str
    question: str
    qrels: dict[str, int]


def load_page_questions(name: str, qs: Sequence[Any]) -> tuple[list[PageQuestion], list[int]]:
    """Every question of set ``name`` with its judgements, then the added ones.

    Returns:
        ``(questions, extra)``: the set's questions (gold file at grade 3, merged with
        ``bench/qrels/<name>.jsonl``) followed by the questions that file adds; ``extra``
        the positions of those added ones.
    """
    out = [PageQuestion(q.id, q.question, {q.path: 3}) for q in qs]
    by_id = {p.id: p for p in out}
    extra: list[int] = []
    path = QRELS / f"{name}.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj["id"] in by_id:
                by_id[obj["id"]].qrels.update(obj["qrels"])
            else:
                extra.append(len(out))
                out.append(PageQuestion(obj["id"], obj["question"], dict(obj["qrels"])))
    return out, extra


#: Hits pages are ranked from (``ingestd eval``'s ``PAGE_HITS``).
PAGE_HITS = 50


def page_rows(
    paths: Sequence[str],
    ranked: Any,
    pqs: Sequence[PageQuestion],
    scores: Sequence[dict[int, float]] | None = None,
) -> list[dict[str, float]]:
    """Each question's page-level values (:func:`~ingestd.daemon.evaluation.pages.page_values`).

    ``scores``: each question's score per chunk: pages then come by page score over
    the first :data:`PAGE_HITS` chunks (:func:`ingestd.store.search.pages.page_scores`,
    as ``ingestd eval`` and passages order them); ``None``: by their first chunk.
    """
    from ingestd.daemon.evaluation.pages import page_values, pages_of
    from ingestd.store.search.pages import page_scores

    arr = np.array(paths)
    out = []
    for i, (q, order) in enumerate(zip(pqs, ranked, strict=True)):
        listed = list(arr[order])
        if scores is not None:
            top = [(paths[j], scores[i][int(j)]) for j in order[:PAGE_HITS]]
            listed = [p for p, _ in page_scores(top)] + listed
        out.append(page_values(pages_of(listed), q.qrels))
    return out


class _Texts:
    """Decoded files of a corpus and their line starts, read once."""

    def __init__(self, corpus: Path) -> None:
        self.corpus = corpus
        self._texts: dict[str, tuple[str, list[int]]] = {}

    def get(self, rel: str) -> tuple[str, list[int]]:
        if rel not in self._texts:
            from ingestd.chunkers.text import decode

            text = decode((self.corpus / rel).read_bytes())
            starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
            self._texts[rel] = (text, starts)
        return self._texts[rel]


class Hits:
    """Search hits (payload keys, ``id``, ``score``) of a chunk ranking of ``idx``.

    ``tokens`` keeps each chunk's verbatim token count by ``count``.
    """

    def __init__(self, idx: Any, corpus: Path, count: Callable[[str], int]) -> None:
        self.idx, self.count = idx, count
        self.texts = _Texts(corpus)
        self.ordinals = _ordinals(idx.paths)
        self.tokens: dict[int, int] = {}
        self.files: dict[str, list[int]] = {}  # path -> its chunk positions, by ordinal

    def __call__(self, order: Any) -> list[dict[str, Any]]:
        """The hits of ``order`` (chunk positions, best first), chunks not located left out."""
        hits: list[dict[str, Any]] = []
        for c in order:
            hit = self.hit(int(c), -len(hits))
            if hit is not None:
                hits.append(hit)
        return hits

    def hit(self, c: int, score: float) -> dict[str, Any] | None:
        """Chunk ``c`` as a hit of ``score`` (``None``: not located in its file)."""
        idx = self.idx
        a, b, rel = idx.starts[c], idx.ends[c], idx.paths[c]
        if a < 0 or rel.startswith("+"):
            return None
        text, lines = self.texts.get(rel)
        if c not in self.tokens:
            self.tokens[c] = self.count(text[a:b])
        return {
            "id": str(c), "source": "s", "path": rel, "start_char": a, "end_char": b,
            "start_line": bisect.bisect_right(lines, a),
            "end_line": bisect.bisect_right(lines, max(a, b - 1)),
            "score": score, "text": text[a:b], "ordinal": self.ordinals[c],
        }  # fmt: skip

    def between(self, a: Any, b: Any) -> list[dict[str, Any]]:
        """The chunks of ``a``'s file between passages ``a`` and ``b`` (``fill``'s ``between``).

        What the search reads from the index to join spans within ``JOIN_LINES`` lines.
        """
        if not self.files:
            for c, rel in enumerate(self.idx.paths):
                self.files.setdefault(rel, []).append(c)
        chunks = self.files.get(a.path, [])[a.ordinals[1] + 1 : max(0, b.ordinals[0])]
        return [h for h in (self.hit(c, 0.0) for c in chunks) if h is not None]


def _ordinals(paths: Sequence[str]) -> list[int]:
    """Each chunk's position among its file's chunks (files are added in order)."""
    seen: dict[str, int] = {}
    out = []
    for p in paths:
        out.append(seen.get(p, 0))
        seen[p] = out[-1] + 1
    return out


def context_rows(
    idx: Any,
    qs: Sequence[Any],
    ranked: Any,
    corpus: Path,
    count: Callable[[str], int],
    budgets: Sequence[int] = BUDGETS,
    per_page: int | None = None,
) -> dict[str, list[float]]:
    """Per question, whether the context at each budget holds the whole answer.

    Args:
        idx: the strategy's index (``paths``, ``starts``, ``ends``).
        qs: the questions, answers located (``path``, ``start``, ``end``).
        ranked: each question's chunk ranking (chunk positions, best first).
        corpus: the folder the paths are relative to.
        count: tokens of a text (cl100k_base).
        budgets: the context budgets, in tokens.
        per_page: the passages' cap per document (``fill``'s ``per_page``).

    Returns:
        ``"chunks@B"`` / ``"passages@B"`` -> one 0/1 value per question, and
        ``"items chunks@B"`` / ``"items passages@B"`` -> how many were handed out.
    """
    from ingestd.store.search.passages import fill

    make = Hits(idx, corpus, count)
    tokens = make.tokens
    out: dict[str, list[float]] = {}
    for q, order in zip(qs, ranked, strict=True):
        hits = make(order)
        for budget in budgets:
            used, got, n = 0, False, 0
            for h in hits:
                cost = tokens[int(h["id"])]
                if used + cost > budget:
                    continue
                used += cost
                n += 1
                got = got or _covers(h["path"], h["start_char"], h["end_char"], q)
            out.setdefault(f"chunks@{budget}", []).append(float(got))
            out.setdefault(f"items chunks@{budget}", []).append(float(n))
            passages = fill(hits, budget, count, per_page=per_page, between=make.between)
            got = any(_covers(p.path, p.start_char, p.end_char, q) for p in passages)
            out.setdefault(f"passages@{budget}", []).append(float(got))
            out.setdefault(f"items passages@{budget}", []).append(float(len(passages)))
            out.setdefault(f"pages passages@{budget}", []).append(
                float(len(distinct_pages(passages)))
            )
            apart = fill(hits, budget, count, per_page=per_page)  # only touching spans joined
            out.setdefault(f"apart passages@{budget}", []).append(float(len(apart)))
    return out


def distinct_pages(passages: Sequence[Any]) -> set[tuple[str, str]]:
    """The distinct pages (source, path) of ``passages``."""
    return {(p.source, p.path) for p in passages}


def _covers(path: str, start: int, end: int, q: Any) -> bool:
    return bool(path == q.path and start <= q.start and end >= q.end)


def paired_interval(a: Sequence[float], b: Sequence[float], n: int = 10_000) -> tuple[float, float]:
    """Paired-bootstrap 95% interval of mean(``a``) - mean(``b``), in points (seed 0).

    The same resampling as ``_report.bootstrap`` (Efron and Tibshirani 1993, ch. 13).
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(xa), size=(n, len(xa)))
    diff = 100 * (xa[pick].mean(axis=1) - xb[pick].mean(axis=1))
    lo, hi = np.percentile(diff, [2.5, 97.5])
    return float(lo), float(hi)


def show(
    mode: str, per_set: dict[str, tuple[dict[str, list[float]], list[dict[str, float]], int]]
) -> None:
    """Print the context and page-level tables of one mode, per set and pooled.

    Args:
        mode: the ranking's name.
        per_set: set -> (:func:`context_rows`, :func:`page_rows`, questions judged
            beyond their gold file or added).
    """
    heads = [f"{kind}@{b}" for b in BUDGETS for kind in ("chunks", "passages")]
    print(f"\n== context under a token budget ({mode}; default rules): span recall, % of "
          "questions whose whole answer the context holds (mean items handed out)")  # fmt: skip
    print(f"  {'set':<14}{'n':>4}" + "".join(f"{h:>22}" for h in heads))
    pooled: dict[str, list[float]] = {}
    for name, (ctx, _, _) in per_set.items():
        cells = "".join(
            f"{100 * np.mean(ctx[h]):>14.1f} ({np.mean(ctx['items ' + h]):>4.1f})" for h in heads
        )
        print(f"  {name:<14}{len(ctx[heads[0]]):>4}{cells}")
        for h, v in ctx.items():
            pooled.setdefault(h, []).extend(v)
    if len(per_set) > 1:
        cells = "".join(
            f"{100 * np.mean(pooled[h]):>14.1f} ({np.mean(pooled['items ' + h]):>4.1f})"
            for h in heads
        )
        print(f"  {'pooled':<14}{len(pooled[heads[0]]):>4}{cells}")
    for b in BUDGETS:
        a, c = pooled[f"passages@{b}"], pooled[f"chunks@{b}"]
        lo, hi = paired_interval(a, c)
        per = ", ".join(
            f"{name} {100 * (np.mean(ctx[f'passages@{b}']) - np.mean(ctx[f'chunks@{b}'])):+.1f}"
            for name, (ctx, _, _) in per_set.items()
        )
        print(
            f"  passages - chunks at {b}: {100 * (np.mean(a) - np.mean(c)):+.1f} points, "
            f"95% interval [{lo:+.1f}, {hi:+.1f}] ({per})"
        )
        if f"pages passages@{b}" in pooled:
            print(
                f"  passages at {b}: {np.mean(pooled[f'items passages@{b}']):.2f} per answer over "
                f"{np.mean(pooled[f'pages passages@{b}']):.2f} pages "
                f"({np.mean(pooled[f'apart passages@{b}']):.2f} with only touching spans joined)"
            )
    print(f"\n== page level ({mode}; default rules): graded judgements, gold file at grade 3 "
          "plus bench/qrels/<set>.jsonl")  # fmt: skip
    names = ("nDCG@5", "Hit@5", "nDCG@10", "R@5", "MRR@10")
    print(f"  {'set':<14}{'n':>4}{'judged+':>9}" + "".join(f"{m:>9}" for m in names))
    allv: list[dict[str, float]] = []
    for name, (_, pages, extra) in per_set.items():
        allv += pages
        cells = "".join(f"{100 * np.mean([v[m] for v in pages]):>9.1f}" for m in names)
        print(f"  {name:<14}{len(pages):>4}{extra:>9}{cells}")
    if len(per_set) > 1:
        cells = "".join(f"{100 * np.mean([v[m] for v in allv]):>9.1f}" for m in names)
        total = sum(e for _, _, e in per_set.values())
        print(f"  {'pooled':<14}{len(allv):>4}{total:>9}{cells}")
