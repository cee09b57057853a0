"""A BERT sentence-transformers model computed in float64 with numpy: the graphs' reference.

:func:`reference_vectors` is the forward pass of transformers' ``BertModel`` followed by
sentence-transformers' ``Pooling`` and ``Normalize``, written out plainly for one text at
a time (no padding, so no mask), in float64, from the same weights
(:func:`ingestd.store.embedding.graphs.bert.load_weights`). It shares no code with the graph
builder (:mod:`~ingestd.store.embedding.graphs.bert_graph`): a graph built wrong disagrees with
it. It is what a new graph is checked against when it is built, and what OpenVINO checks
its own vectors against each time it opens the graph (the probe vectors of the artifact's
record), so neither check needs torch. The tests check it against sentence-transformers.

About 0.5 s for the six probe texts of the bundled model on one core.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.bert import BertArchitecture

__all__ = ["reference_vectors"]

_erf = np.frompyfunc(math.erf, 1, 1)  # the C library's erf, element by element


def _act(x: Any, kind: str) -> Any:
    if kind == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "silu":
        return x / (1.0 + np.exp(-x))
    if kind == "quick_gelu":
        return x / (1.0 + np.exp(-1.702 * x))
    raise ValueError(f"no activation {kind!r}")


def _f64(w: dict[str, Any], name: str) -> Any:
    return np.asarray(w[name], dtype=np.float64)


def _norm(x: Any, w: dict[str, Any], name: str, eps: float) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * _f64(w, f"{name}.weight") + _f64(w, f"{name}.bias")


def _dense(x: Any, w: dict[str, Any], name: str) -> Any:
    return x @ _f64(w, f"{name}.weight").T + _f64(w, f"{name}.bias")


def _encode(ids: Any, types: Any, w: dict[str, Any], arch: BertArchitecture) -> Any:
    """The token vectors ``(n, hidden)`` of one text's word piece ids and token types."""
    n, heads, size = len(ids), arch.heads, arch.head_size
    x = (
        np.asarray(w["embeddings.word_embeddings.weight"][ids], dtype=np.float64)
        + _f64(w, "embeddings.position_embeddings.weight")[:n]
        + _f64(w, "embeddings.token_type_embeddings.weight")[types]
    )
    x = _norm(x, w, "embeddings.LayerNorm", arch.eps)
    for layer in range(arch.layers):
        p = f"encoder.layer.{layer}."
        q, k, v = (
            _dense(x, w, f"{p}attention.self.{name}").reshape(n, heads, size)
            for name in ("query", "key", "value")
        )
        scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(size)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        context = np.einsum("hqk,khd->qhd", probs, v).reshape(n, heads * size)
        attended = _dense(context, w, f"{p}attention.output.dense")
        x = _norm(attended + x, w, f"{p}attention.output.LayerNorm", arch.eps)
        inner = _act(_dense(x, w, f"{p}intermediate.dense"), arch.activation)
        x = _norm(_dense(inner, w, f"{p}output.dense") + x, w, f"{p}output.LayerNorm", arch.eps)
    return x


def _pool(tokens: Any, mode: str) -> Any:
    if mode == "cls":
        return tokens[0]
    if mode == "max":
        return tokens.max(axis=0)
    if mode == "mean_sqrt_len_tokens":
        return tokens.sum(axis=0) / math.sqrt(len(tokens))
    return tokens.mean(axis=0)


def reference_vectors(
    arch: BertArchitecture,
    weights: dict[str, Any],
    encodings: Sequence[tuple[Sequence[int], Sequence[int]]],
) -> Any:
    """The model's sentence vectors of already tokenised texts, in float64.

    Args:
        arch: the model's architecture
            (:func:`ingestd.store.embedding.graphs.bert.read_architecture`).
        weights: its tensors (:func:`ingestd.store.embedding.graphs.bert.load_weights`), any
            float type; each is widened to float64 where it is used (the word embeddings:
            the rows of the text's word pieces), so no float64 copy of them all is kept.
        encodings: per text, its word piece ids and token type ids (truncated already,
            special tokens included).

    Returns:
        ``(len(encodings), hidden)`` float64; unit vectors if the chain normalises.
    """
    out = np.empty((len(encodings), arch.hidden))
    for row, (ids, types) in enumerate(encodings):
        tokens = _encode(np.asarray(ids), np.asarray(types), weights, arch)
        out[row] = _pool(tokens, arch.pooling)
    if arch.normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out
