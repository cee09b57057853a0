"""Passages: search hits of one document merged into spans, filling a token budget.

The index stores chunks; a reader wants the text that answers. A *passage* is a span
of one document made of hits that overlap or touch: two hits of a document (the same
``source``, ``path`` and ``doc_hash``) touch when their character ranges overlap or
meet, or when one is the chunk right after the other (``ordinal`` + 1: chunks tile a
document, so only whitespace lies between them). Its text is the verbatim union of
its hits' texts; the whitespace between two touching chunks is rebuilt from their
offsets and lines (the line ends between them, after any other blanks).

:func:`fill` walks the hits best first and adds each one to the passages while the
budget holds: a hit that touches a passage already taken is merged into it (costing
only the tokens it adds, and bridging two passages it touches both of), any other hit
opens a new passage; a hit that does not fit is passed over and the next one tried.
The passages keep the rank and score of their best hit and come out best first, so
for a budget they hold what the ranking's best chunks hold, without a chunk given
twice and with an answer that spans two adjacent chunks in one piece.

**Near spans join.** Two spans of one page with at most :data:`JOIN_LINES` whole lines
between them become one span when ``fill`` is given ``between`` (the chunks of a
document between two of its spans, read from the index): the lines between are read,
not guessed, and cost their tokens from the budget like any other text. Without
``between``, or when the chunks it gives do not fill the gap, the spans stay apart.

**A page once.** The passages come out page by page: the pages in order of their
page score (:func:`ingestd.store.search.pages.page_scores` over every hit ranked: the
score of the page's best hit), each page's passages together, in rank order. Each
passage says its page's place (``page_rank``, from 1) and score (``page_score``);
``rank`` numbers the passages in that order.

``per_page`` caps the passages of one document (a question that needs several pages
gets them before a second passage of the first page); a hit that would open one more
passage of a page already at its cap is passed over, one that merges into a passage
of it is not.

A passage cites its text as its hits do (:mod:`~ingestd.store.search.citation`): the
format's own coordinates from its first hit to its last (a PDF passage from page 10 to
11 has ``page`` 10 and ``end_page`` 11), and the version and commit of a versioned
source; hits of two versions never merge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ingestd.store.search.citation import cite, span_cite
from ingestd.store.search.pages import page_scores

__all__ = ["JOIN_LINES", "MAX_GAP", "Between", "Passage", "by_page", "fill", "merge_hits"]

#: Most characters of whitespace between two chunks of consecutive ordinals that are
#: still taken to touch (chunks that tile a document leave only the blank lines
#: between two blocks; a longer gap means text that no chunk holds).
MAX_GAP = 64

#: Most whole lines between two spans of one page that still join them into one span
#: (lines of the decoded document). Three lines cost a reader less than a second
#: excerpt of the same page, whose place in it he has to find again; with the default
#: rules' chunks of up to 200 tokens (10 to 20 lines of prose) they are at most a short
#: chunk, such as a heading and its first sentence, between two hits.
JOIN_LINES = 3

#: The chunks of a document between two of its spans (``a`` before ``b``): payloads with
#: ``id``, any order; empty when the index cannot tell (the spans then stay apart).
Between = Callable[["Passage", "Passage"], Sequence[Mapping[str, Any]]]


@dataclass
class Passage:
    """A span of one document, made of hits that overlap or touch.

    Attributes:
        source: the source name.
        path: the document, relative to its source's root.
        doc_hash: the document's content hash when its hits were indexed.
        start_char: start in the decoded document, in characters.
        end_char: end (exclusive), in characters.
        start_line: first line (1-based).
        end_line: last line (inclusive).
        heading_path: the headings every hit of it is under, outermost first.
        rank: the best rank of its hits (1-based).
        score: the best score of its hits (the mode's: higher is better).
        ids: its chunks' ids, in document order (its hits', and the chunks between
            near spans it joined).
        text: the verbatim text of ``[start_char, end_char)``.
        n_tokens: tokens of ``text`` by the counter :func:`fill` was given.
        truncated: the text was cut to fit a budget smaller than its best hit.
        ordinals: the first and last chunk ordinal it holds.
        cite: its keys of :data:`~ingestd.store.search.citation.CITE_KEYS` (a format's
            coordinates from its first hit to its last, a version and its commit).
            A passage cut to a budget keeps its hit's (its text lies within them).
        page_rank: its document's place among the pages of the answer (1-based; 0
            until :func:`fill` orders them).
        page_score: its document's page score (:mod:`ingestd.store.search.pages`).
    """

    source: str
    path: str
    doc_hash: str
    start_char: int
    end_char: int
    start_line: int
    end_line: int
    heading_path: list[str]
    rank: int
    score: float
    ids: list[str]
    text: str
    n_tokens: int = 0
    truncated: bool = False
    ordinals: tuple[int, int] = (-1, -1)
    cite: dict[str, Any] = field(default_factory=dict)
    page_rank: int = 0
    page_score: float = 0.0
    _headings: list[list[str]] = field(default_factory=list, repr=False)

    @classmethod
    def of_hit(cls, hit: Mapping[str, Any], rank: int, score: float | None = None) -> Passage:
        """The passage of one hit (its payload keys, ``id`` and ``score``, or ``score``)."""
        ordinal = int(hit.get("ordinal", -1))
        heading = list(hit.get("heading_path") or [])
        return cls(
            source=str(hit["source"]),
            path=str(hit["path"]),
            doc_hash=str(hit.get("doc_hash", "")),
            start_char=int(hit["start_char"]),
            end_char=int(hit["end_char"]),
            start_line=int(hit["start_line"]),
            end_line=int(hit["end_line"]),
            heading_path=heading,
            rank=rank,
            score=float(hit["score"] if score is None else score),
            ids=[str(hit["id"])],
            text=str(hit.get("text", "")),
            ordinals=(ordinal, ordinal),
            cite=cite(hit),
            _headings=[heading],
        )

    @property
    def document(self) -> tuple[str, str, str, str | None]:
        """``(source, path, doc_hash, version)``: passages merge only within one of these."""
        return self.source, self.path, self.doc_hash, self.cite.get("version")

    def touches(self, other: Passage) -> bool:
        """Whether ``other`` (of the same document) overlaps, meets or follows on."""
        if self.document != other.document:
            return False
        a, b = (self, other) if self.start_char <= other.start_char else (other, self)
        if b.start_char <= a.end_char:
            return True
        gap = b.start_char - a.end_char
        return a.ordinals[1] >= 0 and b.ordinals[0] == a.ordinals[1] + 1 and gap <= MAX_GAP

    def near(self, other: Passage) -> bool:
        """Whether ``other`` (of the same document) lies within :data:`JOIN_LINES` lines."""
        if self.document != other.document:
            return False
        a, b = (self, other) if self.start_char <= other.start_char else (other, self)
        return b.start_line - a.end_line - 1 <= JOIN_LINES

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (payload key names, as hits have them), with :attr:`cite`."""
        return {
            "rank": self.rank,
            "score": self.score,
            "page_rank": self.page_rank,
            "page_score": self.page_score,
            "source": self.source,
            "path": self.path,
            "start_char": self.start_char,
            "end_char": self.end_char,
            "start_line": self.start_line,
            "end_line": self.end_line,
            **self.cite,
            "heading_path": list(self.heading_path),
            "ids": list(self.ids),
            "n_tokens": self.n_tokens,
            "truncated": self.truncated,
            "text": self.text,
        }


def _common(paths: Sequence[Sequence[str]]) -> list[str]:
    """The longest common prefix of heading paths."""
    out = list(paths[0]) if paths else []
    for p in paths[1:]:
        n = 0
        while n < len(out) and n < len(p) and out[n] == p[n]:
            n += 1
        del out[n:]
    return out


def _joined(a: Passage, b: Passage) -> Passage:
    """``a`` and ``b`` (touching, ``a`` starting first) as one passage."""
    if b.start_char <= a.end_char:  # overlapping or meeting: b's text past a's end
        tail = b.text[max(0, a.end_char - b.start_char) :] if b.end_char > a.end_char else ""
        text = a.text + tail
    else:  # whitespace between: the line ends between them, after any other blanks
        gap = b.start_char - a.end_char
        lines = max(0, min(gap, b.start_line - a.end_line))
        text = a.text + " " * (gap - lines) + "\n" * lines + b.text
    ids = a.ids + [i for i in b.ids if i not in a.ids]
    headings = a._headings + b._headings
    last = b if b.end_char > a.end_char else a
    return Passage(
        source=a.source,
        path=a.path,
        doc_hash=a.doc_hash,
        start_char=a.start_char,
        end_char=max(a.end_char, b.end_char),
        start_line=min(a.start_line, b.start_line),
        end_line=max(a.end_line, b.end_line),
        heading_path=_common(headings),
        rank=min(a.rank, b.rank),
        score=max(a.score, b.score),
        ids=ids,
        text=text,
        ordinals=(min(a.ordinals[0], b.ordinals[0]), max(a.ordinals[1], b.ordinals[1])),
        cite=span_cite(a.cite, last.cite),
        _headings=headings,
    )


def merge_hits(parts: Sequence[Passage]) -> Passage:
    """One passage of ``parts`` (of one document, each touching the next in offset order)."""
    ordered = sorted(parts, key=lambda p: (p.start_char, p.end_char))
    out = ordered[0]
    for p in ordered[1:]:
        out = _joined(out, p)
    return out


def fill(
    hits: Sequence[Mapping[str, Any]],
    budget_tokens: int,
    count: Callable[[str], int],
    *,
    max_passages: int | None = None,
    per_page: int | None = None,
    between: Between | None = None,
) -> list[Passage]:
    """The best passages of ``hits`` within ``budget_tokens`` (see the module docstring).

    Args:
        hits: search hits, best first (payload keys plus ``id`` and ``score``).
        budget_tokens: most tokens of all the passages' texts together, by ``count``.
        count: tokens of a text (the index's budget tokenizer: cl100k_base by default).
        max_passages: most passages (``None``: as many as the budget holds).
        per_page: most passages of one document (``None``: no cap).
        between: the chunks between two spans of a document, to join spans within
            :data:`JOIN_LINES` lines (``None``: only touching spans join).

    Returns:
        Passages page by page (pages by page score, a page's passages by their best
        hit's rank), ``rank`` renumbered from 1 in that order, ``page_rank``,
        ``page_score`` and ``n_tokens`` set. When not even the best hit fits, the one
        passage of it cut to the budget at a line end (``truncated``).

    Raises:
        ValueError: ``budget_tokens`` under 1.
    """
    if budget_tokens < 1:
        raise ValueError(f"budget_tokens must be at least 1 (got {budget_tokens})")
    taken: list[Passage] = []
    used = 0
    for rank, hit in enumerate(hits, 1):
        new = Passage.of_hit(hit, rank)
        near, fillers = _joins(taken, new, between)
        if not near:
            full = max_passages is not None and len(taken) >= max_passages
            page = sum(p.document == new.document for p in taken)
            if full or (per_page is not None and page >= per_page):
                continue
        merged = merge_hits([*near, *fillers, new])
        merged.n_tokens = count(merged.text)
        cost = merged.n_tokens - sum(p.n_tokens for p in near)
        if used + cost > budget_tokens:
            continue
        used += cost
        gone = {id(p) for p in near}
        taken = [p for p in taken if id(p) not in gone] + [merged]
    if not taken and hits:
        best = Passage.of_hit(hits[0], 1)
        taken = [_cut(best, budget_tokens, count)]
    return by_page(taken, hits)


def _joins(
    taken: Sequence[Passage], new: Passage, between: Between | None
) -> tuple[list[Passage], list[Passage]]:
    """The passages ``new`` joins, and the chunks that fill the gaps to the near ones.

    The passages it touches, then those within :data:`JOIN_LINES` lines of that span
    whose gap ``between`` fills with chunks that touch end to end (their passages are
    the second list, ranked and scored as ``new``: no better than any passage taken).
    """
    near = [p for p in taken if p.touches(new)]
    if between is None:
        return near, []
    span = merge_hits([*near, new])
    fillers: list[Passage] = []
    for p in taken:
        if any(p is q for q in near) or not p.near(span):
            continue
        a, b = (p, span) if p.start_char <= span.start_char else (span, p)
        parts = [Passage.of_hit(c, new.rank, new.score) for c in between(a, b)]
        chain = sorted([a, *parts, b], key=lambda q: (q.start_char, q.end_char))
        if all(x.touches(y) for x, y in zip(chain, chain[1:], strict=False)):
            near.append(p)
            fillers += parts
    return near, fillers


def by_page(passages: Sequence[Passage], hits: Sequence[Mapping[str, Any]]) -> list[Passage]:
    """``passages`` page by page (module docstring); ``rank``, ``page_rank``, ``page_score`` set.

    Args:
        passages: the passages taken, ``rank`` their best hit's rank in ``hits``.
        hits: every hit ranked, best first (payload keys plus ``id`` and ``score``).
    """
    docs = [Passage.of_hit(h, i).document for i, h in enumerate(hits, 1)]
    scored = page_scores(zip(docs, (float(h["score"]) for h in hits), strict=True))
    place = {doc: (i, score) for i, (doc, score) in enumerate(scored, 1)}
    out = sorted(passages, key=lambda p: (place.get(p.document, (len(place) + 1, 0.0))[0], p.rank))
    pages: dict[tuple[str, str, str, str | None], int] = {}
    for i, p in enumerate(out, 1):
        p.rank = i
        p.page_rank = pages.setdefault(p.document, len(pages) + 1)
        p.page_score = place.get(p.document, (0, p.score))[1]
    return out


def _cut(p: Passage, budget_tokens: int, count: Callable[[str], int]) -> Passage:
    """``p`` cut at the last line end that keeps its text within ``budget_tokens``."""
    lines = p.text.split("\n")
    lo, hi = 0, len(lines)  # the most whole lines that fit: lo
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count("\n".join(lines[:mid])) <= budget_tokens:
            lo = mid
        else:
            hi = mid - 1
    text = "\n".join(lines[:lo])
    if lo == 0:  # not even its first line: cut it at characters
        first = lines[0]
        a, b = 0, len(first)
        while a < b:
            mid = (a + b + 1) // 2
            if count(first[:mid]) <= budget_tokens:
                a = mid
            else:
                b = mid - 1
        text = first[:a]
    p.text = text
    p.end_char = p.start_char + len(text)
    p.end_line = p.start_line + text.count("\n")
    p.n_tokens = count(text)
    p.truncated = True
    return p
