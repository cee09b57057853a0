"""What identifies an embedding model and the backend that runs it.

A leaf of the embedding modules: each backend's spec builds a :class:`ModelInfo` (from a
model's files, :mod:`ingestd.store.embedding.folders`), and the ONNX modules
(:mod:`ingestd.store.embedding.onnx_runtime`, :mod:`ingestd.store.embedding.onnx_export`,
:mod:`ingestd.store.embedding.onnx`) take one. It imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.store.embedding.recipes import OnnxRecipe

__all__ = ["ModelInfo", "Vectors"]

#: ``(n, dim)`` float32 array of unit vectors.
Vectors = Any


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What is known about a model and the backend that runs it, without loading it.

    Attributes:
        name: the configured name.
        path: the folder holding the model's files; ``None`` for a backend whose model
            is not a local folder (an embedding endpoint).
        fingerprint: what made the vectors, sha256 hex, by the backend's rule (see
            :meth:`ingestd.store.embedding.spec.BackendSpec.fingerprint`): the files'
            fingerprint for the ``torch`` backend, that combined with the backend and its
            recipe for the ONNX ones. Keys the embedding cache and the collection check.
        dim: embedding dimension.
        max_seq_length: word pieces the model reads, special tokens included.
        tokenizer_json: path of its ``tokenizer.json``, if any.
        backend: a name of the backends' table (``torch``, ``onnx``, ``onnx-int8``).
        recipe: how the ONNX graph is made (``None`` for the other backends).
        files_fingerprint: sha256 hex over the model's files alone (empty when the
            model is not a local folder).
    """

    name: str
    path: Path | None
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
