"""``token``: fixed windows of budget tokens with overlap, and the fitting helpers.

The classic recipe (LangChain ``TokenTextSplitter``, chonkie ``TokenChunker``): windows
of ``max_tokens`` tokens, each starting ``max_tokens - overlap`` tokens after the
previous one. Windows are cut at token boundaries that are also character boundaries,
so multi-byte characters are never split; a window whose text the embedding model
would truncate is shortened until it fits. Whitespace-only windows are dropped.

The other strategies share the helpers of this module: :class:`Windows` (the largest
window that fits), :func:`split_to_fit` (cut an over-long span at separators, then at
token boundaries) and :func:`pack` (group consecutive units greedily to the budget).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Collection, Sequence

from pydantic import model_validator

from ingestd.chunkers.base import (
    Budget,
    Chunk,
    Chunker,
    ChunkerOptions,
    LineIndex,
    Sizer,
    strip_span,
)

__all__ = ["TokenChunker", "TokenOptions", "Windows", "measure", "pack", "split_to_fit"]

Span = tuple[int, int]

#: Separators tried by :func:`split_to_fit`, coarsest first: a blank line, a line
#: break, whitespace after sentence punctuation (a text with no capitals defeats
#: sentence splitters, not this).
_SEPARATORS = (
    re.compile(r"\n[^\S\n]*\n\s*"),
    re.compile(r"\n\s*"),
    re.compile(r"(?<=[.!?;:。！？])\s+"),
)


class Windows:
    """The budget-token boundaries of ``text[start:end]`` and windows over them.

    Boundary ``i`` is the character offset after ``i`` tokens (``offset(0) == start``).
    A window ``(s, e)`` is ``text[offset(s):offset(e)]``.

    Args:
        budget: budget (and model) limits a window must respect.
        text: the whole decoded text.
        start: first character of the region, in characters.
        end: end of the region (exclusive); ``None`` for ``len(text)``.
        prefix: text embedded before each window (counts against the model limit).
    """

    def __init__(
        self, budget: Budget, text: str, start: int = 0, end: int | None = None, prefix: str = ""
    ) -> None:
        self.budget = budget
        self.text = text
        self.start = start
        self.end = len(text) if end is None else end
        self.prefix = prefix
        self.ends = [start + b for b in budget.sizer.boundaries(text[start : self.end])]
        self._chars_per_piece = 0.0
        model = budget.model_sizer
        self._prefix_pieces = model.count(prefix) if model is not None and prefix else 0

    def __len__(self) -> int:
        return len(self.ends)

    def offset(self, i: int) -> int:
        """Character offset of boundary ``i``."""
        return self.ends[i - 1] if i else self.start

    def fits(self, s: int, e: int, *, strip: bool = False) -> bool:
        """Whether window ``(s, e)`` (trimmed of whitespace if ``strip``) fits."""
        a, b = self._span(s, e, strip)
        return a == b or self.budget.fits(self.text[a:b], self.prefix)

    def _span(self, s: int, e: int, strip: bool) -> tuple[int, int]:
        a, b = self.offset(s), self.offset(e)
        return strip_span(self.text, a, b) if strip else (a, b)

    def _pieces(self, s: int, e: int, strip: bool) -> int:
        """Word pieces of the model in ``prefix`` + window (0 without a model sizer)."""
        model = self.budget.model_sizer
        a, b = self._span(s, e, strip)
        return model.count(self.prefix + self.text[a:b]) if model is not None else 0

    def _budget_ok(self, s: int, e: int, strip: bool) -> bool:
        a, b = self._span(s, e, strip)
        return self.budget.sizer.count(self.text[a:b]) <= self.budget.max_tokens

    def fit(self, s: int, e: int, *, strip: bool = False) -> int:
        """Largest ``e2`` with ``s < e2 <= e`` whose window fits (``s + 1`` if none does).

        When the model's limit bites first (e.g. a run of punctuation: one tiktoken
        token per 8 marks, one word piece per mark), the end is estimated from the
        characters per word piece last seen where it bit, so the search stays short.
        """
        ok = functools.partial(self.fits, s, strip=strip)
        if self._chars_per_piece:
            guess = self._model_guess(s, e)
            if guess < e:
                pieces = self._pieces(s, guess, strip)
                limit = self.budget.model_max_tokens
                if pieces <= limit and self._budget_ok(s, guess, strip):
                    step = max(1, (guess - s) // 8)
                    if pieces * 10 >= limit * 9 or not ok(min(e, guess + step)):
                        return guess  # within 10% of the model's limit: good enough
                    end = _gallop(guess, e, ok)
                    if end == e:  # the model's limit no longer bites: stop guessing
                        self._chars_per_piece = 0.0
                    return end
                e = guess
        if ok(e):
            return e
        model = self.budget.model_sizer
        if model is not None:
            for _ in range(3):
                a, b = self._span(s, e, strip)
                pieces = model.count(self.prefix + self.text[a:b])
                if pieces <= self.budget.model_max_tokens or b == a:
                    break
                self._chars_per_piece = (b - a) / pieces
                guess = self._model_guess(s, e)
                e = min(e - 1, guess) if guess >= e else guess
                if e <= s + 1 or ok(e):
                    return max(s + 1, e)
        return _largest(s + 1, e - 1, ok)

    def _model_guess(self, s: int, e: int) -> int:
        """End of the window from ``s`` of about the model's room in word pieces."""
        room = self.budget.model_max_tokens - self._prefix_pieces
        chars = int(max(1, room) * self._chars_per_piece * 0.97)
        return max(s + 1, min(e, bisect.bisect_right(self.ends, self.offset(s) + chars)))

    def split(self) -> list[Span]:
        """Consecutive windows that fit, trimmed, covering every non-whitespace character."""
        out: list[Span] = []
        n, size, k = len(self.ends), self.budget.max_tokens, 0
        while k < n:
            e = self.fit(k, min(n, k + size), strip=True)
            a, b = strip_span(self.text, self.offset(k), self.offset(e))
            if a < b:
                out.append((a, b))
            k = e
        return out


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Binary search: the largest ``j`` in ``[lo, hi]`` with ``ok(j)``, else ``lo``.

    ``ok`` is assumed monotone (a longer window never fits when a shorter one does not).
    """
    if hi < lo:
        return lo
    if ok(hi):
        return hi
    hi -= 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


#: A candidate chunk longer than this many characters per budget token is not measured
#: whole (prose has about 4; only long whitespace runs come near it).
_FAR_CHARS = 32


def _gallop(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The largest ``j`` in ``[lo, hi]`` with ``ok(j)``, knowing ``ok(lo)``, probing upwards.

    Probes ``lo + 1, lo + 2, lo + 4, ...`` so that a far ``hi`` (the end of the document)
    is never measured whole.
    """
    step = 1
    while lo < hi:
        t = min(hi, lo + step)
        if not ok(t):
            return _largest(lo, t - 1, ok)
        lo, step = t, step * 2
    return lo


def split_to_fit(budget: Budget, text: str, start: int, end: int, prefix: str = "") -> list[Span]:
    """Cut ``text[start:end]`` into trimmed spans that each fit ``budget``.

    Separators are tried coarsest first (blank line, line break, whitespace after
    sentence punctuation); a piece with none left is cut into token windows
    (:meth:`Windows.split`). The spans are in order, do not overlap and cover every
    non-whitespace character of the input. Small pieces are *not* merged: pack them
    with :func:`pack`.
    """
    return _split(budget, text, start, end, prefix, 0)


def _split(budget: Budget, text: str, start: int, end: int, prefix: str, level: int) -> list[Span]:
    start, end = strip_span(text, start, end)
    if start == end:
        return []
    if budget.fits(text[start:end], prefix):
        return [(start, end)]
    for k in range(level, len(_SEPARATORS)):
        cuts = [m.span() for m in _SEPARATORS[k].finditer(text, start, end)]
        if not cuts:
            continue
        out: list[Span] = []
        a = start
        for x, y in [*cuts, (end, end)]:
            out.extend(_split(budget, text, a, x, prefix, k + 1))
            a = y
        return out
    return Windows(budget, text, start, end, prefix).split()


def pack(
    budget: Budget,
    text: str,
    units: Sequence[Span],
    *,
    prefix: str = "",
    overlap: int = 0,
    breaks: Collection[int] = (),
    sizes: Sequence[int] | None = None,
    msizes: Sequence[int] | None = None,
) -> list[Span]:
    """Group consecutive ``units`` greedily into chunks that fit ``budget``.

    Args:
        budget: limits of a chunk (``text[units[i][0]:units[j - 1][1]]``).
        text: the decoded text the units index.
        units: ordered, non-overlapping spans, each expected to fit on its own (one
            that does not is still emitted, alone).
        prefix: text embedded before each chunk (counts against the model limit).
        overlap: most units a chunk repeats from the end of the previous one; the
            repeat is skipped at a break and shortened until the next chunk can add
            at least one new unit.
        breaks: unit indices that must start a chunk.
        sizes: budget tokens of each unit, if already known (an estimate is enough).
        msizes: the model's word pieces of each unit, likewise (see :func:`measure`).

    Returns:
        ``(i, j)`` unit index ranges, ``j`` exclusive, in order; every unit is in one.
    """
    n = len(units)
    if not n:
        return []
    if sizes is None:
        sizes = [budget.count(text[a:b]) for a, b in units]
    cap, room = budget.max_tokens, budget.max_tokens
    if budget.model_sizer is None:
        msizes = [0] * n
    else:
        if msizes is None:
            msizes = _count_many(budget.model_sizer, [text[a:b] for a, b in units])
        room = budget.model_max_tokens - budget.model_sizer.count(prefix)
    hard = sorted(set(breaks))

    def ok(i: int, j: int) -> bool:
        return budget.fits(text[units[i][0] : units[j - 1][1]], prefix)

    def over(i: int, j: int) -> bool:  # estimate: sum of the parts
        return sum(sizes[i:j]) > cap or sum(msizes[i:j]) > room

    groups: list[Span] = []
    i = 0
    while i < n:
        nb = bisect.bisect_right(hard, i)
        limit = hard[nb] if nb < len(hard) else n
        j, acc, macc = i + 1, sizes[i], msizes[i]
        while j < limit and acc + sizes[j] <= cap and macc + msizes[j] <= room:
            acc, macc = acc + sizes[j], macc + msizes[j]
            j += 1
        # units that leave long gaps uncounted between them (tab-indented lines) make
        # a far estimate: it is searched from below, never measured whole
        far = units[j - 1][1] - units[i][0] > _FAR_CHARS * cap
        if j > i + 1 and (far or not ok(i, j)):
            j = _gallop(i + 1, j if far else j - 1, functools.partial(ok, i))
        elif j < limit and not over(i, j + 1):
            j = _gallop(j, limit, functools.partial(ok, i))
        groups.append((i, j))
        if j >= n:
            break
        k = 0 if j == limit else min(overlap, j - i - 1)
        while k and (over(j - k, j + 1) or not ok(j - k, j + 1)):
            k -= 1
        i = j - k
    return groups


def measure(
    budget: Budget, text: str, spans: Sequence[Span], prefix: str = ""
) -> tuple[list[int], list[int], list[bool]]:
    """Budget tokens, model word pieces and "fits on its own" of each span.

    Counts every span once (the model's in one batch, and only for spans within the
    budget: the others get 0 and must not be packed). A span is taken to fit with
    ``prefix`` when the sum of the prefix's and its own word pieces is clearly below
    the model's limit (pieces never merge across the newline a prefix ends with);
    spans near the limit are counted together with the prefix.
    """
    texts = [text[a:b] for a, b in spans]
    sizes = [budget.count(t) for t in texts]
    model = budget.model_sizer
    if model is None:
        return sizes, [0] * len(texts), [n <= budget.max_tokens for n in sizes]
    small = [k for k, n in enumerate(sizes) if n <= budget.max_tokens]
    msizes = [0] * len(texts)  # spans over the budget are never packed: not counted
    for k, m in zip(small, _count_many(model, [texts[k] for k in small]), strict=True):
        msizes[k] = m
    room = budget.model_max_tokens - model.count(prefix) - 4
    fits = [
        n <= budget.max_tokens and (m <= room or budget.fits(t, prefix))
        for t, n, m in zip(texts, sizes, msizes, strict=True)
    ]
    return sizes, msizes, fits


def _count_many(sizer: Sizer, texts: list[str]) -> list[int]:
    """Token counts of ``texts``, batched when the sizer can (``ModelSizer.count_many``)."""
    many = getattr(sizer, "count_many", None)
    if many is not None and texts:
        return list(many(texts))
    return [sizer.count(t) for t in texts]


class TokenOptions(ChunkerOptions):
    """Options of the ``token`` strategy.

    Attributes:
        max_tokens: window size, in budget tokens (default 200: fits all-MiniLM-L6-v2).
        overlap: tokens shared by consecutive windows; ``0 <= overlap < max_tokens``.
    """

    max_tokens: int = 200
    overlap: int = 20

    @model_validator(mode="after")
    def _check(self) -> TokenOptions:
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if not 0 <= self.overlap < self.max_tokens:
            raise ValueError("overlap must be >= 0 and < max_tokens")
        return self


class TokenChunker(Chunker):
    """Token windows with overlap; see the module docstring.

    Offsets are ``str`` indices. Each window starts exactly ``overlap`` tokens before
    the end of the previous one; when the model's limit (or a multi-token character
    at the edge) made the previous window shorter than ``max_tokens``, the overlap
    shrinks in proportion (``overlap * length // max_tokens``), so that a run of
    punctuation does not turn into one window per token. ``meta`` of each
    chunk holds ``start_token`` and ``end_token`` (token indices into the whole
    document, end exclusive).

    Raises:
        ValueError: from :class:`TokenOptions` validation.
    """

    name = "token"
    version = 2
    Options = TokenOptions
    options: TokenOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split ``text`` into overlapping token windows."""
        if not text.strip():
            return []
        win = Windows(self.budget, text)
        n = len(win)
        size, overlap = self.options.max_tokens, self.options.overlap
        lines = LineIndex(text)
        chunks: list[Chunk] = []
        s = 0
        while s < n:
            e = win.fit(s, min(n, s + size))
            start, end = win.offset(s), win.offset(e)
            if not text[start:end].isspace():
                meta = {"start_token": s, "end_token": e}
                chunks.append(self.make_chunk(text, lines, start, end, meta=meta))
            if e >= n:
                break
            # a window the model's limit shortened shares proportionally fewer tokens
            s = max(s + 1, e - overlap * (e - s) // size)
        return chunks
