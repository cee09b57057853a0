"""Embedding: a model described by its backend, and loaded lazily by it.

The model is loaded once, offline, on the first text that really needs a vector:
commands that embed nothing never import torch or sentence-transformers (importing
sentence-transformers alone takes about 5 s). :func:`model_info` and
:func:`load_embedder` ask the backend's spec, from the backends' table
(:data:`ingestd.store.embedding.backends.BACKENDS`: ``torch``, ``onnx``, ``onnx-int8``,
``openai``).

Vectors are cached apart from the model, in :mod:`ingestd.store.embedding.cache`.
"""

from __future__ import annotations

from pathlib import Path

from ingestd.store.embedding.backends import DEFAULT_BACKEND, backend_spec
from ingestd.store.embedding.folders import BUNDLED_MODEL, ModelNotFoundError
from ingestd.store.embedding.graphs.recipes import OnnxRecipe
from ingestd.store.embedding.model import Endpoint, ModelInfo
from ingestd.store.embedding.prompts import Prompts, with_prompts
from ingestd.store.embedding.runtimes.sentence_transformer import (
    ONEDNN_PRIMITIVE_CACHE_CAPACITY,
    SentenceTransformerEmbedder,
)
from ingestd.store.embedding.spec import Embedder

__all__ = [
    "BUNDLED_MODEL",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY",
    "ModelNotFoundError",
    "SentenceTransformerEmbedder",
    "load_embedder",
    "model_info",
]

_INFO_CACHE: dict[
    tuple[str, str, OnnxRecipe | None, Endpoint | None, Prompts | None], ModelInfo
] = {}


def model_info(
    name: str,
    backend: str = DEFAULT_BACKEND,
    recipe: OnnxRecipe | None = None,
    endpoint: Endpoint | None = None,
    prompts: Prompts | None = None,
) -> ModelInfo:
    """Describe model ``name`` run by ``backend``; fast, no torch import, cached.

    A local model's fingerprint comes from its files, not its path, so the same model
    installed elsewhere keeps its vectors and its cache entries (see the backend's
    :meth:`~ingestd.store.embedding.spec.BackendSpec.fingerprint` rule).

    Args:
        name: ``all-MiniLM-L6-v2`` (bundled), a model folder, or what the backend takes.
        backend: a name of the backends' table.
        recipe: an ONNX recipe other than the backend's own (benchmarks, tests).
        endpoint: where a remote backend's model answers (``openai``:
            :class:`~ingestd.store.embedding.model.Endpoint`); local backends ignore it.
        prompts: the configured query and document prompts (``None`` or a ``None``
            field: the model's own, :func:`~ingestd.store.embedding.prompts.with_prompts`);
            a non-empty prompt is part of the fingerprint.

    Raises:
        ModelNotFoundError: no such local or bundled model.
        ValueError: unknown backend, a remote backend without its endpoint, or an
            unreadable ``config_sentence_transformers.json``.
    """
    key = (name, backend, recipe, endpoint, prompts)
    if key not in _INFO_CACHE:
        info = backend_spec(backend).model_info(name, recipe, endpoint)
        _INFO_CACHE[key] = with_prompts(info, prompts)
    return _INFO_CACHE[key]


def load_embedder(
    info: ModelInfo,
    *,
    device: str = "cpu",
    batch_size: int = 16,
    threads: int | None = None,
    cache_dir: Path | None = None,
) -> Embedder:
    """The embedder of ``info`` by its backend; nothing is loaded until the first text.

    Args:
        info: the model and backend (see :func:`model_info`).
        device: torch device (the CPU-only backends ignore it).
        batch_size: texts per forward pass.
        threads: torch's intra-op threads; the ONNX backends: texts run at once, one
            thread each (``None``: one per core).
        cache_dir: where exported ONNX models are kept (``None``:
            :func:`ingestd.store.embedding.backends.default_cache_dir`).

    Returns:
        A callable ``texts -> (n, dim)`` float32 unit vectors, with ``loaded``,
        ``calls`` and ``batch_size`` attributes.

    Raises:
        ValueError: unknown backend.
    """
    return backend_spec(info.backend).load(
        info, device=device, batch_size=batch_size, threads=threads, cache_dir=cache_dir
    )
