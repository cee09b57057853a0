"""The ``sentence`` strategy: BlingFire spans as ``str`` offsets, packing, overlap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.sentence import SentenceChunker, SentenceOptions, sentence_spans

CHARS = ChunkContext(CharSizer())


def texts(text: str, ctx: ChunkContext = CHARS, **params: int) -> list[str]:
    return [c.text for c in SentenceChunker(SentenceOptions(**params), ctx).chunk(text)]


def test_blingfire_offsets_are_str_offsets_not_utf8_bytes() -> None:
    text = "Héllo wörld. Ünïcode ß is fine. 日本語の文。次の文。 😀 Smile! Done."
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == [
        "Héllo wörld.",
        "Ünïcode ß is fine.",
        "日本語の文。",
        "次の文。",
        "😀 Smile!",
        "Done.",
    ]


@pytest.mark.parametrize(
    ("text", "spans"),
    [("", []), ("  \n ", []), ("x", [(0, 1)]), ("  One.  Two.  ", [(2, 6), (8, 12)])],
    ids=["empty", "blank", "one-char", "trimmed"],
)
def test_sentence_spans_edge_cases(text: str, spans: list[tuple[int, int]]) -> None:
    assert sentence_spans(text) == spans


@pytest.mark.parametrize(
    ("text", "params", "expected"),
    [
        ("", {"max_tokens": 20}, []),
        ("123\n123", {"max_tokens": 4, "overlap": 0}, ["123", "123"]),
        (
            "One two. Three four. Five six.",
            {"max_tokens": 20, "overlap": 0},
            ["One two. Three four.", "Five six."],
        ),
        (
            "One two. Three four. Five six.",
            {"max_tokens": 21, "overlap": 1},
            ["One two. Three four.", "Three four. Five six."],
        ),
        (
            "this is lower. no caps here. really none at all",
            {"max_tokens": 16, "overlap": 0},
            ["this is lower.", "no caps here.", "really none at a", "ll"],
        ),
    ],
    ids=["empty", "123-123", "pack", "overlap", "lowercase-cut-at-punctuation"],
)
def test_exact_chunks(text: str, params: dict[str, int], expected: list[str]) -> None:
    assert texts(text, **params) == expected


def test_overlap_never_yields_a_chunk_without_new_text() -> None:
    # "A. B." fits, "B. C..." does not: the next chunk must not be "B." alone again
    text = "Aaaa. Bbbb. " + "C" * 9 + "."
    chunks = SentenceChunker(SentenceOptions(max_tokens=11, overlap=1), CHARS).chunk(text)
    assert [c.text for c in chunks] == ["Aaaa. Bbbb.", "CCCCCCCCC."]
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.end > prev.end


def test_trimmed_pieces_of_a_long_sentence_still_fit(
    tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    text = "this is lowercase. no capitals here. really none " * 50
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254)
    chunks = SentenceChunker(SentenceOptions(max_tokens=200), ctx).chunk(text)
    assert all(tiktoken_sizer.count(c.text) == c.n_tokens <= 200 for c in chunks)
    assert all(model_sizer.count(c.text) <= 254 for c in chunks)


@pytest.mark.parametrize(
    "params", [{"max_tokens": 0}, {"overlap": -1}, {"unknown": 1}], ids=["size", "overlap", "extra"]
)
def test_invalid_options_are_rejected(params: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        SentenceOptions(**params)


@settings(max_examples=60, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            ["Alpha beta.", "gamma delta!", "Eps?", "\n\n", " ", "zeta, eta", "é 日本。"]
        ),
        max_size=30,
    ).map("".join),
    size=st.integers(8, 60),
    overlap=st.integers(0, 3),
)
def test_overlap_is_at_most_overlap_sentences(text: str, size: int, overlap: int) -> None:
    chunks = SentenceChunker(SentenceOptions(max_tokens=size, overlap=overlap), CHARS).chunk(text)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.start > prev.start and nxt.end > prev.end
        shared = text[nxt.start : prev.end] if nxt.start < prev.end else ""
        assert len(sentence_spans(shared)) <= overlap
