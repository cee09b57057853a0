"""PDF: the text layer page by page, headings from the outline or font sizes, cited by page."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pypdfium2
import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.readers.document import PAGE_BREAK, FormatError
from ingestd.chunkers.readers.pdf import PdfReader
from ingestd.chunkers.registry import make_chunker
from tests.format_inputs import PDF_PAGES, check_chunks, markdown_blocks, pdf_bomb, tex_spaced_pdf
from tests.helpers import CORPORA


def _pdfs(tree: Path) -> list[tuple[Path, Path]]:
    """Each good PDF with the book chapter it was made from."""
    book = CORPORA / "history" / "base"
    return [(tree / "pdf" / (Path(rel).stem + ".pdf"), book / rel) for rel in PDF_PAGES]


def _norm(s: str) -> str:
    return " ".join(s.split())


def _page_texts(data: bytes) -> list[str]:
    """Each page's text as PDFium's bounded-text call gives it (not the reader's path)."""
    doc = pypdfium2.PdfDocument(data)
    return [_norm(doc[i].get_textpage().get_text_bounded()) for i in range(len(doc))]


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
        pages = _page_texts(path.read_bytes())
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
    assert not list(pypdfium2.PdfDocument(plain.read_bytes()).get_toc())
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


def test_a_page_tree_that_lies_about_its_count_is_read_as_counted() -> None:
    lying = pdf_bomb(200_000).replace(b"/Count 200000 /Kids", b"/Count 1 /Kids      ")
    t0 = time.monotonic()
    assert PdfReader().read(lying).text == "Hello again\n"
    assert time.monotonic() - t0 < 10


def test_words_spaced_as_tex_spaces_them_stay_apart(corpora_words: list[str]) -> None:
    """TeX draws no space character: a word gap is a kerning offset in a ``TJ`` array,
    in a font whose code 32 is another glyph. The reader keeps the words apart."""
    doc = PdfReader().read(tex_spaced_pdf(corpora_words))
    assert doc.text.split() == corpora_words
    glued = [line for line in doc.text.splitlines() if re.search(r"[^\W\d_]{20,}", line)]
    assert not glued
    assert doc.text.count(PAGE_BREAK) == len(corpora_words) // (11 * 40)


@pytest.fixture
def corpora_words() -> list[str]:
    """1,200 words of a Rust book chapter (ASCII letters and punctuation)."""
    text = (CORPORA / "history" / "base" / PDF_PAGES[0]).read_text(encoding="utf-8")
    return re.findall(r"[A-Za-z][A-Za-z,.;:-]*", text)[:1200]


@pytest.mark.parametrize(
    ("script", "words"),
    [
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
            "crashed on this file (SIGSEGV)",
        ),
        ("import time; time.sleep(60)", "not read within 1 s"),
        ("raise MemoryError", "the PDF reader failed (MemoryError)"),
    ],
)
def test_a_reader_that_crashes_hangs_or_fails_costs_one_file(
    monkeypatch: pytest.MonkeyPatch, script: str, words: str
) -> None:
    """PDFium runs in a child process: whatever it does, the caller gets a FormatError."""
    monkeypatch.setattr(PdfReader, "command", lambda self: [sys.executable, "-c", script])
    t0 = time.monotonic()
    with pytest.raises(FormatError) as info:
        PdfReader(max_seconds=1).read(b"%PDF-1.4")
    assert words in str(info.value) and "; skipped" in str(info.value)
    assert time.monotonic() - t0 < 30


def test_not_a_pdf() -> None:
    with pytest.raises(FormatError, match="not a readable PDF"):
        PdfReader().read(b"%PDF-1.4\nthis is not a pdf at all\n")
