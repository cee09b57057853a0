"""PDF: the text layer page by page, headings from the outline or font sizes, cited by page."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pypdf
import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.readers.document import PAGE_BREAK, FormatError
from ingestd.chunkers.readers.pdf import PdfReader
from ingestd.chunkers.registry import make_chunker
from tests.format_inputs import PDF_PAGES, check_chunks, markdown_blocks
from tests.helpers import CORPORA


def _pdfs(tree: Path) -> list[tuple[Path, Path]]:
    """Each good PDF with the book chapter it was made from."""
    book = CORPORA / "history" / "base"
    return [(tree / "pdf" / (Path(rel).stem + ".pdf"), book / rel) for rel in PDF_PAGES]


def _norm(s: str) -> str:
    return " ".join(s.split())


def test_structure_budget_and_lines(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("pdf", {}, ctx)
    for path, _ in _pdfs(format_tree):
        doc = chunker.read(path.read_bytes())
        chunks = chunker.chunk_document(doc)
        check_chunks(doc.text, chunks, ctx, [h.end for h in doc.headings])
        assert doc.code, "no monospaced listing found"
        for a, b in doc.code:  # a listing is cut only at line ends (check_chunks), never
            assert not any(c.start > a and c.start < b and doc.text[c.start - 1] != "\n"
                           for c in chunks)  # fmt: skip


def test_pages_read_back_from_the_pdf(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("pdf", {}, ctx)
    checked = spanning = 0
    for path, _ in _pdfs(format_tree):
        pages = [
            _norm(p.extract_text()) for p in pypdf.PdfReader(io.BytesIO(path.read_bytes())).pages
        ]
        for c in chunker.chunk_document(chunker.read(path.read_bytes())):
            first, last = c.meta["page"], c.meta["end_page"]
            parts = c.text.split(PAGE_BREAK)
            assert len(parts) == last - first + 1
            for k, part in enumerate(parts):
                assert _norm(part) in pages[first - 1 + k], (path.name, c.meta, part[:80])
            checked += 1
            spanning += last > first
    assert checked > 50


def _titles(chapter: Path) -> list[str]:
    return [
        t
        for kind, _, t in markdown_blocks(chapter.read_text(encoding="utf-8"))
        if kind == "heading"
    ]


def test_headings_from_the_outline(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("pdf", {}, ctx)
    for path, chapter in _pdfs(format_tree):
        chunks = chunker.chunk_document(chunker.read(path.read_bytes()))
        paths = {p for c in chunks for p in c.heading_path}
        titles = [t.encode("cp1252", "replace").decode("cp1252") for t in _titles(chapter)]
        assert chunks[0].heading_path[0] == titles[0]
        assert len(paths & set(titles)) >= len(titles) * 0.8, (path.name, paths, titles)


def test_headings_from_font_sizes_without_an_outline(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("pdf", {}, ctx)
    plain = format_tree / "pdf" / "bad" / "no-outline.pdf"
    with_outline, chapter = _pdfs(format_tree)[0]
    doc = chunker.read(plain.read_bytes())
    assert not pypdf.PdfReader(io.BytesIO(plain.read_bytes())).outline
    titles = {doc.text[h.start : h.end] for h in doc.headings}
    want = {t.encode("cp1252", "replace").decode("cp1252") for t in _titles(chapter)}
    assert len(titles & want) >= len(want) * 0.8
    assert chunker.read(with_outline.read_bytes()).text == doc.text


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("encrypted.pdf", "encrypted PDF (it needs a password)"),
        ("scanned.pdf", "no text layer"),
        ("truncated.pdf", "not a readable PDF"),
        ("bomb.pdf", "PDF has 1000000 pages (> the rule's max_pages 2000)"),
    ],
)
def test_bad_pdfs_are_skipped_with_a_note(format_tree: Path, name: str, words: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(FormatError) as info:
        PdfReader().read((format_tree / "pdf" / "bad" / name).read_bytes())
    assert words in str(info.value) and str(info.value).endswith(("skipped", "OCR"))
    assert time.monotonic() - t0 < 10


def test_page_and_time_bounds(format_tree: Path) -> None:
    data = _pdfs(format_tree)[0][0].read_bytes()
    with pytest.raises(FormatError, match=r"PDF has \d+ pages \(> the rule's max_pages 2\)"):
        PdfReader(max_pages=2).read(data)
    with pytest.raises(FormatError, match="not read within"):
        PdfReader(max_seconds=1e-9).read(data)
    from tests.format_inputs import pdf_bomb

    lying = pdf_bomb(200_000).replace(b"/Count 200000 /Kids", b"/Count 1 /Kids      ")
    with pytest.raises(FormatError, match="not a readable PDF"):  # pypdf's own page-tree limit
        PdfReader().read(lying)


def test_not_a_pdf() -> None:
    with pytest.raises(FormatError, match="not a readable PDF"):
        PdfReader().read(b"%PDF-1.4\nthis is not a pdf at all\n")
