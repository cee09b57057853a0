"""Packing parsed sections into chunks that fit a budget (shared by the structured strategies).

A parser (``markdown``, ``rst``) turns the decoded text into
:class:`~ingestd.chunkers.sections.Section` objects, each a list of
:class:`~ingestd.chunkers.sections.Block` spans. :class:`Packer` counts every block
once (:mod:`~ingestd.chunkers.sizing.meter`), makes units of whole sections or blocks, cut
further when they do not fit (:mod:`~ingestd.chunkers.packing.cutting`), and packs runs of
units into chunks:

* a chunk never crosses a section start, unless it is under ``min_tokens`` and the
  whole next section fits (small sections are merged), or it holds only headings (they
  open the chunk of what follows them, cut as far as needed to fit). A merging chunk
  at least a quarter full still ends before an *anchor section* (one whose first unit
  hashes below a threshold proportional to the section's size, about 2 per
  ``max_tokens`` tokens of section), so that on a page of many small sections (a
  glossary) an edit does not shift every later chunk;
* a heading never ends a chunk (nor does an intro paragraph, or an opening fence line,
  which stay with the first piece of a block that is cut); a chunk of only headings
  joins the chunk after it, else the one before it; a chunk without a word the one
  before it, else the one after it; each when the two fit together;
* inside a section, an *anchor* block ends a chunk that is at least a quarter full
  and holds at least ``min_tokens``. A block is an anchor when the CRC-32 of its text
  falls below a threshold proportional to its size (about 2.5 anchors per
  ``max_tokens`` tokens): boundaries are content-defined, so after an edit the packing
  falls back into step with the old one within a chunk or two. A block with a lead
  glued before it (a heading too deep to open a section, an intro paragraph) is always
  an anchor: a chunk a quarter full ends before it;
* in a long code block, a line is also a *strong anchor* when the other 16 bits of its
  CRC-32 fall below a threshold (about 2 per ``max_tokens`` tokens); it ends a chunk a
  third full. Two packings that drifted apart by more than the anchors' window (from
  ``min_tokens`` to the budget) both take it, and fall back into step there;
* a window (a piece of a line over budget, :mod:`~ingestd.chunkers.packing.windows`) is a
  chunk of its own.

With word pieces in the index, a chunk at least a quarter full also ends before the
model's limit while it is packed (a smaller one cuts the block that would pass it into
lines). Every chunk is then checked against the embedding model
(``Budget.model_sizer``, prefix included) and shrunk if it does not fit: a multi-block
chunk drops blocks at its end (or, when that would leave it under a quarter of the
budget, cuts the first block it would drop at lines and takes its first lines), a
single block is cut as above. Without word pieces in the index, chunks are packed to
the budget first and only those that fail the check are packed again, measured at
every step. A chunk that ends inside a code block is re-fenced: its embedded text
ends with the block's closing fence line.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from ingestd.chunkers.base import Budget, Chunk, LineIndex
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.packing.cutting import Cutter
from ingestd.chunkers.packing.units import WINDOW, Unit
from ingestd.chunkers.sections import Block, Section, SectionOptions, Span, heading_prefix
from ingestd.chunkers.sizing.meter import Meter

__all__ = ["Packer", "pack_titled"]

_ANCHOR_RATE = 2.5  # content-defined cut points: on average this many per max_tokens tokens
_SECTION_RATE = 2.0  # ... and sections that a merging chunk ends before, per max_tokens tokens
_ANCHOR_FILL = 4  # ... and one ends a chunk only if it holds at least max_tokens // this
#: Strong anchors: this many per max_tokens, ending a chunk of max_tokens // _STRONG_FILL,
#: in code blocks of _LONG_CODE chars per max_tokens token (about 1.5 budgets); measured
#: in docs/benchmarks.md, "Edit locality" (rates 0.5-3, fills 1/4-1/2, 1.5-3 budgets).
_STRONG_RATE = 2.0
_STRONG_FILL = 3
_LONG_CODE = 6
_WORD = re.compile(r"[^\W_]")  # a letter or digit


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
            :class:`~ingestd.chunkers.markup.render.Rendering` that maps it back (chunks are
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
        self._count = budget.sizer.count
        longest = None if lines is None else lines.longest
        self._meter = Meter(text, sections, budget, prefix, longest)
        self._cutter = Cutter(self._meter, sections, carry, intro)
        # code blocks with a closing fence line: a chunk that ends inside one is re-fenced
        self._fence_at: list[int] = []  # where the opening fence line ends
        self._fence_close: list[tuple[int, str]] = []  # closing line: start, fence
        for sec in sections:
            for b in sec.blocks:
                if b.kind == "fence" and (close := _closing_line(text, b)) is not None:
                    self._fence_at.append(text.find("\n", b.body, b.end))
                    self._fence_close.append(close)

    def units(self, lo: int = 0, hi: int | None = None) -> list[Unit]:
        """The packing units of sections ``lo..hi-1`` (:meth:`Cutter.units`)."""
        return self._cutter.units(lo, hi)

    def pack(self, units: list[Unit]) -> list[Span]:
        """Pack ``units`` (from :meth:`units`) into spans that fit the budget.

        When the :class:`~ingestd.chunkers.sizing.spans.SpanIndex` counts word pieces, chunks
        are packed once, with the model check at every step (it costs two lookups).
        Otherwise they are packed to the budget first; then all of them are measured
        with the model in one batch, and only a chunk that does not fit is packed again,
        alone, with the model check at every step (its neighbours stay as they are).
        """
        model = self.budget.model_sizer
        if model is not None and self._meter.model_in_index:  # model counts cost nothing here
            return [span for span, _, _ in self._pack(units, model=True)]
        first = self._pack(units, model=False)
        if model is None or not first:
            return [span for span, _, _ in first]
        meter = self._meter
        if meter.model_in_index:
            counts = [meter.model_count(p.start, p.end, p.prefix, p.n_model) for p, _, _ in first]
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

    def pack_all(self) -> list[Span]:
        """Pack every section."""
        return self.pack(self.units())

    def _pack(self, units: list[Unit], *, model: bool) -> list[tuple[Span, int, int]]:
        """Spans with the ``[i, j)`` range of ``units`` each covers.

        A chunk of nothing but headings joins the chunk after it, else the one before
        it; one without a word (markup) the one before it, else the one after it; each
        when the two fit together.
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
            headings = all(units[x].lead for x in range(i, j))
            if not headings and _WORD.search(self.text, span.start, span.end):
                k += 1
                continue
            pairs = ((k, k + 1), (k - 1, k)) if headings else ((k - 1, k), (k, k + 1))
            for a, b in pairs:
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

    def _fit(self, units: list[Unit], i: int, *, model: bool) -> tuple[Span, int]:
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
                cutter = self._cutter
                if t < self.max // _ANCHOR_FILL and (sub := cutter.split_lines_of(units[jj])):
                    units[jj : jj + 1] = sub  # rather than end so small
                    j, tok = self._take(units, i)
                    continue
                j, tok = jj, t
                continue
            sub = self._cutter.split_unit(units[i], res)
            if sub is None:  # one token that does not fit with its prefix: drop the prefix
                forced = self._check(units, i, j, tok, prefix=False, force=True)
                assert isinstance(forced, Span)
                return forced, j
            units[i : i + 1] = sub
            j, tok = self._take(units, i)

    def _take(self, units: list[Unit], i: int) -> tuple[int, int]:
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
        room, known = (self._meter.safe_room, False) if m >= 0 else (-1, True)
        j, n, mx, half = i + 1, len(units), self.max, self._fill
        leads = u.lead  # only headings so far
        while j < n:
            v = units[j]
            window = v.body == WINDOW or units[j - 1].body == WINDOW
            if tok + v.tok > mx or (window and not leads):
                if leads and (sub := self._cutter.split_unit(v, mx - tok)):
                    units[j : j + 1] = sub  # the headings take the first part of it
                    continue
                break  # a window (a piece of an over-long line) is a chunk of its own
            after_lead = units[j - 1].lead
            if room >= 0 and (v.mtok < 0 or m + v.mtok > room):
                if not known and v.mtok >= 0:  # past the lower bound: the real room
                    room, known = self._meter.room(u.sec, u.carry), True
                if room >= 0 and (v.mtok < 0 or m + v.mtok > room):
                    if v.mtok >= 0 and tok >= half and not after_lead:
                        break
                    if v.mtok >= 0 and (sub := self._cutter.split_lines_of(v)):
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

    def _cut_after_leads(self, units: list[Unit], q: int, room: int) -> list[Unit] | None:
        """``units[q]``, the content after a chunk's headings, cut to take ``room`` tokens."""
        if q >= len(units) or units[q].lead or room <= 0:
            return None
        return self._cutter.split_lines_of(units[q]) or self._cutter.split_unit(units[q], room)

    def _cut_before(self, v: Unit, tok: int) -> bool:
        """Whether a chunk of ``tok`` tokens ends before unit ``v`` (which would fit).

        At a section start, unless the chunk is under ``min_tokens`` and the whole
        section fits and is no anchor section; inside a section, at a content-defined
        anchor once the chunk holds ``min_tokens`` (and a quarter of the budget), or at
        a strong anchor of a long code block once it holds a third of the budget.
        """
        mx = self.max
        if v.first:
            section_tok = self._cutter.section_tok.get(v.sec, mx + 1)
            if tok >= self.min_tokens or tok + section_tok > mx:
                return True
            return tok >= mx // _ANCHOR_FILL and self._is_anchor(v, _SECTION_RATE, section_tok)
        if not v.anchor:
            return False
        if tok >= mx // _STRONG_FILL and self._is_strong(v):
            return True
        return tok >= self._fill and (v.body > v.start or self._is_anchor(v))

    def _crc(self, v: Unit) -> int:
        """CRC-32 of ``v``'s text (UTF-8): the content that decides whether a chunk ends."""
        return zlib.crc32(self.text[v.start : v.end].encode("utf-8", "surrogatepass"))

    def _is_anchor(self, v: Unit, rate: float = _ANCHOR_RATE, tok: int | None = None) -> bool:
        """Whether ``v`` is a content-defined cut point, about ``rate`` per ``max_tokens``.

        The low 16 bits of the CRC-32 of its text fall below a threshold proportional to
        ``tok`` (its own tokens, or its section's when it opens one).
        """
        return (self._crc(v) & 0xFFFF) * self.max < 0x10000 * rate * (v.tok if tok is None else tok)

    def _is_strong(self, v: Unit) -> bool:
        """Whether ``v``, a line of a long code block, is a strong anchor (module docstring).

        The high 16 bits of its CRC-32 (:meth:`_is_anchor` reads the low ones) fall below
        a threshold proportional to its tokens, :data:`_STRONG_RATE` per ``max_tokens``.
        """
        if v.body != v.start:  # a window, or a piece with a heading or intro glued before it
            return False
        b = self._cutter.code_block(v)
        if b is None or b.next - b.start < self.max * _LONG_CODE:
            return False
        return (self._crc(v) >> 16) * self.max < 0x10000 * _STRONG_RATE * v.tok

    def _check(
        self, units: list[Unit], i: int, j: int, tok: int, *, prefix: bool = True,
        force: bool = False, model: bool = True,
    ) -> Span | int:  # fmt: skip
        """The span of ``units[i:j]`` if it fits, else the size in tokens to shrink to."""
        text, meter = self.text, self._meter
        first, last = units[i], units[j - 1]
        s, e = first.start, last.end
        exact, msum = first.exact, first.mtok  # model word pieces: blanks are 0 pieces
        for k in range(i + 1, j):
            v = units[k]
            exact = exact and v.exact
            msum = msum + v.mtok if msum >= 0 and v.mtok >= 0 else -1
        n_model = msum if meter.model_in_index else -1
        if exact:  # ``tok`` counts text[s:last.next]
            n = meter.exact(s, e, last.next, tok)
        elif (counts := meter.index.end_counts(s, e) if meter.index else None) is not None:
            n, n_model = counts
        else:
            n = self._count(text[s:e])
        suffix = self._suffix(e) if self._fence_at else ""
        if suffix:  # the closing fence of a code block the chunk ends inside
            n += meter.suffix_tokens(s, e, suffix)
        if n > self.max and not force:
            return max(0, min(tok - 1, tok * self.max // n - 1))
        if first.sec == last.sec:  # the common case: one section
            path = self.sections[first.sec].path
        else:
            secs = {units[k].sec for k in range(i, j)}
            path = _common([self.sections[k].path for k in sorted(secs)])
        pre = meter.prefix(path, first.carry) if prefix else ""
        if model and self.budget.model_sizer is not None:
            m = meter.model_count(s, e, pre, n_model)
            if suffix:
                m += meter.model_short(suffix)
            if m > self.budget.model_max_tokens and not force:
                return max(0, min(tok - 1, tok * self.budget.model_max_tokens // m - 1))
        return Span(s, e, n, path, pre, n_model if meter.model_in_index else -1, suffix)

    def _suffix(self, e: int) -> str:
        """The closing fence for a chunk that ends at ``e`` inside a code block, else ``""``.

        Inside: after its opening fence line, before its closing one.
        """
        k = bisect.bisect_right(self._fence_at, e) - 1
        if k < 0 or e > self._fence_close[k][0]:
            return ""
        return "\n" + self._fence_close[k][1]

    def whole(self, units: list[Unit]) -> Span:
        """One span over all of ``units`` (a parent section), whatever its size."""
        first, last = units[0], units[-1]
        s, e = first.start, last.end
        meter = self._meter
        counts = meter.index.end_counts(s, e) if meter.index is not None else None
        if counts is not None:
            n = counts[0]
        elif all(u.exact for u in units):
            n = sum(u.tok for u in units) - meter.tail(s, e, last.next)
        else:
            n = meter.count(self.text[s:e])[0]
        path = _common([self.sections[k].path for k in sorted({u.sec for u in units})])
        return Span(s, e, n, path, meter.prefix(path, ""))

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


def pack_titled(
    text: str,
    rendering: Rendering,
    sections: list[Section],
    budget: Budget,
    options: SectionOptions,
    *,
    carry: Callable[[str, Block], str],
    intro: Callable[[str, Block], str],
) -> list[Chunk]:
    """Chunks of a titled markup's ``sections`` (rst, AsciiDoc), packed to ``budget``.

    Args:
        text: the file's text, which chunk offsets and lines refer to.
        rendering: ``text`` rendered as the model reads it; ``sections`` are offsets
            into ``rendering.text``.
        sections: the rendered text's sections, titles already glued to their blocks.
        budget: the chunk budget (tokens).
        options: the strategy's options (``merge_below``; with ``heading_prefix``
            off, neither a heading path, nor ``carry`` nor ``intro`` is added).
        carry: the context line of a block continued in the next chunk.
        intro: the sentence that introduces a block (a list after ``...:``).
    """
    with_prefix = options.heading_prefix
    lines = LineIndex(text)
    packer = Packer(
        rendering.text,
        sections,
        budget,
        min_tokens=options.merge_below,
        prefix=(lambda path: heading_prefix(path, None)) if with_prefix else (lambda _: ""),
        carry=carry if with_prefix else (lambda _t, _b: ""),
        intro=intro if with_prefix else None,
        lines=lines,
        rendering=rendering,
    )
    return packer.chunks(lines, packer.pack_all(), {})


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
