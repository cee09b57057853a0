r"""PDF files -> the text of their text layer, page by page, cited by page.

The text layer is read by `pypdf <https://pypi.org/project/pypdf/>`_ (pure Python, so
it installs everywhere and is safe on any thread; it bounds what a hostile file can
make it allocate: arrays, page trees, decompressed streams). There is no OCR: a PDF
whose pages hold no text (scanned images) is skipped with a note.

The extracted text is each page's text, in reading order as pypdf extracts it, with
the lines rebuilt from the positions pypdf reports: a blank line where the gap to the
previous line is well over the usual line spacing, or where the font size or a
monospaced font starts or ends; pages are joined by a line holding a form feed
(``\f``, as pdftotext separates pages), so the page of any offset is the number of
form feeds before it plus one (:class:`~ingestd.chunkers.readers.document.PageBreaks`:
payload ``page`` and ``end_page``).

Found out of band, for the ``pdf`` strategy: **headings**, from the outline (its
titles matched to lines of the page each entry points to; the level is its depth),
else from font sizes (a short line set at least 15 % larger than the body text; the
larger, the higher its level, three levels at most; a short line all in bold at the
body's size is the deepest); and **code**, runs of lines set in a monospaced font.

Bounds, each a note in ``status`` and no chunks: an encrypted PDF that needs a
password, a file pypdf cannot parse (truncated, malformed, over its limits), more
than ``max_pages`` pages (counted before any page is read), more than
``max_seconds`` of reading, and a PDF that expands more than a PDF of text does
(:mod:`~ingestd.chunkers.readers.expansion`): a stream that inflates to over
:func:`stream_limit` bytes (pypdf stops decoding there), or a text layer of more than
:func:`~ingestd.chunkers.readers.expansion.expansion_limit` characters (a form drawn
thousands of times, one page listed a thousand times in the page tree), counted text
run by text run as pypdf reports them.
"""

from __future__ import annotations

import io
import logging
import re
import statistics
import time
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
from ingestd.chunkers.readers.expansion import ExpansionError, OutputBudget

__all__ = ["STREAM_EXPANSION", "STREAM_FLOOR", "PdfReader", "stream_limit"]

#: Most bytes one stream of a PDF may inflate to, per byte of the file. Text content
#: compresses 3-10x with Flate and a file holds more than its content streams, so a
#: PDF of text stays far below; a decompression bomb (1,000x) does not.
STREAM_EXPANSION = 32
#: Bytes any stream may inflate to, however small the file.
STREAM_FLOOR = 4 * 1024 * 1024
#: pypdf's limits on decoded stream lengths (``pypdf.Configuration``) set per read.
_DECODE_LIMITS = (
    "zlib_maximum_output_length",
    "lzw_maximum_output_length",
    "run_length_maximum_output_length",
    "brotli_maximum_output_length",
    "array_based_stream_maximum_output_length",
    "stream_decoding_work_maximum_length",
)


#: pypdf's messages when a decoded stream passes its bound (zlib, LZW, run length,
#: Brotli, the streams of a page joined, the decoding work of one stream).
_DECODING = re.compile(r"decompress|decod|output", re.IGNORECASE)


def stream_limit(size: int) -> int:
    """Most bytes one stream of a ``size``-byte PDF may inflate to.

    ``max(STREAM_FLOOR, STREAM_EXPANSION * size)``, and never more than pypdf's own
    default bound (75 MB).
    """
    return min(75_000_000, max(STREAM_FLOOR, STREAM_EXPANSION * size))


_MONO = re.compile(r"courier|mono|consol|code|menlo|inconsolata", re.I)
_BOLD = re.compile(r"bold|black|heavy|semibold", re.I)
_HEADING_RATIO = 1.15  # a line this much larger than the body text is a heading
_GAP_RATIO = 1.4  # a gap this much over the usual line spacing starts a paragraph
_HEADING_CHARS = 150  # longer lines are never headings
_SPACES = re.compile(r"\s+")


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


def _page_lines(page: Any, budget: OutputBudget) -> list[_Line]:
    """The lines of one page with the position, size and font of their text.

    Raises:
        ExpansionError: the text of the pages read so far passed ``budget``.
    """
    lines = [_Line()]

    def visit(text: str, cm: Any, tm: Any, font: Any, size: float) -> None:
        # pypdf goes on past an error inside a form it draws: the check after the
        # page raises it again
        budget.spend(len(text))
        parts = text.split("\n")
        for k, part in enumerate(parts):
            if k:
                lines.append(_Line())
            if not part:
                continue
            line = lines[-1]
            line.text += part
            if not part.strip():
                continue
            scale = abs(float(tm[3]) * float(cm[3])) or 1.0
            eff = round(float(size) * scale, 1)
            if line.y is None:
                line.y = float(tm[5]) * float(cm[3]) + float(cm[5])
            name = str((font or {}).get("/BaseFont", "")) if hasattr(font, "get") else ""
            line.mono = line.mono and bool(_MONO.search(name))
            line.bold = line.bold and bool(_BOLD.search(name))
            line.chars.append((eff, len(part.strip())))

    page.extract_text(visitor_text=visit)
    budget.spend(0)  # over the bound inside a form: raised here
    out = []
    for line in lines:
        line.text = line.text.rstrip()
        if line.text.strip():
            sizes: Counter[float] = Counter()
            for s, n in line.chars:
                sizes[s] += n
            line.size = sizes.most_common(1)[0][0] if sizes else 0.0
            out.append(line)
    return out


def _outline(reader: Any, limit: int) -> list[tuple[int, str, int]]:
    """``(page index, title, level)`` of the outline's entries (at most ``limit``)."""
    out: list[tuple[int, str, int]] = []

    def walk(items: Any, level: int) -> None:
        for item in items:
            if len(out) >= limit:
                return
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
                title = str(item.title or "")
            except Exception:  # a dangling destination: no heading from it
                continue
            if page is not None and page >= 0 and title.strip():
                out.append((page, title, level))

    walk(reader.outline, 1)
    return out


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
            FormatError: encrypted, malformed, without a text layer, or over a bound
                (:class:`~ingestd.chunkers.readers.expansion.ExpansionError` for a stream
                or a text layer over the expansion bounds).
        """
        try:
            import pypdf
        except ImportError:  # pragma: no cover - a dependency of ingestd
            raise FormatError("cannot read PDF files: pypdf is not installed") from None
        logging.getLogger("pypdf").setLevel(logging.ERROR)  # warnings about odd files
        deadline = time.monotonic() + self.max_seconds
        limit = stream_limit(len(data))
        try:
            config = pypdf.get_configuration().with_overwrites(
                **dict.fromkeys(_DECODE_LIMITS, limit)
            )
            with pypdf.apply_configuration(config):
                return self._read(pypdf, data, deadline)
        except FormatError:
            raise
        except pypdf.errors.LimitReachedError as exc:
            if not _DECODING.search(str(exc)):  # another of pypdf's bounds (a page tree)
                raise FormatError(f"not a readable PDF ({exc}); skipped") from None
            raise ExpansionError(
                len(data), "a PDF stream", limit, unit="bytes", ratio=STREAM_EXPANSION
            ) from None
        except Exception as exc:  # pypdf raises many kinds on a damaged file
            detail = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise FormatError(f"not a readable PDF ({detail}); skipped") from None

    def _read(self, pypdf: Any, data: bytes, deadline: float) -> Extracted:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # AES without a crypto library, or a broken handler
                if "cryptography" in str(exc):
                    raise FormatError(
                        "encrypted PDF (AES): install the cryptography package to read it; skipped"
                    ) from None
                opened = 0
            if not opened:
                raise FormatError("encrypted PDF (it needs a password); skipped")
        count = reader.trailer["/Root"]["/Pages"].get("/Count", 0)
        if int(count) > self.max_pages:
            raise FormatError(
                f"PDF has {int(count)} pages (> the rule's max_pages {self.max_pages}); skipped"
            )
        n = len(reader.pages)
        if n > self.max_pages:
            raise FormatError(
                f"PDF has {n} pages (> the rule's max_pages {self.max_pages}); skipped"
            )
        pages: list[list[_Line]] = []
        budget = OutputBudget(len(data), "the PDF's text layer")
        for i in range(n):
            if time.monotonic() > deadline:
                raise FormatError(
                    f"PDF not read within {self.max_seconds:g} s ({i} of {n} pages); skipped: "
                    "raise the rule's max_seconds to index it"
                )
            pages.append(_page_lines(reader.pages[i], budget))
        if not any(pages):
            raise FormatError(
                f"PDF has no text layer ({n} pages of images or drawings?); skipped: "
                "ingestd does no OCR"
            )
        outline = _outline(reader, 10 * n + 100)
        return _assemble(pages, outline)


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
    of its page), else from font sizes.
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
                for k, (title, lvl) in enumerate(wanted):
                    if key == title:
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
