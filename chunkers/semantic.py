"""``semantic``: placeholder until the strategy lands; packs sentences for now."""

from __future__ import annotations

from .sentence import SentenceChunker

__all__ = ["SemanticChunker"]


class SemanticChunker(SentenceChunker):
    """Placeholder: behaves as ``sentence``."""

    name = "semantic"
    version = 0
