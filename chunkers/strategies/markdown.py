r"""``markdown``: sections at headings, blocks kept whole, packed to a token budget.

The document is cut into *sections* at the headings whose level opens a section (ATX
``#``..``######`` and setext ``===``/``---``; levels 1-3 by default), and each section
into *blocks*: paragraphs, fenced code (```` ``` ```` and ``~~~``, any fence length),
indented code, tables, lists (with their blank-line-separated items and indented
continuations), HTML (:mod:`~ingestd.chunkers.markup.mdblocks`; the content of MkDocs
admonitions and content tabs is read as markdown, not as indented code). A heading
stays with the block that follows it, and so does a paragraph that ends in ``:`` with
the list, code block or table it introduces. Lines inside a fence are never headings.

What is packed and embedded is the document's *clean rendering*
(:func:`render_markdown`, :mod:`~ingestd.chunkers.markup.render`): link targets, image URLs,
HTML tags and comments, Hugo shortcodes, attribute lists (``{#id}``, ``{ #id .class }``),
reference-link definitions, table divider rows, setext underlines, snippet includes
(``--8<--``, mdBook's ``{{#include}}``) and the markers of MkDocs containers (their
titles stay) are left out, code is kept as it is (but for include lines). The budget
is spent on the words that are embedded; a chunk's ``text`` and offsets stay verbatim
(what the rendering leaves out between two chunks belongs to the earlier one), its
``clean`` text is the rendering, re-fenced with the closing fence line when the chunk
ends inside a code block.

Blocks are packed into chunks of at most ``max_tokens`` budget tokens, from the start of
each section, so an edit never re-packs another section. A section that does not fit
is sub-chunked at block boundaries; a block that does not fit is cut at blank lines,
then at line boundaries (code at lines straight away), and a line that does not fit
at token boundaries. Inside a section, blocks whose content hash falls under a
threshold end a chunk that holds ``min_tokens`` (content-defined chunking, see
:mod:`~ingestd.chunkers.packing.packer`): after an edit the packing falls back into step at
the next such block, so most chunks of a large section survive the edit; a block with
a heading too deep to open a section or an intro paragraph glued before it is always
such a block. Inside a long code block, lines whose content hash falls under a second
threshold also end a chunk that holds a third of the budget (strong anchors), so an
edit before a long listing shifts at most a chunk or two of it. A chunk under
``min_tokens`` takes in the next section when the whole section fits (small sections
are merged).

Chunks are well shaped: a heading never ends a chunk (a section that holds only its
heading opens the next one's first chunk; a heading glued to a block too big for one
chunk stays with the block's first part), nor does an intro paragraph or a code
block's opening fence line; a chunk without a word, or with only headings, joins a
neighbour when the two fit together. A code block split across chunks is re-fenced:
each piece's embedded text has the opening fence line (in the prefix) and a closing
one; a split table repeats its header row.

Each chunk is a verbatim slice that starts at a line (or token) boundary and ends
without trailing whitespace. ``heading_path`` holds the section titles, outermost first.
With ``heading_prefix`` on, ``prefix`` is ``"Title > Section > Sub\n\n"`` (the document
title from YAML front matter as the root, unless the first heading repeats it), plus
the header row of a table or the opening fence of a code block that the chunk
continues, or the last sentence of the paragraph ending in ``:`` that introduces the
list, code block or table the chunk starts with (when the two did not fit together).
YAML front matter (``---`` ... ``---`` at the top, or TOML ``+++``) is not body text: no
chunk covers it, and its ``title``, ``linkTitle`` and ``description`` go to ``meta``.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens (tiktoken ``cl100k_base``
by default); offsets are ``str`` indices into the decoded text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ingestd.chunkers.base import Chunk, Chunker, LineIndex
from ingestd.chunkers.markup.extensions import code_edits
from ingestd.chunkers.markup.frontmatter import parse_front_matter
from ingestd.chunkers.markup.mdblocks import read_blocks
from ingestd.chunkers.markup.noise import Edit, markdown_inline, markdown_line_edits
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.packing.packer import Packer
from ingestd.chunkers.sections import (
    Block,
    Section,
    SectionOptions,
    first_line,
    heading_prefix,
    introducer,
)

__all__ = [
    "MarkdownChunker",
    "MarkdownOptions",
    "markdown_edits",
    "parse_front_matter",  # from frontmatter.py: how this strategy finds the body
    "parse_markdown",
    "render_markdown",
]

_INTRODUCED = frozenset({"list", "fence", "code", "table"})  # glued to a paragraph ending in ':'


class MarkdownOptions(SectionOptions):
    """Options of the ``markdown`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200: with the heading
            prefix it fits all-MiniLM-L6-v2's 254 word pieces).
        section_levels: headings of level ``1..section_levels`` open a section (1-6,
            default 3); deeper headings stay inside their section.
        min_tokens: a chunk under this many tokens takes in the next section when the
            whole section fits (0 turns merging off; default three quarters of ``max_tokens``).
        heading_prefix: prefix the heading path (and table header or fence line of a
            continued block) to the embedded text (default on).
        title_in_prefix: use the front-matter ``title`` as the root of the prefix
            (default on).
    """

    title_in_prefix: bool = True


def parse_markdown(
    text: str, start: int = 0, section_levels: int = 3, lines: LineIndex | None = None
) -> list[Section]:
    """Cut ``text[start:]`` into sections of blocks (see the module docstring).

    The first section is the text before the first section heading (possibly empty,
    with no blocks); every other section starts with its heading block. Blocks tile
    the non-blank text: ``Block.next`` is the start of the following block. ``start``
    must be a line start; ``lines``, the :class:`LineIndex` of ``text`` if the caller
    has one, saves splitting the text again.
    """
    return _glue(text, read_blocks(text, start, section_levels, lines))


def render_markdown(
    text: str,
    sections: list[Section] | None = None,
    body: int | None = None,
    lines: LineIndex | None = None,
) -> Rendering:
    """The clean rendering of markdown ``text`` (see :mod:`~ingestd.chunkers.markup.noise`).

    Code (fenced and indented) is kept as it is but for include directives (a block
    left without content goes whole); prose between code blocks is cleaned as one run,
    so an HTML comment may span paragraphs.

    Args:
        text: the decoded document.
        sections: its sections as parsed, before headings are glued to their blocks
            (parsed here when ``None``).
        body: where the body starts (after the front matter; found when ``None``).
        lines: the :class:`LineIndex` of ``text``, if known.
    """
    if body is None:
        body = parse_front_matter(text)[0]
    if sections is None:
        sections = read_blocks(text, body, 6, lines)
    return Rendering(text, markdown_edits(text, sections), body)


def markdown_edits(text: str, sections: list[Section]) -> list[Edit]:
    """The edits of the clean rendering of ``text`` parsed into ``sections``.

    See :func:`render_markdown`; the sections are as parsed, headings not yet glued.
    """
    edits: list[Edit] = []
    run = -1
    for sec in sections:
        for b in sec.blocks:
            if b.kind == "fence" or b.kind == "code":
                if run >= 0:
                    markdown_inline(text, run, b.start, edits)
                    run = -1
                code_edits(text, b.start, b.end, b.kind == "fence", edits)
                continue
            if run < 0:
                run = b.start
            markdown_line_edits(text, b.start, b.end, b.kind, edits)
    if run >= 0:
        markdown_inline(text, run, len(text), edits)
    return edits


def _glue(text: str, sections: list[Section]) -> list[Section]:
    """Glue each heading to its next block.

    A paragraph ending in ``:`` is glued to the list, code block or table after it, as
    a heading is (its ``body`` is where that block starts).
    """
    for sec in sections:
        glued: list[Block] = []
        for blk in sec.blocks:
            prev = glued[-1] if glued else None
            if prev is not None and (
                prev.kind == "heading"
                or (prev.kind == "para" and blk.kind in _INTRODUCED and text[prev.end - 1] == ":")
            ):
                glued[-1] = Block(prev.start, blk.end, blk.next, blk.kind, blk.start)
            else:
                glued.append(blk)
        sec.blocks = glued
    return sections


def _carry(text: str, blk: Block) -> str:
    """Context for a chunk that continues ``blk``: table header row or opening fence line."""
    if blk.kind not in ("table", "fence"):
        return ""
    return first_line(text, blk)


_intro = introducer(_INTRODUCED)


class MarkdownChunker(Chunker):
    """Heading-aware markdown chunking; see the module docstring.

    Raises:
        ValueError: from :class:`MarkdownOptions` validation.
    """

    name = "markdown"
    version = 16  # 16: strong anchors in long code blocks (15 was a packing tried and dropped)
    Options = MarkdownOptions
    options: MarkdownOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split markdown ``text`` into heading-aware chunks, in document order."""
        body, meta = parse_front_matter(text)
        lines = LineIndex(text)
        packer = self.packer(text, body, meta, lines)
        return packer.chunks(lines, packer.pack_all(), meta)

    def packer(self, text: str, body: int, meta: dict[str, str], lines: LineIndex) -> Packer:
        """A :class:`Packer` over the clean rendering of ``text[body:]``.

        Args:
            text: the decoded document.
            body: where the body starts (after the front matter).
            meta: the front matter's keys (its ``title`` roots the prefix).
            lines: the :class:`LineIndex` of ``text``.
        """
        raw = read_blocks(text, body, self.options.section_levels, lines)
        rendering = Rendering(text, markdown_edits(text, raw), body)
        return self.packer_of(body, meta, lines, raw, rendering)

    def packer_of(
        self,
        body: int,
        meta: Mapping[str, str],
        lines: LineIndex,
        raw: list[Section],
        rendering: Rendering,
        *,
        title_in_path: bool = False,
    ) -> Packer:
        """A :class:`Packer` over a document's ``rendering``, parsed into ``raw``.

        Args:
            body: where the body starts.
            meta: the page's ``title`` (and other keys).
            lines: the :class:`LineIndex` of the document.
            raw: the sections as parsed (offsets into the document), headings not yet
                glued.
            rendering: the document rendered (:func:`markdown_edits` and any others).
            title_in_path: the title (with ``title_in_prefix``) roots every section's
                heading path, not only the prefix (unless the first heading repeats it).
        """
        clean = rendering.text
        sections = _glue(clean, rendering.sections(raw))
        title = meta.get("title") if self.options.title_in_prefix else None
        if title and title_in_path:
            for sec in sections:
                if not (sec.path and sec.path[0].casefold() == title.casefold()):
                    sec.path = (title, *sec.path)
            title = None
        return Packer(
            clean,
            sections,
            self.budget,
            min_tokens=self.options.merge_below,
            prefix=self._prefix_fn(title),
            carry=_carry if self.options.heading_prefix else (lambda _t, _b: ""),
            intro=_intro if self.options.heading_prefix else None,
            lines=lines,
            rendering=rendering,
            body=body,
        )

    def _prefix_fn(self, title: str | None) -> Callable[[tuple[str, ...]], str]:
        if not self.options.heading_prefix:
            return lambda path: ""
        return lambda path: heading_prefix(path, title)
