"""``asciidoc``: AsciiDoc sections by their ``=`` titles, listings kept whole like fences.

The document is cut into *sections* at the titles of levels ``1..section_levels``
(``=`` is level 1, ``==`` level 2...; default 3) and each section into *blocks*
(:mod:`~ingestd.chunkers.markup.asciidoc`): paragraphs, lists, delimited blocks
(listing, literal, example, sidebar, quote, open, table), each with the attribute
lines and block title above it; a title stays with the block that follows it, and so
does a paragraph ending in ``:`` with the listing, list or table it introduces.

What is packed and embedded is the document's clean rendering: admonitions become
their words (``NOTE:`` and ``[NOTE]`` give ``Note:``), attribute references their
values, links and cross references their text; attribute entries, block attribute
lines, comments, includes and the delimiters of compound blocks are left out. Listing,
literal and passthrough blocks are kept whole when they fit, otherwise cut only at
line ends, each piece closed with the block's delimiter line in the embedded text. A
chunk's ``text`` and offsets stay verbatim slices of the file.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens (tiktoken
``cl100k_base`` by default); offsets are ``str`` indices into the decoded text.
"""

from __future__ import annotations

from ingestd.chunkers.base import Chunk, Chunker
from ingestd.chunkers.markup.asciidoc import asciidoc_edits, read_asciidoc
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.packing.packer import pack_titled
from ingestd.chunkers.sections import (
    Block,
    Section,
    SectionOptions,
    first_line,
    introducer,
)

__all__ = ["AsciidocChunker", "AsciidocOptions"]

_INTRODUCED = frozenset({"list", "fence", "table"})


class AsciidocOptions(SectionOptions):
    """Options of the ``asciidoc`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        section_levels: titles of level ``1..section_levels`` open a section (``=`` is
            level 1; default 3).
        min_tokens: small sections are packed together up to this size (default
            three quarters of ``max_tokens``).
        heading_prefix: prefix the title path (and the first line of a continued
            listing) to the embedded text (default on).
    """


def _glue(text: str, sections: list[Section]) -> list[Section]:
    """Glue titles to the block after them, and a paragraph ending in ``:`` likewise."""
    for sec in sections:
        glued: list[Block] = []
        for blk in sec.blocks:
            prev = glued[-1] if glued else None
            if prev is not None and (
                prev.kind == "heading"
                or (prev.kind == "para" and blk.kind in _INTRODUCED and text[prev.end - 1] == ":")
            ):
                body = blk.body if blk.kind == "heading" else blk.start
                glued[-1] = Block(prev.start, blk.end, blk.next, blk.kind, body)
            else:
                glued.append(blk)
        sec.blocks = glued
    return sections


def _carry(text: str, blk: Block) -> str:
    """Context for a chunk that continues a listing or table: its first line."""
    if blk.kind not in ("fence", "table"):
        return ""
    return first_line(text, blk)


_intro = introducer(_INTRODUCED)


class AsciidocChunker(Chunker):
    """Title-aware AsciiDoc chunking; see the module docstring.

    Raises:
        ValueError: from :class:`AsciidocOptions` validation.
    """

    name = "asciidoc"
    version = 4  # 2: attribute lines or a block title with no block after them are kept;
    # 4: strong anchors in long code blocks, as markdown 16 (3 was not kept)
    Options = AsciidocOptions
    options: AsciidocOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split AsciiDoc ``text`` into title-aware chunks, in document order."""
        raw = read_asciidoc(text, self.options.section_levels)
        rendering = Rendering(text, asciidoc_edits(text, raw))
        sections = _glue(rendering.text, rendering.sections(raw))
        return pack_titled(
            text, rendering, sections, self.budget, self.options, carry=_carry, intro=_intro
        )
