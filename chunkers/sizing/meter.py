"""What a chunk costs: budget tokens and model word pieces of spans of a text, and prefixes.

The packer (:mod:`~ingestd.chunkers.packing.packer`) and the cutter
(:mod:`~ingestd.chunkers.packing.cutting`) ask a :class:`Meter` for the counts of blocks,
lines and chunks of one text, in budget tokens and in the embedding model's word
pieces, and for the prefix a chunk is embedded with and the room it leaves the model.

Token counts are additive at line starts (every tokenizer in use splits there), so a
chunk's count is the sum of its blocks' counts, corrected for the trailing whitespace
that the chunk leaves out (:meth:`Meter.tail`). With tiktoken ``cl100k_base`` (and a
BERT model) the document is counted once by
:class:`~ingestd.chunkers.sizing.spans.SpanIndex`, and every count, in budget tokens and in
model word pieces, is a difference of two lookups; other sizers count each block once.
A run of non-whitespace of :data:`PART_CHARS` characters or more is counted in parts
of at most that many characters, so a huge run of one character costs linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ingestd.chunkers.base import Budget
from ingestd.chunkers.sections import Section
from ingestd.chunkers.sizing.pieces import MASK, MODEL_SHIFT
from ingestd.chunkers.sizing.spans import PUNCT_RUN_MAX, SpanIndex, trailing_run
from ingestd.chunkers.sizing.tokenizers import LONG_RUN, MAX_RUN

__all__ = ["PART_CHARS", "Meter"]

#: Characters: a run of non-whitespace this long or longer is counted in parts of at
#: most this many characters (:meth:`Meter.count`), and a line is cut at token
#: boundaries in parts of at most this many
#: (:class:`~ingestd.chunkers.packing.windows.WindowCutter`), so a huge run of one character
#: costs linear time.
PART_CHARS = 4096
_HUGE_RUN = re.compile(r"(?<!\S)\S{" + str(PART_CHARS) + ",}")


class Meter:
    """Counts of spans of ``text`` and of chunk prefixes, within ``budget``'s sizers.

    Args:
        text: the text that is packed (a document, or its clean rendering).
        sections: its sections (their heading paths make the prefixes).
        budget: the budget and model sizers, and their limits.
        prefix: heading path -> text prepended for embedding.
        longest: the length of the longest line of ``text`` (or of the document it
            renders), in characters, if known.

    Attributes:
        text: the measured text.
        budget: the budget it measures for.
        index: the :class:`~ingestd.chunkers.sizing.spans.SpanIndex` of ``text``, or ``None``
            (sizers without a piece table: spans are counted one by one).
        model_in_index: whether the index also counts model word pieces.
        safe_room: a lower bound of every :meth:`room` (prefixes are capped to a third
            of the model's limit), in word pieces; -1 without word pieces in the index.
    """

    def __init__(
        self,
        text: str,
        sections: list[Section],
        budget: Budget,
        prefix: Callable[[tuple[str, ...]], str],
        longest: int | None = None,
    ) -> None:
        self.text = text
        self.budget = budget
        self._sections = sections
        self._prefix = prefix
        self._count = budget.sizer.count
        self._prefixes: dict[tuple[tuple[str, ...], str], str] = {}
        self._ws: dict[str, int] = {}
        self._model_pre: dict[str, int] = {}
        self._rooms: dict[tuple[int, str], int] = {}  # (section, carry) -> room
        self.index = SpanIndex.build(text, budget, longest)
        self.model_in_index = self.index is not None and self.index.table.has_model
        cap = budget.model_max_tokens // 3
        self.safe_room = budget.model_max_tokens - cap if self.model_in_index else -1

    def count(self, s: str) -> tuple[int, bool]:
        """Tokens of ``s`` and whether the count is exact (long runs are counted in pieces)."""
        if len(s) > 2 * PART_CHARS and _HUGE_RUN.search(s):
            total, pos = 0, 0
            for m in _HUGE_RUN.finditer(s):
                total += self._count(s[pos : m.start()])
                for k in range(m.start(), m.end(), PART_CHARS):
                    total += self._count(s[k : min(k + PART_CHARS, m.end())])
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
        index = self.index
        counts = index.counts(a, b) if index is not None else None
        if counts is not None:
            return counts[0], True, counts[1] if self.model_in_index else -1
        n, exact = self.count(self.text[a:b])
        return n, exact and index is None, -1

    def span_counts(self, bounds: list[int]) -> list[tuple[int, bool, int]]:
        """:meth:`count_span` of each ``[bounds[k], bounds[k + 1])`` (increasing bounds)."""
        index = self.index
        if index is None:
            return [self.count_span(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
        at = index.at_many(bounds)
        model = self.model_in_index
        out: list[tuple[int, bool, int]] = []
        for k in range(len(bounds) - 1):
            a, b = at[k], at[k + 1]
            if a >= 0 and b >= 0:  # b - a: the packed counts of the span (see unpack)
                out.append(((b - a) & MASK, True, (b - a) >> MODEL_SHIFT if model else -1))
            else:
                out.append(self.count_span(bounds[k], bounds[k + 1]))
        return out

    def exact(self, s: int, e: int, nxt: int, tok: int) -> int:
        """Tokens of ``text[s:e]``, given ``tok`` tokens in ``text[s:nxt]`` (``e..nxt`` blank)."""
        return tok - self.tail(s, e, nxt)

    def small(self, piece: str) -> int:
        """Tokens of a short string (a trailing punctuation run, whitespace), memoised."""
        if self.index is not None:
            return self.index.table.value(piece) & MASK
        n = self._ws.get(piece)
        if n is None:
            n = self._count(piece)
            if len(piece) <= 16:
                self._ws[piece] = n
        return n

    def tail(self, s: int, e: int, nxt: int) -> int:
        """Tokens that the whitespace ``text[e:nxt]`` adds to ``text[s:e]``.

        Tokenizers split before whitespace that follows a letter or digit; after other
        characters the trailing run of them is recounted with and without the whitespace.
        """
        if nxt == e:
            return 0
        text = self.text
        p = trailing_run(text, s, e)
        if p == e:
            return self.small(text[e:nxt])
        if p < 0 or e - p >= PUNCT_RUN_MAX:  # a long run: recounted from its line's start
            p = max(s, text.rfind("\n", s, e) + 1)
        elif p > s and text[p - 1] == " ":
            p -= 1
        return self.small(text[p:nxt]) - self.small(text[p:e])

    def suffix_tokens(self, s: int, e: int, suffix: str) -> int:
        """Budget tokens that ``suffix`` adds after ``text[s:e]`` (see :meth:`tail`)."""
        text = self.text
        p = trailing_run(text, s, e)
        if p == e:
            return self.small(suffix)
        if p < 0:
            return self._count(text[s:e] + suffix) - self._count(text[s:e])
        return self.small(text[p:e] + suffix) - self.small(text[p:e])

    def model_count(self, s: int, e: int, pre: str, body: int = -1) -> int:
        """Model word pieces of ``pre + text[s:e]`` (``s`` a line start, ``e`` before blanks).

        ``body``: the word pieces of ``text[s:e]`` when already known (else -1). A
        prefix that ends in a newline adds its own count (BERT never reads across it).
        """
        model = self.budget.model_sizer
        assert model is not None
        if pre and pre[-1] != "\n":
            return model.count(pre + self.text[s:e])
        if body < 0:
            counts = self.index.end_counts(s, e) if self.model_in_index else None  # type: ignore[union-attr]
            if counts is None:
                return model.count(pre + self.text[s:e])
            body = counts[1]
        return body + self.model_short(pre)

    def model_short(self, s: str) -> int:
        """Model word pieces of a short string (a prefix), memoised across documents."""
        if self.model_in_index:
            return self.index.table.value(s) >> MODEL_SHIFT  # type: ignore[union-attr]
        m = self._model_pre.get(s)
        if m is None:
            assert self.budget.model_sizer is not None
            m = self._model_pre[s] = self.budget.model_sizer.count(s)
        return m

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
            if model is not None and pre and self.model_short(pre) > cap:
                pre = self._prefix(path[-1:])
                if self.model_short(pre) > cap:
                    pre = ""
            self._prefixes[key] = pre
        return pre

    def room(self, sec: int, carry: str) -> int:
        """Word pieces left for a chunk's text after its prefix, or -1 (no model check).

        For a chunk of section ``sec`` whose first unit has context line ``carry``. The
        prefix is the one of that section: a chunk that crosses sections takes a
        common, shorter path, so the room is never overestimated.
        """
        key = (sec, carry)
        room = self._rooms.get(key)
        if room is None:
            pre = self.prefix(self._sections[sec].path, carry)
            if not self.model_in_index or (pre and pre[-1] != "\n"):
                room = -1
            else:
                room = self.budget.model_max_tokens - self.model_short(pre)
            self._rooms[key] = room
        return room

    def over_model(self, mtok: int, sec: int) -> bool:
        """Whether ``mtok`` word pieces surely do not fit a chunk of section ``sec``."""
        return mtok > self.safe_room >= 0 and mtok > self.room(sec, "") >= 0
