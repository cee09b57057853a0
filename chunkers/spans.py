r"""Exact token counts of any span of a document, from one pass over it.

The structured strategies pack blocks and check every chunk against two tokenizers:
the budget's (tiktoken ``cl100k_base`` by default) and the embedding model's (BERT
WordPiece for all-MiniLM-L6-v2). Encoding every chunk with both costs several passes
over the text with the model's tokenizer alone. :class:`SpanIndex` does it in one
pass over the text, with a cache of counts per *piece* and per *word*:

* **Pieces.** ``cl100k_base`` first splits text into pre-tokens with a regular
  expression and byte-pair-encodes each pre-token on its own (tiktoken's ``CoreBPE``),
  so a text's token count is the sum of its pre-tokens' counts. BERT's pre-tokenizer
  splits at whitespace and at every punctuation character and WordPiece-encodes each
  word on its own, so its count is also a sum over words. :data:`PIECES` is
  cl100k's expression (for the characters below) with one change: a run of letters or
  digits also takes the letters and digits glued to it (``abc123``, ``2024``,
  ``'sfoo``), which cl100k splits into several pre-tokens but BERT reads as one word.
  Every piece boundary is then a pre-token boundary of both tokenizers, so both
  counts are sums of per-piece counts, and a piece's counts depend on its text only:
  Zipf's law makes a dictionary of them hit almost always.
* **Fast and slow lines.** The expression is only used on lines whose characters are
  tab, newline, printable ASCII (``\x20``-``\x7e``) and punctuation: there cl100k's
  ``\p{L}`` and ``\p{N}`` are ``[A-Za-z]`` and ``[0-9]``, and BERT's normaliser
  changes nothing but case. Any other line (accents, CJK, emoji, symbols, control
  characters that BERT deletes) is counted by both real tokenizers, a line at a time.
  The start of a non-blank line is a boundary of both tokenizers (cl100k never
  carries a pre-token across a newline into the next line's first character; BERT
  splits at whitespace), so fast and slow stretches are counted independently.
* **Words.** Fast text is not matched piece by piece: each *segment* (a line with
  content and the blank lines after it) is split at single spaces into words, and a
  word's counts (the sum of its pieces') are looked up like a piece's
  (:meth:`PieceTable.segments`). ``str.split`` and one lookup per word cost about
  half of a regular-expression match and a lookup per piece. Text where that split
  would part a run of whitespace that cl100k keeps whole is counted piece by piece.

Counts are exact for the spans the packer asks about: from the start of the text or of
a non-blank line, to the start of a non-blank line, to the end of the text, or (see
:meth:`SpanIndex.end_counts`) to a non-whitespace character followed by whitespace.
Offsets where the index holds a running sum are *boundaries* (segment ends, or piece
ends where the text was counted piece by piece; :meth:`SpanIndex.at` says whether an
offset is one). Not every boundary ends an exact span: a span that ends inside a run
of whitespace is encoded differently on its own (cl100k joins a run that ends a text
into one token).
Exactness against tiktoken and ``tokenizers`` is property-tested and checked on every
file of ../shared/corpora (``tests/chunkers/test_spans.py``).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from itertools import accumulate
from operator import add

from .base import Budget, Sizer
from .tokenizers import (
    LONG_RUN,
    MAX_RUN,
    SLOW_CHAR,
    ModelSizer,
    TiktokenSizer,
    clear_word_caches,
    run_pieces,
)

__all__ = [
    "AT", "MASK", "PIECES", "PUNCT_RUN_MAX", "PieceTable", "SpanIndex", "clear_word_tables",
    "piece_table", "trailing_run", "unpack",
]  # fmt: skip

#: cl100k_base's pre-token expression (:attr:`TiktokenSizer.pattern`) restricted to
#: tab, newline and printable ASCII, with glued letter and digit runs kept in one piece.
#: ``\Z`` stands for the Rust ``$``: end of text only.
PIECES = re.compile(
    r"'(?i:[sdmt]|ll|ve|re)[A-Za-z0-9]*+"
    r"|[^\r\nA-Za-z0-9]?+[A-Za-z]++[A-Za-z0-9]*+"
    r"|[0-9]{1,3}+[A-Za-z0-9]*+"
    r"| ?[^\sA-Za-z0-9]++[\r\n]*+"
    r"|\s++\Z|\s*[\r\n]|\s+(?!\S)|\s"
)
_CL100K = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"
    r"[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)


# a long run first: \r may start one
_SLOW_OR_LONG = re.compile(f"{LONG_RUN.pattern}|{SLOW_CHAR.pattern}")
_FAST_ASCII = bytes([9, 10, *range(0x20, 0x7F)])  # tab, newline, printable ASCII
_GLUE = re.compile("[\x0b\x0c\x1c-\x1f\x85]")  # Python splits at these, BERT deletes them
_NEXT_LINE = re.compile(r"\n(?=[^\S\n]*\S)")  # a newline before a line with content
_SHIFT = 32  # a piece's counts are packed as budget + (model << _SHIFT)
MASK = (1 << _SHIFT) - 1  # the budget part of a packed count
AT = _AT = 64  # ... and the position (characters) a running sum has reached, from bit 64
_COUNTS = (1 << _AT) - 1  # the budget and model parts
_LONG_PIECE = MAX_RUN // 3
# Pieces (and words of slow lines) remembered per table, then the table starts afresh;
# and words of fast text likewise (see PieceTable.segments). About 130 bytes an entry:
# a table holds at most ~25 MB, whatever a long-running daemon reads (a million entries
# each let it grow by hundreds of MB on text with ever new tokens: ids, numbers). All of
# ../shared/corpora holds 68k distinct pieces and 136k words; chunking it twice took the
# same time with 65,536 as with 1,000,000 (within the noise of a shared machine).
_CACHE_MAX = 65_536
_WORDS_MAX = 65_536
_PAIR = "\x01\x01"  # two spaces, in the copy of a text that is split into words
_START = "\x02"  # marks the first word of a segment (no space before it)
# a newline before a line with content, in that copy (a line of spaces is blank)
_SEGMENT = re.compile(r"\n(?=[ \t\x01]*[^\s\x01])")
# a lone space between whitespace (or whitespace and the end): the words around it are
# not counted on their own the way cl100k counts them in context. The space comes
# first, then a look behind it: the search skips ahead to the next space.
_ODD_SPACE = re.compile(r" (?<=[\t\n\x01] )(?:[\t\n]|\Z)")
_ONE = 1 << _AT  # a position of 1 in a running sum
#: Characters a trailing punctuation run is followed back, at most: :func:`trailing_run`
#: gives up (-1) on a longer run.
PUNCT_RUN_MAX = 64


class _LongWord(Exception):
    """A word holds a piece too long to count on its own (see ``cumulative``)."""


class _Words(dict[str, int]):
    """Packed counts of words (no position), counted on first use by ``table``.

    A key is a word of a segment split at spaces (see :meth:`PieceTable.segments`): it
    stands for itself after a space, or, when it starts with :data:`_START`, for
    itself at the start of a segment; :data:`_PAIR` stands for two spaces.
    """

    __slots__ = ("table",)

    def __init__(self, table: PieceTable) -> None:
        super().__init__()
        self.table = table

    def __missing__(self, key: str) -> int:
        text = key[1:] if key[:1] == _START else " " + key
        if "\x01" in text:
            text = text.replace("\x01", " ")
        table = self.table
        known = table._cache.get
        v = known(text)  # the counts of this very text: a piece (see PieceTable.piece)
        # or a short string that PieceTable.value counted whole
        if v is None:
            v = 0
            for p in PIECES.findall(text):
                c = known(p)
                if c is None and (c := table.piece(p)) is None:
                    raise _LongWord(key)
                v += c
        v &= _COUNTS
        if len(key) < _LONG_PIECE:  # as pieces are
            self[key] = v
        return v


class PieceTable:
    """Counts of pieces for one (budget sizer, model sizer) pair, with their cache.

    Args:
        budget: counts a piece in budget tokens (``str -> int``; it need only be right
            on a single piece).
        model: counts a piece in model word pieces, or ``None`` (no model check).
        sizer: the budget :class:`Sizer` (exact counts of slow stretches).
        model_sizer: the model :class:`Sizer`, or ``None``.
    """

    def __init__(
        self,
        budget: Callable[[str], int],
        model: Callable[[str], int] | None,
        sizer: Sizer,
        model_sizer: Sizer | None,
    ) -> None:
        self._budget = budget
        self._model = model
        self.sizer = sizer
        self.model_sizer = model_sizer if model is not None else None
        self._cache: dict[str, int] = {}
        self._words: dict[str, int] = {}  # model word pieces of words of slow lines
        self._segment_words = _Words(self)  # packed counts of words of fast text

    @property
    def has_model(self) -> bool:
        """Whether the packed counts hold model word pieces (else they are 0)."""
        return self._model is not None

    def value(self, s: str) -> int:
        """Packed counts of any string ``s``: ``budget + (model << 32)``."""
        v = self._cache.get(s)
        if v is not None:
            return v & _COUNTS
        if SLOW_CHAR.search(s) is None:
            if len(s) <= 256:  # short strings recur (chunk prefixes, punctuation runs)
                cum = self.cumulative(PIECES.findall(s), 0, long_ok=True)
                assert cum is not None  # long_ok
                self._cache[s] = cum[-1]
                return cum[-1] & _COUNTS
            # counted as the budget sizer counts it (tiktoken: long runs in parts)
            return self._budget_exact(s) + ((self._model(s) if self._model else 0) << _SHIFT)
        return self.exact([s])[0]

    def exact(self, texts: list[str]) -> list[int]:
        r"""Packed counts of ``texts`` from the real tokenizers (any characters).

        The model's count is a sum over whitespace-separated words (BERT never reads
        across whitespace), each word counted once by the model's tokenizer and then
        remembered; a text with a character that Python splits at but BERT deletes
        (``\x0b``, ``\x0c``, ``\x1c``-``\x1f``, ``\x85``) is counted whole.
        """
        tok = [self._budget_exact(t) for t in texts]
        if self.model_sizer is None:
            return tok
        words = self._words
        if len(words) > _CACHE_MAX:
            words = self._words = {}
        whole = [t for t in texts if _GLUE.search(t)]
        split = [t.split() for t in texts]
        missing = list({w for ws in split for w in ws}.difference(words))
        counted = self._count_many(missing + whole)
        words.update(zip(missing, counted[: len(missing)], strict=True))
        by_text = dict(zip(whole, counted[len(missing) :], strict=True))
        wp = [
            by_text[t] if t in by_text else sum(map(words.__getitem__, ws))
            for t, ws in zip(texts, split, strict=True)
        ]
        return [a + (b << _SHIFT) for a, b in zip(tok, wp, strict=True)]

    def _budget_exact(self, text: str) -> int:
        """Budget tokens of ``text`` as the budget sizer counts it.

        Fast text that tiktoken counts in parts (a line with a run of over
        :data:`~ingestd.chunkers.tokenizers.MAX_RUN` characters) is counted the same
        way, part by part, from the pieces of each part.
        """
        if (
            len(text) > MAX_RUN
            and isinstance(self.sizer, TiktokenSizer)
            and SLOW_CHAR.search(text) is None
        ):
            total = 0
            for part in run_pieces(text):
                cum = self.cumulative(PIECES.findall(part), 0, long_ok=True)
                assert cum is not None  # long_ok
                total += cum[-1] & MASK
            return total
        return self.sizer.count(text)

    def _count_many(self, texts: list[str]) -> list[int]:
        assert self.model_sizer is not None
        if not texts:
            return []
        many = getattr(self.model_sizer, "count_many", None)
        return many(texts) if many is not None else [self.model_sizer.count(t) for t in texts]

    def piece(self, p: str, *, long_ok: bool = False) -> int | None:
        """Packed counts of piece ``p`` plus its length from bit 64 up, remembered.

        ``None`` for a piece of :data:`_LONG_PIECE` characters or more unless
        ``long_ok`` (see :meth:`cumulative`); such a piece is never remembered.
        A piece found in a text is also the one piece :data:`PIECES` finds in it on
        its own: the alternative that matched it is tried on the same characters, and
        at the end of a string a run of whitespace is matched whole, as it was.
        """
        if len(p) >= _LONG_PIECE and not long_ok:
            return None
        model = self._model
        v = self._budget(p) + ((model(p) if model else 0) << _SHIFT) + (len(p) << _AT)
        if len(p) < _LONG_PIECE:
            self._cache[p] = v
        return v

    def cumulative(
        self, pieces: list[str], base: int, *, long_ok: bool = False
    ) -> list[int] | None:
        """``base`` then the running sums of the packed counts of fast ``pieces``.

        Each cached value also holds its piece's length from bit 64 up, so a running
        sum also says where in the text it stands.

        ``None`` when a piece is long and not ``long_ok``: a piece of
        :data:`_LONG_PIECE` characters or more may be part of a whitespace run that
        :class:`~ingestd.chunkers.tokenizers.TiktokenSizer` counts in parts (a run of
        over :data:`~ingestd.chunkers.tokenizers.MAX_RUN` characters is at most three
        cl100k pre-tokens); the caller then checks the text for such runs. Long pieces
        are never cached, so the check cannot be skipped.
        """
        cache = self._cache
        if len(cache) > _CACHE_MAX:  # replaced, not cleared: other threads keep theirs
            cache = self._cache = {}
        try:  # warm: every piece is known
            return list(accumulate(map(cache.__getitem__, pieces), initial=base))
        except KeyError:
            pass
        long: dict[str, int] = {}
        for p in set(pieces).difference(cache):
            if self.piece(p) is None:  # long: counted, not remembered
                v = self.piece(p, long_ok=True) if long_ok else None
                if v is None:
                    return None
                long[p] = v
        if long:
            vals = [cache[p] if p in cache else long[p] for p in pieces]
            return list(accumulate(vals, initial=base))
        return list(accumulate(map(cache.__getitem__, pieces), initial=base))

    def segments(self, text: str, a: int, b: int, base: int) -> list[int] | None:
        """``base`` then the running sums at the segment ends of fast ``text[a:b]``.

        A *segment* runs from the start of a line with content (or ``a``, a boundary)
        to the start of the next one (or ``b``): a line and the blank lines after it.
        Segment starts are boundaries of both tokenizers (see the module docstring), so
        a segment is counted on its own; it is split at single spaces into *words*,
        each counted once (its pieces, from :data:`PIECES`) and then remembered, so a
        text costs one ``str.split`` and a dictionary lookup per word instead of a
        regular-expression match and a lookup per piece. A space before a word is a
        boundary of both tokenizers when its neighbours are not both whitespace:
        cl100k's pieces hold a space only at their start or inside a run of
        whitespace, and BERT splits at every space. Runs of spaces stay inside words
        (two spaces are replaced by :data:`_PAIR` before the split), so such a run is
        counted whole, as cl100k counts it.

        Returns ``None`` when the text has a lone space between two whitespace
        characters (a blank line holding a space, three spaces before a newline): the
        caller then counts it piece by piece. Also ``None`` when a word holds a piece
        too long to count on its own (see :meth:`cumulative`).
        """
        words = self._segment_words
        if len(words) > _WORDS_MAX:  # replaced, not cleared: other threads keep theirs
            words = self._segment_words = _Words(self)
        s = text if a == 0 and b == len(text) else text[a:b]
        s = s.replace("  ", _PAIR)
        if _ODD_SPACE.search(s) is not None:
            return None
        segs = _SEGMENT.split(s)
        last = segs.pop()
        get = words.__getitem__
        try:  # counts only: sums that fit a machine word are summed faster
            vals = [sum(map(get, f"{_START}{g}\n".split(" "))) for g in segs]
            vals.append(sum(map(get, (_START + last).split(" "))))
        except _LongWord:
            return None
        segs.append(last)
        ends = accumulate(map((1).__add__, map(len, segs)), initial=base >> _AT)  # + "\n"
        counts = accumulate(vals, initial=base & _COUNTS)
        cum = list(map(add, counts, map(_ONE.__mul__, ends)))
        cum[-1] -= _ONE  # the last segment has no newline after it
        return cum


def clear_word_tables() -> None:
    """Forget every remembered piece and word count; they are counted again on use.

    The tables are bounded (:data:`_CACHE_MAX`, :data:`_WORDS_MAX` entries, ~130 bytes
    each, per table; 65,536 words per BERT sizer), but a daemon that reads ever new
    tokens keeps them full. ``ingestd run`` calls this after each sync that wrote
    (:mod:`ingestd.daemon.memory`), so an idle daemon holds none of it, and a big
    resync still reads every word once. A chunker at work keeps the table it holds.
    """
    piece_table.cache_clear()
    clear_word_caches()


@functools.lru_cache(maxsize=16)
def piece_table(sizer: Sizer, model_sizer: Sizer | None) -> PieceTable | None:
    """The :class:`PieceTable` of a sizer pair, or ``None`` when pieces cannot be used.

    Supported budgets: tiktoken ``cl100k_base`` tokens (when tiktoken shows its
    pre-token expression and ranks: :meth:`TiktokenSizer.piece_counter`), or a BERT
    WordPiece model's word pieces (``tokenizer: model``). The model part is filled for a
    BERT WordPiece model (:attr:`PieceTable.has_model`); other models are left to the
    caller. Other budget tokenizers have no per-piece counter here; callers then count
    spans one by one.
    """
    model_fn: Callable[[str], int] | None = None
    if isinstance(model_sizer, ModelSizer):
        model_fn = model_sizer.ascii_counter
    budget_fn: Callable[[str], int] | None = None
    if isinstance(sizer, TiktokenSizer) and sizer.pattern == _CL100K:
        budget_fn = sizer.piece_counter()
    elif isinstance(sizer, ModelSizer):
        budget_fn = sizer.ascii_counter
    if budget_fn is None:
        return None
    return PieceTable(budget_fn, model_fn, sizer, model_sizer)


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

    Long: over :data:`~ingestd.chunkers.tokenizers.MAX_RUN` characters, blank lines
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
        table: the :class:`PieceTable` that counted it.
        cum: one running sum per boundary, increasing: packed counts of the text
            before it (see :func:`unpack`) plus the boundary's offset from bit 64 up,
            so ``bisect_left(cum, p << 64)`` finds the boundary at ``p``.
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

        Not supported: tokenizers without a piece counter (:func:`piece_table`). A line
        with a run of whitespace or non-whitespace of over
        :data:`~ingestd.chunkers.tokenizers.MAX_RUN` characters, which
        :class:`~ingestd.chunkers.tokenizers.TiktokenSizer` counts in parts, is counted
        by the sizers like a slow line; so is a run of whitespace of that length over
        several lines (blank lines, then an indent), found by its long piece in fast
        text or where it crosses from one stretch into the next.
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
                cum.append(cum[-1] + next(slow_vals) + ((b - a) << _AT))
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
        i = bisect.bisect_left(cum, p << _AT)
        if i < len(cum) and cum[i] >> _AT == p:
            return cum[i] & _COUNTS
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
            i = left(cum, p << _AT, lo, hi if hi < n else n)
            if i < n:
                c = cum[i]
                lo, lo_pos = i, c >> _AT
                if lo_pos == p:
                    out.append(c & _COUNTS)
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
        i = bisect.bisect_left(cum, a << _AT)
        j = bisect.bisect_left(cum, b << _AT, i)
        if j < len(cum) and cum[i] >> _AT == a and cum[j] >> _AT == b:
            d = (cum[j] & _COUNTS) - (cum[i] & _COUNTS)
            return d & MASK, d >> _SHIFT
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
        i = bisect.bisect_left(cum, a << _AT)
        j = bisect.bisect_left(cum, e << _AT, i)
        if j >= len(cum) or cum[i] >> _AT != a:
            return None
        text, b = self.text, cum[j] >> _AT
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
        return unpack((cum[j] & _COUNTS) - (cum[i] & _COUNTS) - tail)


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


def unpack(v: int) -> tuple[int, int]:
    """``(budget tokens, model word pieces)`` of a packed count."""
    return v & MASK, (v >> _SHIFT) & MASK
