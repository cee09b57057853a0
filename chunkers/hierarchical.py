"""``hierarchical``: placeholder until the strategy lands; packs sentences for now."""

from __future__ import annotations

from .sentence import SentenceChunker

__all__ = ["HierarchicalChunker"]


class HierarchicalChunker(SentenceChunker):
    """Placeholder: behaves as ``sentence``."""

    name = "hierarchical"
    version = 0
