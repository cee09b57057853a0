r"""PDF files -> the text of their text layer, page by page, cited by page.

The text layer is read by PDFium in a child process (:mod:`~ingestd.chunkers.readers.
pdf_lines`: its words and lines come from the glyphs' positions, as pdftotext finds
them, so TeX's word gaps stay spaces; a crash, hang or memory bomb costs the one
file). There is no OCR: a PDF whose pages hold no text (scanned images) is skipped
with a note.

The extracted text is each page's lines in PDFium's reading order, with a blank line
where the gap to the previous line is well over the usual line spacing, or where the
font size or a monospaced font starts or ends; pages are joined by a line holding a
form feed (``\f``, as pdftotext separates pages), so the page of any offset is the
number of form feeds before it plus one (:class:`~ingestd.chunkers.readers.document.
PageBreaks`: payload ``page`` and ``end_page``).

Found out of band, for the ``pdf`` strategy: **headings**, from the outline (its
titles matched to lines of the page each entry points to; the level is its depth),
else from font sizes (a short line set at least 15 % larger than the body text; the
larger, the higher its level, three levels at most; a short line all in bold at the
body's size is the deepest); and **code**, runs of lines set in a monospaced font.

Bounds, each a note in ``status`` and no chunks: an encrypted PDF that needs a
password, a file PDFium cannot parse (truncated, malformed), more than ``max_pages``
pages (counted before any page is read), more than ``max_seconds`` of reading (the
child is killed), more memory than :func:`~ingestd.chunkers.readers.pdf_lines.
address_limit` allows a file of its size (a stream that inflates without a bound),
a crash of the reader, and a text layer of more
than :func:`~ingestd.chunkers.readers.expansion.expansion_limit` characters (a form
drawn thousands of times, a stream that inflates to megabytes of text: counted page by
page in the child, before the page's characters are read).
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ingestd.chunkers.readers.document import (
    PAGE_BREAK,
    Extracted,
    FormatError,
    Heading,
    PageBreaks,
)
from ingestd.chunkers.readers.expansion import ExpansionError
from ingestd.chunkers.readers.pdf_lines import MEMORY_PER_BYTE, address_limit

__all__ = ["PdfReader"]

_HEADING_RATIO = 1.15  # a line this much larger than the body text is a heading
_GAP_RATIO = 1.4  # a gap this much over the usual line spacing starts a paragraph
_HEADING_CHARS = 150  # longer lines are never headings
_SPACES = re.compile(r"\s+")
# a section number before an outline entry's title on the page: "2.3 ", "A.1. ", "IV "
_NUMBERED = re.compile(r"^(?:\d+|[a-z]|[ivxlc]+)(?:\.\d+)*\.?\s+")
_CHILD = "ingestd.chunkers.readers.pdf_lines"


@dataclass
class _Line:
    text: str = ""
    y: float | None = None
    size: float = 0.0
    mono: bool = True
    bold: bool = True
    chars: list[tuple[float, int]] = field(default_factory=list)  # (size, n) of its runs


def _norm(s: str) -> str:
    return _SPACES.sub(" ", s).strip().casefold()


def _line(row: list[Any]) -> _Line:
    """A :class:`_Line` from the child's ``[text, y, [[size, n], ...], mono, bold]``."""
    text, y, runs, mono, bold = row
    chars = [(float(s), int(n)) for s, n in runs]
    size = max(chars, key=lambda c: c[1])[0] if chars else 0.0
    return _Line(str(text), None if y is None else float(y), size, bool(mono), bool(bold), chars)


class PdfReader:
    """Reads the text layer of a PDF (see the module docstring).

    Args:
        max_pages: most pages a PDF may have (a larger one is skipped unread).
        max_seconds: most seconds reading one PDF may take.
    """

    def __init__(self, max_pages: int = 2000, max_seconds: float = 120.0) -> None:
        self.max_pages = max_pages
        self.max_seconds = max_seconds

    def read(self, data: bytes) -> Extracted:
        """The extracted text of PDF ``data``, with its pages, headings and code.

        Raises:
            FormatError: encrypted, malformed, without a text layer, over a bound, or
                the reader crashed.
        """
        found = self._run(data)
        pages = [[_line(row) for row in rows] for rows in found["pages"]]
        if not any(pages):
            raise FormatError(
                f"PDF has no text layer ({len(pages)} pages of images or drawings?); "
                "skipped: ingestd does no OCR"
            )
        outline = [(int(p), str(t), int(level)) for p, t, level in found["outline"]]
        return _assemble(pages, outline)

    def command(self) -> list[str]:
        """The child process's command line (:mod:`~ingestd.chunkers.readers.pdf_lines`)."""
        # -P: the working folder (perhaps a watched tree) is not on the child's path
        return [sys.executable, "-P", "-m", _CHILD, str(self.max_pages)]

    def _run(self, data: bytes) -> dict[str, Any]:
        """The child's JSON for ``data`` (:mod:`~ingestd.chunkers.readers.pdf_lines`)."""
        try:
            done = subprocess.run(
                self.command(),
                input=data,
                capture_output=True,
                timeout=self.max_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise FormatError(
                f"PDF not read within {self.max_seconds:g} s; skipped: "
                "raise the rule's max_seconds to index it"
            ) from None
        except OSError as exc:
            raise FormatError(f"cannot start the PDF reader ({exc}); skipped") from None
        if done.returncode == -signal.SIGABRT:  # an allocation past the address space
            raise ExpansionError(
                len(data),
                "a PDF's content, in the reader's memory",
                address_limit(len(data)),
                unit="bytes of memory",
                ratio=MEMORY_PER_BYTE,
            )
        if done.returncode < 0:
            name = signal.Signals(-done.returncode).name
            raise FormatError(f"the PDF reader crashed on this file ({name}); skipped")
        if done.returncode:
            last = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise FormatError(f"the PDF reader failed ({last[:160]}); skipped")
        found: dict[str, Any] = json.loads(done.stdout)
        if "expansion" in found:  # the text layer passed its bound (the child's budget)
            size, what, limit = found["expansion"]
            raise ExpansionError(int(size), str(what), int(limit))
        if "error" in found:
            raise FormatError(str(found["error"]))
        return found


def _measure(pages: list[list[_Line]]) -> tuple[float, float]:
    """The body text's font size (the most common, by characters) and its line spacing."""
    sizes: Counter[float] = Counter()
    gaps: list[float] = []
    for lines in pages:
        for a, b in zip(lines, lines[1:], strict=False):
            if a.y is not None and b.y is not None and a.size == b.size and a.y > b.y:
                gaps.append(a.y - b.y)
        for line in lines:
            for s, n in line.chars:
                sizes[s] += n
    body = sizes.most_common(1)[0][0] if sizes else 0.0
    return body, statistics.median(gaps) if gaps else 0.0


def _heading_levels(
    pages: list[list[_Line]], outline: list[tuple[int, str, int]], body: float
) -> list[list[int]]:
    """The heading level of each line of each page (0: not a heading).

    From the outline when the PDF has one (each entry's title matched once to a line
    of its page, with or without a section number before it), else from font sizes.
    """
    if outline:
        by_page: dict[int, list[tuple[str, int]]] = {}
        for page, title, level in outline:
            by_page.setdefault(page, []).append((_norm(title), level))
        out = []
        for p, lines in enumerate(pages):
            wanted = by_page.get(p, [])
            levels = []
            for line in lines:
                key, level = _norm(line.text), 0
                bare = _NUMBERED.sub("", key)  # "4.14 a minimal example"
                for k, (title, lvl) in enumerate(wanted):
                    if title in (key, bare):
                        level = lvl
                        del wanted[k]
                        break
                levels.append(level)
            out.append(levels)
        return out
    big = sorted({line.size for lines in pages for line in lines if _is_big(line, body)})[::-1]
    below = min(3, len(big) + 1)  # a bold line of the body's size: the deepest level

    def level_of(line: _Line) -> int:
        if _is_big(line, body):
            return min(3, big.index(line.size) + 1)
        return below if _is_bold_heading(line, body) else 0

    return [[level_of(line) for line in lines] for lines in pages]


def _assemble(pages: list[list[_Line]], outline: list[tuple[int, str, int]]) -> Extracted:
    """The text, its headings and code spans, from each page's lines."""
    body, usual = _measure(pages)
    levels = _heading_levels(pages, outline, body)
    parts: list[str] = []
    headings: list[Heading] = []
    code: list[tuple[int, int]] = []
    pos = 0
    for p, lines in enumerate(pages):
        if p:
            parts.append("\n" + PAGE_BREAK + "\n")
            pos += 3
        prev: _Line | None = None
        for line, level in zip(lines, levels[p], strict=True):
            if prev is not None:
                sep = "\n\n" if _breaks(prev, line, usual) else "\n"
                parts.append(sep)
                pos += len(sep)
            end = pos + len(line.text)
            if level:
                headings.append(Heading(pos, end, level))
            elif line.mono:
                if code and code[-1][1] == pos - 1:
                    code[-1] = (code[-1][0], end)
                else:
                    code.append((pos, end))
            parts.append(line.text)
            pos = end
            prev = line
    text = "".join(parts) + "\n"
    return Extracted(text, PageBreaks(text), tuple(headings), tuple(code))


def _is_big(line: _Line, body: float) -> bool:
    return (
        body > 0
        and line.size >= body * _HEADING_RATIO
        and len(line.text.strip()) <= _HEADING_CHARS
        and not line.mono
    )


def _is_bold_heading(line: _Line, body: float) -> bool:
    """A short line all in bold, at least as large as the body text, not a sentence."""
    text = line.text.strip()
    return (
        line.bold
        and not line.mono
        and body > 0
        and line.size >= body * 0.95
        and len(text) <= _HEADING_CHARS // 2
        and not text.endswith((".", ",", ";", ":"))
    )


def _breaks(prev: _Line, line: _Line, usual: float) -> bool:
    """Whether a paragraph break (a blank line) goes between two lines of a page."""
    if prev.mono != line.mono or prev.bold != line.bold or abs(prev.size - line.size) > 0.5:
        return True
    if prev.y is None or line.y is None or usual <= 0:
        return False
    gap = prev.y - line.y
    return gap > usual * _GAP_RATIO or gap < 0
