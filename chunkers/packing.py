"""Packing parsed sections into chunks that fit a budget (shared by the structured strategies).

A parser (``markdown``, ``rst``) turns the decoded text into :class:`Section` objects,
each a list of :class:`Block` spans. :class:`Packer` counts every block once and packs
whole blocks into chunks:

* a chunk never crosses a section start, unless it is under ``min_tokens`` and the
  whole next section fits (tiny sections are merged), or it holds only headings (they
  open the chunk of what follows them, cut as far as needed to fit);
* a heading never ends a chunk: a heading (or an intro paragraph, or an opening fence
  line) glued before a block that is cut stays with the block's first piece, a closing
  fence line with its last; a chunk without a word, or with only headings, joins the
  chunk before it, or else the one after it, when the two fit together;
* inside a section, an *anchor* block ends a chunk that is at least a quarter full
  and holds at least ``min_tokens``. A block is an anchor when the CRC-32 of its text
  falls below a threshold proportional to its size (about 2.5 anchors per
  ``max_tokens`` tokens): boundaries are content-defined, so after an edit the packing
  falls back into step with the old one within a chunk or two. A block with a lead
  glued before it (a heading too deep to open a section, an intro paragraph) is always
  an anchor: a chunk a quarter full ends before it;
* a block over budget (or, with the model's counts at hand, over what the model reads
  after the prefix) is cut at blank lines, then at line starts (code at line starts
  straight away), and a line over budget into windows: between its pieces
  (pre-tokens) when it is fast text with an index, else at token boundaries
  (``Sizer.boundaries``, on pieces of at most 4,096 characters, so a huge run of one
  character costs linear time); a piece of a line is a chunk of its own.

Token counts are additive at line starts (every tokenizer in use splits there), so a
chunk's count is the sum of its blocks' counts, corrected for the trailing whitespace
that the chunk leaves out. With tiktoken ``cl100k_base`` (and a BERT model) the
document is counted once by :class:`~ingestd.chunkers.spans.SpanIndex`, and every
count, in budget tokens and in model word pieces, is a difference of two lookups;
other sizers count each block once. Windows cut at token boundaries are recounted
exactly. With word pieces in the index, a chunk at least a quarter full also ends
before the model's limit while it is packed (a smaller one cuts the block that would
pass it into lines). Every chunk is then checked against the embedding model
(``Budget.model_sizer``, prefix included) and shrunk if it does not fit: a multi-block
chunk drops blocks at its end (or, when that would leave it under a quarter of the
budget, cuts the first block it would drop at lines and takes its first lines), a
single block is cut as above. Without word pieces in the index, chunks are packed to
the budget first and only those that fail the check are packed again, measured at
every step.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from .base import Budget, Chunk, LineIndex
from .pieces import AT, MASK, PIECES
from .render import Rendering
from .sections import Block, Section, Span
from .spans import PUNCT_RUN_MAX, SpanIndex, trailing_run
from .tokenizers import LONG_RUN, MAX_RUN, SLOW_CHAR

__all__ = ["Packer"]

_PIECE = 4096
_LONG_RUN = re.compile(r"(?<!\S)\S{" + str(_PIECE) + ",}")
_SECTION_CHARS = 5  # a section this many chars per budget token is counted whole first
_BLOCK_CHARS = 8  # a block longer than this many chars per budget token is counted by lines
_WINDOW, _SEC = -2, -3  # markers in _Unit.body
_ANCHOR_RATE = 2.5  # content-defined cut points: on average this many per max_tokens tokens
_ANCHOR_FILL = 4  # ... and one ends a chunk only if it holds at least max_tokens // this
_ANCHOR_KINDS = frozenset({"para", "line", "list", "heading"})
_LINE_KINDS = frozenset({"fence", "code"})
_LINE = r"^[^\S\n]*\S(?:[^\n]*\S)?"  # a non-blank line, without trailing whitespace
_LINES = re.compile(r"^([ \t]*)" + _LINE[1:], re.M)  # group 1: its indent, spaces and tabs
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_PARAS = re.compile(_LINE + r"(?:[^\S\n]*\n" + _LINE[1:] + ")*", re.M)  # lines, no blank one
_WORD = re.compile(r"[^\W_]")  # a letter or digit
_FENCE_LINE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[^\n]*")  # an opening fence line
_BARE_FENCE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[ \t]*")  # a closing one


def _budget_of(c: int) -> int:
    """Budget tokens of a running sum of :attr:`SpanIndex.cum`."""
    return c & MASK


def _model_of(c: int) -> int:
    """Model word pieces of a running sum of :attr:`SpanIndex.cum`."""
    return (c >> 32) & MASK


class _Unit:
    __slots__ = (
        "anchor", "body", "carry", "end", "exact", "first", "lead", "mtok", "next", "sec",
        "start", "tok",
    )  # fmt: skip

    def __init__(
        self, start: int, end: int, nxt: int, tok: int, sec: int, first: bool = False,
        anchor: bool = False, carry: str = "", exact: bool = True, body: int = -1,
        mtok: int = -1, lead: bool = False,
    ) -> None:  # fmt: skip
        self.start, self.end, self.next, self.tok, self.sec = start, end, nxt, tok, sec
        self.first, self.anchor, self.carry, self.exact = first, anchor, carry, exact
        self.body = start if body == -1 else body
        self.mtok = mtok  # model word pieces of text[start:next], -1 when not counted
        self.lead = lead  # a heading with nothing after it in its block: never ends a chunk


def _common(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        k = 0
        while k < n and k < len(p) and p[k] == first[k]:
            k += 1
        n = k
    return first[:n]


class Packer:
    """Packs the blocks of ``sections`` into :class:`Span` objects within ``budget``.

    Args:
        text: the decoded text the sections refer to.
        sections: parsed sections, in document order.
        budget: token budget (and model limit) of each chunk.
        min_tokens: a chunk under this size takes in the next section if it fits whole,
            and does not end at an anchor block.
        prefix: heading path -> text prepended for embedding.
        carry: (text, block) -> context line for a chunk that continues the block.
        intro: (text, block) -> context line for a chunk that starts where the body of
            a block with a lead glued before it starts (default none).
        lines: the :class:`~ingestd.chunkers.base.LineIndex` of ``text``, or of the
            document ``text`` renders (its longest line bounds the rendering's), if
            known.
        rendering: when ``text`` is the clean rendering of a document, the
            :class:`~ingestd.chunkers.render.Rendering` that maps it back (chunks are
            document slices, embedded as rendered).
        body: where the document's body starts (chunks tile it from there).
    """

    def __init__(
        self,
        text: str,
        sections: list[Section],
        budget: Budget,
        *,
        min_tokens: int,
        prefix: Callable[[tuple[str, ...]], str],
        carry: Callable[[str, Block], str],
        intro: Callable[[str, Block], str] | None = None,
        lines: LineIndex | None = None,
        rendering: Rendering | None = None,
        body: int = 0,
    ) -> None:
        self.text = text
        self._rendering = None if rendering is None or rendering.identity else rendering
        self._source = text if self._rendering is None else self._rendering.source
        self._body = body
        self.sections = sections
        self.budget = budget
        self.max = budget.max_tokens
        self.min_tokens = min_tokens
        self._fill = max(self.max // _ANCHOR_FILL, min_tokens)  # a chunk may end at an anchor
        self._prefix = prefix
        self._carry = carry
        self._count = budget.sizer.count
        self._sec_tok: dict[int, int] = {}
        self._prefixes: dict[tuple[tuple[str, ...], str], str] = {}
        self._ws: dict[str, int] = {}
        self._model_pre: dict[str, int] = {}
        self._rooms: dict[tuple[int, str], int] = {}  # (section, carry) -> _room
        self._index = SpanIndex.build(text, budget, None if lines is None else lines.longest)
        self._model_in_index = self._index is not None and self._index.table.has_model
        # a lower bound of every _room: prefixes are capped to a third of the model
        cap = budget.model_max_tokens // 3
        self._safe_room = budget.model_max_tokens - cap if self._model_in_index else -1
        self._starts: dict[int, list[int]] = {}  # section -> its blocks' starts
        self._intros: dict[int, str] = {}  # body start of a block with a lead -> context
        if intro is not None:
            for sec in sections:
                for b in sec.blocks:
                    if b.body > b.start and (ctx := intro(text, b)):
                        self._intros[b.body] = ctx
        # code blocks with a closing fence line: a chunk that ends inside one is re-fenced
        self._fence_at: list[int] = []  # where the opening fence line ends
        self._fence_close: list[tuple[int, str]] = []  # closing line: start, fence
        for sec in sections:
            for b in sec.blocks:
                if b.kind == "fence" and (close := _closing_line(text, b)) is not None:
                    self._fence_at.append(text.find("\n", b.body, b.end))
                    self._fence_close.append(close)

    # -- units ------------------------------------------------------------------

    def count(self, s: str) -> tuple[int, bool]:
        """Tokens of ``s`` and whether the count is exact (long runs are counted in pieces)."""
        if len(s) > 2 * _PIECE and _LONG_RUN.search(s):
            total, pos = 0, 0
            for m in _LONG_RUN.finditer(s):
                total += self._count(s[pos : m.start()])
                for k in range(m.start(), m.end(), _PIECE):
                    total += self._count(s[k : min(k + _PIECE, m.end())])
                pos = m.end()
            return total + self._count(s[pos:]), False
        # a sizer that counts long runs in parts is not additive across them
        return self._count(s), not (len(s) > MAX_RUN and LONG_RUN.search(s))

    def count_span(self, a: int, b: int) -> tuple[int, bool, int]:
        """Counts of ``text[a:b]`` (``a`` and ``b`` at line starts).

        Returns:
            ``(budget tokens, exact, model word pieces)``; ``exact`` is false when the
            count of ``text[a:b]`` on its own need not add up with its neighbours'
            (long runs counted in parts; a line start inside a stretch that the index
            counts whole, which only a long run makes); the model count is -1 when the
            index does not hold it.
        """
        index = self._index
        counts = index.counts(a, b) if index is not None else None
        if counts is not None:
            return counts[0], True, counts[1] if self._model_in_index else -1
        n, exact = self.count(self.text[a:b])
        return n, exact and index is None, -1

    def _span_counts(self, bounds: list[int]) -> list[tuple[int, bool, int]]:
        """:meth:`count_span` of each ``[bounds[k], bounds[k + 1])`` (increasing bounds)."""
        index = self._index
        if index is None:
            return [self.count_span(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
        at = index.at_many(bounds)
        model = self._model_in_index
        out: list[tuple[int, bool, int]] = []
        for k in range(len(bounds) - 1):
            a, b = at[k], at[k + 1]
            if a >= 0 and b >= 0:  # b - a: the packed counts of the span (see unpack)
                out.append(((b - a) & MASK, True, (b - a) >> 32 if model else -1))
            else:
                out.append(self.count_span(bounds[k], bounds[k + 1]))
        return out

    def units(self, lo: int = 0, hi: int | None = None) -> list[_Unit]:
        """The packing units of sections ``lo..hi-1``: whole sections that fit, else blocks.

        A block over budget is cut into lines, a line over budget into token windows.
        """
        out: list[_Unit] = []
        for si in range(lo, len(self.sections) if hi is None else hi):
            out.extend(self._section_units(si, whole=True))
        return out

    def _section_units(self, si: int, *, whole: bool) -> list[_Unit]:
        blocks = self.sections[si].blocks
        if not blocks:
            return []
        a, z = blocks[0].start, blocks[-1].next
        # a section that ends with a heading goes by blocks: that heading is a lead
        if (
            whole
            and len(blocks) > 1
            and z - a <= self.max * _SECTION_CHARS
            and (blocks[-1].kind != "heading")
        ):
            tok, exact, mtok = self.count_span(a, z)
            if tok <= self.max and not self._over_model(mtok, si):
                self._sec_tok[si] = tok
                return [_Unit(a, blocks[-1].end, z, tok, si, first=True, exact=exact, body=_SEC,
                              mtok=mtok)]  # fmt: skip
        counts = self._span_counts([b.start for b in blocks] + [z])
        out: list[_Unit] = []
        for bi, (b, c) in enumerate(zip(blocks, counts, strict=True)):
            out.extend(self._block_units(b, si, bi == 0, c))
        self._sec_tok[si] = sum(u.tok for u in out)
        return out

    def _block_units(
        self, b: Block, si: int, first: bool, counts: tuple[int, bool, int] | None
    ) -> list[_Unit]:
        """Units of block ``b``; ``counts``: its :meth:`count_span`, when known."""
        anchor = b.kind in _ANCHOR_KINDS or b.body > b.start  # a lead glued before it
        lead = b.kind == "heading"  # a heading with no block after it in its section
        u = _Unit(b.start, b.end, b.next, 0, si, first, anchor, "", True, b.body, lead=lead)
        if b.next - b.start > self.max * _BLOCK_CHARS:  # surely too big: count its lines
            parts = self._split_lines(u, self._carry(self.text, b), b.kind)
            tok = sum(p.tok for p in parts)
            if tok > self.max or not all(p.exact and p.body != _WINDOW for p in parts):
                return parts
            mtok = sum(p.mtok for p in parts) if all(p.mtok >= 0 for p in parts) else -1
            if self._over_model(mtok, si):
                return parts
            u.tok, u.mtok = tok, mtok
            return [u]
        u.tok, u.exact, u.mtok = counts or self.count_span(b.start, b.next)
        if u.tok > self.max or self._over_model(u.mtok, si):
            return self._split_lines(u, self._carry(self.text, b), b.kind)
        return [u]

    def _split_lines(self, u: _Unit, carry: str, kind: str = "") -> list[_Unit]:
        """Cut ``u`` at blank lines into paragraphs, and paragraphs over budget at lines.

        Code (``kind`` ``"fence"`` or ``"code"``) is cut at lines straight away.
        """
        paras = kind not in _LINE_KINDS and _BLANK_LINE.search(self.text, u.start, u.end)
        groups = self._glued(self._paragraphs(u), u) if paras else []
        if len(groups) <= 1:
            return self._lines(u, carry)
        out: list[_Unit] = []
        body_eol = self._body_eol(u)
        counts = self._span_counts([s for s, _, _ in groups] + [groups[-1][2]])
        for k, ((s, end, nxt), (tok, exact, mtok)) in enumerate(zip(groups, counts, strict=True)):
            g = _Unit(s, end, nxt, tok, u.sec, first=u.first and k == 0, anchor=k > 0,
                      carry=carry if s > body_eol >= 0 else self._intros.get(s, ""),
                      exact=exact, body=u.body if s < u.body <= end else s,
                      mtok=mtok)  # fmt: skip
            too_big = tok > self.max or self._over_model(mtok, u.sec)
            out.extend(self._lines(g, carry, body_eol=body_eol) if too_big else [g])
        return out

    def _glued(self, pieces: list[tuple[int, int, int]], u: _Unit) -> list[tuple[int, int, int]]:
        """``(start, end, next)`` pieces of ``u``, with its lead and closing fence glued on.

        The lead (a heading or an intro paragraph glued before the block proper, and a
        code block's opening fence line) joins the piece after it: a heading never
        ends a chunk. A closing fence line joins the piece before it.
        """
        if len(pieces) <= 1:
            return pieces
        text = self.text
        lead = u.body if u.body > u.start else u.start
        if (m := _FENCE_LINE.match(text, lead, u.end)) is not None:
            lead = m.end()
        k = 0
        while k + 1 < len(pieces) and pieces[k][1] <= lead:
            k += 1
        if k:
            pieces = [(pieces[0][0], pieces[k][1], pieces[k][2]), *pieces[k + 1 :]]
        s, e, _ = pieces[-1]
        if len(pieces) > 1 and _BARE_FENCE.fullmatch(text, s, e):
            pieces[-2:] = [(pieces[-2][0], e, pieces[-1][2])]
        return pieces

    def _paragraphs(self, u: _Unit) -> list[tuple[int, int, int]]:
        """``(start, end, next)`` of the paragraphs (runs of non-blank lines) of ``u``.

        ``end`` is after the last non-whitespace character; ``next`` is the start of the
        next paragraph or ``u.next``.
        """
        spans = [m.span() for m in _PARAS.finditer(self.text, u.start, u.end)]
        nexts = [s for s, _ in spans[1:]]
        nexts.append(u.next)
        return [(s, e, n) for (s, e), n in zip(spans, nexts, strict=True)]

    def _lines(
        self, u: _Unit, carry: str, *, items: bool = True, body_eol: int | None = None
    ) -> list[_Unit]:
        """Cut ``u`` into items, items over budget into lines, lines into windows.

        An item is a line no more indented than the first one, with the more indented
        lines after it (a list item and its continuation, a statement and its body).
        """
        text = self.text
        found = list(_LINES.finditer(text, u.start, u.end))
        if len(found) <= 1:
            return self._windows(u, self.max)
        spans: list[tuple[int, int]] = []
        if items:
            base = found[0].end(1) - found[0].start()
            for m in found:
                if spans and m.end(1) - m.start() > base:
                    spans[-1] = (spans[-1][0], m.end())
                else:
                    spans.append(m.span())
            if len(spans) == 1:
                items = False
                spans = [m.span() for m in found]
        else:
            spans = [m.span() for m in found]
        if body_eol is None:
            body_eol = self._body_eol(u)
        nexts = [s for s, _ in spans[1:]]
        nexts.append(u.next)
        glued = self._glued([(s, e, n) for (s, e), n in zip(spans, nexts, strict=True)], u)
        if len(glued) == 1:  # one item with its lead: its lines, else windows
            if items:
                return self._lines(u, carry, items=False)
            return self._cut_before_fence(u, carry) or self._windows(u, self.max)
        out: list[_Unit] = []
        sec, mx, intros = u.sec, self.max, self._intros
        bounds = [s for s, _, _ in glued]
        bounds.append(u.next)
        counts = self._span_counts(bounds)
        for (s, end, nxt), (tok, exact, mtok) in zip(glued, counts, strict=True):
            ctx = carry if s > body_eol >= 0 else intros.get(s, "")
            body = u.body if s < u.body <= end else -1
            line = _Unit(s, end, nxt, tok, sec, False, True, ctx, exact, body, mtok)
            if tok <= mx and not self._over_model(mtok, sec):
                out.append(line)
            elif items:
                out.extend(self._lines(line, carry, items=False, body_eol=body_eol))
            else:
                out.extend(self._windows(line, mx))
        out[0].first, out[0].anchor = u.first, False
        return out

    def _cut_before_fence(self, u: _Unit, carry: str) -> list[_Unit] | None:
        """``u``, an intro glued to a one-line code block, cut before the opening fence line.

        ``None`` unless ``u`` has an introducing paragraph (ending in ``:``) before a
        fenced code block, which are cut here (over budget, or windows of them are
        wanted to fill a chunk with headings before them). Token windows across them
        would cut the opening fence line itself, and neither piece could then be
        re-fenced. The lead (headings and the intro) is cut on its own when over
        budget; the code keeps the introducing sentence as its context line.
        """
        text, body = self.text, u.body
        if not u.start < body < u.end or _FENCE_LINE.match(text, body, u.end) is None:
            return None
        intro = self._intros.get(body, "")
        if not intro:  # headings only: they take the first window (a heading never ends)
            return None
        end = body
        while end > u.start and text[end - 1].isspace():
            end -= 1
        (tok, exact, mtok), (ctok, cexact, cmtok) = self._span_counts([u.start, body, u.next])
        lead = _Unit(u.start, end, body, tok, u.sec, u.first, False, u.carry, exact, u.start,
                     mtok)  # fmt: skip
        code = _Unit(body, u.end, u.next, ctok, u.sec, False, True, intro, cexact, body, cmtok)
        out: list[_Unit] = []
        for part in (lead, code):
            if part.tok > self.max or self._over_model(part.mtok, part.sec):
                pieces = self._lines(part, carry if part is code else "")
                pieces[0].first, pieces[0].anchor = part.first, part.anchor
                pieces[0].carry = pieces[0].carry or part.carry
                out.extend(pieces)
            else:
                out.append(part)
        return out

    def _windows(self, u: _Unit, size: int) -> list[_Unit]:
        """Cut ``u`` (one line) into windows of ``size`` tokens.

        Between the line's pieces where it can (:meth:`_piece_windows`: no word is cut
        in two), else at token boundaries.

        With a model sizer, a window also stops before two thirds of the model's limit
        in its word pieces (the rest is room for the prefix), so that a run of
        punctuation (one word piece per character) is not cut and re-cut.
        """
        text = self.text
        raw = self._piece_windows(u, size)
        model = self.budget.model_sizer
        room = self.budget.model_max_tokens * 2 // 3
        s = raw[-1][1] if raw else u.start
        while s < u.end:  # the rest (all of it without an index) at token boundaries
            e = min(u.end, s + _PIECE)
            if e < u.end:  # prefer to cut a piece after whitespace
                ws = max(text.rfind(" ", s + _PIECE // 4, e), text.rfind("\t", s + _PIECE // 4, e))
                e = ws + 1 if ws != -1 else e
            ends = self.budget.sizer.boundaries(text[s:e])
            pieces = model.boundaries(text[s:e]) if model is not None and room > 0 else None
            k = 0
            while k < len(ends):
                a = ends[k - 1] if k else 0
                m = min(len(ends), k + size)
                if pieces is not None:
                    p = bisect.bisect_right(pieces, a) + room  # word pieces that fit
                    if p < len(pieces):
                        m = max(k + 1, min(m, bisect.bisect_right(ends, pieces[p - 1])))
                raw.append((s + a, s + ends[m - 1], m - k, -1, False))
                k = m
            s = e
        out: list[_Unit] = []
        # a window after the block's first line continues it: it takes its context line
        multiline = not u.carry and text.find("\n", u.start, u.end) != -1
        body_eol = self._body_eol(u) if multiline else -1
        block_carry = self._block_carry(u) if body_eol >= 0 else ""
        for a, b, n, mtok, piece in raw:
            if text[a:b].isspace():
                continue
            end = b
            while text[end - 1].isspace():
                end -= 1
            if out:
                out[-1].exact &= out[-1].next == a  # no blank window left out
                out[-1].next = a
            # a piece window's count is exact (also on its own), up to long runs; not so
            # once its trailing blanks are cut off (a run inside a line splits otherwise)
            exact = piece and end == b and b - a <= MAX_RUN
            carry = block_carry if a > body_eol >= 0 else u.carry
            out.append(_Unit(a, end, b, n, u.sec, carry=carry, exact=exact, body=_WINDOW,
                             mtok=mtok))  # fmt: skip
        if not out:  # cannot happen for a unit with content; keep the unit whole
            return [u]
        out[0].first = u.first
        out[-1].exact &= out[-1].next == u.next
        out[-1].next = u.next
        return out

    def _piece_windows(self, u: _Unit, size: int) -> list[tuple[int, int, int, int, bool]]:
        """``(start, end, tokens, word pieces, True)`` windows of ``u`` cut at piece boundaries.

        Greedy, like :meth:`_windows`: each window is the longest run of pieces within
        ``size`` budget tokens and two thirds of the model's limit, found by bisection
        on the running sums of the pieces of ``u``'s text on its own (so a window's
        count is its own text's, whatever follows it). Stops (possibly at once) where
        no piece boundary is left or the next piece alone does not fit;
        :meth:`_windows` cuts the rest at token boundaries. Empty for a slow line (see
        :mod:`~ingestd.chunkers.spans`) or without an index. The word pieces are -1
        when the index does not count them.
        """
        index = self._index
        if index is None or (self.budget.model_sizer is not None and not self._model_in_index):
            return []
        if SLOW_CHAR.search(self.text, u.start, u.end) is not None:
            return []
        cum = index.table.cumulative(
            PIECES.findall(self.text, u.start, u.end), u.start << AT, long_ok=True
        )
        assert cum is not None  # long_ok
        i, hi = 0, len(cum)
        room = self.budget.model_max_tokens * 2 // 3 if self._model_in_index else 0
        out: list[tuple[int, int, int, int, bool]] = []
        while True:
            c = cum[i]
            k = bisect.bisect_right(cum, (c & MASK) + size, i + 1, hi, key=_budget_of) - 1
            if room > 0:
                m = bisect.bisect_right(cum, _model_of(c) + room, i + 1, hi, key=_model_of) - 1
                k = min(k, m)
            if k <= i:
                return out
            mtok = _model_of(cum[k]) - _model_of(c) if room > 0 else -1
            out.append((c >> AT, cum[k] >> AT, (cum[k] & MASK) - (c & MASK), mtok, True))
            i = k

    # -- packing ----------------------------------------------------------------

    def pack(self, units: list[_Unit]) -> list[Span]:
        """Pack ``units`` (from :meth:`units`) into spans that fit the budget.

        When the :class:`~ingestd.chunkers.spans.SpanIndex` counts word pieces, chunks
        are packed once, with the model check at every step (it costs two lookups).
        Otherwise they are packed to the budget first; then all of them are measured
        with the model in one batch, and only a chunk that does not fit is packed again,
        alone, with the model check at every step (its neighbours stay as they are).
        """
        model = self.budget.model_sizer
        if model is not None and self._model_in_index:  # model counts cost nothing here
            return [span for span, _, _ in self._pack(units, model=True)]
        first = self._pack(units, model=False)
        if model is None or not first:
            return [span for span, _, _ in first]
        if self._model_in_index:
            counts = [self._model_count(p.start, p.end, p.prefix, p.n_model) for p, _, _ in first]
        else:
            texts = [
                span.prefix + self.text[span.start : span.end] + span.suffix for span, _, _ in first
            ]
            count_many = getattr(model, "count_many", None)
            counts = count_many(texts) if count_many is not None else list(map(model.count, texts))
        out: list[Span] = []
        for (span, i, j), m in zip(first, counts, strict=True):
            if m <= self.budget.model_max_tokens:
                out.append(span)
            else:
                out.extend(span for span, _, _ in self._pack(units[i:j], model=True))
        return out

    def _model_count(self, s: int, e: int, pre: str, body: int = -1) -> int:
        """Model word pieces of ``pre + text[s:e]`` (``s`` a line start, ``e`` before blanks).

        ``body``: the word pieces of ``text[s:e]`` when already known (else -1). A
        prefix that ends in a newline adds its own count (BERT never reads across it).
        """
        model = self.budget.model_sizer
        assert model is not None
        if pre and pre[-1] != "\n":
            return model.count(pre + self.text[s:e])
        if body < 0:
            counts = self._index.end_counts(s, e) if self._model_in_index else None  # type: ignore[union-attr]
            if counts is None:
                return model.count(pre + self.text[s:e])
            body = counts[1]
        return body + self._model_short(pre)

    def _model_short(self, s: str) -> int:
        """Model word pieces of a short string (a prefix), memoised across documents."""
        if self._model_in_index:
            return self._index.table.value(s) >> 32  # type: ignore[union-attr]
        m = self._model_pre.get(s)
        if m is None:
            assert self.budget.model_sizer is not None
            m = self._model_pre[s] = self.budget.model_sizer.count(s)
        return m

    def _pack(self, units: list[_Unit], *, model: bool) -> list[tuple[Span, int, int]]:
        """Spans with the ``[i, j)`` range of ``units`` each covers.

        A chunk without a word (no letter or digit: markup) or with nothing but
        headings joins the chunk before it, or else the one after it, when the two
        fit together.
        """
        out: list[tuple[Span, int, int]] = []
        i = 0
        while i < len(units):
            span, j = self._fit(units, i, model=model)
            out.append((span, i, j))
            i = j
        k = 0
        while k < len(out) and len(out) > 1:
            span, i, j = out[k]
            if _WORD.search(self.text, span.start, span.end) and not all(
                units[x].lead for x in range(i, j)
            ):
                k += 1
                continue
            for a, b in ((k - 1, k), (k, k + 1)):
                if a >= 0 and b < len(out):
                    ia, jb = out[a][1], out[b][2]
                    tok = sum(units[x].tok for x in range(ia, jb))
                    joined = self._check(units, ia, jb, tok, model=model)
                    if isinstance(joined, Span):
                        out[a : b + 1] = [(joined, ia, jb)]
                        break
            else:
                k += 1
        return out

    def _fit(self, units: list[_Unit], i: int, *, model: bool) -> tuple[Span, int]:
        """The chunk that starts at ``units[i]`` and the index of the unit after it.

        Units that turn out too big (for the exact count or, with ``model``, for the
        model) are split in place, in ``units``.
        """
        j, tok = self._take(units, i)
        while True:
            res = self._check(units, i, j, tok, model=model)
            if isinstance(res, Span):
                return res, j
            if j - i > 1:
                jj, t = j - 1, tok - units[j - 1].tok
                while jj - 1 > i and (t > res or units[jj - 1].lead):
                    jj -= 1
                    t -= units[jj].tok
                q, lead_tok = i, 0  # the first unit after the headings the chunk starts with
                while q < j and units[q].lead:
                    lead_tok += units[q].tok
                    q += 1
                if q >= jj and (sub := self._cut_after_leads(units, q, res - lead_tok)):
                    units[q : q + 1] = sub  # the headings take the first part of it
                    j, tok = self._take(units, i)
                    continue
                if t < self.max // _ANCHOR_FILL and (sub := self._split_lines_of(units[jj])):
                    units[jj : jj + 1] = sub  # rather than end so small
                    j, tok = self._take(units, i)
                    continue
                j, tok = jj, t
                continue
            sub = self._split_unit(units[i], res)
            if sub is None:  # one token that does not fit with its prefix: drop the prefix
                forced = self._check(units, i, j, tok, prefix=False, force=True)
                assert isinstance(forced, Span)
                return forced, j
            units[i : i + 1] = sub
            j, tok = self._take(units, i)

    def pack_all(self) -> list[Span]:
        """Pack every section."""
        return self.pack(self.units())

    def _take(self, units: list[_Unit], i: int) -> tuple[int, int]:
        """Greedy end of the chunk that starts at ``units[i]``, and its estimated size.

        With the model's counts in the index, a chunk at least a quarter full also stops
        before its word pieces (prefix included) would pass the model's limit, so that
        :meth:`_check` rarely has to shrink it; a smaller one cuts the unit that would
        pass the limit into lines, in ``units``, and goes on with them.

        A heading never ends a chunk: a chunk that holds only headings takes in what
        follows them (the next section, cut into smaller units as far as needed), and
        a chunk that stops after a heading ends before it instead.
        """
        u = units[i]
        tok, m = u.tok, u.mtok
        room, known = (self._safe_room, False) if m >= 0 else (-1, True)
        j, n, mx, half = i + 1, len(units), self.max, self._fill
        leads = u.lead  # only headings so far
        while j < n:
            v = units[j]
            window = v.body == _WINDOW or units[j - 1].body == _WINDOW
            if tok + v.tok > mx or (window and not leads):
                if leads and (sub := self._split_unit(v, mx - tok)):
                    units[j : j + 1] = sub  # the headings take the first part of it
                    continue
                break  # a window (a piece of an over-long line) is a chunk of its own
            after_lead = units[j - 1].lead
            if room >= 0 and (v.mtok < 0 or m + v.mtok > room):
                if not known and v.mtok >= 0:  # past the lower bound: the real room
                    room, known = self._room(u.sec, u.carry), True
                if room >= 0 and (v.mtok < 0 or m + v.mtok > room):
                    if v.mtok >= 0 and tok >= half and not after_lead:
                        break
                    if v.mtok >= 0 and (sub := self._split_lines_of(v)):
                        units[j : j + 1] = sub  # take its first lines rather than end so small
                        continue
                    room = -1  # left to the check
            if not after_lead and self._cut_before(v, tok):  # what follows a heading stays
                break
            tok += v.tok
            m += v.mtok
            leads = leads and v.lead
            j += 1
        if j < n:  # stopped early: not right after a heading
            while j - 1 > i and units[j - 1].lead:
                j -= 1
                tok -= units[j].tok
        return j, tok

    def _cut_after_leads(self, units: list[_Unit], q: int, room: int) -> list[_Unit] | None:
        """``units[q]``, the content after a chunk's headings, cut to take ``room`` tokens."""
        if q >= len(units) or units[q].lead or room <= 0:
            return None
        return self._split_lines_of(units[q]) or self._split_unit(units[q], room)

    def _cut_before(self, v: _Unit, tok: int) -> bool:
        """Whether a chunk of ``tok`` tokens ends before unit ``v`` (which would fit).

        At a section start, unless the chunk is under ``min_tokens`` and the whole
        section fits; inside a section, at a content-defined anchor once a quarter full.
        """
        mx = self.max
        if v.first:
            return tok >= self.min_tokens or tok + self._sec_tok.get(v.sec, mx + 1) > mx
        return v.anchor and tok >= self._fill and (v.body > v.start or self._is_anchor(v))

    def _over_model(self, mtok: int, sec: int) -> bool:
        """Whether ``mtok`` word pieces surely do not fit a chunk of section ``sec``."""
        return mtok > self._safe_room >= 0 and mtok > self._room(sec, "") >= 0

    def _room(self, sec: int, carry: str) -> int:
        """Word pieces left for a chunk's text after its prefix, or -1 (no model check).

        For a chunk of section ``sec`` whose first unit has context line ``carry``. The
        prefix is the one of that section: a chunk that crosses sections takes a
        common, shorter path, so the room is never overestimated.
        """
        key = (sec, carry)
        room = self._rooms.get(key)
        if room is None:
            pre = self.prefix(self.sections[sec].path, carry)
            if not self._model_in_index or (pre and pre[-1] != "\n"):
                room = -1
            else:
                room = self.budget.model_max_tokens - self._model_short(pre)
            self._rooms[key] = room
        return room

    def _is_anchor(self, v: _Unit) -> bool:
        crc = zlib.crc32(self.text[v.start : v.end].encode("utf-8", "surrogatepass"))
        return (crc & 0xFFFF) * self.max < 0x10000 * _ANCHOR_RATE * v.tok

    def _check(
        self, units: list[_Unit], i: int, j: int, tok: int, *, prefix: bool = True,
        force: bool = False, model: bool = True,
    ) -> Span | int:  # fmt: skip
        """The span of ``units[i:j]`` if it fits, else the size in tokens to shrink to."""
        text = self.text
        first, last = units[i], units[j - 1]
        s, e = first.start, last.end
        exact, msum = first.exact, first.mtok  # model word pieces: blanks are 0 pieces
        for k in range(i + 1, j):
            v = units[k]
            exact = exact and v.exact
            msum = msum + v.mtok if msum >= 0 and v.mtok >= 0 else -1
        n_model = msum if self._model_in_index else -1
        if exact:  # ``tok`` counts text[s:last.next]
            n = self._exact(s, e, last.next, tok)
        elif (counts := self._index.end_counts(s, e) if self._index else None) is not None:
            n, n_model = counts
        else:
            n = self._count(text[s:e])
        suffix = self._suffix(e) if self._fence_at else ""
        if suffix:  # the closing fence of a code block the chunk ends inside
            n += self._suffix_tokens(s, e, suffix)
        if n > self.max and not force:
            return max(0, min(tok - 1, tok * self.max // n - 1))
        if first.sec == last.sec:  # the common case: one section
            path = self.sections[first.sec].path
        else:
            secs = {units[k].sec for k in range(i, j)}
            path = _common([self.sections[k].path for k in sorted(secs)])
        pre = self.prefix(path, first.carry) if prefix else ""
        if model and self.budget.model_sizer is not None:
            m = self._model_count(s, e, pre, n_model)
            if suffix:
                m += self._model_short(suffix)
            if m > self.budget.model_max_tokens and not force:
                return max(0, min(tok - 1, tok * self.budget.model_max_tokens // m - 1))
        return Span(s, e, n, path, pre, n_model if self._model_in_index else -1, suffix)

    def _suffix_tokens(self, s: int, e: int, suffix: str) -> int:
        """Budget tokens that ``suffix`` adds after ``text[s:e]`` (see :meth:`_tail`)."""
        text = self.text
        p = trailing_run(text, s, e)
        if p == e:
            return self._small(suffix)
        if p < 0:
            return self._count(text[s:e] + suffix) - self._count(text[s:e])
        return self._small(text[p:e] + suffix) - self._small(text[p:e])

    def _suffix(self, e: int) -> str:
        """The closing fence for a chunk that ends at ``e`` inside a code block, else ``""``.

        Inside: after its opening fence line, before its closing one.
        """
        k = bisect.bisect_right(self._fence_at, e) - 1
        if k < 0 or e > self._fence_close[k][0]:
            return ""
        return "\n" + self._fence_close[k][1]

    def _exact(self, s: int, e: int, nxt: int, tok: int) -> int:
        """Tokens of ``text[s:e]``, given ``tok`` tokens in ``text[s:nxt]`` (``e..nxt`` blank)."""
        return tok - self._tail(s, e, nxt)

    def _small(self, piece: str) -> int:
        """Tokens of a short string (a trailing punctuation run, whitespace), memoised."""
        if self._index is not None:
            return self._index.table.value(piece) & MASK
        n = self._ws.get(piece)
        if n is None:
            n = self._count(piece)
            if len(piece) <= 16:
                self._ws[piece] = n
        return n

    def _tail(self, s: int, e: int, nxt: int) -> int:
        """Tokens that the whitespace ``text[e:nxt]`` adds to ``text[s:e]``.

        Tokenizers split before whitespace that follows a letter or digit; after other
        characters the trailing run of them is recounted with and without the whitespace.
        """
        if nxt == e:
            return 0
        text = self.text
        p = trailing_run(text, s, e)
        if p == e:
            return self._small(text[e:nxt])
        if p < 0 or e - p >= PUNCT_RUN_MAX:  # a long run: recounted from its line's start
            p = max(s, text.rfind("\n", s, e) + 1)
        elif p > s and text[p - 1] == " ":
            p -= 1
        return self._small(text[p:nxt]) - self._small(text[p:e])

    def _split_unit(self, u: _Unit, target: int) -> list[_Unit] | None:
        """Smaller units covering ``u``'s text but for blank windows, or ``None``.

        ``None`` when ``u`` is a single token (or cannot be cut into smaller ones).
        """
        if u.body == _SEC:
            return self._section_units(u.sec, whole=False)
        if u.body != _WINDOW:
            parts = self._split_lines(u, u.carry or self._block_carry(u))
            if len(parts) > 1:
                return parts
            u = parts[0] if parts[0].body == _WINDOW else u
        n = u.tok if u.body == _WINDOW else self._count(self.text[u.start : u.end])
        if n <= 1:
            return None
        size = max(1, min(n - 1, target))
        parts = self._windows(u, size)
        while len(parts) == 1 and size > 1:  # several tokens end inside one character
            size //= 2  # (an emoji, CJK): a window counts characters' boundaries
            parts = self._windows(u, size)
        if len(parts) == 1 and parts[0].end - parts[0].start < u.end - u.start:
            return parts  # only blank windows were left out (wide spaces that cost tokens)
        return parts if len(parts) > 1 else None

    def _split_lines_of(self, u: _Unit) -> list[_Unit] | None:
        """``u`` cut at lines (as :meth:`_split_lines` does), or ``None`` for one line.

        A chunk that the model check would shrink to under a quarter of the budget (a
        heading before a table whose divider row costs many word pieces) takes the
        first lines of the unit it would drop instead.
        """
        if u.body in (_SEC, _WINDOW) or self.text.find("\n", u.start, u.end) == -1:
            return None
        parts = self._split_lines(u, self._block_carry(u))
        return parts if len(parts) > 1 else None

    def _block_of(self, u: _Unit) -> Block | None:
        """The block that holds ``u`` (``None`` for a unit of several blocks)."""
        blocks = self.sections[u.sec].blocks
        starts = self._starts.get(u.sec)
        if starts is None:
            starts = self._starts[u.sec] = [b.start for b in blocks]
        k = bisect.bisect_right(starts, u.start) - 1
        return blocks[k] if k >= 0 and u.end <= blocks[k].end else None

    def _block_carry(self, u: _Unit) -> str:
        """The context line of the block that holds ``u``, for the pieces ``u`` is cut into.

        A block that fits the budget but not the model is split on the way, after
        :meth:`_block_units`: its pieces after the first line need the line too.
        """
        b = self._block_of(u)
        return "" if b is None else self._carry(self.text, b)

    def _body_eol(self, u: _Unit) -> int:
        """End of the first line of the body of the block that holds ``u``.

        Pieces of ``u`` that start after it continue the block: they take its context
        line (:meth:`_block_carry`).
        """
        b = self._block_of(u)
        body = u.body if b is None else b.body
        return self.text.find("\n", body, u.end if b is None else b.end)

    def prefix(self, path: tuple[str, ...], carry: str) -> str:
        """The embedding prefix for ``path`` plus ``carry``, capped to a third of the model."""
        key = (path, carry)
        pre = self._prefixes.get(key)
        if pre is None:
            pre = self._prefix(path)
            if carry:
                pre += carry + "\n"
            model = self.budget.model_sizer
            cap = self.budget.model_max_tokens // 3
            if model is not None and pre and self._model_short(pre) > cap:
                pre = self._prefix(path[-1:])
                if self._model_short(pre) > cap:
                    pre = ""
            self._prefixes[key] = pre
        return pre

    def whole(self, units: list[_Unit]) -> Span:
        """One span over all of ``units`` (a parent section), whatever its size."""
        first, last = units[0], units[-1]
        s, e = first.start, last.end
        counts = self._index.end_counts(s, e) if self._index is not None else None
        if counts is not None:
            n = counts[0]
        elif all(u.exact for u in units):
            n = sum(u.tok for u in units) - self._tail(s, e, last.next)
        else:
            n = self.count(self.text[s:e])[0]
        path = _common([self.sections[k].path for k in sorted({u.sec for u in units})])
        return Span(s, e, n, path, self.prefix(path, ""))

    def place(self, spans: list[Span]) -> list[tuple[int, int]]:
        """Document ``(start, end)`` of ``spans`` (in order), tiling the body."""
        pairs = [(span.start, span.end) for span in spans]
        return pairs if self._rendering is None else self._rendering.place(pairs, self._body)

    def chunk_of(
        self, lines: LineIndex, span: Span, at: tuple[int, int], meta: Mapping[str, Any], *,
        parent: int | None = None, is_parent: bool = False,
    ) -> Chunk:  # fmt: skip
        """The :class:`Chunk` of ``span``, placed at document offsets ``at``.

        ``lines`` is the :class:`~ingestd.chunkers.base.LineIndex` of the document;
        ``parent`` and ``is_parent`` are the hierarchical strategy's fields of
        :class:`Chunk`.
        """
        start, end = at
        text = self._source[start:end]
        clean = self.text[span.start : span.end] + span.suffix
        return Chunk(
            text, start, end, *lines.span(start, end), span.n_tokens, span.path, span.prefix,
            dict(meta), parent, is_parent, None if clean == text else clean,
        )  # fmt: skip

    def chunks(self, lines: LineIndex, spans: list[Span], meta: Mapping[str, Any]) -> list[Chunk]:
        """The chunks of ``spans`` (:meth:`chunk_of` at :meth:`place`)."""
        return [
            self.chunk_of(lines, span, at, meta)
            for span, at in zip(spans, self.place(spans), strict=True)
        ]


def _closing_line(text: str, b: Block) -> tuple[int, str] | None:
    """``(start, fence)`` of the closing fence line of fenced code block ``b``, if any."""
    eol = text.find("\n", b.body, b.end)
    if eol == -1:
        return None
    opener = text[b.body : eol].strip()
    ls = text.rfind("\n", eol, b.end) + 1
    fence = text[ls : b.end].strip()
    if not fence or fence[0] != opener[:1] or fence.strip(fence[0]) or len(fence) < 3:
        return None
    return ls, fence
