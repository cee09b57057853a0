"""The registry of chunking strategies: config name -> class.

A plain dict that type checkers can see. :func:`make_chunker` validates a rule's
``params`` against the strategy's options model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ingestd.chunkers.base import ChunkContext, Chunker
from ingestd.chunkers.errors import InputError
from ingestd.chunkers.strategies.asciidoc import AsciidocChunker
from ingestd.chunkers.strategies.code import CodeChunker
from ingestd.chunkers.strategies.hierarchical import HierarchicalChunker
from ingestd.chunkers.strategies.html import HtmlChunker
from ingestd.chunkers.strategies.markdown import MarkdownChunker
from ingestd.chunkers.strategies.mdx import MdxChunker
from ingestd.chunkers.strategies.notebook import NotebookChunker
from ingestd.chunkers.strategies.pdf import PdfChunker
from ingestd.chunkers.strategies.rst import RstChunker
from ingestd.chunkers.strategies.semantic import SemanticChunker
from ingestd.chunkers.strategies.sentence import SentenceChunker
from ingestd.chunkers.strategies.token import TokenChunker

__all__ = ["CHUNKERS", "UnknownChunkerError", "chunker_class", "make_chunker", "register"]

CHUNKERS: dict[str, type[Chunker]] = {}


class UnknownChunkerError(InputError, ValueError):
    """A rule names a strategy that is not registered."""


def register(cls: type[Chunker]) -> type[Chunker]:
    """Add a strategy under ``cls.name``.

    Raises:
        ValueError: another class is registered under the same name.
    """
    existing = CHUNKERS.get(cls.name)
    if existing is not None and existing is not cls:
        raise ValueError(f"chunker name {cls.name!r} already registered by {existing!r}")
    CHUNKERS[cls.name] = cls
    return cls


def chunker_class(name: str) -> type[Chunker]:
    """The class registered as ``name``.

    Raises:
        UnknownChunkerError: ``name`` is not registered (the message lists the names).
    """
    try:
        return CHUNKERS[name]
    except KeyError:
        raise UnknownChunkerError(
            f"unknown chunker {name!r}; expected one of: {', '.join(sorted(CHUNKERS))}"
        ) from None


def make_chunker(name: str, params: Mapping[str, Any], ctx: ChunkContext) -> Chunker:
    """Build strategy ``name`` with ``params`` validated against its options.

    Raises:
        UnknownChunkerError: unknown ``name``.
        pydantic.ValidationError: ``params`` do not fit the strategy's options.
        ValueError: options that cannot work together.
    """
    cls = chunker_class(name)
    return cls(cls.Options.model_validate(dict(params)), ctx)


for _cls in (
    TokenChunker,
    SentenceChunker,
    MarkdownChunker,
    MdxChunker,
    RstChunker,
    CodeChunker,
    SemanticChunker,
    HierarchicalChunker,
    NotebookChunker,
    HtmlChunker,
    PdfChunker,
    AsciidocChunker,
):
    register(_cls)
