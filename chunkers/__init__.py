"""Text -> chunks: the strategies, the shared :class:`Chunk` record and the sizers.

This package imports neither ``ingestd.store`` nor ``ingestd.daemon``, and never loads
an embedding model: the semantic strategy receives an embedding callable.

The names below are imported on first use (PEP 562): importing the package, or
:mod:`ingestd.chunkers.errors` (the root of ingestd's exceptions, which every command
may need), loads none of the strategies, pydantic or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestd.chunkers.base import (
        Budget,
        Chunk,
        ChunkContext,
        Chunker,
        ChunkerOptions,
        LineIndex,
        Sizer,
    )
    from ingestd.chunkers.registry import (
        CHUNKERS,
        UnknownChunkerError,
        chunker_class,
        make_chunker,
    )
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

#: Each exported name -> the module that defines it.
_HOMES = {
    **dict.fromkeys(
        ("Budget", "Chunk", "ChunkContext", "Chunker", "ChunkerOptions", "LineIndex", "Sizer"),
        "ingestd.chunkers.base",
    ),
    **dict.fromkeys(
        ("CHUNKERS", "UnknownChunkerError", "chunker_class", "make_chunker"),
        "ingestd.chunkers.registry",
    ),
    **dict.fromkeys(
        ("BinaryFileError", "NotUTF8Error", "UndecodableError", "decode"), "ingestd.chunkers.text"
    ),
}


def __getattr__(name: str) -> Any:
    """The exported ``name``, imported from its module on first use.

    Raises:
        AttributeError: ``name`` is not exported (a submodule is imported by Python).
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
