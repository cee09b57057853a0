"""``sentence``: BlingFire sentences packed greedily to a token budget, with overlap.

Sentence boundaries come from BlingFire (``text_to_sentences_and_offsets``, whose
Python wrapper returns ``str`` offsets). Each sentence runs to the start of the next,
so the units tile the text and nothing is lost; chunks are trimmed of surrounding
whitespace. Consecutive chunks share up to ``overlap`` trailing sentences. A sentence
over the budget is cut into token windows (no overlap) at token boundaries.
"""

from __future__ import annotations

from pydantic import model_validator

from .base import Chunk, Chunker, ChunkerOptions, LineIndex, strip_span

__all__ = ["SentenceChunker", "SentenceOptions", "sentence_spans"]


class SentenceOptions(ChunkerOptions):
    """Options of the ``sentence`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        overlap: sentences repeated at the start of the next chunk (default 1; ``>= 0``).
    """

    max_tokens: int = 200
    overlap: int = 1

    @model_validator(mode="after")
    def _check(self) -> SentenceOptions:
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if self.overlap < 0:
            raise ValueError("overlap must be >= 0")
        return self


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans of ``text`` as ``(start, end)`` character offsets, trimmed.

    The spans are found by BlingFire and widened so that, between them, they cover every
    non-whitespace character of ``text``.
    """
    import blingfire

    if not text.strip():
        return []
    _, offsets = blingfire.text_to_sentences_and_offsets(text)
    starts = sorted({s for s, _ in offsets if 0 <= s < len(text)})
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    spans = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(text)
        a, b = strip_span(text, s, e)
        if a < b:
            spans.append((a, b))
    return spans


class SentenceChunker(Chunker):
    """Sentence packing to a token budget; see the module docstring."""

    name = "sentence"
    version = 1
    Options = SentenceOptions
    options: SentenceOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Pack the sentences of ``text`` into chunks of at most ``max_tokens`` tokens."""
        units = self._units(text)
        lines = LineIndex(text)
        chunks: list[Chunk] = []
        i, n = 0, len(units)
        overlap = self.options.overlap
        while i < n:
            j = i + 1
            while j < n and self.budget.fits(text[units[i][0] : units[j][1]]):
                j += 1
            start, end = units[i][0], units[j - 1][1]
            chunks.append(self.make_chunk(text, lines, start, end))
            if j >= n:
                break
            # step back at most `overlap` sentences, but always make progress and never
            # repeat a piece that was itself a split of an over-long sentence
            i = max(i + 1, j - overlap) if overlap else j
        return chunks

    def _units(self, text: str) -> list[tuple[int, int]]:
        """Sentence spans, with sentences over budget cut into token windows."""
        units: list[tuple[int, int]] = []
        for s, e in sentence_spans(text):
            if self.budget.fits(text[s:e]):
                units.append((s, e))
                continue
            units.extend(self._split(text, s, e))
        return units

    def _split(self, text: str, s: int, e: int) -> list[tuple[int, int]]:
        """Cut the over-long ``text[s:e]`` into windows that fit, at token boundaries."""
        piece = text[s:e]
        ends = self.ctx.sizer.boundaries(piece)
        out: list[tuple[int, int]] = []
        k = 0
        size = self.options.max_tokens
        while k < len(ends):
            a = ends[k - 1] if k else 0
            hi = min(len(ends), k + size)
            while hi > k + 1 and not self.budget.fits(piece[a : ends[hi - 1]]):
                hi = max(k + 1, hi - max(1, (hi - k) // 8))
            x, y = strip_span(piece, a, ends[hi - 1])
            if x < y:
                out.append((s + x, s + y))
            k = hi
        return out
