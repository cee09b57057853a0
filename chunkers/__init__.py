"""Text -> chunks: the strategies, the shared :class:`Chunk` record and the sizers.

This package imports neither ``ingestd.store`` nor ``ingestd.daemon``, and never loads
an embedding model: the semantic strategy receives an embedding callable.
"""

from ingestd.chunkers.base import (
    Budget,
    Chunk,
    ChunkContext,
    Chunker,
    ChunkerOptions,
    LineIndex,
    Sizer,
)
from ingestd.chunkers.registry import CHUNKERS, UnknownChunkerError, chunker_class, make_chunker
from ingestd.chunkers.text import BinaryFileError, NotUTF8Error, UndecodableError, decode

__all__ = [
    "CHUNKERS",
    "BinaryFileError",
    "Budget",
    "Chunk",
    "ChunkContext",
    "Chunker",
    "ChunkerOptions",
    "LineIndex",
    "NotUTF8Error",
    "Sizer",
    "UndecodableError",
    "UnknownChunkerError",
    "chunker_class",
    "decode",
    "make_chunker",
]
