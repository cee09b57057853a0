r"""``markdown``: sections at headings, blocks kept whole, packed to a token budget.

The document is cut into *sections* at the headings whose level opens a section (ATX
``#``..``######`` and setext ``===``/``---``; levels 1-3 by default), and each section
into *blocks*: paragraphs, fenced code (```` ``` ```` and ``~~~``, any fence length),
indented code, tables, lists (with their blank-line-separated items and indented
continuations), HTML. A heading stays with the block that follows it, and so does a
paragraph that ends in ``:`` with the list, code block or table it introduces. Lines
inside a fence are never headings.

What is packed and embedded is the document's *clean rendering*
(:func:`render_markdown`, :mod:`~ingestd.chunkers.render`): link targets, image URLs,
HTML tags and comments, Hugo shortcodes, attribute lists (``{#id}``, ``{ #id .class }``),
reference-link definitions, table divider rows and setext underlines are left out, code
is kept as it is. The budget is spent on the words that are embedded; a chunk's
``text`` and offsets stay verbatim (what the rendering leaves out between two chunks
belongs to the earlier one), its ``clean`` text is the rendering, re-fenced with the
closing fence line when the chunk ends inside a code block.

Blocks are packed into chunks of at most ``max_tokens`` budget tokens, from the start of
each section, so an edit never re-packs another section. A section that does not fit
is sub-chunked at block boundaries; a block that does not fit is cut at blank lines,
then at line boundaries (code at lines straight away), and a line that does not fit
at token boundaries. Inside a section, blocks whose content hash falls under a
threshold end a chunk that is at least a quarter full (content-defined chunking, see
:mod:`~ingestd.chunkers.packing`): after an edit the packing falls back into step at
the next such block, so most chunks of a large section survive the edit; a block with
a heading too deep to open a section or an intro paragraph glued before it is always
such a block. A chunk under ``min_tokens`` takes in the next section when the whole
section fits (tiny sections are merged).

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

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate

from .base import Chunk, Chunker, LineIndex
from .frontmatter import parse_front_matter
from .markup import Edit, clean_markdown, markdown_inline, markdown_line_edits
from .packing import Packer
from .render import Rendering
from .sections import Block, Section, SectionOptions, first_line, heading_prefix, intro_sentence

__all__ = [
    "MarkdownChunker",
    "MarkdownOptions",
    "parse_front_matter",  # from frontmatter.py: how this strategy finds the body
    "parse_markdown",
    "render_markdown",
]

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_LIST = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_INTRODUCED = frozenset({"list", "fence", "code", "table"})  # glued to a paragraph ending in ':'


class MarkdownOptions(SectionOptions):
    """Options of the ``markdown`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200: with the heading
            prefix it fits all-MiniLM-L6-v2's 254 word pieces).
        section_levels: headings of level ``1..section_levels`` open a section (1-6,
            default 3); deeper headings stay inside their section.
        min_tokens: a chunk under this many tokens takes in the next section when the
            whole section fits (0 turns merging off; default ``max_tokens // 4``).
        heading_prefix: prefix the heading path (and table header or fence line of a
            continued block) to the embedded text (default on).
        title_in_prefix: use the front-matter ``title`` as the root of the prefix
            (default on).
    """

    title_in_prefix: bool = True


@dataclass(slots=True)
class _Open:
    """The block being read."""

    start: int
    kind: str
    last: int  # end of its last non-blank line


@dataclass(slots=True)
class _State:
    levels: int
    sections: list[Section] = field(default_factory=lambda: [Section((), 0, [])])
    stack: list[tuple[int, str]] = field(default_factory=list)

    def add(self, block: Block) -> None:
        self.sections[-1].blocks.append(block)

    def heading(self, level: int, title: str, block: Block) -> None:
        if level > self.levels:
            self.add(block)
            return
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))
        self.sections.append(Section(tuple(t for _, t in self.stack), level, [block]))


def _title(raw: str) -> str:
    """Heading text for the path, as the model reads it (see :func:`clean_markdown`)."""
    return clean_markdown(raw)


def _kind(line: str, indent: int) -> str:
    first = line[indent]
    if first == "|":
        return "table"
    if first == "<":
        return "html"
    if indent >= 4:
        return "code"
    if first in "-*+0123456789" and _LIST.match(line):
        return "list"
    return "para"


def _closing_fence(text: str, mark: str, pos: int) -> int:
    """Start of the first line at or after ``pos`` (a line start) that closes a fence.

    Such a line holds, between spaces and tabs, a run of ``mark[0]`` at least as long
    as ``mark``. Returns -1 when there is none. Found with ``str.find`` (fenced code is
    a large part of documentation; a line-anchored regular expression tries every
    position).
    """
    char, n = mark[0], len(text)
    while (k := text.find(mark, pos)) != -1:
        start = text.rfind("\n", 0, k) + 1
        end = k + len(mark)
        while end < n and text[end] == char:
            end += 1
        eol = text.find("\n", end)
        if not text[start:k].strip(" \t") and not text[end : n if eol == -1 else eol].strip(" \t"):
            return start
        pos = end
    return -1


class _Parser:
    """Line scanner behind :func:`parse_markdown`; fenced code is skipped by regex."""

    def __init__(self, text: str, start: int, levels: int, index: LineIndex | None) -> None:
        self.text = text
        if index is None or start >= len(text):
            self.lines = text[start:].split("\n")
            self.offsets = list(
                accumulate(map((1).__add__, map(len, self.lines[:-1])), initial=start)
            )
        else:  # ``start`` is a line start
            k = bisect.bisect_left(index.starts, start)
            self.lines, self.offsets = index.lines[k:], index.starts[k:]
        self.st = _State(levels)
        self.cur: _Open | None = None

    def close(self) -> None:
        if self.cur is not None:
            self.st.add(Block(self.cur.start, self.cur.last, self.cur.last, self.cur.kind))
            self.cur = None

    def run(self) -> list[Section]:
        lines, offsets = self.lines, self.offsets
        blank = False
        i, n = 0, len(lines)
        while i < n:
            line = lines[i]
            body = line.lstrip()
            if not body:
                blank = True
                i += 1
                continue
            first = body[0]
            if not blank and self.cur is not None and first not in "#=-`~":
                self.cur.last = offsets[i] + len(line)  # the common case: a block goes on
                i += 1
                continue
            a = offsets[i]
            b = a + len(line)
            indent = len(line) - len(body)
            if first == "#" and indent < 4 and (m := _ATX.match(line)):
                self.close()
                level = len(m.group(1))
                self.st.heading(level, _title(m.group(2) or ""), Block(a, b, b, "heading"))
            elif first in "=-" and not blank and self._setext(line, b):
                pass
            else:
                fence = _FENCE.match(line) if first in "`~" else None
                if fence is not None and fence.group(1)[0] == "`" and "`" in fence.group(2):
                    fence = None  # not a fence: an info string may not hold a backtick
                cur = self.cur
                if fence is not None and (indent < 4 or cur is None or cur.kind != "code"):
                    self.close()  # a fence interrupts a paragraph or a list: a block of its own
                    self.cur = _Open(a, "fence", b)
                    i = self._fence(i, fence)
                    self.close()
                else:
                    self._extend(line, a, b, indent, blank)
                    if fence is not None:  # a fence line inside indented code
                        i = self._fence(i, fence)
                    elif (
                        first == "<"
                        and body.startswith("<!--")
                        and self.cur is not None
                        and self.cur.start == a
                    ):
                        i = self._comment(i)
            blank = False
            i += 1
        self.close()
        return self.st.sections

    def _setext(self, line: str, b: int) -> bool:
        cur = self.cur
        if cur is None or cur.kind != "para" or not _SETEXT.match(line):
            return False
        level = 1 if line.lstrip()[0] == "=" else 2
        title = _title(self.text[cur.start : cur.last])
        self.cur = None
        self.st.heading(level, title, Block(cur.start, b, b, "heading"))
        return True

    def _extend(self, line: str, a: int, b: int, indent: int, blank: bool) -> None:
        cur = self.cur
        if cur is not None and blank:
            keep = (cur.kind == "list" and (indent >= 2 or _LIST.match(line) is not None)) or (
                cur.kind == "code" and indent >= 4
            )
            if not keep:
                self.close()
                cur = None
        if cur is None:
            self.cur = _Open(a, _kind(line, indent), b)
        else:
            cur.last = b

    def _comment(self, i: int) -> int:
        """Index of the last line of the HTML comment opened at line ``i``.

        As in CommonMark, the comment block ends at the line that holds ``-->``, so a
        table or list right under ``<!-- prettier-ignore-start -->`` is a block of its
        own. A comment that does not close before a blank line is left as it was read.
        """
        assert self.cur is not None
        a = self.offsets[i]
        close = self.text.find("-->", a + 4)
        if close == -1:
            return i
        j = bisect.bisect_right(self.offsets, close) - 1
        if any(not self.lines[k].strip() for k in range(i + 1, j)):
            return i
        self.cur.last = self.offsets[j] + len(self.lines[j])
        self.close()
        return j

    def _fence(self, i: int, m: re.Match[str]) -> int:
        """Index of the line that closes the fence opened at line ``i`` (or the last line).

        The block being read ends there.
        """
        mark = m.group(1)
        assert self.cur is not None
        if i + 1 >= len(self.lines):
            return i
        close = _closing_fence(self.text, mark, self.offsets[i + 1])
        j = len(self.lines) - 1 if close < 0 else bisect.bisect_right(self.offsets, close) - 1
        while j > i and not self.lines[j].strip():
            j -= 1
        self.cur.last = self.offsets[j] + len(self.lines[j])
        return j


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
    return _glue(text, _trim(text, _Parser(text, start, section_levels, lines).run()))


def render_markdown(
    text: str,
    sections: list[Section] | None = None,
    body: int | None = None,
    lines: LineIndex | None = None,
) -> Rendering:
    """The clean rendering of markdown ``text`` (see :mod:`~ingestd.chunkers.markup`).

    Code (fenced and indented) is kept as it is; prose between code blocks is cleaned
    as one run, so an HTML comment may span paragraphs.

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
        sections = _trim(text, _Parser(text, body, 6, lines).run())
    edits: list[Edit] = []
    run = -1
    for sec in sections:
        for b in sec.blocks:
            if b.kind == "fence" or b.kind == "code":
                if run >= 0:
                    markdown_inline(text, run, b.start, edits)
                    run = -1
                continue
            if run < 0:
                run = b.start
            markdown_line_edits(text, b.start, b.end, b.kind, edits)
    if run >= 0:
        markdown_inline(text, run, len(text), edits)
    return Rendering(text, edits, body)


def _trim(text: str, sections: list[Section]) -> list[Section]:
    """Trim block ends (trailing whitespace) and link ``next`` offsets."""
    flat = [b for s in sections for b in s.blocks]
    n = len(text)
    for k, blk in enumerate(flat):
        end = blk.end
        while end > blk.start and text[end - 1].isspace():
            end -= 1
        blk.end = end
        blk.next = flat[k + 1].start if k + 1 < len(flat) else n
    return sections


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


def _intro(text: str, blk: Block) -> str:
    return intro_sentence(text, blk) if blk.kind in _INTRODUCED else ""


class MarkdownChunker(Chunker):
    """Heading-aware markdown chunking; see the module docstring.

    Raises:
        ValueError: from :class:`MarkdownOptions` validation.
    """

    name = "markdown"
    version = 11
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
        raw = _trim(text, _Parser(text, body, self.options.section_levels, lines).run())
        rendering = render_markdown(text, raw, body)
        clean = rendering.text
        sections = _glue(clean, rendering.sections(raw))
        title = meta.get("title") if self.options.title_in_prefix else None
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
