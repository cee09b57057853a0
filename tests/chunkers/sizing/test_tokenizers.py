"""Sizers: tiktoken offline and bounded on hostile runs, the model's tokenizer untruncated."""

from __future__ import annotations

from itertools import accumulate

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from ingestd.chunkers.sizing.tokenizers import (
    MAX_RUN,
    CharSizer,
    ModelSizer,
    TiktokenSizer,
    load_tiktoken,
    run_pieces,
)


def test_tiktoken_loads_offline_by_canonical_name(tiktoken_sizer: TiktokenSizer) -> None:
    assert tiktoken_sizer.name == "tiktoken:cl100k_base"
    assert load_tiktoken("cl100k_base") is load_tiktoken("cl100k_base")
    assert tiktoken_sizer.count("hello world") == 2


def test_unknown_encoding_names_the_offline_ones() -> None:
    with pytest.raises(ValueError, match="no offline copy; available offline: .*cl100k_base"):
        TiktokenSizer("no_such_encoding")


def test_special_token_text_is_ordinary_text(tiktoken_sizer: TiktokenSizer) -> None:
    assert tiktoken_sizer.count("<|endoftext|>") > 1
    assert tiktoken_sizer.boundaries("<|endoftext|>")[-1] == len("<|endoftext|>")


@pytest.mark.parametrize(
    ("text", "ends"),
    [("", []), ("éé", [1, 2]), ("hello world", [5, 11]), ("😀", [1])],
    ids=["empty", "multibyte", "words", "emoji-of-two-tokens"],
)
def test_tiktoken_boundaries_are_str_offsets(
    tiktoken_sizer: TiktokenSizer, text: str, ends: list[int]
) -> None:
    assert tiktoken_sizer.boundaries(text) == ends


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_boundaries_agree_with_count(text: str) -> None:
    sizer = TiktokenSizer()
    ends = sizer.boundaries(text)
    assert ends == sorted(set(ends))
    assert (ends[-1] if ends else 0) == len(text)
    assert len(ends) <= sizer.count(text)
    assert "".join(text[a:b] for a, b in zip([0, *ends], ends, strict=False)) == text


def _char_offsets_reference(text: str, byte_ends: list[int]) -> list[int]:
    """Character by character: the offset of each token end that ends a character."""
    at = {len(text[:i].encode()): i for i in range(len(text) + 1)}
    out: list[int] = []
    for b in byte_ends:
        if b in at and (not out or at[b] > out[-1]):
            out.append(at[b])
    return out if out and out[-1] == len(text) else [*out, len(text)]


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=200))
def test_char_offsets_match_a_character_by_character_walk(text: str) -> None:
    from ingestd.chunkers.sizing.tokenizers import _char_offsets

    enc = TiktokenSizer()._enc
    byte_ends = list(accumulate(len(b) for b in enc.decode_tokens_bytes(enc.encode_ordinary(text))))
    assert _char_offsets(text, byte_ends) == _char_offsets_reference(text, byte_ends)


def test_long_runs_are_encoded_in_pieces() -> None:
    text = "ab " + "x" * (MAX_RUN * 2 + 5) + " " * (MAX_RUN + 3) + "end"
    pieces = list(run_pieces(text))
    assert "".join(pieces) == text
    # cut every MAX_RUN characters inside each long run, counted from the run's start
    assert [len(p) for p in pieces] == [3 + MAX_RUN, MAX_RUN, 5 + MAX_RUN, 3 + 3]
    assert list(run_pieces("short text")) == ["short text"]


@pytest.mark.parametrize(
    "text",
    ["!" * 1_000_000, "a" * 200_000, "-" * 1_000_000, " " * 1_000_000, "é" * 300_000],
    ids=["1M-bang", "200k-letter", "1M-dash", "1M-space", "300k-multibyte"],
)
def test_tiktoken_stays_fast_on_one_huge_pre_token(
    tiktoken_sizer: TiktokenSizer, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiktoken's byte-pair merge is quadratic in a pre-token's length: the work stays
    # linear when no call hands it more than a run's piece (the time: bench/hostile.py)
    longest = 0
    encode = tiktoken.Encoding.encode_ordinary

    def measured(enc: tiktoken.Encoding, piece: str) -> list[int]:
        nonlocal longest
        longest = max(longest, len(piece))
        return encode(enc, piece)

    monkeypatch.setattr(tiktoken.Encoding, "encode_ordinary", measured)
    n = tiktoken_sizer.count(text)
    ends = tiktoken_sizer.boundaries(text)
    assert 0 < longest <= MAX_RUN
    assert ends[-1] == len(text) and len(ends) <= n


def test_count_of_a_slice_is_recountable(tiktoken_sizer: TiktokenSizer) -> None:
    text = "!" * 10_000
    ends = tiktoken_sizer.boundaries(text)
    piece = text[ends[10] : ends[300]]
    assert tiktoken_sizer.count(piece) == len(tiktoken_sizer.boundaries(piece))


def test_model_sizer_counts_past_the_bundled_truncation(model_sizer: ModelSizer) -> None:
    text = "hello world " * 200
    assert model_sizer.count(text) == 400 > 128
    assert model_sizer.count_many([text, "hello"]) == [400, 1]
    assert model_sizer.count("") == 0


def test_model_sizer_adds_no_special_tokens(model_sizer: ModelSizer) -> None:
    assert model_sizer.count("hello") == 1
    assert model_sizer.boundaries("hello world") == [5, 11]


def test_char_sizer() -> None:
    assert CharSizer().count("éé") == 2
    assert CharSizer().boundaries("abc") == [1, 2, 3]


_FAST_TEXT = st.text(
    alphabet=st.sampled_from(
        list("abcXYZ019 \t\n.,;:'\"()[]{}#|-_*/\\<>!?@$%^&=+~`") + ["—", "’", "…"]
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_FAST_TEXT, st.text(max_size=100)))
def test_model_count_agrees_with_the_model_tokenizer(model_sizer: ModelSizer, text: str) -> None:
    # the fast path (BERT rules applied in Python) must never differ from tokenizers
    assert model_sizer.ascii_counter is not None
    assert model_sizer.count(text) == model_sizer.count_exact(text)
    assert model_sizer.count_many([text, text + " x"]) == [
        model_sizer.count_exact(text), model_sizer.count_exact(text + " x"),
    ]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.one_of(_FAST_TEXT, st.text(max_size=100)))
def test_model_boundaries_agree_with_the_model_tokenizer(
    model_sizer: ModelSizer, text: str
) -> None:
    enc = model_sizer._tok.encode(text, add_special_tokens=False)
    want = sorted({end for _, end in enc.offsets if end > 0} | ({len(text)} if text else set()))
    assert model_sizer.boundaries(text) == want


def test_model_count_of_words_out_of_the_vocabulary(model_sizer: ModelSizer) -> None:
    for word in ["xqzvwk", "Kubernetes", "a" * 101, "internationalization", "ABC123def"]:
        assert model_sizer.count(word) == model_sizer.count_exact(word) > 0
