r"""What a format's reader makes of a file: the text every offset refers to, and its coordinates.

A *reader* turns a file's bytes into an :class:`Extracted` document: the text that
chunks slice (their ``start``/``end`` offsets and ``start_line``/``end_line`` refer to
it, for every format) and the format's own coordinates of any span of it (a
:class:`Citations`): the pages of a PDF, the cells of a notebook, the lines of the
HTML file a text was extracted from. A chunker names its reader
(:meth:`ingestd.chunkers.base.Chunker.reader`), and chunking, ``verify``, the
from-scratch oracle and ``read`` all read a document through it, so they see the same
text.

Text formats (markdown, reStructuredText, AsciiDoc, code, plain text) are read by
:data:`TEXT_READER`: the decoded-text contract of :func:`ingestd.chunkers.text.decode`
(UTF-8, BOM removed, CRLF and lone CR made LF); their lines are their citation.

The citation keys a format adds to a chunk's payload are :data:`CITATION_KEYS`; every
value is a 1-based ``int``.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ingestd.chunkers.text import UndecodableError, decode

__all__ = [
    "CITATION_KEYS",
    "TEXT_READER",
    "Citations",
    "Extracted",
    "FormatError",
    "Heading",
    "LineMap",
    "PAGE_BREAK",
    "PageBreaks",
    "Reader",
    "TextReader",
    "citation",
    "cite_text",
]

#: Payload keys of a format's own coordinates (1-based ints): ``page``/``end_page``
#: (PDF: the pages of a chunk's first and last character), ``cell``/``end_cell`` and
#: ``cell_start_line``/``cell_end_line`` (notebooks: first and last cell, and the line
#: of the first character in ``cell`` and of the last in ``end_cell``),
#: ``file_start_line``/``file_end_line`` (HTML: lines of the file itself).
CITATION_KEYS = (
    "page",
    "end_page",
    "cell",
    "end_cell",
    "cell_start_line",
    "cell_end_line",
    "file_start_line",
    "file_end_line",
)

#: The character that separates the pages of a PDF's extracted text (as pdftotext's).
PAGE_BREAK = "\f"


class FormatError(UndecodableError):
    """A file of a structured format cannot be read (malformed, encrypted, no text, too big).

    Its message is the one log line and ``status`` entry of the document, as for any
    file that is not indexable text.
    """


class Citations(Protocol):
    """A format's coordinates of spans of an extracted text."""

    def of(self, start: int, end: int) -> dict[str, int]:
        """The citation keys (:data:`CITATION_KEYS`) of ``text[start:end]`` (``end > start``)."""
        ...


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading the reader found in the text (where the text alone does not mark it).

    Attributes:
        start: offset of the heading line's first character.
        end: offset one past its last character.
        level: 1 for a top-level heading, deeper ones higher.
    """

    start: int
    end: int
    level: int


@dataclass(frozen=True, slots=True)
class Extracted:
    r"""A document as its reader extracted it.

    Attributes:
        text: the text every chunk offset and line refers to (``\n`` line ends).
        citations: the format's coordinates of a span, or ``None`` (text formats:
            the lines are the citation).
        headings: headings found out of band (a PDF's outline or font sizes), in
            document order; formats whose text marks its headings leave it empty.
        code: ``(start, end)`` spans of code found out of band (a PDF's monospaced
            lines), in document order.
        meta: payload extras of every chunk of the document (a notebook's
            ``language``).
    """

    text: str
    citations: Citations | None = None
    headings: tuple[Heading, ...] = ()
    code: tuple[tuple[int, int], ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def cite(self, start: int, end: int) -> dict[str, Any]:
        """Payload extras of ``text[start:end]``: :attr:`meta` and the span's citation."""
        out = dict(self.meta)
        if self.citations is not None and end > start:
            out.update(self.citations.of(start, end))
        return out


class Reader(Protocol):
    """Turns a file's bytes into an :class:`Extracted` document."""

    def read(self, data: bytes) -> Extracted:
        """The document of ``data``.

        Raises:
            UndecodableError: the bytes are not a readable document of the format
                (:class:`FormatError` for structured formats); the message says why.
        """
        ...


class TextReader:
    """The reader of text formats: :func:`~ingestd.chunkers.text.decode`, no citations."""

    def read(self, data: bytes) -> Extracted:
        """``Extracted(decode(data))``.

        Raises:
            UndecodableError: binary or not UTF-8.
        """
        return Extracted(decode(data))


#: The reader of every text format.
TEXT_READER = TextReader()


class PageBreaks:
    r"""Pages of a text whose pages are separated by :data:`PAGE_BREAK` (``\f``).

    Args:
        text: the extracted text.
    """

    __slots__ = ("_breaks",)

    def __init__(self, text: str) -> None:
        self._breaks = [i for i, ch in enumerate(text) if ch == PAGE_BREAK]

    def page_of(self, offset: int) -> int:
        """1-based page of the character at ``offset`` (a break belongs to the page it ends)."""
        return bisect.bisect_left(self._breaks, offset) + 1

    def of(self, start: int, end: int) -> dict[str, int]:
        """``page`` and ``end_page`` of ``text[start:end]``."""
        return {"page": self.page_of(start), "end_page": self.page_of(end - 1)}


class LineMap:
    """Lines of the file an extracted text came from, for each line of that text.

    Args:
        text: the extracted text.
        spans: for each line of ``text`` (split at line ends), the first and last line of
            the file it was extracted from (1-based), or ``None`` for a line the reader
            made (a blank line, a fence): it takes its neighbour's.
    """

    __slots__ = ("_first", "_last", "_starts")

    def __init__(self, text: str, spans: list[tuple[int, int] | None]) -> None:
        starts = [0]
        pos = text.find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        if len(spans) != len(starts):
            raise ValueError(f"{len(spans)} line spans for {len(starts)} lines")
        self._starts = starts
        first: list[int] = []
        last: list[int] = []
        prev = 1
        for span in spans:  # a made line: the line before it (the first: line 1)
            a, b = span if span is not None else (prev, prev)
            first.append(a)
            last.append(b)
            prev = b
        self._first, self._last = first, last

    def of(self, start: int, end: int) -> dict[str, int]:
        """``file_start_line`` and ``file_end_line`` of ``text[start:end]``."""
        a = bisect.bisect_right(self._starts, start) - 1
        b = bisect.bisect_right(self._starts, end - 1) - 1
        return {
            "file_start_line": self._first[a],
            "file_end_line": max(self._first[a], self._last[b]),
        }


def citation(payload: Mapping[str, Any]) -> str:
    """A chunk's (or lines') own citation in words, or ``""`` for a text format.

    ``p. 4`` or ``pp. 4-5`` (PDF), ``cell 7:3-10`` (cell 7, its lines 3 to 10) or
    ``cells 7:3-9:2`` (notebooks), ``file lines 120-135`` (HTML).
    """
    if "page" in payload:
        a, b = payload["page"], payload.get("end_page", payload["page"])
        return f"p. {a}" if a == b else f"pp. {a}-{b}"
    if "cell" in payload:
        a, b = payload["cell"], payload.get("end_cell", payload["cell"])
        la, lb = payload.get("cell_start_line", 1), payload.get("cell_end_line", 1)
        return f"cell {a}:{la}-{lb}" if a == b else f"cells {a}:{la}-{b}:{lb}"
    if "file_start_line" in payload:
        return f"file lines {payload['file_start_line']}-{payload.get('file_end_line', '?')}"
    return ""


def cite_text(payload: Mapping[str, Any]) -> str:
    """How a hit is cited after its path: ``:12-30``, `` p. 4``, `` cell 7:3-10``...

    Lines (``:START-END``) for text formats and for HTML (the HTML file's own lines),
    else the :func:`citation` of the format.
    """
    if "file_start_line" in payload:
        return f":{payload['file_start_line']}-{payload.get('file_end_line', '?')}"
    words = citation(payload)
    if words:
        return " " + words
    return f":{payload.get('start_line', '?')}-{payload.get('end_line', '?')}"
