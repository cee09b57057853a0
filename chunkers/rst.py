"""``rst``: placeholder until the strategy lands; packs sentences for now."""

from __future__ import annotations

from .sentence import SentenceChunker

__all__ = ["RstChunker"]


class RstChunker(SentenceChunker):
    """Placeholder: behaves as ``sentence``."""

    name = "rst"
    version = 0
