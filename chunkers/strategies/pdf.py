r"""``pdf``: the text layer of PDF files, by headings and paragraphs, cited by page.

The reader (:class:`~ingestd.chunkers.readers.pdf.PdfReader`, PDFium) gives each page's
text (pages joined by a form-feed line), the headings the outline or the font sizes
show, and the runs of monospaced lines. This strategy cuts that text into *sections*
at the headings of levels ``1..section_levels`` and each section into *blocks*:
paragraphs (runs of lines without a blank line), code (monospaced runs, cut only at
line ends) and headings, each heading glued to the block after it. The blocks are
packed as the ``markdown`` strategy packs them
(:class:`~ingestd.chunkers.packing.packer.Packer`): whole when they fit, small
sections merged up to ``min_tokens``, a heading never left at the end of a chunk.

The payload's ``text`` is the extracted text, verbatim, with its offsets and lines;
``page`` and ``end_page`` are the 1-based pages of a chunk's first and last
characters. A page break is a block boundary (a chunk may still span pages).

Chunked without its reader (``chunk(text)``), a text has no headings or code: only
paragraphs, and its pages from its form feeds.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens; ``max_seconds`` is
seconds; offsets are ``str`` indices into the extracted text.
"""

from __future__ import annotations

from pydantic import Field

from ingestd.chunkers.base import Chunk, Chunker, ChunkerOptions, LineIndex, cite_chunks
from ingestd.chunkers.packing.packer import Packer
from ingestd.chunkers.readers.document import Extracted, Heading, PageBreaks, Reader
from ingestd.chunkers.readers.pdf import PdfReader
from ingestd.chunkers.sections import Block, Section, SectionOptions, heading_prefix

__all__ = ["PdfChunker", "PdfOptions", "parse_pdf_text"]


class PdfOptions(SectionOptions):
    """Options of the ``pdf`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        section_levels: heading levels ``1..section_levels`` open a section (default 3).
        min_tokens: small sections are packed together up to this size (default
            three quarters of ``max_tokens``).
        heading_prefix: prefix the heading path to the embedded text (default on).
        max_pages: a PDF with more pages is skipped unread (default 2,000).
        max_seconds: most seconds reading one PDF may take (default 120).
    """

    max_pages: int = Field(default=2000, gt=0)
    max_seconds: float = Field(default=120.0, gt=0)


def parse_pdf_text(
    text: str,
    headings: tuple[Heading, ...] = (),
    code: tuple[tuple[int, int], ...] = (),
    section_levels: int = 3,
) -> list[Section]:
    """Cut extracted PDF ``text`` into sections of blocks, headings glued (module docstring)."""
    level_at = {h.start: h.level for h in headings}
    code_at = {a for a, _ in code}
    code_end = {a: b for a, b in code}
    sections = [Section((), 0, [])]
    stack: list[tuple[int, str]] = []
    flat: list[Block] = []
    pos, n = 0, len(text)
    while pos < n:
        eol = text.find("\n", pos)
        eol = n if eol == -1 else eol
        if not text[pos:eol].strip():
            pos = eol + 1
            continue
        if pos in level_at:
            level = level_at[pos]
            blk = Block(pos, eol, eol, "heading")
            title = " ".join(text[pos:eol].split())
            if level <= section_levels:
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, title))
                sections.append(Section(tuple(t for _, t in stack), level, [blk]))
            else:
                sections[-1].blocks.append(blk)
            flat.append(blk)
            pos = eol + 1
            continue
        if pos in code_at:
            end = code_end[pos]
            kind = "code"
        else:  # a paragraph: lines up to a blank one, a heading or code
            end, q = eol, eol + 1
            while q < n:
                e = text.find("\n", q)
                e = n if e == -1 else e
                if not text[q:e].strip() or q in level_at or q in code_at:
                    break
                end, q = e, e + 1
            kind = "para"
        blk = Block(pos, end, end, kind)
        sections[-1].blocks.append(blk)
        flat.append(blk)
        pos = end + 1
    for k, blk in enumerate(flat):
        while blk.end > blk.start and text[blk.end - 1].isspace():
            blk.end -= 1
        blk.next = flat[k + 1].start if k + 1 < len(flat) else n
    return _glue(sections)


def _glue(sections: list[Section]) -> list[Section]:
    """Glue each heading to the block that follows it in its section."""
    for sec in sections:
        glued: list[Block] = []
        for blk in sec.blocks:
            prev = glued[-1] if glued else None
            if prev is not None and prev.kind == "heading":
                body = blk.body if blk.kind == "heading" else blk.start
                glued[-1] = Block(prev.start, blk.end, blk.next, blk.kind, body)
            else:
                glued.append(blk)
        sec.blocks = glued
    return sections


class PdfChunker(Chunker):
    """PDF chunking; see the module docstring.

    Raises:
        ValueError: from :class:`PdfOptions` validation.
    """

    name = "pdf"
    version = 4  # 4: read by PDFium (words TeX spaced by kerning stay apart); 3: strong anchors
    Options = PdfOptions
    options: PdfOptions

    @classmethod
    def reader(cls, options: ChunkerOptions) -> Reader:
        """A :class:`~ingestd.chunkers.readers.pdf.PdfReader` with the rule's bounds."""
        assert isinstance(options, PdfOptions)
        return PdfReader(options.max_pages, options.max_seconds)

    def chunk(self, text: str) -> list[Chunk]:
        """Chunk extracted text without its reader's structure: paragraphs, cited by page."""
        return self.chunk_document(Extracted(text, PageBreaks(text)))

    def chunk_document(self, doc: Extracted) -> list[Chunk]:
        """Chunk a PDF's extracted text with its headings and code, cited by page."""
        text = doc.text
        lines = LineIndex(text)
        sections = parse_pdf_text(text, doc.headings, doc.code, self.options.section_levels)
        with_prefix = self.options.heading_prefix
        packer = Packer(
            text,
            sections,
            self.budget,
            min_tokens=self.options.merge_below,
            prefix=(lambda path: heading_prefix(path, None)) if with_prefix else (lambda _: ""),
            carry=lambda _t, _b: "",
            lines=lines,
        )
        return cite_chunks(packer.chunks(lines, packer.pack_all(), {}), doc)
