r"""Exact token counts of any span of a document, from one pass over it.

The structured strategies pack blocks and check every chunk against two tokenizers:
the budget's (tiktoken ``cl100k_base`` by default) and the embedding model's (BERT
WordPiece for all-MiniLM-L6-v2). Encoding every chunk with both costs several passes
over the text with the model's tokenizer alone. :class:`SpanIndex` does it in one
pass over the text, with the counts per *piece* and per *word* of a
:class:`~ingestd.chunkers.sizing.pieces.PieceTable` (see :mod:`~ingestd.chunkers.sizing.pieces`).

**Fast and slow lines.** Pieces (:data:`~ingestd.chunkers.sizing.pieces.PIECES`) are only
used on lines whose characters are tab, newline, printable ASCII (``\x20``-``\x7e``)
and punctuation: there cl100k's ``\p{L}`` and ``\p{N}`` are ``[A-Za-z]`` and
``[0-9]``, and BERT's normaliser changes nothing but case. Any other line (accents,
CJK, emoji, symbols, control characters that BERT deletes) is counted by both real
tokenizers, a line at a time. The start of a non-blank line is a boundary of both
tokenizers (cl100k never carries a pre-token across a newline into the next line's
first character; BERT splits at whitespace), so fast and slow stretches are counted
independently.

Counts are exact for the spans the packer asks about: from the start of the text or of
a non-blank line, to the start of a non-blank line, to the end of the text, or (see
:meth:`SpanIndex.end_counts`) to a non-whitespace character followed by whitespace.
Offsets where the index holds a running sum are *boundaries* (segment ends, or piece
ends where the text was counted piece by piece; :meth:`SpanIndex.at` says whether an
offset is one). Not every boundary ends an exact span: a span that ends inside a run
of whitespace is encoded differently on its own (cl100k joins a run that ends a text
into one token).
Exactness against tiktoken and ``tokenizers`` is property-tested and checked on every
file of ../shared/corpora (``tests/chunkers/sizing/test_spans.py``).
"""

from __future__ import annotations

import bisect
import re

from ingestd.chunkers.base import Budget
from ingestd.chunkers.sizing.pieces import (
    AT,
    COUNTS,
    MASK,
    MODEL_SHIFT,
    PIECES,
    PieceTable,
    piece_table,
    unpack,
)
from ingestd.chunkers.sizing.tokenizers import LONG_RUN, MAX_RUN, SLOW_CHAR, clear_word_caches

__all__ = ["PUNCT_RUN_MAX", "SpanIndex", "clear_word_tables", "trailing_run"]

# a long run first: \r may start one
_SLOW_OR_LONG = re.compile(f"{LONG_RUN.pattern}|{SLOW_CHAR.pattern}")
_FAST_ASCII = bytes([9, 10, *range(0x20, 0x7F)])  # tab, newline, printable ASCII
_NEXT_LINE = re.compile(r"\n(?=[^\S\n]*\S)")  # a newline before a line with content
#: Characters a trailing punctuation run is followed back, at most: :func:`trailing_run`
#: gives up (-1) on a longer run.
PUNCT_RUN_MAX = 64


def clear_word_tables() -> None:
    """Forget every remembered piece and word count; they are counted again on use.

    The tables are bounded (:class:`~ingestd.chunkers.sizing.pieces.PieceTable`: 65,536
    pieces and 65,536 words, ~130 bytes each, per table; 65,536 words per BERT sizer),
    but a daemon that reads ever new tokens keeps them full. ``ingestd run`` calls
    this after each sync that wrote (:mod:`ingestd.daemon.sync.memory`), so an idle daemon
    holds none of it, and a big resync still reads every word once. A chunker at work
    keeps the table it holds.
    """
    piece_table.cache_clear()
    clear_word_caches()


def _line_start(text: str, i: int, floor: int) -> int:
    """Start of the last line at or before ``i`` that is not all whitespace (``>= floor``).

    Such a line start is a boundary of both tokenizers; a blank line's is not (cl100k
    joins a run of blank lines into one pre-token).
    """
    a = text.rfind("\n", 0, i) + 1
    while a > floor:
        eol = text.find("\n", a)
        if text[a : eol if eol != -1 else len(text)].strip():
            break
        a = text.rfind("\n", 0, a - 1) + 1
    return max(a, floor)


def _long_space(text: str, a: int) -> bool:
    """Whether a long run of whitespace goes on across line start ``a``.

    Long: over :data:`~ingestd.chunkers.sizing.tokenizers.MAX_RUN` characters, blank lines
    and then an indent, which tiktoken counts in parts from the run's start.
    """
    if a >= len(text) or not text[a].isspace():
        return False
    before = text[max(0, a - MAX_RUN - 1) : a]
    after = text[a : a + MAX_RUN + 1]
    return len(before) - len(before.rstrip()) + len(after) - len(after.lstrip()) > MAX_RUN


def _line_groups(text: str, slow: re.Pattern[str] = SLOW_CHAR) -> list[tuple[int, int, bool]]:
    """``(start, end, fast)`` stretches of ``text`` that tile it, cut at line starts.

    A stretch is slow when it holds a character outside tab, newline and printable
    ASCII; it runs from the start of that character's line (or of the last line with
    content before it) to the start of the next line with content (or the end).
    """
    n = len(text)
    if slow is SLOW_CHAR:  # the common case, all fast: ~10x faster than the search below
        rest = text.encode("utf-8", "surrogatepass").translate(None, _FAST_ASCII)
        if not rest or SLOW_CHAR.search(rest.decode("utf-8", "surrogatepass")) is None:
            return [(0, n, True)]
    out: list[tuple[int, int, bool]] = []
    pos = 0
    for m in slow.finditer(text):
        i = m.start()
        if i < pos and m.end() <= pos:
            continue
        # a long run may hold characters Python's \s counts as space and cl100k does
        # not (\x1c-\x1f...): the stretch covers the whole match, then its line
        nxt = _NEXT_LINE.search(text, m.end() - 1)
        b = nxt.end() if nxt is not None else n
        if i < pos:  # a long run that starts in the last slow stretch: it goes on to b
            out[-1] = (out[-1][0], b, False)
            pos = b
            continue
        a = _line_start(text, i, pos)
        if a > pos:
            out.append((pos, a, True))
        out.append((a, b, False))
        pos = b
    if pos < n or not out:
        out.append((pos, n, True))
    return out


class SpanIndex:
    """Cumulative budget and model counts at the piece boundaries of one text.

    Build it with :meth:`build`. Offsets are ``str`` indices; which spans count
    exactly is said in the module docstring.

    Attributes:
        text: the indexed text.
        table: the :class:`~ingestd.chunkers.sizing.pieces.PieceTable` that counted it.
        cum: one running sum per boundary, increasing: packed counts of the text
            before it (see :func:`~ingestd.chunkers.sizing.pieces.unpack`) plus the
            boundary's offset from bit 64 up, so ``bisect_left(cum, p << 64)`` finds
            the boundary at ``p``.
    """

    __slots__ = ("cum", "table", "text")

    def __init__(self, text: str, table: PieceTable, cum: list[int]) -> None:
        self.text = text
        self.table = table
        self.cum = cum

    @classmethod
    def build(cls, text: str, budget: Budget, longest: int | None = None) -> SpanIndex | None:
        """Index ``text`` for ``budget``'s sizers; ``None`` when not supported.

        ``longest``: the length of the text's longest line (characters), when known.

        Not supported: tokenizers without a piece counter
        (:func:`~ingestd.chunkers.sizing.pieces.piece_table`). A line with a run of whitespace
        or non-whitespace of over :data:`~ingestd.chunkers.sizing.tokenizers.MAX_RUN`
        characters, which :class:`~ingestd.chunkers.sizing.tokenizers.TiktokenSizer` counts in
        parts, is counted by the sizers like a slow line; so is a run of whitespace of
        that length over several lines (blank lines, then an indent), found by its long
        piece in fast text or where it crosses from one stretch into the next.
        """
        # sizers hash by identity; the Sizer protocol just does not say so
        table = piece_table(budget.sizer, budget.model_sizer)  # type: ignore[arg-type]
        if table is None or not text:
            return None
        if longest is None:
            longest = max(map(len, text.split("\n")))
        long_line = longest > MAX_RUN
        index = cls._build(text, table, _SLOW_OR_LONG if long_line else SLOW_CHAR, long_ok=False)
        if index is None:  # a long piece or run: perhaps a long run of blank lines
            index = cls._build(text, table, _SLOW_OR_LONG, long_ok=True)
        return index

    @classmethod
    def _build(
        cls, text: str, table: PieceTable, slow: re.Pattern[str], *, long_ok: bool,
        words: bool = True,
    ) -> SpanIndex | None:  # fmt: skip
        groups = _line_groups(text, slow)
        if len(groups) == 1 and groups[0][2]:  # all fast: the common case
            cum = cls._fast(text, 0, len(text), 0, table, long_ok=long_ok, words=words)
            return None if cum is None else cls(text, table, cum)
        if slow is SLOW_CHAR and any(_long_space(text, a) for a, _, _ in groups[1:]):
            return None  # a long run of whitespace goes on across stretches: see build
        slow_vals = iter(table.exact([text[a:b] for a, b, fast in groups if not fast]))
        cum = [0]
        for a, b, fast in groups:
            if not fast:
                cum.append(cum[-1] + next(slow_vals) + ((b - a) << AT))
                continue
            more = cls._fast(text, a, b, cum[-1], table, long_ok=long_ok, words=words)
            if more is None:
                return None
            cum.extend(more)
            cum.pop(-len(more))  # ``cum[-1]`` was already there
        return cls(text, table, cum)

    @staticmethod
    def _fast(
        text: str, a: int, b: int, base: int, table: PieceTable, *, long_ok: bool, words: bool
    ) -> list[int] | None:
        """Running sums over fast ``text[a:b]``: at segment ends, else at piece ends."""
        if words and not long_ok and (cum := table.segments(text, a, b, base)) is not None:
            return cum
        return table.cumulative(PIECES.findall(text, a, b), base, long_ok=long_ok)

    def at(self, p: int) -> int | None:
        """Packed counts of ``text[:p]``, or ``None`` when ``p`` is not a boundary."""
        cum = self.cum
        i = bisect.bisect_left(cum, p << AT)
        if i < len(cum) and cum[i] >> AT == p:
            return cum[i] & COUNTS
        return None

    def at_many(self, points: list[int]) -> list[int]:
        """:meth:`at` of each of the increasing ``points``, with -1 for ``None``.

        One bisection per point, over at most as many running sums as there are
        characters since the last point found (a piece holds at least one).
        """
        cum = self.cum
        n = len(cum)
        out: list[int] = []
        lo = lo_pos = 0  # a running sum's index and its offset, at or before the point
        left = bisect.bisect_left
        for p in points:
            hi = lo + p - lo_pos + 1
            i = left(cum, p << AT, lo, hi if hi < n else n)
            if i < n:
                c = cum[i]
                lo, lo_pos = i, c >> AT
                if lo_pos == p:
                    out.append(c & COUNTS)
                    continue
            out.append(-1)
        return out

    def counts(self, a: int, b: int) -> tuple[int, int] | None:
        """``(budget tokens, model word pieces)`` of ``text[a:b]``; ``None`` off boundaries.

        Exact when ``a`` is 0 or a non-blank line start and ``b`` is a non-blank line
        start or ``len(text)`` (see the module docstring). The packer's hot path: both
        lookups are :meth:`at` inlined.
        """
        cum = self.cum
        i = bisect.bisect_left(cum, a << AT)
        j = bisect.bisect_left(cum, b << AT, i)
        if j < len(cum) and cum[i] >> AT == a and cum[j] >> AT == b:
            d = (cum[j] & COUNTS) - (cum[i] & COUNTS)
            return d & MASK, d >> MODEL_SHIFT
        return None

    def end_counts(self, a: int, e: int) -> tuple[int, int] | None:
        """Counts of ``text[a:e]`` where ``a`` is a boundary and ``text[e]`` is whitespace.

        ``e`` need not be a boundary. When only whitespace lies between ``e`` and the
        next boundary ``b``, the span is counted as ``text[a:b]`` less what that
        whitespace adds: nothing but its own count after a letter or digit; after a
        run of ASCII punctuation, whose cl100k piece takes the newlines after it, the
        run (with its leading space, if any) is counted with and without the
        whitespace. ``None`` if that fails (a punctuation run of 64 characters or
        more, other characters before the whitespace, content before ``b``).
        """
        found = self.counts(a, e)
        if found is not None:
            return found
        cum = self.cum
        i = bisect.bisect_left(cum, a << AT)
        j = bisect.bisect_left(cum, e << AT, i)
        if j >= len(cum) or cum[i] >> AT != a:
            return None
        text, b = self.text, cum[j] >> AT
        if e <= a or not text[e:b].isspace():
            return None
        p = trailing_run(text, a, e)
        if p < 0:
            return None
        if p == e:
            if not text[e - 1].isalnum():
                return None
        elif not text[max(a, p - 1) : e].isascii():  # ASCII punctuation: BERT's too
            return None
        elif p > a and text[p - 1] == " ":
            p -= 1
        table = self.table
        tail = table.value(text[p:b]) - (table.value(text[p:e]) if p < e else 0)
        return unpack((cum[j] & COUNTS) - (cum[i] & COUNTS) - tail)


def trailing_run(text: str, lo: int, e: int) -> int:
    r"""Start of the run of punctuation that ends at ``e`` (not before ``lo``).

    Punctuation here: characters neither alphanumeric nor whitespace. cl100k's piece
    for such a run takes the newlines after it (``".\n\n"``), so what whitespace after
    ``e`` adds is counted from the run's start. Returns ``e`` when ``text[e - 1]`` is
    not punctuation, and -1 when the run goes on for over :data:`PUNCT_RUN_MAX` characters.
    """
    p = e
    while p > lo and not text[p - 1].isalnum() and not text[p - 1].isspace():
        if e - p >= PUNCT_RUN_MAX:
            return -1
        p -= 1
    return p
