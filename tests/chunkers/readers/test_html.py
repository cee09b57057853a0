"""HTML pages: the main content only, headings, code and tables kept, cited by file line."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.readers.document import FormatError
from ingestd.chunkers.readers.html import HtmlReader
from ingestd.chunkers.readers.htmltree import Element, Text, parse_html
from ingestd.chunkers.registry import make_chunker
from tests.format_inputs import SITE_PAGES, check_chunks, heading_ends
from tests.helpers import CORPORA

_TAG = re.compile(r"<[^>]*>")
_ALT = re.compile(r"<img[^>]*\balt=\"([^\"]*)\"[^>]*>")
_WORD = re.compile(r"[A-Za-z]{3,}")


def _pages(tree: Path) -> list[tuple[Path, str]]:
    """Each built page with the markdown it was built from."""
    out = []
    for rel in SITE_PAGES:
        page = tree / "site" / rel.removesuffix(".md") / "index.html"
        out.append((page, (CORPORA / "mkdocs-docs" / rel).read_text(encoding="utf-8")))
    return out


def _texts_under(root: Element, tags: set[str]) -> list[str]:
    out: list[str] = []

    def walk(el: Element, inside: bool) -> None:
        inside = inside or el.tag in tags or el.attrs.get("role") == "navigation"
        for child in el.children:
            if isinstance(child, Text):
                if inside and child.data.strip():
                    out.append(" ".join(child.data.split()))
            elif child.tag not in ("script", "style"):
                walk(child, inside)

    walk(root, False)
    return out


def test_structure_budget_and_lines(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("html", {}, ctx)
    for page, _ in _pages(format_tree):
        doc = chunker.read(page.read_bytes())
        chunks = chunker.chunk_document(doc)
        check_chunks(doc.text, chunks, ctx, heading_ends(doc.text, "markdown"))
        assert chunks[0].heading_path  # the page's title heads its first chunk


def test_no_navigation_header_or_footer_text(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("html", {}, ctx)
    for page, source in _pages(format_tree):
        raw = page.read_text(encoding="utf-8")
        chrome = [
            t
            for t in _texts_under(parse_html(raw), {"nav", "header", "footer", "aside"})
            if len(t) > 3 and t not in source
        ]
        assert len(chrome) > 10, page  # the theme's navigation is there to leave out
        chunks = chunker.chunk_document(chunker.read(page.read_bytes()))
        for c in chunks:
            for t in chrome:
                assert t not in c.text and t not in c.embed_text, (page, t)
        assert "Made with" not in " ".join(c.text for c in chunks)


def _words(line: str) -> list[str]:
    return _WORD.findall(line)[:4]


def test_citations_read_back_from_the_html_lines(format_tree: Path, ctx: ChunkContext) -> None:
    chunker = make_chunker("html", {}, ctx)
    checked = 0
    for page, _ in _pages(format_tree):
        raw = page.read_text(encoding="utf-8").split("\n")
        for c in chunker.chunk_document(chunker.read(page.read_bytes())):
            a, b = c.meta["file_start_line"], c.meta["file_end_line"]
            assert 1 <= a <= b <= len(raw)
            cited = _ALT.sub(r" \1 ", "\n".join(raw[a - 1 : b]))  # an image cites its alt text
            cited = htmllib.unescape(_TAG.sub(" ", cited))
            cited = " ".join(cited.split())
            lines = [ln for ln in c.text.split("\n") if _words(ln) and not ln.startswith("```")]
            for line in (lines[0], lines[-1]):
                for word in _words(line):
                    assert word in cited, (page.name, c.meta, word, line)
            checked += 1
    assert checked > 50


def test_pre_blocks_verbatim(format_tree: Path, ctx: ChunkContext) -> None:
    page = format_tree / "site" / "guide" / "reactivity" / "index.html"
    raw = page.read_text(encoding="utf-8")
    doc = make_chunker("html", {}, ctx).read(page.read_bytes())
    blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", raw, re.S)
    assert len(blocks) > 5
    for block in blocks:
        code = htmllib.unescape(_TAG.sub("", block)).strip("\n")
        assert "\n".join(line.rstrip() for line in code.split("\n")).rstrip() in doc.text


def test_a_split_table_repeats_its_header_row(format_tree: Path, ctx: ChunkContext) -> None:
    page = format_tree / "site" / "widgets" / "data_table" / "index.html"
    chunker = make_chunker("html", {"max_tokens": 80}, ctx)
    chunks = chunker.chunk_document(chunker.read(page.read_bytes()))
    rows = [c for c in chunks if "| `fixed_columns`" in c.text or "| `cursor_type`" in c.text]
    assert rows
    header = "| Name | Type | Default | Description |"
    for c in rows:
        assert header in c.embed_text, c.embed_text[:200]
        assert all(line.startswith("|") for line in c.text.split("\n") if line.strip())


def test_tree_builder_closes_implied_elements() -> None:
    doc = HtmlReader().read(
        b"<html><body><main><h1>T</h1><ul><li>one<li>two</ul><p>first<p>second"
        b"<table><tr><th>k<th>v<tr><td>a<td>b|c</table></main><footer>foot</footer>"
    )
    assert doc.text == (
        "# T\n\n- one\n- two\n\nfirst\n\nsecond\n\n| k | v |\n| --- | --- |\n| a | b\\|c |\n"
    )


def test_one_article_in_main_is_the_content_and_permalinks_go() -> None:
    page = (
        "<body><header><h1>Site</h1></header><nav>Home</nav>\n<main>\n<aside>toc</aside>\n"
        '<article>\n<h2 id="a">Setup<a class="headerlink" href="#a">¶</a></h2>\n'
        "<p>Run <code>make</code>\nthen <em>wait</em>.</p>\n</article>\n</main>"
        "<script>var x = 1;</script><footer>(c)</footer></body>"
    )
    doc = HtmlReader().read(page.encode())
    assert doc.text == "## Setup\n\nRun `make`\nthen wait.\n"
    assert doc.cite(0, 8) == {"file_start_line": 5, "file_end_line": 5}
    start = doc.text.index("Run")
    assert doc.cite(start, len(doc.text) - 1) == {"file_start_line": 6, "file_end_line": 7}


def test_a_page_that_takes_too_long_is_skipped(format_tree: Path) -> None:
    data = (format_tree / "site" / "guide" / "layout" / "index.html").read_bytes() * 20
    with pytest.raises(FormatError, match="not read within"):
        HtmlReader(max_seconds=0.001).read(data)


@pytest.mark.parametrize("tag", ["div", "blockquote", "span", "ul><li"])
def test_nesting_of_any_depth_is_read_flattened_below_the_bound(tag: str) -> None:
    from ingestd.chunkers.readers.htmltree import MAX_DEPTH

    depth = 20_000  # a recursive walk of the tree as written would overflow the stack
    close = "</" + "></".join(reversed(tag.split("><"))) + ">"
    page = (
        "<main>"
        + f"<{tag}>w{{}} " * depth
        + "<p>bottom</p>"
        + close * depth
        + "<p>after</p></main>"
    )
    words = [f"w{k}" for k in range(depth)]
    doc = HtmlReader().read(page.format(*range(depth)).encode())
    assert re.findall(r"w\d+", doc.text) == words  # every word, in order
    assert doc.text.rstrip().endswith("bottom\n\nafter")
    root = parse_html(page.format(*range(depth)))
    deepest, stack = 0, [(root, 0)]
    while stack:
        el, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in el.children if isinstance(c, Element))
    assert deepest <= MAX_DEPTH
