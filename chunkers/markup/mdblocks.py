r"""Markdown block structure: the sections and blocks a markdown document is made of.

:func:`read_blocks` scans the lines of a document once and cuts it into sections at
the headings whose level opens a section (ATX ``#``..``######`` and setext
``===``/``---``), and each section into blocks: paragraphs, fenced code (```` ``` ````
and ``~~~``, any fence length), indented code, tables, lists (with their
blank-line-separated items and indented continuations), HTML, and headings too deep to
open a section. Lines inside a fence are never headings; an HTML comment block ends at
the line holding ``-->``.

The content of a MkDocs container (an admonition ``!!! note``, a collapsible ``???``
block, a content tab ``=== "Label"``; see :mod:`~ingestd.chunkers.markup.extensions`) is the
lines indented past its marker: it is read as markdown, with indents counted from the
container's, so it is prose, lists and fenced code, not indented code. The marker line
is a block of kind ``"heading"`` that opens no section: like a heading too deep to
open one, it is glued to the block after it (``markdown``'s ``_glue``).

Offsets are ``str`` indices into the decoded text; a block's ``end`` is after its last
non-whitespace character, its ``next`` the start of the following block.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from itertools import accumulate

from ingestd.chunkers.base import LineIndex
from ingestd.chunkers.markup.extensions import CONTAINER_INDENT, container_marker
from ingestd.chunkers.markup.noise import ATX_HEADING, clean_markdown
from ingestd.chunkers.sections import Block, Section

__all__ = ["closing_fence", "read_blocks"]

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_LIST = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


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


def _kind(line: str, indent: int, rel: int, indented_code: bool = True) -> str:
    """The kind of a block that starts with ``line`` (``rel``: indent in its container)."""
    first = line[indent]
    if first == "|":
        return "table"
    if first == "<":
        return "html"
    if rel >= 4 and indented_code:
        return "code"
    if first in "-*+0123456789" and _LIST.match(line):
        return "list"
    return "para"


def closing_fence(text: str, mark: str, pos: int) -> int:
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
    """Line scanner behind :func:`read_blocks`; fenced code is skipped by regex."""

    def __init__(
        self, text: str, start: int, levels: int, index: LineIndex | None, indented_code: bool
    ) -> None:
        self.text = text
        self.indented_code = indented_code
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
        self.bases: list[int] = []  # content indent of each open container, innermost last

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
            indent = len(line) - len(body)
            bases = self.bases
            if bases and indent < bases[-1]:  # the content of a container ends
                self.close()
                while bases and indent < bases[-1]:
                    bases.pop()
            if not blank and self.cur is not None and first not in "#=-`~!?":
                self.cur.last = offsets[i] + len(line)  # the common case: a block goes on
                i += 1
                continue
            a = offsets[i]
            b = a + len(line)
            rel = indent - bases[-1] if bases else indent  # indent inside the container
            if rel < 4 and first in "!?=" and container_marker(line):
                self.close()  # the marker: a title glued to the container's first block
                self.st.add(Block(a, b, b, "heading"))
                bases.append(indent + CONTAINER_INDENT)
            elif first == "#" and indent < 4 and (m := ATX_HEADING.match(line)):
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
                if fence is not None and (rel < 4 or cur is None or cur.kind != "code"):
                    self.close()  # a fence interrupts a paragraph or a list: a block of its own
                    self.cur = _Open(a, "fence", b)
                    i = self._fence(i, fence)
                    self.close()
                else:
                    self._extend(line, a, b, indent, rel, blank)
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

    def _extend(self, line: str, a: int, b: int, indent: int, rel: int, blank: bool) -> None:
        cur = self.cur
        if cur is not None and blank:
            keep = (cur.kind == "list" and (rel >= 2 or _LIST.match(line) is not None)) or (
                cur.kind == "code" and rel >= 4
            )
            if not keep:
                self.close()
                cur = None
        if cur is None:
            self.cur = _Open(a, _kind(line, indent, rel, self.indented_code), b)
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
        close = closing_fence(self.text, mark, self.offsets[i + 1])
        j = len(self.lines) - 1 if close < 0 else bisect.bisect_right(self.offsets, close) - 1
        while j > i and not self.lines[j].strip():
            j -= 1
        self.cur.last = self.offsets[j] + len(self.lines[j])
        return j


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


def read_blocks(
    text: str,
    start: int = 0,
    section_levels: int = 3,
    lines: LineIndex | None = None,
    *,
    indented_code: bool = True,
) -> list[Section]:
    """Sections of trimmed, linked blocks of ``text[start:]``, headings not yet glued.

    The first section is the text before the first section heading (possibly empty,
    with no blocks); every other section starts with its heading block. Blocks tile
    the non-blank text: ``Block.next`` is the start of the following block. ``start``
    must be a line start; ``lines``, the :class:`LineIndex` of ``text`` if the caller
    has one, saves splitting the text again. ``indented_code`` off (MDX, which has no
    indented code): a line indented by 4 or more columns is prose.
    """
    return _trim(text, _Parser(text, start, section_levels, lines, indented_code).run())
