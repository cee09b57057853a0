r"""Counts of text pieces in budget tokens and model word pieces, remembered per piece.

:class:`~ingestd.chunkers.sizing.spans.SpanIndex` counts a document in one pass with a
:class:`PieceTable`: both tokenizers' counts of fast text (no
:data:`~ingestd.chunkers.sizing.tokenizers.SLOW_CHAR`) are sums of the counts of its *pieces*
and *words*:

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
* **Words.** Fast text is not matched piece by piece: each *segment* (a line with
  content and the blank lines after it) is split at single spaces into words, and a
  word's counts (the sum of its pieces') are looked up like a piece's
  (:meth:`PieceTable.segments`). ``str.split`` and one lookup per word cost about
  half of a regular-expression match and a lookup per piece. Text where that split
  would part a run of whitespace that cl100k keeps whole is counted piece by piece.

Both counts of a piece travel *packed* in one integer: budget tokens in the low bits
(:data:`MASK`), model word pieces from bit :data:`MODEL_SHIFT` up, and in a running sum
the position (characters) reached from bit :data:`AT` up; :func:`unpack` takes one
apart.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from itertools import accumulate
from operator import add

from ingestd.chunkers.base import Sizer
from ingestd.chunkers.sizing.tokenizers import (
    MAX_RUN,
    SLOW_CHAR,
    ModelSizer,
    TiktokenSizer,
    run_pieces,
)

__all__ = [
    "AT", "COUNTS", "MASK", "MODEL_SHIFT", "PIECES", "PieceTable", "piece_table", "unpack",
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
# cl100k_base's own expression: a table is built for a tiktoken sizer that uses it
_CL100K = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"
    r"[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)
_GLUE = re.compile("[\x0b\x0c\x1c-\x1f\x85]")  # Python splits at these, BERT deletes them
#: Bits: a piece's counts are packed as ``budget + (model << MODEL_SHIFT)``.
MODEL_SHIFT = 32
#: The budget part of a packed count (and the width of either part).
MASK = (1 << MODEL_SHIFT) - 1
#: Bits: a running sum also holds the position (characters) it has reached, from bit
#: ``AT`` up.
AT = 64
#: The budget and model parts of a running sum (its bits below :data:`AT`).
COUNTS = (1 << AT) - 1
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
_ONE = 1 << AT  # a position of 1 in a running sum


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
        v &= COUNTS
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
            return v & COUNTS
        if SLOW_CHAR.search(s) is None:
            if len(s) <= 256:  # short strings recur (chunk prefixes, punctuation runs)
                cum = self.cumulative(PIECES.findall(s), 0, long_ok=True)
                assert cum is not None  # long_ok
                self._cache[s] = cum[-1]
                return cum[-1] & COUNTS
            # counted as the budget sizer counts it (tiktoken: long runs in parts)
            return self._budget_exact(s) + ((self._model(s) if self._model else 0) << MODEL_SHIFT)
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
        return [a + (b << MODEL_SHIFT) for a, b in zip(tok, wp, strict=True)]

    def _budget_exact(self, text: str) -> int:
        """Budget tokens of ``text`` as the budget sizer counts it.

        Fast text that tiktoken counts in parts (a line with a run of over
        :data:`~ingestd.chunkers.sizing.tokenizers.MAX_RUN` characters) is counted the same
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
        v = self._budget(p) + ((model(p) if model else 0) << MODEL_SHIFT) + (len(p) << AT)
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
        :class:`~ingestd.chunkers.sizing.tokenizers.TiktokenSizer` counts in parts (a run of
        over :data:`~ingestd.chunkers.sizing.tokenizers.MAX_RUN` characters is at most three
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
        ends = accumulate(map((1).__add__, map(len, segs)), initial=base >> AT)  # + "\n"
        counts = accumulate(vals, initial=base & COUNTS)
        cum = list(map(add, counts, map(_ONE.__mul__, ends)))
        cum[-1] -= _ONE  # the last segment has no newline after it
        return cum


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


def unpack(v: int) -> tuple[int, int]:
    """``(budget tokens, model word pieces)`` of a packed count."""
    return v & MASK, (v >> MODEL_SHIFT) & MASK
