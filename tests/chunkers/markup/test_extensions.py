"""MkDocs containers and snippet includes: read as markdown, rendered without their markup.

Admonitions (``!!! note "Title"``), collapsible blocks (``???``) and content tabs
(``=== "Label"``) hold markdown, not indented code; their marker renders to its title.
Snippet includes (``--8<--``, mdBook's ``{{#include}}``) render to nothing, and so does a
code block that holds nothing else; blockquote markers go (``> [!NOTE]`` keeps ``NOTE``).
``text``, offsets and lines stay verbatim. Exact cases, generated documents
(hypothesis) and real files of ../shared/corpora.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingestd.chunkers import ChunkContext, decode
from ingestd.chunkers.markup.extensions import container_marker
from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.hierarchical import HierarchicalChunker, HierarchicalOptions
from ingestd.chunkers.strategies.markdown import (
    MarkdownChunker,
    MarkdownOptions,
    parse_markdown,
    render_markdown,
)
from tests.chunkers.markup.test_clean import check_clean
from tests.helpers import CORPORA

TIKTOKEN = TiktokenSizer()

#: Markup that must never reach the embedded text.
_MARKUP = re.compile(r"^[ \t]*(?:!!!|\?\?\?|===[+!]? \")|-8<-|\{\{#|^:::", re.M)

RENDERED = [
    ('!!! note "Title"\n\n    Body [x](https://y.io).', 'Title\n\n    Body x.'),
    ("!!! note\n    Body.", "note\n    Body."),
    ('??? tip "More"\n\n    Hidden.', "More\n\n    Hidden."),
    ("???+ warning\n\n    Open.", "warning\n\n    Open."),
    ('!!! note ""\n\n    Body.', "\n    Body."),
    ('!!! tip inline end "Screens"\n\n    Side.', "Screens\n\n    Side."),
    (
        '=== "Tab A"\n\n    ```sh\n    pip install x\n    ```\n\n=== "Tab B"\n\n    Text.',
        "Tab A\n\n    ```sh\n    pip install x\n    ```\n\nTab B\n\n    Text.",
    ),
    (
        "!!! tip\n\n    - [a](https://u.io) item\n    - b\n\nAfter.",
        "tip\n\n    - a item\n    - b\n\nAfter.",
    ),
    ('--8<-- "docs/snippets/x.md"\n\nText.', "\nText."),
    ("--8<--\na.md\nb.md\n--8<--\n\nText.", "\nText."),
    ('<div class="x">\n--8<-- "docs/images/a.svg"\n</div>\n\nText.', "\nText."),
    ('Intro.\n\n```python title="a.py"\n--8<-- "docs/a.py"\n```\n\nAfter.', "Intro.\n\n\nAfter."),
    ('```{.textual path="x.py"}\n```\n\nText.', "\nText."),
    (
        "```rust\n{{#rustdoc_include ../l/main.rs:here}}\nfn main() {}\n```",
        "```rust\nfn main() {}\n```",
    ),
    ("::: textual.app\n    options:\n      show: false", "textual.app\n"),
    # blockquote markers go, a GitHub alert keeps its word
    ("> Quoted [x](https://y.io) text.\n> More.", "Quoted x text.\nMore."),
    ("> [!NOTE]\n> Read this.", "NOTE\nRead this."),
    ("> > Deep.\n>\n> Back.", "Deep.\nBack."),
    ("- item\n  > quoted in a list", "- item\n  quoted in a list"),
    # PyMdown's generic blocks (pymdownx.blocks): the header keeps its title
    ("/// note | Some title\nBody [x](https://y.io).\n///", "Some title\nBody x.\n"),
    ("/// note\n\nBody.\n\n///", "note\n\nBody.\n\n"),
    ('/// warning | "Quoted"\nBody.\n///', "Quoted\nBody.\n"),
    ("/// admonition | Careful\n    type: warning\n\nBody.\n///", "Careful\n\nBody.\n"),
    ("/// details | Sum\n    type: tip\n    open: True\n\nHidden.\n///", "Sum\n\nHidden.\n"),
    ("/// tab | Tab 1\nOne.\n///\n\n/// tab | Tab 2\nTwo.\n///", "Tab 1\nOne.\n\nTab 2\nTwo.\n"),
    ("/// html | div.grid\nIn a div.\n///", "In a div.\n"),
    ("/// details\n\n- item\n///", "\n- item\n"),
    ("//// note | Outer\nText.\n/// tip\nInner.\n///\n////", "Outer\nText.\ntip\nInner.\n"),
    # not markup: kept as written
    ("```rust\n/// A doc comment.\nfn f() {}\n```", None),
    ("a /// b, and http://x.io///y", None),
    ("a > b and c>d", None),
    ("```sh\n> not a quote\n```", None),
    ("!!! Warning !!!\n\n=== not a tab", None),
    ("```sh\necho '--8<-- is a marker'\n```", None),
    ("    !!! note\n    indented code", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), RENDERED, ids=[t[:30] for t, _ in RENDERED])
def test_mkdocs_markup_rendering(text: str, expected: str | None) -> None:
    assert render_markdown(text).text == (text if expected is None else expected)


def test_container_markers() -> None:
    assert container_marker('!!! note "A title"')
    assert container_marker("???+ tip inline end")
    assert container_marker('===! "Tab"')
    assert container_marker('  !!!note "x"')
    for line in ("!!!", "??? ", '=== "open', "=== Tab", "!!! Warning !!!", "?? note"):
        assert container_marker(line) is None, line


def test_container_content_is_markdown_not_indented_code() -> None:
    text = "!!! note\n\n    Para one.\n\n    - item\n\n    ```py\n    x = 1\n    ```\n\nAfter."
    (sec,) = parse_markdown(text)
    kinds = [(b.kind, text[b.start : b.body]) for b in sec.blocks]
    assert kinds == [("para", "!!! note\n\n"), ("list", ""), ("fence", ""), ("para", "")]


def test_nested_containers_and_their_end() -> None:
    text = '=== "A"\n\n    !!! tip\n\n        Tip text.\n\n    Tab text.\n\nOutside.\n'
    (sec,) = parse_markdown(text)
    assert [text[b.body : b.end].strip() for b in sec.blocks] == [
        "Tip text.",
        "Tab text.",
        "Outside.",
    ]
    assert [b.kind for b in sec.blocks] == ["para", "para", "para"]
    assert (
        render_markdown(text).text == "A\n\ntip\n\n        Tip text.\n\n    Tab text.\n\nOutside.\n"
    )


def test_admonition_title_opens_the_chunk_of_its_content() -> None:
    para = " ".join(["word"] * 60)
    text = f'# Page\n\n{para}\n\n!!! tip "Keep this title"\n\n    {para}\n'
    chunks = MarkdownChunker(MarkdownOptions(max_tokens=80), ChunkContext(TIKTOKEN)).chunk(text)
    assert not any(c.text.rstrip().endswith('"Keep this title"') for c in chunks)
    (tip,) = [c for c in chunks if "Keep this title" in c.text]
    assert tip.clean_text.startswith("Keep this title\n\n    word")


def test_a_generic_block_title_is_embedded_with_its_content() -> None:
    """A Pydantic-style page: ``///`` blocks reach the model as their titles and words."""
    text = (
        "# Validators\n\nIntro words.\n\n"
        "/// tip | Use Annotated validators\n    type: tip\n\n"
        "Prefer the annotated pattern for reuse.\n\n"
        "```python\n/// not a block: code\nx = 1\n```\n///\n\n"
        "/// version-added | v2.4\n///\n\nAfter.\n"
    )
    chunks = MarkdownChunker(MarkdownOptions(), ChunkContext(TIKTOKEN)).chunk(text)
    embedded = "\n".join(c.embed_text for c in chunks)
    assert "Use Annotated validators" in embedded and "Prefer the annotated" in embedded
    assert "/// not a block: code" in embedded  # code is never changed
    assert not re.search(r"^///[ \t]*$|^/// ?(tip|version)|type: tip", embedded, re.M), embedded
    assert "v2.4\n" in embedded
    assert all(text[c.start : c.end] == c.text for c in chunks)  # stored text stays verbatim


# -- generated documents --------------------------------------------------------------------


@st.composite
def mkdocs_docs(draw: st.DrawFn) -> str:
    """Markdown with admonitions, tabs, snippet includes and mdBook includes."""
    vocab = st.sampled_from(["alpha", "beta", "gamma", "Delta", "[link](https://x.io/p)"])
    n = iter(range(10_000))

    def words() -> str:
        return " ".join(draw(st.lists(vocab, min_size=1, max_size=8)))

    def body(indent: str) -> str:
        kinds = ["para", "list", "fence", "snippet", "blank"]
        lines = []
        for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=4)):
            lines.append({
                "para": f"{indent}{words()}", "list": f"{indent}- {words()}\n{indent}- {words()}",
                "fence": f"{indent}```py\n{indent}x = '{words()}'\n{indent}```",
                "snippet": f'{indent}--8<-- "docs/s{next(n)}.md"', "blank": "",
            }[kind])  # fmt: skip
        return "\n\n".join(lines)

    out = []
    kinds = ["heading", "para", "admonition", "details", "tab", "snippet", "include", "empty"]
    kinds += ["block", "options"]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=12)):
        title = draw(st.sampled_from(["", ' "Title words"', ' ""']))
        bar = " | Title words" if "T" in title else ""  # a generic block's title
        out.append({
            "heading": f"## {words()}", "para": words(),
            "admonition": f"!!! note{title}\n\n{body('    ')}",
            "details": f"???+ tip{title}\n{body('    ')}",
            "tab": f'=== "Tab {next(n)}"\n\n{body("    ")}\n\n=== "Other"\n\n{body("    ")}',
            "snippet": f'--8<-- "docs/snippets/s{next(n)}.md"',
            "include": f"```rust\n{{{{#rustdoc_include ../listings/l{next(n)}.rs:here}}}}\n```",
            "empty": '```{.textual path="docs/x.py"}\n```',
            "block": f"/// note{bar}\n{body('')}\n///",
            "options": f"/// details | Title words\n    type: warning\n\n{body('')}\n///",
        }[kind])  # fmt: skip
    return "\n\n".join([*out, "The end of the page."])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mkdocs_docs(), size=st.sampled_from([16, 60, 200]))
@example(doc='!!! note "T"\n\n    --8<-- "docs/a.md"\n\nThe end of the page.', size=16)
def test_generated_mkdocs_embeds_no_container_or_include_markup(
    doc: str, size: int, model_sizer: ModelSizer
) -> None:
    for ch in (
        MarkdownChunker(MarkdownOptions(max_tokens=size), ChunkContext(TIKTOKEN, model_sizer)),
        HierarchicalChunker(
            HierarchicalOptions(max_tokens=size), ChunkContext(TIKTOKEN, model_sizer)
        ),
    ):
        chunks = ch.chunk(doc)
        check_clean(doc, chunks, size, model_sizer)
        embedded = "\n".join(c.embed_text for c in chunks if not c.is_parent)
        assert not _MARKUP.search(embedded), embedded
        assert not re.search(r"^[ \t]*///|^ {4}type: warning", embedded, re.M), embedded
        assert not re.search(r"^#{1,6} ", embedded, re.M), embedded  # headings' marks
        assert "Title words" in embedded or "Title words" not in doc


# -- real files -------------------------------------------------------------------------------

MKDOCS_FILES = [
    "mkdocs-docs/widgets/sparkline.md",  # tabs with annotated code, includes, mkdocstrings
    "mkdocs-docs/guide/actions.md",  # admonitions, included listings, excalidraw snippets
    "mkdocs-docs/blog/posts/release0-17-0.md",  # inline admonitions, an include inside a tab
    "mkdocs-docs/widgets/text_area.md",  # tabs of install commands
    "history/base/src/ch04-01-what-is-ownership.md",  # mdBook listings
]


@pytest.mark.parametrize("rel", MKDOCS_FILES)
def test_real_files_embed_no_container_or_include_markup(rel: str, model_sizer: ModelSizer) -> None:
    text = decode((CORPORA / rel).read_bytes())
    chunks = MarkdownChunker(MarkdownOptions(), ChunkContext(TIKTOKEN, model_sizer)).chunk(text)
    check_clean(text, chunks, 200, model_sizer)
    embedded = "\n".join(c.embed_text for c in chunks)
    assert not _MARKUP.search(embedded)
    for title in re.findall(r'^[ \t]*(?:!!!|\?\?\?\+?) [\w -]*"([^"\n]+)"', text, re.M):
        assert title in embedded
    for label in re.findall(r'^[ \t]*=== "([^"\n]+)"', text, re.M):
        assert label in embedded


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The post&mdash;it was late.", "The post—it was late."),
        (
            "# &lt;border&gt;\n\nThe `&lt;border&gt;` type.",
            "<border>\n\nThe `&lt;border&gt;` type.",
        ),
        ("[a &amp; b](https://x.io) &#124; &#x41;", "a & b | A"),
        ("a&nbsp;b, &bogus; and & alone", "a b, &bogus; and & alone"),
        ("```html\n&lt;p&gt;\n```", None),  # code is never changed
    ],
)
def test_character_references_render_to_their_characters(text: str, expected: str | None) -> None:
    """``&lt;border&gt;`` (Textual's CSS type pages), ``&mdash;``, ``&vert;`` reach the model
    as the characters a reader sees, as CommonMark 6.2 reads them; code keeps them."""
    assert render_markdown(text).text == (text if expected is None else expected)
    from ingestd.chunkers.markup.noise import clean_markdown

    assert clean_markdown("&lt;border&gt; &amp; more") == "<border> & more"
