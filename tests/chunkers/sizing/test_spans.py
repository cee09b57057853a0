"""SpanIndex: one pass gives exact tiktoken and word-piece counts between boundaries.

Every count is checked against the real tokenizers on the very substring: hypothesis
texts built from the characters that break per-piece counting (glued letters and
digits, contractions, punctuation before newlines, blank-line runs, accents, CJK,
characters BERT deletes or treats as spaces), and every file of ../shared/corpora.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingestd.chunkers.base import Budget, ChunkContext
from ingestd.chunkers.sizing import tokenizers
from ingestd.chunkers.sizing.pieces import AT, PIECES, piece_table
from ingestd.chunkers.sizing.spans import SpanIndex
from ingestd.chunkers.sizing.tokenizers import (
    MAX_RUN,
    SLOW_CHAR,
    CharSizer,
    ModelSizer,
    TiktokenSizer,
    load_tiktoken,
)
from ingestd.chunkers.strategies.markdown import MarkdownChunker, MarkdownOptions
from ingestd.chunkers.text import decode
from tests.chunkers.conftest import CORPORA

_CONTENT_LINE = re.compile(r"(?m)^(?=[^\S\n]*\S)")
_DOC = "blog/2023/exponential-histograms.md"  # code fences, tables, non-ASCII text

_ATOMS = [
    "—", "’", "“", "…", "·", "«", "\xad", "。", "→", "©",
    "a", "Z", "word", "Words", "x1", "2024", "123456", "abc123def", "'s", "'LL", "n't",
    "'sfoo", " ", "  ", "\t", "\n", "\n\n", " \n", ".", ",", "...", "(", ")", "`", "#",
    "|---|", "_", "-", "<|endoftext|>", "é", "Café", "中文", "\u3000", "\xa0", "\x0b",
    "\x0c", "\x1c", "\x85", "\u200b", "\u2028", "😀", "\r", "\x00", "naïve", "ﬁ",
]  # fmt: skip


def _truth(sizer: TiktokenSizer, model: ModelSizer, s: str) -> tuple[int, int]:
    return sizer.count(s), model.count_exact(s)


def _boundaries(text: str) -> list[int]:
    return sorted({0, len(text), *(m.start() for m in _CONTENT_LINE.finditer(text))})


@pytest.fixture(scope="module")
def budget(tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer) -> Budget:
    return Budget(tiktoken_sizer, 200, model_sizer, 254)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=60), st.data())
def test_at_many_is_at_of_each_point(budget: Budget, atoms: list[str], data: st.DataObject) -> None:
    text = "".join(atoms)
    index = SpanIndex.build(text, budget)
    assert index is not None
    points = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=20)))
    want = [index.at(p) for p in points]
    assert index.at_many(points) == [-1 if w is None else w for w in want]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=60))
def test_counts_between_line_starts_are_exact(
    budget: Budget, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer, atoms: list[str]
) -> None:
    text = "".join(atoms)
    index = SpanIndex.build(text, budget)
    if not text:
        assert index is None
        return
    assert index is not None
    marks = _boundaries(text)
    for i, a in enumerate(marks):
        for b in marks[i + 1 :]:
            assert index.counts(a, b) == _truth(tiktoken_sizer, model_sizer, text[a:b]), (a, b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=40))
def test_chunk_ends_before_whitespace_are_exact(
    budget: Budget, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer, atoms: list[str]
) -> None:
    text = "".join(atoms)
    index = SpanIndex.build(text, budget)
    assert index is not None
    marks = _boundaries(text)
    for a in marks[:-1]:
        for e in range(a + 1, len(text)):
            if text[e].isspace() and not text[e - 1].isspace():
                got = index.end_counts(a, e)
                if got is not None:
                    assert got == _truth(tiktoken_sizer, model_sizer, text[a:e]), (a, e)


_SPACES = ["a", "word", "x1", "'s", ".", ")", "|", "-", " ", "  ", "   ", "\t", "\n", "\n\n",
           " \n", "  \n", "   \n", "\n \n", "\t\n", " \t", "\t ", "é"]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_SPACES), min_size=1, max_size=60))
def test_word_sums_agree_with_piece_sums(budget: Budget, atoms: list[str]) -> None:
    # the index sums words (text split at single spaces) per segment; every running
    # sum it keeps is one that summing piece by piece gives at the same offset
    text = "".join(atoms)
    table = piece_table(budget.sizer, budget.model_sizer)
    assert table is not None
    words = SpanIndex.build(text, budget)
    pieces = SpanIndex._build(text, table, SLOW_CHAR, long_ok=False, words=False)
    assert words is not None and pieces is not None
    assert set(words.cum) <= set(pieces.cum)
    assert words.cum[-1] == pieces.cum[-1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS + _SPACES), min_size=1, max_size=60))
def test_a_piece_is_its_own_only_piece(atoms: list[str]) -> None:
    # a word's counts are taken from the piece table when the word is a known piece
    text = "".join(atoms)
    for p in PIECES.findall(text):
        assert PIECES.findall(p) == [p], p


def test_segments_are_summed_by_words(budget: Budget) -> None:
    text = "Intro line, with words.\n\n    indented  code   here\nlast line\n"
    index = SpanIndex.build(text, budget)
    assert index is not None
    # one running sum per segment (a line with content and the blank lines after it)
    starts = [0, text.index("    indented"), text.index("last"), len(text)]
    assert [c >> AT for c in index.cum] == starts
    assert index.at(text.index("with")) is None  # no boundaries inside a line


def test_end_counts_before_a_newline(
    budget: Budget, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    # chunks end at line ends, which a word-summed index does not hold: the span up to
    # the next segment, less what the whitespace adds (glued to punctuation or not)
    text = "First line ends here\nSecond one ends with dots...\n\nThird (x).\n  \nEnd"
    index = SpanIndex.build(text, budget)
    assert index is not None
    for line in ("First line ends here", "Second one ends with dots...", "Third (x)."):
        e = text.index(line) + len(line)
        assert index.end_counts(0, e) == _truth(tiktoken_sizer, model_sizer, text[:e]), line


def test_piece_boundaries_fall_inside_no_word() -> None:
    # cl100k splits "abc123def" into 3 pre-tokens and "2024x" into 3; BERT reads one word
    assert PIECES.findall("abc123def 2024x x'sfoo foo's") == [
        "abc123def", " ", "2024x", " x", "'sfoo", " foo", "'s",
    ]  # fmt: skip


def test_offsets_that_are_not_boundaries_give_none(budget: Budget) -> None:
    text = "configuration of things\nnext line\n"
    index = SpanIndex.build(text, budget)
    assert index is not None
    assert index.counts(0, 5) is None  # inside a word
    assert index.counts(0, text.index("next")) is not None


@pytest.mark.parametrize(
    "text",
    [
        "x" * (MAX_RUN + 1),
        "intro line\n" + "y" * (3 * MAX_RUN) + " tail\nnext line\n",
        "a\n" + " \n" * (MAX_RUN // 2 + 1) + "b",
        "a " * MAX_RUN,
        "x\n" + " \n" * 1100 + "\x1dk",  # Python's \s takes \x1d into the run
        "x\n" + " \n" * 1100 + "  \x1fab",
        # a run that starts on a slow line and goes on into the next one
        "# Doc\n\n" + "é" * 100 + "\n" + " " * 2060 + "word\n",
        # a run that starts with \r, itself a slow character
        "limit.\r\n" + " " * 2051 + "word\r\n\r\nThree\r\n",
        # runs over MAX_RUN made of short lines that cross from one stretch into the next
        "\n\n\n" + " " * 2047 + "é",
        "Café\n" + "\n" * 2046 + "    x = 1\n",
        "é\n" + "\n" * 1400 + " " * 650 + "x\n",
        "é\n" + "\n" * 1500 + " " * 600 + "ü\n",
    ],
)
def test_long_runs_count_like_the_sizer(
    budget: Budget, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer, text: str
) -> None:
    # TiktokenSizer encodes a run of over MAX_RUN characters in parts: the index agrees
    # (a line start inside a long run's stretch is no boundary: None, the slow path)
    index = SpanIndex.build(text, budget)
    assert index is not None
    assert index.counts(0, len(text)) == _truth(tiktoken_sizer, model_sizer, text)
    marks = _boundaries(text)
    for i, a in enumerate(marks):
        for b in marks[i + 1 :]:
            got = index.counts(a, b)
            assert got is None or got == _truth(tiktoken_sizer, model_sizer, text[a:b]), (a, b)


def test_other_tokenizers_have_no_table(model_sizer: ModelSizer) -> None:
    assert piece_table(CharSizer(), None) is None
    budget_only = piece_table(TiktokenSizer("cl100k_base"), CharSizer())
    assert budget_only is not None and not budget_only.has_model
    assert piece_table(model_sizer, model_sizer) is not None  # tokenizer: model


class _Encoding:
    """A tiktoken encoding that shows ``real``'s public API and only the ``kept`` attributes.

    Stands for a tiktoken release that renamed or dropped the private attributes
    ``TiktokenSizer`` reads.
    """

    def __init__(self, real: Any, kept: tuple[str, ...]) -> None:
        self.encode_ordinary = real.encode_ordinary
        self.decode_tokens_bytes = real.decode_tokens_bytes
        for name in kept:
            setattr(self, name, getattr(real, name))


@pytest.mark.parametrize(
    "kept", [(), ("_pat_str",), ("_mergeable_ranks",)], ids=["neither", "pattern", "ranks"]
)
def test_without_tiktoken_private_attributes_chunks_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
    tiktoken_sizer: TiktokenSizer,
    model_sizer: ModelSizer,
    kept: tuple[str, ...],
) -> None:
    # a tiktoken without them: no piece table, every span counted by the sizers (the
    # slow exact path), and the very same chunks
    real = load_tiktoken("cl100k_base")
    monkeypatch.setattr(tokenizers, "load_tiktoken", lambda name: _Encoding(real, kept))
    hidden = TiktokenSizer("cl100k_base")
    assert hidden.piece_counter() is None
    assert piece_table(hidden, model_sizer) is None
    text = decode((CORPORA / "md-docs").joinpath(_DOC).read_bytes())
    assert SpanIndex.build(text, Budget(hidden, 200, model_sizer, 254)) is None
    assert SpanIndex.build(text, Budget(tiktoken_sizer, 200, model_sizer, 254)) is not None
    for max_tokens in (64, 200):
        opts = MarkdownOptions(max_tokens=max_tokens)
        slow = MarkdownChunker(opts, ChunkContext(hidden, model_sizer, 254)).chunk(text)
        fast = MarkdownChunker(opts, ChunkContext(tiktoken_sizer, model_sizer, 254)).chunk(text)
        assert len(slow) > 3
        assert slow == fast


def test_tiktoken_shows_what_the_piece_table_needs(tiktoken_sizer: TiktokenSizer) -> None:
    # the installed tiktoken (pinned below the next minor release) has both attributes
    count = tiktoken_sizer.piece_counter()
    assert tiktoken_sizer.pattern is not None and count is not None
    pieces = ["hello", " world", " OpenTelemetry", "123", " <|", "\n\n"]  # one pre-token each
    assert [count(p) for p in pieces] == [tiktoken_sizer.count(p) for p in pieces]
    assert count(" OpenTelemetry") == 3  # not one rank: encoded


@pytest.mark.parametrize(
    ("corpus", "ext"), [("md-docs", ".md"), ("rst-docs", ".rst"), ("code", ".py")]
)
def test_every_corpus_file_counts_exactly(
    budget: Budget, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer, corpus: str, ext: str
) -> None:
    rnd = random.Random(7)
    files = sorted((CORPORA / corpus).rglob("*" + ext))
    assert files
    indexed = 0
    for path in files:
        text = decode(path.read_bytes())
        index = SpanIndex.build(text, budget)
        if index is None:
            continue
        indexed += 1
        marks = _boundaries(text)
        pairs = [(0, len(text)), *(tuple(sorted(rnd.sample(marks, 2))) for _ in range(2))]
        for a, b in pairs:
            assert index.counts(a, b) == _truth(tiktoken_sizer, model_sizer, text[a:b]), (
                path.name, a, b,
            )  # fmt: skip
    assert indexed == len(files)


def test_every_fast_punctuation_mark_counts_exactly(
    budget: Budget, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    from ingestd.chunkers.sizing.tokenizers import _FAST_PUNCT

    assert "\u2014" in _FAST_PUNCT and "\xad" not in _FAST_PUNCT  # soft hyphen is Cf now
    for c in _FAST_PUNCT:
        text = f"a{c}b {c}{c}'s x{c}\n{c}9{c}Word\n"
        index = SpanIndex.build(text, budget)
        assert index is not None
        assert index.counts(0, len(text)) == _truth(tiktoken_sizer, model_sizer, text), c
