"""``notebook``: Jupyter notebooks, markdown cells by their headings, code cells whole.

The reader (:class:`~ingestd.chunkers.readers.notebook.NotebookReader`, nbformat)
writes a notebook out as one markdown text: markdown cells verbatim, each code cell
in a fenced block tagged with the kernel's language, outputs left out unless
``outputs`` keeps short text ones. That text is chunked exactly as the ``markdown``
strategy chunks a page: sections at the headings of markdown cells, a heading kept
with what follows it (in the same cell or the next), a code cell whole when it fits
and otherwise cut at line boundaries and re-fenced (a single line longer than the
budget is the only thing ever cut inside a line), small cells packed together up to
``min_tokens``.

Each chunk's payload cites the cells it spans (``cell``, ``end_cell``, 1-based, empty
cells counted) and the lines within them (``cell_start_line``, ``cell_end_line``), and
records the kernel ``language``; ``start_line``/``end_line`` and the offsets refer to
the extracted text, which ``read`` returns too.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens; ``outputs`` is in
characters; offsets are ``str`` indices into the extracted text.
"""

from __future__ import annotations

from pydantic import Field

from ingestd.chunkers.base import ChunkerOptions
from ingestd.chunkers.readers.document import Reader
from ingestd.chunkers.readers.notebook import NotebookReader
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions

__all__ = ["NotebookChunker", "NotebookOptions"]


class NotebookOptions(MarkdownOptions):
    """Options of the ``notebook`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        section_levels: headings of level ``1..section_levels`` open a section (default 3).
        min_tokens: small sections are packed together up to this size (default
            three quarters of ``max_tokens``).
        heading_prefix: prefix the heading path to the embedded text (default on).
        title_in_prefix: use a first markdown cell's front-matter ``title`` as the
            prefix root (default on).
        outputs: keep each text output (a stream, a result's ``text/plain``) of at most
            this many characters, after its cell, in the text that is chunked and
            embedded (default 0: outputs are left out).
    """

    outputs: int = Field(default=0, ge=0)


class NotebookChunker(MarkdownChunker):
    """Notebook chunking; see the module docstring.

    Raises:
        ValueError: from :class:`NotebookOptions` validation.
    """

    name = "notebook"
    version = 4  # 2: markdown cells rendered as markdown 14 renders them (entities, /// blocks);
    # 4: packed as markdown 16 packs (3 was not kept)
    Options = NotebookOptions
    options: NotebookOptions

    @classmethod
    def reader(cls, options: ChunkerOptions) -> Reader:
        """A :class:`~ingestd.chunkers.readers.notebook.NotebookReader` keeping ``outputs``."""
        assert isinstance(options, NotebookOptions)
        return NotebookReader(options.outputs)
