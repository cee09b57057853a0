"""Notebooks: markdown cells by headings, code cells whole, outputs out, cited by cell."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.readers.document import FormatError
from ingestd.chunkers.readers.notebook import NotebookReader
from ingestd.chunkers.registry import make_chunker
from ingestd.chunkers.text import NotUTF8Error
from tests.format_inputs import NOTEBOOK_PAGES, check_chunks, heading_ends, output_marker


def _notebooks(tree: Path) -> list[Path]:
    found = sorted((tree / "notebooks").glob("*.ipynb"))
    assert len(found) == len(NOTEBOOK_PAGES)
    return found


def test_structure_budget_and_lines(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("notebook", {}, ctx)
    for path in _notebooks(format_tree):
        doc = chunker.read(path.read_bytes())
        chunks = chunker.chunk_document(doc)
        check_chunks(doc.text, chunks, ctx, heading_ends(doc.text, "markdown"))
        assert all(c.meta["language"] == "python" for c in chunks)
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code
        for cell in code:  # a code cell that fits is one chunk's, whole
            if ctx.sizer.count(cell.source) < 150:
                assert any(cell.source in c.text for c in chunks), cell.source[:60]


def test_citations_read_back_from_the_cells(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("notebook", {}, ctx)
    checked = 0
    for path in _notebooks(format_tree):
        nb = nbformat.read(path, as_version=4)
        sources = [c.source.split("\n") for c in nb.cells]
        for c in chunker.chunk_document(chunker.read(path.read_bytes())):
            m = c.meta
            assert 1 <= m["cell"] <= m["end_cell"] <= len(nb.cells)
            lines = c.text.split("\n")
            first = sources[m["cell"] - 1][m["cell_start_line"] - 1]
            last = sources[m["end_cell"] - 1][m["cell_end_line"] - 1]
            if lines[0] != first:  # the fence the reader opens a code cell with
                assert lines[0].startswith("```") and nb.cells[m["cell"] - 1].cell_type == "code"
                lines = lines[1:]
            if lines[-1] != last:  # ... and closes it with
                assert lines[-1].startswith("```")
                assert nb.cells[m["end_cell"] - 1].cell_type == "code"
                lines = lines[:-1]
            assert lines[0] == first, (path.name, m, lines[0], first)
            assert lines[-1] == last, (path.name, m, lines[-1], last)
            if m["cell"] == m["end_cell"]:
                cited = "\n".join(
                    sources[m["cell"] - 1][m["cell_start_line"] - 1 : m["cell_end_line"]]
                )
                assert "\n".join(lines) in cited
            checked += 1
    assert checked > 30


def test_outputs_left_out_unless_a_rule_keeps_short_ones(
    format_tree: Path, ctx: ChunkContext
) -> None:
    path = _notebooks(format_tree)[1]
    data = path.read_bytes()
    plain = make_chunker("notebook", {}, ctx)
    text = plain.read(data).text
    assert "zqoutput" not in text and "<Figure>" not in text and "iVBOR" not in text
    kept = make_chunker("notebook", {"outputs": 100}, ctx)
    doc = kept.read(data)
    embedded = " ".join(c.embed_text for c in kept.chunk_document(doc))
    assert output_marker(1).split(":")[0] in embedded or "zqoutput" in embedded
    assert "<Figure>" in doc.text and "iVBOR" not in doc.text  # text/plain only, no image
    short = make_chunker("notebook", {"outputs": 10}, ctx).read(data).text
    assert "zqoutput" not in short  # longer than 10 characters: left out


def test_fences_in_sources_never_swallow_the_next_cell(ctx: ChunkContext) -> None:
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(
        cells=[
            new_markdown_cell("# Title\n\n```python\nleft open"),
            new_code_cell('doc = """\n```\nnot a fence end\n"""'),
            new_markdown_cell(""),
            new_markdown_cell("## After\n\nThe last cell."),
        ]
    )
    chunker = make_chunker("notebook", {"min_tokens": 0}, ctx)
    doc = chunker.read(nbformat.writes(nb).encode())
    chunks = chunker.chunk_document(doc)
    last = [c for c in chunks if "The last cell." in c.text]
    assert last and last[0].heading_path == ("Title", "After")
    assert last[0].meta["cell"] == 4  # the empty cell keeps its number
    assert doc.text.count("````") == 2  # the code cell's fence is longer than its content's


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b'{"cells": [', FormatError),
        (b'{"nbformat": 4, "nbformat_minor": 5, "cells": "nope", "metadata": {}}', FormatError),
        (b"\xff\xfe{}", NotUTF8Error),
    ],
)
def test_malformed_notebooks_say_so(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        NotebookReader().read(data)
    assert "skipped" in str(info.value)


def test_an_empty_notebook_has_no_chunks(ctx: ChunkContext) -> None:
    from nbformat.v4 import new_notebook

    chunker = make_chunker("notebook", {}, ctx)
    doc = chunker.read(nbformat.writes(new_notebook()).encode())
    assert doc.text == "" and chunker.chunk_document(doc) == []
