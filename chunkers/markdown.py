"""``markdown``: placeholder until the strategy lands; packs sentences for now."""

from __future__ import annotations

from .sentence import SentenceChunker

__all__ = ["MarkdownChunker"]


class MarkdownChunker(SentenceChunker):
    """Placeholder: behaves as ``sentence``."""

    name = "markdown"
    version = 0
