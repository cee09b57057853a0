"""``code``: placeholder until the strategy lands; packs sentences for now."""

from __future__ import annotations

from .sentence import SentenceChunker

__all__ = ["CodeChunker"]


class CodeChunker(SentenceChunker):
    """Placeholder: behaves as ``sentence``."""

    name = "code"
    version = 0
