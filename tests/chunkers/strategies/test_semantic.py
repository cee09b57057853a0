"""The ``semantic`` strategy: similarity boundaries, budget, determinism, the real model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from ingestd.chunkers import Chunk, ChunkContext
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.semantic import SemanticChunker, SemanticOptions
from ingestd.chunkers.strategies.sentence import sentence_spans
from tests.chunkers.conftest import bag_of_words
from tests.helpers import CORPORA

TOPICS = (
    "Cats purr softly. Cats nap in the sun. Cats chase small mice. "
    "Rockets burn fuel fast. Rockets reach orbit quickly. Rockets carry satellites up."
)


def chunker(ctx: ChunkContext, **params: Any) -> SemanticChunker:
    return SemanticChunker(SemanticOptions.model_validate(params), ctx)


class Recorder:
    """An embedding callable that records the batches it was given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> Any:
        self.batches.append(list(texts))
        return bag_of_words(texts)


def test_missing_embedder_is_a_clear_error(tiktoken_sizer: TiktokenSizer) -> None:
    with pytest.raises(ValueError, match="needs an embedding callable"):
        chunker(ChunkContext(tiktoken_sizer))


@pytest.mark.parametrize(
    "params",
    [
        {"threshold": 1.5},
        {"percentile": 101},
        {"overlap": -1},
        {"batch_size": 0},
        {"max_tokens": 0},
    ],
)
def test_invalid_options_are_rejected(params: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SemanticOptions.model_validate(params)


def test_zero_and_one_sentence_documents(ctx: ChunkContext) -> None:
    sem = chunker(ctx)
    assert sem.chunk("") == [] and sem.chunk("  \n ") == []
    [one] = sem.chunk("  Just one sentence here.\n")
    assert one.text == "Just one sentence here." and one.meta == {"boundary": "start"}


def test_boundary_where_the_topic_changes(ctx: ChunkContext) -> None:
    chunks = chunker(ctx, threshold=0.2).chunk(TOPICS)
    assert [c.text for c in chunks] == [
        "Cats purr softly. Cats nap in the sun. Cats chase small mice.",
        "Rockets burn fuel fast. Rockets reach orbit quickly. Rockets carry satellites up.",
    ]
    assert [c.meta["boundary"] for c in chunks] == ["start", "similarity"]


def test_percentile_threshold_cuts_at_the_least_similar_pair(ctx: ChunkContext) -> None:
    chunks = chunker(ctx, percentile=0).chunk(TOPICS)
    assert len(chunks) == 1  # nothing is below the minimum
    chunks = chunker(ctx, percentile=10).chunk(TOPICS)
    assert chunks[1].text.startswith("Rockets burn fuel fast.")


def test_budget_cuts_within_a_topic_with_overlap(char_sizer: CharSizer) -> None:
    ctx = ChunkContext(char_sizer, embed=bag_of_words)
    chunks = chunker(ctx, threshold=0.2, max_tokens=45, overlap=1).chunk(TOPICS)
    assert all(c.n_tokens <= 45 for c in chunks)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        shared = text_between(TOPICS, nxt, prev)
        if nxt.meta["boundary"] == "budget":
            assert len(sentence_spans(shared)) <= 1
        else:
            assert shared == ""
    assert any(c.meta["boundary"] == "budget" for c in chunks)
    assert any(c.meta["boundary"] == "similarity" for c in chunks)


def text_between(text: str, nxt: Chunk, prev: Chunk) -> str:
    return text[nxt.start : prev.end] if nxt.start < prev.end else ""


def test_sentences_are_embedded_in_fixed_batches_in_order(tiktoken_sizer: TiktokenSizer) -> None:
    rec = Recorder()
    ctx = ChunkContext(tiktoken_sizer, embed=rec)
    chunker(ctx, batch_size=4).chunk(TOPICS)
    assert [len(b) for b in rec.batches] == [4, 2]
    assert [s for b in rec.batches for s in b] == [TOPICS[a:b] for a, b in sentence_spans(TOPICS)]
    rec.batches.clear()
    chunker(ctx, batch_size=1).chunk(TOPICS)
    assert [len(b) for b in rec.batches] == [1] * 6


def test_float_noise_does_not_change_the_chunks(tiktoken_sizer: TiktokenSizer) -> None:
    rng = np.random.default_rng(0)

    def noisy(texts: Sequence[str]) -> Any:
        vecs = bag_of_words(texts) + rng.normal(0, 1e-7, (len(texts), 64))
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    text = " ".join(TOPICS for _ in range(5))
    clean = chunker(ChunkContext(tiktoken_sizer, embed=bag_of_words)).chunk(text)
    for _ in range(3):
        assert chunker(ChunkContext(tiktoken_sizer, embed=noisy)).chunk(text) == clean


def test_wrong_shape_from_the_embedder_is_reported(tiktoken_sizer: TiktokenSizer) -> None:
    ctx = ChunkContext(tiktoken_sizer, embed=lambda texts: np.zeros((1, 4)))
    with pytest.raises(ValueError, match=r"shape \(1, 4\) for 2 texts"):
        chunker(ctx, batch_size=2).chunk("One here. Two there. Three.")


def test_long_sentence_is_cut_to_the_budget_and_the_model(
    tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254, embed=bag_of_words)
    text = "Short start. " + "word " * 1000 + "end. Short tail."
    chunks = chunker(ctx).chunk(text)
    assert all(c.n_tokens <= 200 and model_sizer.count(c.text) <= 254 for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)


@pytest.mark.slow
def test_real_model_chunks_are_deterministic_and_fit(
    real_model: Any, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    embed = real_model  # the session's SentenceTransformerEmbedder: unit vectors, float32
    path = CORPORA / "md-docs/docs/concepts/signals/traces.md"
    text = path.read_text()[:3000]
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254, embed=embed)
    first = chunker(ctx).chunk(text)
    assert len(first) > 2
    assert any(c.meta["boundary"] == "similarity" for c in first)
    assert all(c.n_tokens <= 200 and model_sizer.count(c.text) <= 254 for c in first)
    assert chunker(ctx).chunk(text) == first
    sims = chunker(ctx).similarities(["The cat sat on the mat.", "A cat was sitting on a rug."])
    assert sims[0] > 0.5 and sims[0] == round(sims[0], 3)
