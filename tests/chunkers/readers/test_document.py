"""The reader seam: text formats keep the decode contract; pages, file lines, citations."""

from __future__ import annotations

import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.readers.document import (
    TEXT_READER,
    Extracted,
    LineMap,
    PageBreaks,
    citation,
    cite_text,
)
from ingestd.chunkers.registry import CHUNKERS, make_chunker
from ingestd.chunkers.text import BinaryFileError, NotUTF8Error


def test_text_formats_read_by_the_decode_contract() -> None:
    doc = TEXT_READER.read("\ufeffa\r\nb\rc\n".encode())
    assert doc == Extracted("a\nb\nc\n")
    assert doc.citations is None and doc.cite(0, 1) == {}
    with pytest.raises(BinaryFileError):
        TEXT_READER.read(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(NotUTF8Error):
        TEXT_READER.read("café".encode("latin-1"))


@pytest.mark.parametrize("name", ["markdown", "rst", "code", "sentence", "token", "asciidoc"])
def test_text_strategies_read_text_and_cite_nothing(name: str, ctx: ChunkContext) -> None:
    chunker = make_chunker(name, {}, ctx)
    data = b"# Title\r\n\r\nSome words here.\r\n"
    doc = chunker.read(data)
    assert doc.text == "# Title\n\nSome words here.\n"
    assert chunker.chunk_document(doc) == chunker.chunk(doc.text)


def test_every_strategy_names_a_reader() -> None:
    for name, cls in CHUNKERS.items():
        reader = cls.reader(cls.Options())
        assert callable(reader.read), name


def test_page_breaks() -> None:
    text = "one\ntwo\n\f\nthree\n\f\nfour\n"
    pages = PageBreaks(text)
    assert [pages.page_of(text.index(w)) for w in ("one", "three", "four")] == [1, 2, 3]
    assert pages.of(text.index("two"), text.index("three") + 5) == {"page": 1, "end_page": 2}
    assert pages.page_of(text.index("\f")) == 1  # a break belongs to the page it ends


def test_line_map_made_lines_take_the_line_before() -> None:
    text = "# Title\n\n```\ncode\n```\n"
    spans: list[tuple[int, int] | None] = [(10, 12), None, (14, 14), (15, 15), None, None]
    lines = LineMap(text, spans)
    assert lines.of(0, 7) == {"file_start_line": 10, "file_end_line": 12}
    assert lines.of(text.index("```"), len(text) - 1) == {
        "file_start_line": 14,
        "file_end_line": 15,
    }
    with pytest.raises(ValueError):
        LineMap(text, spans[:-1])


def test_citations_in_words() -> None:
    assert citation({"page": 4, "end_page": 4}) == "p. 4"
    assert citation({"page": 4, "end_page": 5}) == "pp. 4-5"
    cell = {"cell": 7, "end_cell": 7, "cell_start_line": 3, "cell_end_line": 10}
    assert citation(cell) == "cell 7:3-10"
    assert citation({**cell, "end_cell": 9, "cell_end_line": 2}) == "cells 7:3-9:2"
    assert citation({"file_start_line": 120, "file_end_line": 135}) == "file lines 120-135"
    assert citation({"start_line": 1, "end_line": 2}) == ""
    assert cite_text({"start_line": 1, "end_line": 2}) == ":1-2"
    assert (
        cite_text({"start_line": 1, "end_line": 2, "file_start_line": 9, "file_end_line": 9})
        == ":9-9"
    )
    assert cite_text({"page": 2, "end_page": 2, "start_line": 1, "end_line": 2}) == " p. 2"
