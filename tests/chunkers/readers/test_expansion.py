"""No reader or rendering multiplies a small file (issue 41, item 2).

Each format that can make more text than it read is fed a small file built to do so
(:mod:`tests.expansion_inputs`). Before the bound, a 20,027-byte AsciiDoc file made
14,650 chunks in 57 s and 1.1 GB; a 3,906-byte one made 396 points; a 72 KB HTML table
62,531 chunks; a 971-byte PDF drawing one form 4,000 times 8,000 chunks. Now each is
stopped at :func:`~ingestd.chunkers.readers.expansion.expansion_limit` of its size with
an :class:`~ingestd.chunkers.readers.expansion.ExpansionError`, having made no more than
the bound: the memory it took (counted with :mod:`tracemalloc`) is a small multiple of
the bound, never of what the file would have become.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from ingestd.chunkers.base import ChunkContext
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.readers.expansion import (
    MAX_EXPANSION,
    MIN_LIMIT,
    ExpansionError,
    expansion_limit,
)
from ingestd.chunkers.readers.html import HtmlReader
from ingestd.chunkers.readers.notebook import MAX_LANGUAGE_CHARS, NotebookReader
from ingestd.chunkers.readers.pdf import PdfReader
from ingestd.chunkers.readers.pdf_lines import address_limit
from ingestd.chunkers.registry import chunker_class
from tests import expansion_inputs as bombs

#: Most bytes a stopped read may allocate at its peak, beyond what was read: the bound
#: in characters, a few copies of it (a list of lines, its join), and the parsers' own.
PEAK_BYTES = 24 * 1024 * 1024


def _peak(run: Callable[[], Any]) -> tuple[Any, int]:
    """``run()``'s result (or the exception it raised) and its peak of allocated bytes."""
    tracemalloc.start()
    try:
        try:
            out: Any = run()
        except Exception as exc:
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _asciidoc(ctx: ChunkContext) -> Any:
    cls = chunker_class("asciidoc")
    return cls(cls.Options(), ctx)


def test_the_bound_is_a_small_multiple_of_the_file_with_a_floor() -> None:
    assert expansion_limit(0) == expansion_limit(100) == MIN_LIMIT
    assert expansion_limit(1_000_000) == MAX_EXPANSION * 1_000_000
    err = ExpansionError(20_027, "AsciiDoc attribute references")
    assert str(err) == (
        "expands to over 160,216 characters (AsciiDoc attribute references; "
        "at most 8x its 20,027 bytes); skipped"
    )


@pytest.mark.parametrize(
    ("make", "size"),
    [(bombs.adoc_attribute_bomb, 20_027), (bombs.adoc_sentence_bomb, 3_906)],
    ids=["10000-x-value", "sentence-value"],
)
def test_asciidoc_attribute_references_stop_at_the_bound(
    make: Callable[[], bytes], size: int, tiktoken_sizer: Any
) -> None:
    data = make()
    assert len(data) == size
    chunker = _asciidoc(ChunkContext(tiktoken_sizer))
    out, peak = _peak(lambda: chunker.chunk(data.decode()))
    assert isinstance(out, ExpansionError), out
    assert "AsciiDoc attribute references" in str(out)
    assert out.limit == expansion_limit(size)
    assert peak < PEAK_BYTES, peak


def test_asciidoc_attributes_within_the_bound_are_rendered(tiktoken_sizer: Any) -> None:
    text = (
        "= Guide\n:product: Zqwidget Enterprise Server\n\n"
        + "Install {product} first, then configure {product}.\n\n" * 40
    )
    chunks = _asciidoc(ChunkContext(tiktoken_sizer)).chunk(text)
    embedded = " ".join(c.embed_text for c in chunks)
    assert embedded.count("Zqwidget Enterprise Server") == 80
    assert "{product}" not in embedded


def test_a_rendering_that_would_pass_the_bound_is_never_built() -> None:
    source = "ab\n" * 10
    with pytest.raises(ExpansionError, match="markup rendering"):
        Rendering(source, [(0, 1, "x" * (MIN_LIMIT + 1))])
    assert Rendering(source, [(0, 1, "x" * 100)]).text.startswith("x" * 100 + "b")


def test_html_entity_declarations_are_never_expanded() -> None:
    data = bombs.html_entity_bomb()
    doc = HtmlReader().read(data)
    assert len(doc.text) < len(data)
    assert "lol" not in doc.text  # the declarations are not content
    assert "Zqentity & <kept> A" in doc.text  # HTML's own references are


def test_an_html_table_padded_to_a_wide_row_stops_at_the_bound() -> None:
    data = bombs.html_wide_table()
    out, peak = _peak(lambda: HtmlReader().read(data))
    assert isinstance(out, ExpansionError), out
    assert out.limit == expansion_limit(len(data))
    assert peak < PEAK_BYTES + 40 * len(data), peak  # the parsed tree, and the bound


def test_html_lists_nested_hundreds_deep_keep_their_text_not_their_indentation() -> None:
    data = bombs.html_nested_lists()
    doc = HtmlReader().read(data)
    assert doc.text.count("- b") == 5000  # every item
    assert len(doc.text) < 2 * len(data)  # was 24x: 2 spaces per level on every item


def test_a_long_kernel_language_is_cut_and_never_repeated_per_cell(tiktoken_sizer: Any) -> None:
    data = bombs.notebook_long_language()
    doc = NotebookReader().read(data)
    assert doc.meta["language"] == "l" * MAX_LANGUAGE_CHARS  # every chunk's payload holds it
    assert len(doc.text) < len(data)  # was 32x: the name on each of 3,000 fences
    cls = chunker_class("notebook")
    chunks = cls(cls.Options(), ChunkContext(tiktoken_sizer)).chunk_document(doc)
    assert len(chunks) < 1000  # was 24,001


def test_a_notebook_with_huge_outputs_is_read_within_its_size() -> None:
    data = bombs.notebook_huge_outputs()
    doc, peak = _peak(lambda: NotebookReader().read(data))
    assert "Zqresults" in doc.text and "step 149999" not in doc.text  # outputs left out
    kept, peak_kept = _peak(lambda: NotebookReader(outputs=10_000_000).read(data))
    assert "step 149999" in kept.text  # in the file: no expansion, so it is read
    assert len(kept.text) < len(data) <= expansion_limit(len(data)) / MAX_EXPANSION
    assert max(peak, peak_kept) < 40 * len(data)  # nbformat's objects, not a multiplier


def test_a_pdf_stream_that_inflates_stops_at_the_readers_memory_bound() -> None:
    """66 KB deflated, 19 MB of text inflated: PDFium's text page of it took 3.3 GB. The
    reader's process may map a bound that grows with the file's size, and ends there."""
    data = bombs.pdf_inflating_stream()
    out, peak = _peak(lambda: PdfReader().read(data))
    assert isinstance(out, ExpansionError), out
    assert "in the reader's memory" in str(out)
    assert f"{address_limit(len(data)):,} bytes of memory" in str(out)
    assert address_limit(len(data)) < 600 << 20
    assert peak < PEAK_BYTES, peak  # the text never reaches this process


def test_a_pdf_form_drawn_thousands_of_times_stops_at_the_text_bound() -> None:
    # 300 draws: the text page fits the reader's memory, its characters pass the bound
    out, peak = _peak(lambda: PdfReader().read(bombs.pdf_form_drawn(draws=300)))
    assert isinstance(out, ExpansionError), out
    assert "the PDF's text layer" in str(out)
    assert peak < PEAK_BYTES, peak
    # 4,000 draws (971 bytes): PDFium's text page alone passes the memory bound first
    out, peak = _peak(lambda: PdfReader().read(bombs.pdf_form_drawn()))
    assert isinstance(out, ExpansionError), out
    assert "in the reader's memory" in str(out)
    assert peak < PEAK_BYTES, peak
    # the same form drawn a few times is read
    few = PdfReader().read(bombs.pdf_form_drawn(draws=3))
    assert few.text.count("again and again") == 90
