"""The ``token`` strategy and the window/packing helpers other strategies share."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.token import (
    TokenChunker,
    TokenOptions,
    Windows,
    pack,
    split_to_fit,
)

CHARS = ChunkContext(CharSizer())


def windows(text: str, ctx: ChunkContext = CHARS, **params: int) -> list[tuple[str, int, int]]:
    chunks = TokenChunker(TokenOptions(**params), ctx).chunk(text)
    return [(c.text, c.meta["start_token"], c.meta["end_token"]) for c in chunks]


@pytest.mark.parametrize(
    ("text", "params", "expected"),
    [
        ("", {"max_tokens": 4, "overlap": 0}, []),
        ("  \n\t ", {"max_tokens": 4, "overlap": 0}, []),
        ("123\n123", {"max_tokens": 4, "overlap": 0}, [("123\n", 0, 4), ("123", 4, 7)]),
        ("123\n123", {"max_tokens": 4, "overlap": 1}, [("123\n", 0, 4), ("\n123", 3, 7)]),
        (
            "abcdefghij",
            {"max_tokens": 4, "overlap": 1},
            [("abcd", 0, 4), ("defg", 3, 7), ("ghij", 6, 10)],
        ),
        ("a" + " " * 10 + "b", {"max_tokens": 3, "overlap": 0}, [("a  ", 0, 3), ("  b", 9, 12)]),
    ],
    ids=["empty", "blank", "123-123", "123-123-overlap", "overlap-1", "blank-windows-dropped"],
)
def test_exact_windows(
    text: str, params: dict[str, int], expected: list[tuple[str, int, int]]
) -> None:
    assert windows(text, **params) == expected


def test_multibyte_characters_are_never_split(tiktoken_sizer: TiktokenSizer) -> None:
    ctx = ChunkContext(tiktoken_sizer)
    assert windows("éé", ctx, max_tokens=1, overlap=0) == [("é", 0, 1), ("é", 1, 2)]
    # one emoji is two cl100k tokens: the window holds both rather than half a character
    assert [t for t, *_ in windows("😀😀", ctx, max_tokens=1, overlap=0)] == ["😀", "😀"]


def test_consecutive_windows_share_exactly_overlap_tokens(tiktoken_sizer: TiktokenSizer) -> None:
    text = " ".join(f"word{i} and some filler text." for i in range(300))
    chunks = TokenChunker(
        TokenOptions(max_tokens=50, overlap=7), ChunkContext(tiktoken_sizer)
    ).chunk(text)
    assert len(chunks) > 10
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert prev.meta["end_token"] - nxt.meta["start_token"] == 7
        assert prev.n_tokens == 50
    assert chunks[-1].end == len(text)


def test_windows_are_shortened_to_fit_the_model(
    tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    text = "!" * 20_000 + " and then some prose. " * 200
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254)
    chunks = TokenChunker(TokenOptions(max_tokens=200, overlap=0), ctx).chunk(text)
    assert all(model_sizer.count(c.text) <= 254 for c in chunks)
    assert all(c.n_tokens <= 200 for c in chunks)
    assert "".join(c.text for c in chunks) == text  # no overlap: the windows tile the text
    assert max(c.n_tokens for c in chunks) == 200  # prose after the run fills windows again


@pytest.mark.parametrize(
    "params", [{"max_tokens": 0}, {"overlap": -1}, {"max_tokens": 10, "overlap": 10}, {"x": 1}]
)
def test_invalid_options_are_rejected(params: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        TokenOptions(**params)


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=300), size=st.integers(1, 40), overlap=st.integers(0, 39))
def test_token_windows_properties_with_chars(text: str, size: int, overlap: int) -> None:
    overlap = min(overlap, size - 1)
    chunks = TokenChunker(TokenOptions(max_tokens=size, overlap=overlap), CHARS).chunk(text)
    for c in chunks:
        assert text[c.start : c.end] == c.text and c.text.strip()
        assert c.n_tokens == len(c.text) <= size
        assert c.meta["end_token"] - c.meta["start_token"] == len(c.text)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.start > prev.start
        assert prev.meta["end_token"] - nxt.meta["start_token"] <= overlap


def test_split_to_fit_prefers_lines_then_punctuation(tiktoken_sizer: TiktokenSizer) -> None:
    budget = ChunkContext(CharSizer()).budget(12)
    text = "first line\nsecond. third\n\nxxxxxxxxxxxxxxxxxxxx"
    spans = split_to_fit(budget, text, 0, len(text))
    assert [text[a:b] for a, b in spans] == [
        "first line",
        "second.",
        "third",
        "xxxxxxxxxxxx",
        "xxxxxxxx",
    ]


def test_pack_respects_breaks_and_overlap() -> None:
    budget = ChunkContext(CharSizer()).budget(11)
    text = "aa bb cc dd ee"
    units = [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14)]
    assert pack(budget, text, units) == [(0, 4), (4, 5)]
    assert pack(budget, text, units, breaks=[2]) == [(0, 2), (2, 5)]
    assert pack(budget, text, units, overlap=1) == [(0, 4), (3, 5)]
    assert pack(budget, text, units, overlap=2, breaks=[4]) == [(0, 4), (4, 5)]


def test_windows_fit_returns_at_least_one_token() -> None:
    budget = ChunkContext(CharSizer()).budget(2)
    win = Windows(budget, "abcdef")
    assert win.fit(0, 6) == 2
    assert win.split() == [(0, 2), (2, 4), (4, 6)]
