r"""The lines of a PDF's text layer, read by PDFium in a process of their own.

`PDFium <https://pdfium.googlesource.com/pdfium/>`_ (Chromium's PDF engine, through
`pypdfium2 <https://pypi.org/project/pypdfium2/>`_: BSD-3-Clause or Apache-2.0) finds
the words and lines of a page from the glyphs' positions, as pdftotext does, so a
word gap drawn as a kerning offset (how TeX sets every space) is a space: pypdf's
extraction glued 31 % of the lines of a dblatex manual into runs like
``Thecomputationofthescores`` (``bench/pdf_text.py``).

PDFium is native code and not thread-safe (pypdfium2's "Incompatibility with
Threading"), and a file to index may be hostile. So :class:`~ingestd.chunkers.readers.
pdf.PdfReader` runs :func:`main` in a child process (``python -m`` this module) that
reads the PDF from stdin under an address-space limit and writes JSON to stdout; the
parent kills it at the rule's ``max_seconds``. A crash, a hang or a memory bomb costs
that one file, never the daemon (Chromium isolates PDFium in a process for the same
reason).

The JSON: ``{"pages": [[line, ...], ...], "outline": [[page index, title, level],
...]}`` with each line ``[text, baseline y (points, up), [[font size, characters],
...], monospaced, bold]``, or ``{"error": message}``, or, for a text layer longer than
:func:`~ingestd.chunkers.readers.expansion.expansion_limit` of the file's size,
``{"error": message, "expansion": [file bytes, what expanded, limit]}``.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
from typing import Any

from ingestd.chunkers.readers.document import FormatError
from ingestd.chunkers.readers.expansion import ExpansionError, OutputBudget

__all__ = [
    "MAX_ADDRESS_SPACE",
    "MEMORY_PER_BYTE",
    "MIN_ADDRESS_SPACE",
    "address_limit",
    "main",
    "read_lines",
]

#: Most address space the child may map, in bytes, however large the file.
MAX_ADDRESS_SPACE = 4 << 30
#: Address space any file may have: Python and PDFium take about 50 MB of it, and the
#: page of a small PDF far less than the rest.
MIN_ADDRESS_SPACE = 512 << 20
#: Address space granted per byte of the file on top of :data:`MIN_ADDRESS_SPACE`.
MEMORY_PER_BYTE = 64


def address_limit(size: int) -> int:
    """Bytes of address space the reader of a ``size``-byte PDF may map.

    ``min(MAX_ADDRESS_SPACE, MIN_ADDRESS_SPACE + MEMORY_PER_BYTE * size)``. A stream that
    inflates without a bound (a 66 KB file whose page holds 17.5 million characters
    took 3.3 GB in PDFium's text page) ends the child at this bound, with ``SIGABRT``,
    instead of taking the machine's memory.
    """
    return min(MAX_ADDRESS_SPACE, MIN_ADDRESS_SPACE + MEMORY_PER_BYTE * size)


_MONO = re.compile(r"courier|mono|consol|code|menlo|inconsolata|typewriter", re.I)
# TeX's typewriter fonts, named in lower case: cmtt10, ectt1000, lmtt10, t1xtt, tcxbtt
_TEX_MONO = re.compile(r"(?:^|[+-])[a-z0-9]{0,5}tt(?:\d|[-_]|$)")
_BOLD = re.compile(r"bold|black|heavy|semibold", re.I)
_FIXED_PITCH = 1  # PDF 32000-1 table 123, font descriptor flags: bit 1
_FORCE_BOLD = 1 << 18  # bit 19
_LINE_ENDS = frozenset((10, 13))
_SOFT_HYPHEN = 2  # PDFium's code for a hyphen that ends a line


def _load(pdfium: Any, data: bytes) -> Any:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise FormatError("encrypted PDF (it needs a password); skipped") from None
        detail = " ".join(str(exc).split())[:160]
        raise FormatError(f"not a readable PDF ({detail}); skipped") from None


def _font_info(raw: Any, textpage: Any, i: int, buf: Any) -> tuple[float, bool, bool]:
    """``(size in points, monospaced, bold)`` of the font of character ``i``."""
    size = round(float(raw.FPDFText_GetFontSize(textpage, i)), 1)
    font = raw.FPDFTextObj_GetFont(raw.FPDFText_GetTextObject(textpage, i))
    if not font:
        return size, False, False
    raw.FPDFFont_GetBaseFontName(font, buf, len(buf))
    name = buf.value.decode("latin-1")
    flags = raw.FPDFFont_GetFlags(font)
    mono = bool(flags & _FIXED_PITCH or _MONO.search(name) or _TEX_MONO.search(name))
    bold = bool(flags & _FORCE_BOLD) or raw.FPDFFont_GetWeight(font) >= 600
    return size, mono, bold or bool(_BOLD.search(name))


#: A glyph whose baseline is this many font sizes (em) off the last glyph's starts a new
#: line: PDFium runs some paragraphs of Apache FOP's output into one line (a DocBook
#: reference's page 11: six printed lines in one, where ``pdftotext -layout`` keeps
#: them apart), while a superscript or subscript sits about a third of an em off its
#: line.
NEW_LINE_EM = 0.6


def _page_lines(raw: Any, textpage: Any) -> list[list[Any]]:
    """The lines of one page: ``[text, y, [[size, n], ...], mono, bold]`` each."""
    lines: list[list[Any]] = []
    buf = ctypes.create_string_buffer(256)
    x, y = ctypes.c_double(), ctypes.c_double()
    fonts: dict[int | None, tuple[float, bool, bool]] = {}
    chars: list[str] = []
    sizes: dict[float, int] = {}
    state: list[Any] = [None, True, True]  # y, mono, bold
    last_y: list[float | None] = [None]  # the baseline of the last glyph of this line

    def flush() -> None:
        # a character beyond the BMP comes as a UTF-16 surrogate pair: join them
        units = "".join(chars).encode("utf-16-le", "surrogatepass")
        text = units.decode("utf-16-le", "replace").rstrip()
        if text.strip():
            lines.append([text, state[0], [[s, n] for s, n in sizes.items()], *state[1:]])
        chars.clear()
        sizes.clear()
        state[:] = [None, True, True]
        last_y[0] = None

    for i in range(raw.FPDFText_CountChars(textpage)):
        code = raw.FPDFText_GetUnicode(textpage, i)
        if code in _LINE_ENDS:
            flush()
            continue
        ch = "-" if code == _SOFT_HYPHEN else chr(code) if 0 < code < 0x110000 else ""
        chars.append(ch)
        if not ch.strip():
            continue
        key = ctypes.cast(raw.FPDFText_GetTextObject(textpage, i), ctypes.c_void_p).value
        info = fonts.get(key)
        if info is None:
            info = fonts[key] = _font_info(raw, textpage, i, buf)
        size, mono, bold = info
        if raw.FPDFText_GetCharOrigin(textpage, i, x, y):
            em = max(size, 1.0)
            if last_y[0] is not None and abs(y.value - last_y[0]) > NEW_LINE_EM * em:
                chars.pop()  # a baseline this far off starts a line PDFium did not break
                flush()
                chars.append(ch)
            last_y[0] = y.value
            if state[0] is None:
                state[0] = round(y.value, 2)
        sizes[size] = sizes.get(size, 0) + 1
        state[1] = state[1] and mono
        state[2] = state[2] and bold
    flush()
    return lines


def read_lines(data: bytes, max_pages: int) -> dict[str, Any]:
    """The lines of each page of PDF ``data`` and its outline (the module's JSON shape).

    Raises:
        FormatError: encrypted, malformed, or more than ``max_pages`` pages.
        ExpansionError: the text layer has more characters than ``data``'s size allows
            (:func:`~ingestd.chunkers.readers.expansion.expansion_limit`); each page's
            characters are counted before they are read.
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    doc = _load(pdfium, data)
    try:
        n = len(doc)
        if n > max_pages:
            raise FormatError(f"PDF has {n} pages (> the rule's max_pages {max_pages}); skipped")
        pages = []
        budget = OutputBudget(len(data), "the PDF's text layer")
        for i in range(n):
            page = doc[i]
            textpage = page.get_textpage()
            try:
                budget.spend(raw.FPDFText_CountChars(textpage))
                pages.append(_page_lines(raw, textpage))
            finally:
                textpage.close()
                page.close()
        outline: list[list[Any]] = []
        for mark in doc.get_toc(max_depth=8):
            if len(outline) >= 10 * n + 100:
                break
            dest = mark.get_dest()
            index = dest.get_index() if dest is not None else None
            title = mark.get_title()
            if index is not None and 0 <= index < n and title.strip():
                outline.append([index, title, mark.level + 1])
        return {"pages": pages, "outline": outline}
    finally:
        doc.close()


def main() -> None:
    """Read a PDF from stdin and write its lines as JSON to stdout (argv[1]: max_pages)."""
    data = sys.stdin.buffer.read()
    try:
        import resource

        limit = address_limit(len(data))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not on Linux
        pass
    try:
        out = read_lines(data, int(sys.argv[1]))
    except ExpansionError as exc:
        out = {"error": str(exc), "expansion": [exc.size, exc.what, exc.limit]}
    except FormatError as exc:
        out = {"error": str(exc)}
    except MemoryError:
        out = {"error": "PDF needs more memory than the reader may use; skipped"}
    json.dump(out, sys.stdout, ensure_ascii=False, separators=(",", ":"))


if __name__ == "__main__":
    main()
