"""Cutting sections into packing units, and units that do not fit into smaller ones.

:class:`Cutter` turns each section into :class:`~ingestd.chunkers.packing.units.Unit` objects:
the whole section when it fits, else its blocks. A block over budget (or, with the
model's counts at hand, over what the model reads after the prefix) is cut at blank
lines into paragraphs, then at line starts into items (a line no more indented than
the first one, with the more indented lines after it) and lines; code is cut at line
starts straight away; a line over budget goes to
:class:`~ingestd.chunkers.packing.windows.WindowCutter`. A heading (or an intro paragraph, or
an opening fence line) glued before a block that is cut stays with the block's first
piece, a closing fence line with its last: a heading never ends a chunk. A piece that
continues a block takes the block's context line (a table's header row, a code
block's opening fence line).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from ingestd.chunkers.packing.units import SECTION, WINDOW, Unit
from ingestd.chunkers.packing.windows import WindowCutter
from ingestd.chunkers.sections import Block, Section
from ingestd.chunkers.sizing.meter import Meter

__all__ = ["Cutter"]

_SECTION_CHARS = 5  # a section this many chars per budget token is counted whole first
_BLOCK_CHARS = 8  # a block longer than this many chars per budget token is counted by lines
_ANCHOR_KINDS = frozenset({"para", "line", "list", "heading"})
_LINE_KINDS = frozenset({"fence", "code"})
_LINE = r"^[^\S\n]*\S(?:[^\n]*\S)?"  # a non-blank line, without trailing whitespace
_LINES = re.compile(r"^([ \t]*)" + _LINE[1:], re.M)  # group 1: its indent, spaces and tabs
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_PARAS = re.compile(_LINE + r"(?:[^\S\n]*\n" + _LINE[1:] + ")*", re.M)  # lines, no blank one
_FENCE_LINE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[^\n]*")  # an opening fence line
_BARE_FENCE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[ \t]*")  # a closing one


class Cutter:
    """Makes the packing units of ``sections``, and cuts a unit that does not fit.

    Args:
        meter: the counts of the text the sections refer to (``meter.text``).
        sections: parsed sections, in document order.
        carry: (text, block) -> context line for a chunk that continues the block.
        intro: (text, block) -> context line for a chunk that starts where the body of
            a block with a lead glued before it starts (default none).

    Attributes:
        text: the text the sections refer to.
        sections: the sections.
        max: budget per chunk, in budget tokens.
        section_tok: budget tokens of each section whose units were made (section index
            -> tokens): a chunk under ``min_tokens`` takes in a section that fits whole.
    """

    def __init__(
        self,
        meter: Meter,
        sections: list[Section],
        carry: Callable[[str, Block], str],
        intro: Callable[[str, Block], str] | None = None,
    ) -> None:
        text = self.text = meter.text
        self.sections = sections
        self.max = meter.budget.max_tokens
        self.section_tok: dict[int, int] = {}
        self._meter = meter
        self._window_cutter = WindowCutter(meter)
        self._carry = carry
        self._count = meter.budget.sizer.count
        self._starts: dict[int, list[int]] = {}  # section -> its blocks' starts
        self._intros: dict[int, str] = {}  # body start of a block with a lead -> context
        if intro is not None:
            for sec in sections:
                for b in sec.blocks:
                    if b.body > b.start and (ctx := intro(text, b)):
                        self._intros[b.body] = ctx

    def units(self, lo: int = 0, hi: int | None = None) -> list[Unit]:
        """The packing units of sections ``lo..hi-1``: whole sections that fit, else blocks.

        A block over budget is cut into lines, a line over budget into token windows.
        """
        out: list[Unit] = []
        for si in range(lo, len(self.sections) if hi is None else hi):
            out.extend(self._section_units(si, whole=True))
        return out

    def _section_units(self, si: int, *, whole: bool) -> list[Unit]:
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
            tok, exact, mtok = self._meter.count_span(a, z)
            if tok <= self.max and not self._meter.over_model(mtok, si):
                self.section_tok[si] = tok
                return [Unit(a, blocks[-1].end, z, tok, si, first=True, exact=exact, body=SECTION,
                             mtok=mtok)]  # fmt: skip
        counts = self._meter.span_counts([b.start for b in blocks] + [z])
        out: list[Unit] = []
        for bi, (b, c) in enumerate(zip(blocks, counts, strict=True)):
            out.extend(self._block_units(b, si, bi == 0, c))
        self.section_tok[si] = sum(u.tok for u in out)
        return out

    def _block_units(
        self, b: Block, si: int, first: bool, counts: tuple[int, bool, int] | None
    ) -> list[Unit]:
        """Units of block ``b``; ``counts``: its :meth:`Meter.count_span`, when known."""
        anchor = b.kind in _ANCHOR_KINDS or b.body > b.start  # a lead glued before it
        lead = b.kind == "heading"  # a heading with no block after it in its section
        u = Unit(b.start, b.end, b.next, 0, si, first, anchor, "", True, b.body, lead=lead)
        if b.next - b.start > self.max * _BLOCK_CHARS:  # surely too big: count its lines
            parts = self._split_lines(u, self._carry(self.text, b), b.kind)
            tok = sum(p.tok for p in parts)
            if tok > self.max or not all(p.exact and p.body != WINDOW for p in parts):
                return parts
            mtok = sum(p.mtok for p in parts) if all(p.mtok >= 0 for p in parts) else -1
            if self._meter.over_model(mtok, si):
                return parts
            u.tok, u.mtok = tok, mtok
            return [u]
        u.tok, u.exact, u.mtok = counts or self._meter.count_span(b.start, b.next)
        if u.tok > self.max or self._meter.over_model(u.mtok, si):
            return self._split_lines(u, self._carry(self.text, b), b.kind)
        return [u]

    def split_unit(self, u: Unit, target: int) -> list[Unit] | None:
        """Smaller units covering ``u``'s text but for blank windows, or ``None``.

        ``None`` when ``u`` is a single token (or cannot be cut into smaller ones).
        """
        if u.body == SECTION:
            return self._section_units(u.sec, whole=False)
        if u.body != WINDOW:
            parts = self._split_lines(u, u.carry or self._block_carry(u))
            if len(parts) > 1:
                return parts
            u = parts[0] if parts[0].body == WINDOW else u
        n = u.tok if u.body == WINDOW else self._count(self.text[u.start : u.end])
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

    def split_lines_of(self, u: Unit) -> list[Unit] | None:
        """``u`` cut at lines (as :meth:`_split_lines` does), or ``None`` for one line.

        A chunk that the model check would shrink to under a quarter of the budget (a
        heading before a table whose divider row costs many word pieces) takes the
        first lines of the unit it would drop instead.
        """
        if u.body in (SECTION, WINDOW) or self.text.find("\n", u.start, u.end) == -1:
            return None
        parts = self._split_lines(u, self._block_carry(u))
        return parts if len(parts) > 1 else None

    def _split_lines(self, u: Unit, carry: str, kind: str = "") -> list[Unit]:
        """Cut ``u`` at blank lines into paragraphs, and paragraphs over budget at lines.

        Code (``kind`` ``"fence"`` or ``"code"``) is cut at lines straight away.
        """
        paras = kind not in _LINE_KINDS and _BLANK_LINE.search(self.text, u.start, u.end)
        groups = self._glued(self._paragraphs(u), u) if paras else []
        if len(groups) <= 1:
            return self._lines(u, carry)
        out: list[Unit] = []
        body_eol = self._body_eol(u)
        counts = self._meter.span_counts([s for s, _, _ in groups] + [groups[-1][2]])
        for k, ((s, end, nxt), (tok, exact, mtok)) in enumerate(zip(groups, counts, strict=True)):
            g = Unit(s, end, nxt, tok, u.sec, first=u.first and k == 0, anchor=k > 0,
                     carry=carry if s > body_eol >= 0 else self._intros.get(s, ""),
                     exact=exact, body=u.body if s < u.body <= end else s,
                     mtok=mtok)  # fmt: skip
            too_big = tok > self.max or self._meter.over_model(mtok, u.sec)
            out.extend(self._lines(g, carry, body_eol=body_eol) if too_big else [g])
        return out

    def _glued(self, pieces: list[tuple[int, int, int]], u: Unit) -> list[tuple[int, int, int]]:
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

    def _paragraphs(self, u: Unit) -> list[tuple[int, int, int]]:
        """``(start, end, next)`` of the paragraphs (runs of non-blank lines) of ``u``.

        ``end`` is after the last non-whitespace character; ``next`` is the start of the
        next paragraph or ``u.next``.
        """
        spans = [m.span() for m in _PARAS.finditer(self.text, u.start, u.end)]
        nexts = [s for s, _ in spans[1:]]
        nexts.append(u.next)
        return [(s, e, n) for (s, e), n in zip(spans, nexts, strict=True)]

    def _lines(
        self, u: Unit, carry: str, *, items: bool = True, body_eol: int | None = None
    ) -> list[Unit]:
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
        out: list[Unit] = []
        sec, mx, intros = u.sec, self.max, self._intros
        bounds = [s for s, _, _ in glued]
        bounds.append(u.next)
        counts = self._meter.span_counts(bounds)
        for (s, end, nxt), (tok, exact, mtok) in zip(glued, counts, strict=True):
            ctx = carry if s > body_eol >= 0 else intros.get(s, "")
            body = u.body if s < u.body <= end else -1
            line = Unit(s, end, nxt, tok, sec, False, True, ctx, exact, body, mtok)
            if tok <= mx and not self._meter.over_model(mtok, sec):
                out.append(line)
            elif items:
                out.extend(self._lines(line, carry, items=False, body_eol=body_eol))
            else:
                out.extend(self._windows(line, mx))
        out[0].first, out[0].anchor = u.first, False
        return out

    def _cut_before_fence(self, u: Unit, carry: str) -> list[Unit] | None:
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
        (tok, exact, mtok), (ctok, cexact, cmtok) = self._meter.span_counts([u.start, body, u.next])
        lead = Unit(u.start, end, body, tok, u.sec, u.first, False, u.carry, exact, u.start,
                    mtok)  # fmt: skip
        code = Unit(body, u.end, u.next, ctok, u.sec, False, True, intro, cexact, body, cmtok)
        out: list[Unit] = []
        for part in (lead, code):
            if part.tok > self.max or self._meter.over_model(part.mtok, part.sec):
                pieces = self._lines(part, carry if part is code else "")
                pieces[0].first, pieces[0].anchor = part.first, part.anchor
                pieces[0].carry = pieces[0].carry or part.carry
                out.extend(pieces)
            else:
                out.append(part)
        return out

    def _windows(self, u: Unit, size: int) -> list[Unit]:
        """``u`` (one line) cut into windows of ``size`` tokens (:meth:`WindowCutter.cut`).

        A window after the first line of the block that holds ``u`` continues the
        block: it takes the block's context line (when ``u`` has none of its own).
        """
        multiline = not u.carry and self.text.find("\n", u.start, u.end) != -1
        body_eol = self._body_eol(u) if multiline else -1
        block_carry = self._block_carry(u) if body_eol >= 0 else ""
        return self._window_cutter.cut(u, size, body_eol, block_carry)

    def _block_of(self, u: Unit) -> Block | None:
        """The block that holds ``u`` (``None`` for a unit of several blocks)."""
        blocks = self.sections[u.sec].blocks
        starts = self._starts.get(u.sec)
        if starts is None:
            starts = self._starts[u.sec] = [b.start for b in blocks]
        k = bisect.bisect_right(starts, u.start) - 1
        return blocks[k] if k >= 0 and u.end <= blocks[k].end else None

    def code_block(self, u: Unit) -> Block | None:
        """The code block (fenced or indented) that holds ``u``, or ``None``.

        ``None`` too for a unit of several blocks.
        """
        b = self._block_of(u)
        return b if b is not None and b.kind in _LINE_KINDS else None

    def _block_carry(self, u: Unit) -> str:
        """The context line of the block that holds ``u``, for the pieces ``u`` is cut into.

        A block that fits the budget but not the model is split on the way, after
        :meth:`_block_units`: its pieces after the first line need the line too.
        """
        b = self._block_of(u)
        return "" if b is None else self._carry(self.text, b)

    def _body_eol(self, u: Unit) -> int:
        """End of the first line of the body of the block that holds ``u``.

        Pieces of ``u`` that start after it continue the block: they take its context
        line (:meth:`_block_carry`).
        """
        b = self._block_of(u)
        body = u.body if b is None else b.body
        return self.text.find("\n", body, u.end if b is None else b.end)
