"""``token``: fixed windows of budget tokens with overlap.

The classic recipe (LangChain ``TokenTextSplitter``, chonkie ``TokenChunker``): windows
of ``max_tokens`` tokens, each starting ``max_tokens - overlap`` tokens after the
previous one. Windows are cut at token boundaries that are also character boundaries,
so multi-byte characters are never split; a window whose text the embedding model
would truncate is shortened until it fits. Whitespace-only windows are dropped.
"""

from __future__ import annotations

from pydantic import model_validator

from .base import Chunk, Chunker, ChunkerOptions, LineIndex

__all__ = ["TokenChunker", "TokenOptions"]


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

    ``meta`` of each chunk holds ``start_token`` and ``end_token`` (token indices into
    the whole document, end exclusive).

    Raises:
        ValueError: from :class:`TokenOptions` validation.
    """

    name = "token"
    version = 1
    Options = TokenOptions
    options: TokenOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split ``text`` into overlapping token windows."""
        if not text.strip():
            return []
        ends = self.ctx.sizer.boundaries(text)
        n = len(ends)
        size, overlap = self.options.max_tokens, self.options.overlap
        lines = LineIndex(text)
        chunks: list[Chunk] = []
        s = 0
        while s < n:
            e = min(n, s + size)
            start = ends[s - 1] if s else 0
            e = self._fit(text, ends, start, s, e)
            end = ends[e - 1]
            piece = text[start:end]
            if piece.strip():
                chunks.append(
                    self.make_chunk(
                        text, lines, start, end,
                        meta={"start_token": s, "end_token": e},
                        n_tokens=e - s if self.ctx.sizer.count(piece) == e - s else None,
                    )
                )
            if e >= n:
                break
            s = max(s + 1, e - overlap)
        return chunks

    def _fit(self, text: str, ends: list[int], start: int, s: int, e: int) -> int:
        """Largest ``e' <= e`` (and ``> s``) whose window fits the budget and the model."""
        if self.budget.fits(text[start : ends[e - 1]]):
            return e
        lo, hi = s + 1, e  # lo always fits (one token) unless a single token is too big
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.budget.fits(text[start : ends[mid - 1]]):
                lo = mid
            else:
                hi = mid - 1
        return lo
