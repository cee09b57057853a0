"""AsciiDoc: sections by ``=`` titles, listings whole, admonitions and attributes in words."""

from __future__ import annotations

from pathlib import Path

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.registry import make_chunker
from tests.format_inputs import ADOC_PAGES, check_chunks, heading_ends

DOC = """\
= Install Guide
:product: Widgetron
:url-dl: https://example.org/dl

Welcome to {product}.

== Download

NOTE: Get {product} from link:{url-dl}[the download page].

[source,shell]
.Fetch it
----
curl -O https://example.org/dl/widgetron.tar.gz
tar xf widgetron.tar.gz
----

[WARNING]
====
Never run {product} as root.
====

// maintainers: keep this short
== Configure

* one setting, see <<download,Download>>
* another one{nbsp}here
"""


def _adoc(tree: Path) -> list[Path]:
    found = sorted((tree / "adoc").glob("*.adoc"))
    assert len(found) == len(ADOC_PAGES)
    return found


def test_structure_budget_and_lines(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("asciidoc", {}, ctx)
    for path in _adoc(format_tree):
        doc = chunker.read(path.read_bytes())
        chunks = chunker.chunk_document(doc)
        check_chunks(doc.text, chunks, ctx, heading_ends(doc.text, "asciidoc"))
        assert any(c.heading_path for c in chunks)


def test_listings_kept_whole_where_they_fit(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("asciidoc", {}, ctx)
    seen = 0
    for path in _adoc(format_tree):
        text = path.read_text(encoding="utf-8")
        chunks = chunker.chunk(text)
        parts = text.split("\n----\n")
        for k in range(1, len(parts) - 1, 2):  # the content of each ---- listing
            body = parts[k]
            if ctx.sizer.count(body) < 120:
                assert any(body in c.text for c in chunks), body[:60]
                seen += 1
    assert seen >= 3


def test_sections_admonitions_attributes_and_links(ctx: ChunkContext) -> None:
    chunks = make_chunker("asciidoc", {"min_tokens": 0}, ctx).chunk(DOC)
    assert [c.heading_path for c in chunks] == [
        ("Install Guide",),
        ("Install Guide", "Download"),
        ("Install Guide", "Configure"),
    ]
    intro, download, configure = (c.embed_text for c in chunks)
    assert intro == "Install Guide\n\nInstall Guide\n\nWelcome to Widgetron."
    assert "Note: Get Widgetron from the download page." in download
    assert "Warning:\nNever run Widgetron as root." in download
    assert "curl -O https://example.org/dl/widgetron.tar.gz\ntar xf" in download
    assert "----" in download and "[source,shell]" not in download and "Fetch it" in download
    assert "====" not in download and "maintainers" not in download
    assert "see Download" in configure and "one\u00a0here" in configure
    assert all(DOC[c.start : c.end] == c.text for c in chunks)
    assert ":product:" in chunks[0].text  # the payload's text stays verbatim


def test_a_long_listing_is_cut_at_lines_and_closed(ctx: ChunkContext) -> None:
    code = "\n".join(f"step_{i} = run_the_step(number={i}, verbose=True)" for i in range(80))
    text = f"= Steps\n\nThe script:\n\n----\n{code}\n----\n"
    chunks = make_chunker("asciidoc", {}, ctx).chunk(text)
    assert len(chunks) > 2
    for c in chunks:
        assert c.start == 0 or text[c.start - 1] == "\n"
    for c in chunks[:-1]:
        assert c.embed_text.endswith("\n----"), c.embed_text[-40:]
    assert all(c.heading_path == ("Steps",) for c in chunks)


def test_delimited_block_never_opens_a_section(ctx: ChunkContext) -> None:
    text = "= Doc\n\n____\n== Not a section\n\nQuoted words.\n____\n\n== Real\n\nBody.\n"
    chunks = make_chunker("asciidoc", {"min_tokens": 0}, ctx).chunk(text)
    assert [c.heading_path for c in chunks] == [("Doc",), ("Doc", "Real")]


def test_a_block_title_or_attribute_lines_with_no_block_after_them_are_kept(
    ctx: ChunkContext,
) -> None:
    """Found by the property test (``.0``): lines that belong to the next block, with no
    block after them, were in no chunk, so their text was left out of the index."""
    for text in (".0", ".Orphan title\n\nA paragraph after a blank line.\n", "= T\n\n:key: v\n"):
        chunks = make_chunker("asciidoc", {}, ctx).chunk(text)
        covered = "".join(text[c.start : c.end] for c in chunks)
        for word in ("0", "Orphan", "paragraph", "key"):
            if word in text:
                assert word in covered, (text, [c.text for c in chunks])
