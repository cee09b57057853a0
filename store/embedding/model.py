"""What identifies an embedding model and the backend that runs it.

A leaf of the embedding modules: :mod:`ingestd.store.embedding.embedder` builds a
:class:`ModelInfo` from a model's files, and the ONNX modules
(:mod:`ingestd.store.embedding.onnx_runtime`, :mod:`ingestd.store.embedding.onnx_export`,
:mod:`ingestd.store.embedding.onnx`) take one. It imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.store.embedding.backends import OnnxRecipe

__all__ = ["ModelInfo", "Vectors"]

#: ``(n, dim)`` float32 array of unit vectors.
Vectors = Any


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What is known about a model and the backend that runs it, without loading it.

    Attributes:
        name: the configured name.
        path: the folder holding the model's files.
        fingerprint: what made the vectors, sha256 hex: the files' fingerprint for the
            ``torch`` backend, else that combined with the backend and its recipe (see
            :func:`ingestd.store.embedding.backends.backend_fingerprint`). Keys the embedding
            cache and the collection check.
        dim: embedding dimension.
        max_seq_length: word pieces the model reads, special tokens included.
        tokenizer_json: path of its ``tokenizer.json``, if any.
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        recipe: how the ONNX graph is made (``None`` for ``torch``).
        files_fingerprint: sha256 hex over the model's files alone.
    """

    name: str
    path: Path
    fingerprint: str
    dim: int
    max_seq_length: int
    tokenizer_json: Path | None = field(default=None)
    backend: str = "torch"
    recipe: OnnxRecipe | None = None
    files_fingerprint: str = ""

    @property
    def label(self) -> str:
        """The name, with the backend when it is not ``torch`` (for messages, records)."""
        return self.name if self.backend == "torch" else f"{self.name} ({self.backend})"
