"""``mdx``: MDX pages (markdown with ESM, JSX and expressions), chunked as markdown is.

MDX is what Docusaurus, Nextra, Astro Starlight, Next.js and many other documentation
sites write their pages in (mdxjs.com). :func:`~ingestd.chunkers.markup.mdx.read_mdx`
finds the page's MDX and what a reader of the built page sees of it; the page is then
parsed, rendered and packed exactly as the ``markdown`` strategy does, with these
differences in what is embedded:

* ESM (``import``/``export`` blocks) is left out of the embedded text. An exported
  ``title`` or ``description`` (``export const title = "..."``, or the ``title`` of an
  exported ``metadata``/``meta``/``frontMatter`` object) is the page's title and
  description, as front matter's are (front matter wins when a page has both);
* the page title roots every chunk's ``heading_path`` (unless the first heading repeats
  it) and so the heading prefix of the embedded text, and it is in the payload as
  ``title``;
* a JSX element is embedded as what it shows: the text between its tags, the values
  of its prose attributes (``title``, ``label``, ``description``, ``alt``...), and the
  strings and JSX text of its attribute expressions unless they are markup
  (``href``, ``className``...); a ``{...}`` expression in text keeps only its string
  literals; ``{/* comments */}`` go;
* there is no indented code (MDX has none): a line indented by 4 or more columns is
  prose, as inside a component;
* fenced code and code spans are never read as MDX and are embedded as they are.

A chunk's ``text`` and offsets stay verbatim: the ESM lines at the top of a page are in
its first chunk's ``text``, the tags in the chunks around them. MDX that does not parse
(an unclosed tag or brace) is read as markdown from there on: nothing is lost.

Units: ``max_tokens`` and ``min_tokens`` are budget-sizer tokens (tiktoken
``cl100k_base`` by default); offsets are ``str`` indices into the decoded text.
"""

from __future__ import annotations

from ingestd.chunkers.base import Chunk, LineIndex
from ingestd.chunkers.markup.frontmatter import parse_front_matter
from ingestd.chunkers.markup.mdblocks import read_blocks
from ingestd.chunkers.markup.mdx import MdxLayer, read_mdx
from ingestd.chunkers.markup.noise import Edit
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.packing.packer import Packer
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions, markdown_edits

__all__ = ["MdxChunker", "mdx_edits"]


def mdx_edits(text: str, layer: MdxLayer) -> list[Edit]:
    """The edits that leave out what ``layer`` says a reader does not see.

    A run left out between two letters or digits on one line leaves a space (the values
    of two attributes stay two words); any other run leaves nothing.
    """
    out: list[Edit] = []
    n = len(text)
    for a, b in layer.drops:
        space = a > 0 and b < n and text[a - 1].isalnum() and text[b].isalnum()
        out.append((a, b, " " if space and text.find("\n", a, b) == -1 else ""))
    return out


class MdxChunker(MarkdownChunker):
    """MDX chunking; see the module docstring.

    Raises:
        ValueError: from :class:`~ingestd.chunkers.strategies.markdown.MarkdownOptions`
            validation.
    """

    name = "mdx"
    version = 1
    Options = MarkdownOptions
    options: MarkdownOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split MDX ``text`` into heading-aware chunks, in document order."""
        body, meta = parse_front_matter(text)
        layer = read_mdx(text, body)
        meta = {**layer.meta, **meta}
        lines = LineIndex(text)
        packer = self.mdx_packer(text, body, meta, lines, layer)
        return packer.chunks(lines, packer.pack_all(), meta)

    def mdx_packer(
        self, text: str, body: int, meta: dict[str, str], lines: LineIndex, layer: MdxLayer
    ) -> Packer:
        """A :class:`Packer` over the page as a reader sees it (``layer``, from read_mdx)."""
        levels = self.options.section_levels
        masked = layer.masked
        mlines = lines if masked is text else LineIndex(masked)
        raw = read_blocks(masked, body, levels, mlines, indented_code=False)
        edits = markdown_edits(masked, raw) + mdx_edits(text, layer)
        rendering = Rendering(text, edits, body)
        if rendering.identity and layer.drops:  # nothing but markup: embedded as it is
            raw = read_blocks(text, body, levels, lines, indented_code=False)
            rendering = Rendering(text, markdown_edits(text, raw), body)
        return self.packer_of(body, meta, lines, raw, rendering, title_in_path=True)
