"""``html``: the main content of HTML pages, by headings, code and table rows.

The reader (:class:`~ingestd.chunkers.readers.html.HtmlReader`) keeps a page's main
content only (navigation, headers, footers, sidebars, scripts and styles left out) and
writes it out as markdown: headings as ATX headings, ``<pre>`` as fenced code
verbatim, tables one row a line under their header row. That text is chunked exactly
as the ``markdown`` strategy chunks a page: headings become ``heading_path`` and stay
with what follows them, code is cut only at line ends and re-fenced, a table that
does not fit is cut between rows and each part repeats the header row in its prefix.

``text``, offsets and ``start_line``/``end_line`` refer to the extracted text (which
``read`` returns); the payload cites the lines of the HTML file itself
(``file_start_line``, ``file_end_line``), which ``ingestd search`` shows.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens; ``max_seconds`` is
seconds; offsets are ``str`` indices into the extracted text.
"""

from __future__ import annotations

from pydantic import Field

from ingestd.chunkers.base import Chunk, ChunkerOptions, LineIndex
from ingestd.chunkers.readers.document import Reader
from ingestd.chunkers.readers.html import HtmlReader
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions

__all__ = ["HtmlChunker", "HtmlOptions"]


class HtmlOptions(MarkdownOptions):
    """Options of the ``html`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        section_levels: headings ``<h1>``..``<hN>`` open a section (default 3).
        min_tokens: small sections are packed together up to this size (default
            three quarters of ``max_tokens``).
        heading_prefix: prefix the heading path to the embedded text (default on).
        title_in_prefix: unused (a page has no front matter); kept for symmetry.
        max_seconds: most seconds reading one page may take (default 60); a page that
            takes longer is skipped with a note in ``status``.
    """

    max_seconds: float = Field(default=60.0, gt=0)


class HtmlChunker(MarkdownChunker):
    """HTML chunking; see the module docstring.

    Raises:
        ValueError: from :class:`HtmlOptions` validation.
    """

    name = "html"
    version = 5  # 2: no front matter; 3: the markdown rendering of entities and /// blocks;
    # 5: packed as markdown 16 packs (4 was not kept)
    Options = HtmlOptions
    options: HtmlOptions

    @classmethod
    def reader(cls, options: ChunkerOptions) -> Reader:
        """An :class:`~ingestd.chunkers.readers.html.HtmlReader` bounded by ``max_seconds``."""
        assert isinstance(options, HtmlOptions)
        return HtmlReader(options.max_seconds)

    def chunk(self, text: str) -> list[Chunk]:
        """Chunk the extracted text of a page as markdown, all of it body.

        A page has no YAML front matter: a text that starts with a ``---`` line (a
        paragraph of dashes) is chunked whole, never read as metadata and left out.
        """
        lines = LineIndex(text)
        packer = self.packer(text, 0, {}, lines)
        return packer.chunks(lines, packer.pack_all(), {})
