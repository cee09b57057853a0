"""``hierarchical``: markdown sections as parents, budget-sized children inside them.

The document is parsed as by the ``markdown`` strategy. Each heading of level
``1..parent_levels`` (default 1-2), and the text before the first one, opens a
*parent*: the section with all its subsections, stored for context (``search
--expand``) and not held to the budget (``is_parent=True``). Headings with nothing
after them at a parent's end (a page title right before its first ``##`` section, a
section whose content renders to nothing) open the next parent instead: no child is
only headings unless nothing follows it in the document. Inside each parent, blocks
are packed into *children* exactly as ``markdown`` packs a document (sections at
levels ``1..section_levels``, blocks whole when they fit, content-defined boundaries,
tiny sections merged); a child never crosses its parent's boundary.

The returned list is in document order, each parent just before its children, and
every child's ``parent`` is the index of its parent in that list. Children fit
``max_tokens`` (and the embedding model, prefix included); parents carry the same
heading prefix and front-matter ``meta`` as their children.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens (tiktoken ``cl100k_base``
by default); offsets are ``str`` indices into the decoded text.
"""

from __future__ import annotations

from pydantic import model_validator

from ingestd.chunkers.base import Chunk, Chunker, LineIndex
from ingestd.chunkers.markup.frontmatter import parse_front_matter
from ingestd.chunkers.packing.units import Unit
from ingestd.chunkers.sections import Section, Span
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions

__all__ = ["HierarchicalChunker", "HierarchicalOptions"]


class HierarchicalOptions(MarkdownOptions):
    """Options of the ``hierarchical`` strategy.

    Attributes:
        parent_levels: headings of level ``1..parent_levels`` open a parent (1-6,
            default 2; at most ``section_levels``).
        max_tokens: budget per child, in budget tokens (default 200); parents have none.
        section_levels: headings that open a child section (default 3).
        min_tokens: child sections are merged up to this size (default ``3 * max_tokens // 4``).
        heading_prefix: prefix the heading path to the embedded text (default on).
        title_in_prefix: use the front-matter ``title`` as the prefix root (default on).
    """

    parent_levels: int = 2

    @model_validator(mode="after")
    def _check_parent(self) -> HierarchicalOptions:
        if not 1 <= self.parent_levels <= self.section_levels:
            raise ValueError("parent_levels must be between 1 and section_levels")
        return self


def _groups(sections: list[Section], parent_levels: int) -> list[tuple[int, int]]:
    """``(lo, hi)`` section ranges of the parents."""
    starts = [k for k, s in enumerate(sections) if k == 0 or s.level <= parent_levels]
    return [
        (a, starts[i + 1] if i + 1 < len(starts) else len(sections)) for i, a in enumerate(starts)
    ]


class HierarchicalChunker(Chunker):
    """Parent sections with budget-sized children; see the module docstring.

    Raises:
        ValueError: from :class:`HierarchicalOptions` validation.
    """

    name = "hierarchical"
    version = 17  # 16: children packed as markdown 16 packs (15 was not kept);
    # 17: headings at a parent's end open the next parent
    Options = HierarchicalOptions
    options: HierarchicalOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split markdown ``text`` into parents and their children, in document order."""
        opts = self.options
        body, meta = parse_front_matter(text)
        lines = LineIndex(text)
        packer = MarkdownChunker(opts, self.ctx).packer(text, body, meta, lines)
        parents: list[Span] = []
        children: list[list[Span]] = []
        carried: list[Unit] = []  # headings at a parent's end: they open the next parent
        groups = _groups(packer.sections, opts.parent_levels)
        for g, (lo, hi) in enumerate(groups):
            units = carried + packer.units(lo, hi)
            k = len(units)
            while g + 1 < len(groups) and k > 0 and units[k - 1].lead:
                k -= 1
            units, carried = units[:k], units[k:]
            if units:
                parents.append(packer.whole(units))
                children.append(packer.pack(units))
        placed = iter(packer.place([c for group in children for c in group]))
        out: list[Chunk] = []
        for parent, at, group in zip(parents, packer.place(parents), children, strict=True):
            index = len(out)
            out.append(packer.chunk_of(lines, parent, at, meta, is_parent=True))
            out.extend(packer.chunk_of(lines, c, next(placed), meta, parent=index) for c in group)
        return out
