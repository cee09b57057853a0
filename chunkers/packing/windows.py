"""Cutting one line over budget into windows of budget tokens.

A line that does not fit a chunk (or a block that cannot be cut at lines) is cut into
windows: between its pieces (pre-tokens, :data:`~ingestd.chunkers.sizing.pieces.PIECES`) when
it is fast text with a :class:`~ingestd.chunkers.sizing.spans.SpanIndex`, so no word is cut
in two, else at token boundaries (``Sizer.boundaries``, on parts of at most
:data:`~ingestd.chunkers.sizing.meter.PART_CHARS` characters, so a huge run of one character
costs linear time). A window cut at token boundaries is recounted exactly; a piece
window's count comes from the index. The packer makes each window a chunk of its own.
"""

from __future__ import annotations

import bisect

from ingestd.chunkers.packing.units import WINDOW, Unit
from ingestd.chunkers.sizing.meter import PART_CHARS, Meter
from ingestd.chunkers.sizing.pieces import AT, MASK, MODEL_SHIFT, PIECES
from ingestd.chunkers.sizing.tokenizers import MAX_RUN, SLOW_CHAR

__all__ = ["WindowCutter"]


def _budget_of(c: int) -> int:
    """Budget tokens of a running sum of :attr:`~ingestd.chunkers.sizing.spans.SpanIndex.cum`."""
    return c & MASK


def _model_of(c: int) -> int:
    """Model word pieces of a running sum (:attr:`~ingestd.chunkers.sizing.spans.SpanIndex.cum`)."""
    return (c >> MODEL_SHIFT) & MASK


class WindowCutter:
    """Cuts units of one line of ``meter.text`` into windows (see the module docstring).

    Args:
        meter: the counts of the text (its index, its budget and model limits).

    Attributes:
        text: the text the units refer to.
        budget: the budget (and model limit) of each window.
    """

    def __init__(self, meter: Meter) -> None:
        self.text = meter.text
        self.budget = meter.budget
        self._meter = meter

    def cut(self, u: Unit, size: int, body_eol: int = -1, block_carry: str = "") -> list[Unit]:
        """Cut ``u`` (one line) into windows of ``size`` tokens.

        Between the line's pieces where it can (:meth:`_piece_windows`: no word is cut
        in two), else at token boundaries.

        With a model sizer, a window also stops before two thirds of the model's limit
        in its word pieces (the rest is room for the prefix), so that a run of
        punctuation (one word piece per character) is not cut and re-cut.

        Args:
            u: the unit to cut.
            size: budget tokens per window, at most.
            body_eol: end of the first line of the body of ``u``'s block, when ``u``
                has no context line of its own and spans lines; else -1.
            block_carry: the context line of ``u``'s block: a window that starts after
                ``body_eol`` continues the block and takes it.
        """
        text = self.text
        raw = self._piece_windows(u, size)
        model = self.budget.model_sizer
        room = self.budget.model_max_tokens * 2 // 3
        s = raw[-1][1] if raw else u.start
        while s < u.end:  # the rest (all of it without an index) at token boundaries
            e = min(u.end, s + PART_CHARS)
            if e < u.end:  # prefer to cut a piece after whitespace
                ws = max(
                    text.rfind(" ", s + PART_CHARS // 4, e),
                    text.rfind("\t", s + PART_CHARS // 4, e),
                )
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
        out: list[Unit] = []
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
            out.append(Unit(a, end, b, n, u.sec, carry=carry, exact=exact, body=WINDOW,
                            mtok=mtok))  # fmt: skip
        if not out:  # cannot happen for a unit with content; keep the unit whole
            return [u]
        out[0].first = u.first
        out[-1].exact &= out[-1].next == u.next
        out[-1].next = u.next
        return out

    def _piece_windows(self, u: Unit, size: int) -> list[tuple[int, int, int, int, bool]]:
        """``(start, end, tokens, word pieces, True)`` windows of ``u`` cut at piece boundaries.

        Greedy, like :meth:`cut`: each window is the longest run of pieces within
        ``size`` budget tokens and two thirds of the model's limit, found by bisection
        on the running sums of the pieces of ``u``'s text on its own (so a window's
        count is its own text's, whatever follows it). Stops (possibly at once) where
        no piece boundary is left or the next piece alone does not fit;
        :meth:`cut` cuts the rest at token boundaries. Empty for a slow line (see
        :mod:`~ingestd.chunkers.sizing.spans`) or without an index. The word pieces are -1
        when the index does not count them.
        """
        index = self._meter.index
        if index is None or (
            self.budget.model_sizer is not None and not self._meter.model_in_index
        ):
            return []
        if SLOW_CHAR.search(self.text, u.start, u.end) is not None:
            return []
        cum = index.table.cumulative(
            PIECES.findall(self.text, u.start, u.end), u.start << AT, long_ok=True
        )
        assert cum is not None  # long_ok
        i, hi = 0, len(cum)
        room = self.budget.model_max_tokens * 2 // 3 if self._meter.model_in_index else 0
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
