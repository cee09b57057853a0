"""``rst``: reStructuredText sections and blocks, packed to a token budget.

Section titles are recognised by their adornment: a line of one repeated punctuation
character (at least 3) under the title, optionally also over it. As in docutils, the
level of a style (character, with or without overline) is the order in which the
style first appears in the document. Titles of levels ``1..section_levels`` open
sections; deeper titles stay inside their section, glued to the block that follows.
Hyperlink targets (``.. _label:``) just before a title belong to that title's section.

A block starts at a non-blank line and runs over following lines that are non-blank,
or indented deeper than its first line (across blank lines): so a directive
(``.. code-block::``, ``.. note::``...) with its indented body, and a paragraph ending
in ``::`` with its literal block, are one block. Packing is the ``markdown`` strategy's
(:class:`~ingestd.chunkers.packing.packer.Packer`): blocks whole when they fit, lines
otherwise; a chunk that continues a directive carries the directive line in its prefix.

As for ``markdown``, the blocks of the document's clean rendering are packed and
embedded (:func:`~ingestd.chunkers.markup.noise.rst_edits`): roles and hyperlink references
keep their text (``:ref:`text <target>``` gives ``text``), hyperlink targets, comments,
section adornments, table borders and image directives are left out, literal blocks
and code directives are kept as they are; ``text`` and offsets stay verbatim.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens (tiktoken ``cl100k_base``
by default); offsets are ``str`` indices into the decoded text.
"""

from __future__ import annotations

import re

from ingestd.chunkers.base import Chunk, Chunker
from ingestd.chunkers.markup.noise import clean_rst, rst_edits
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.packing.packer import pack_titled
from ingestd.chunkers.sections import (
    Block,
    Section,
    SectionOptions,
    first_line,
    introducer,
)

__all__ = ["RstChunker", "RstOptions", "parse_rst"]

_ADORN = re.compile(r"([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
_TARGET = re.compile(r"\.\. _[^:]*:")
_INTRODUCED = frozenset({"list", "table", "directive", "literal"})  # after a line ending in ':'


class RstOptions(SectionOptions):
    """Options of the ``rst`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        section_levels: title levels (by first appearance) that open a section (1-6,
            default 3).
        min_tokens: a chunk under this many tokens takes in the next section when the
            whole section fits (0 turns merging off; default three quarters of ``max_tokens``).
        heading_prefix: prefix the title path (and the directive line of a continued
            directive) to the embedded text (default on).
    """


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _title_at(lines: list[str], i: int) -> tuple[str, tuple[str, bool], int] | None:
    """``(title, style, n_lines)`` if a section title starts at line ``i``."""
    line = lines[i]
    n = len(lines)
    over = _ADORN.match(line)
    if over and i + 2 < n and lines[i + 1].strip():
        under = _ADORN.match(lines[i + 2])
        if under and under.group(1) == over.group(1) and not _ADORN.match(lines[i + 1]):
            return lines[i + 1].strip(), (over.group(1), True), 3
    if over or _indent(line) or i + 1 >= n:
        return None
    under = _ADORN.match(lines[i + 1])
    if under and len(lines[i + 1].rstrip()) >= min(3, len(line.rstrip())):
        return line.strip(), (under.group(1), False), 2
    return None


def _block_end(lines: list[str], i: int) -> int:
    """Index one past the last line of the block that starts at line ``i``."""
    base = _indent(lines[i])
    n = len(lines)
    j = i + 1
    while j < n:
        if lines[j].strip():
            j += 1
            continue
        k = j
        while k < n and not lines[k].strip():
            k += 1
        if k < n and _indent(lines[k]) > base:
            j = k
            continue
        break
    return j


def _kind(line: str) -> str:
    body = line.lstrip()
    if body.startswith(".. "):
        if "::" in body:
            return "directive"
        return "target" if _TARGET.match(body) else "comment"
    if body[:1] in "-*+•" and body[1:2] in (" ", ""):
        return "list"
    if body[:1] in "+=" and _ADORN.match(body) is None:
        return "table"
    return "para"


def _intro_ends_with_colons(lines: list[str], i: int, j: int) -> bool:
    """Whether the first paragraph of lines ``i..j-1`` ends with ``::`` (a literal block)."""
    k = i
    while k + 1 < j and lines[k + 1].strip():
        k += 1
    return lines[k].rstrip().endswith("::")


def parse_rst(text: str, section_levels: int = 3) -> list[Section]:
    """Cut ``text`` into sections of blocks (see the module docstring)."""
    return _glue(text, _blocks(text, section_levels))


def _blocks(text: str, section_levels: int) -> list[Section]:
    """Sections of trimmed, linked blocks, not yet glued."""
    lines = text.split("\n")
    offsets = [0] * len(lines)
    pos = 0
    for k, line in enumerate(lines):
        offsets[k] = pos
        pos += len(line) + 1
    sections = [Section((), 0, [])]
    styles: list[tuple[str, bool]] = []
    stack: list[tuple[int, str]] = []
    i, n = 0, len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        a = offsets[i]
        found = _title_at(lines, i)
        if found is not None:
            title, style, used = found
            if style not in styles:
                styles.append(style)
            level = styles.index(style) + 1
            end = offsets[i + used - 1] + len(lines[i + used - 1])
            block = Block(a, end, end, "heading")
            i += used
            if level > section_levels:
                sections[-1].blocks.append(block)
                continue
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, clean_rst(title)))
            moved: list[Block] = []
            while sections[-1].blocks and sections[-1].blocks[-1].kind == "target":
                moved.insert(0, sections[-1].blocks.pop())
            sections.append(Section(tuple(t for _, t in stack), level, [*moved, block]))
            continue
        j = _block_end(lines, i)
        end = offsets[j - 1] + len(lines[j - 1])
        kind = _kind(lines[i])
        if kind == "para" and _intro_ends_with_colons(lines, i, j):
            kind = "literal"
        sections[-1].blocks.append(Block(a, end, end, kind))
        i = j
    flat = [b for s in sections for b in s.blocks]
    for k, blk in enumerate(flat):
        while blk.end > blk.start and text[blk.end - 1].isspace():
            blk.end -= 1
        blk.next = flat[k + 1].start if k + 1 < len(flat) else len(text)
    return sections


def _glue(text: str, sections: list[Section]) -> list[Section]:
    """Glue targets and headings to what follows them, and intro paragraphs too.

    A paragraph ending in ``:`` (not ``::``, which holds its literal block already) is
    glued to the list, table or directive after it.
    """
    for sec in sections:
        glued: list[Block] = []
        for blk in sec.blocks:
            prev = glued[-1] if glued else None
            if prev is not None and prev.kind in ("heading", "target"):
                kind = "heading" if blk.kind == "heading" else blk.kind
                body = blk.body if blk.kind == "heading" else blk.start
                glued[-1] = Block(prev.start, blk.end, blk.next, kind, body)
            elif prev is not None and blk.kind in _INTRODUCED and _ends_intro(text, prev):
                glued[-1] = Block(prev.start, blk.end, blk.next, blk.kind, blk.start)
            else:
                glued.append(blk)
        sec.blocks = glued
    return sections


def _ends_intro(text: str, blk: Block) -> bool:
    """Whether ``blk`` is a paragraph ending in one ``:``."""
    return blk.kind == "para" and text[blk.end - 1] == ":" and text[blk.end - 2 : blk.end] != "::"


_intro = introducer(_INTRODUCED)


def _carry(text: str, blk: Block) -> str:
    """The directive line (``.. code-block:: python``) for a chunk that continues it."""
    return first_line(text, blk) if blk.kind == "directive" else ""


class RstChunker(Chunker):
    """Title-aware reStructuredText chunking; see the module docstring.

    Raises:
        ValueError: from :class:`RstOptions` validation.
    """

    name = "rst"
    version = 9
    Options = RstOptions
    options: RstOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split reStructuredText ``text`` into title-aware chunks, in document order."""
        raw = _blocks(text, self.options.section_levels)
        rendering = Rendering(text, rst_edits(text))
        sections = _glue(rendering.text, rendering.sections(raw))
        return pack_titled(
            text, rendering, sections, self.budget, self.options, carry=_carry, intro=_intro
        )
