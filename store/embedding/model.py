"""What identifies an embedding model and the backend that runs it.

A leaf of the embedding modules: each backend's spec builds a :class:`ModelInfo` (from a
model's files, :mod:`ingestd.store.embedding.folders`), and the ONNX modules
(:mod:`ingestd.store.embedding.runtimes.onnx_runtime`,
:mod:`ingestd.store.embedding.graphs.onnx_export`,
:mod:`ingestd.store.embedding.runtimes.onnx`) take one. It imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.store.embedding.graphs.recipes import OnnxRecipe

__all__ = ["Endpoint", "ModelInfo", "Vectors"]

#: ``(n, dim)`` float32 array of unit vectors.
Vectors = Any


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how a remote backend asks for vectors (the ``embedding`` keys it reads).

    Attributes:
        url: the base URL of an OpenAI-compatible API (``http://host:8000/v1``: the
            requests go to its ``/embeddings``), or the full URL of the embeddings route.
        dimensions: the dimension of the model's vectors; a response of another is an error.
        api_key_env: the environment variable holding the API key (``None``: no key).
        api_key_header: the header that carries the key: ``Authorization`` (sent as
            ``Bearer KEY``) or another (Azure OpenAI's ``api-key``: the key as it is).
        concurrency: requests in flight at once.
        timeout_s: seconds one request may take (connect, write, read).
        retries: attempts after the first for a transient failure (429, 5xx, no answer).
        max_tokens: the model's input limit in tiktoken ``cl100k_base`` tokens: with
            ``fit_model`` every chunk is held to it.
        query_input_type: the ``input_type`` a request for search queries carries
            (``None``: no such field; see :class:`ModelInfo`).
        document_input_type: the ``input_type`` a request for chunks carries.
    """

    url: str
    dimensions: int
    api_key_env: str | None = None
    api_key_header: str = "Authorization"
    concurrency: int = 2
    timeout_s: float = 60.0
    retries: int = 4
    max_tokens: int = 512
    query_input_type: str | None = None
    document_input_type: str | None = None

    @property
    def input_types(self) -> bool:
        """Whether requests say their input type (the server puts the prompt itself)."""
        return self.query_input_type is not None


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
        max_seq_length: word pieces the model reads, special tokens included (a
            remote model: its ``max_tokens`` plus the 2 that the chunk limit takes off).
        tokenizer_json: path of its ``tokenizer.json``, if any.
        backend: a name of the backends' table (``torch``, ``onnx``, ``onnx-int8``,
            ``openai``).
        recipe: how the ONNX graph is made (``None`` for the other backends).
        files_fingerprint: sha256 hex over the model's files alone (empty when the
            model is not a local folder).
        endpoint: where a remote backend's model answers (``None`` for a local model).
        query_prompt: text put before each search query (``""``: none; see
            :mod:`ingestd.store.embedding.prompts`).
        document_prompt: text put before each chunk (``""``: none).
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
    endpoint: Endpoint | None = None
    query_prompt: str = ""
    document_prompt: str = ""

    @property
    def asymmetric(self) -> bool:
        """Whether a search query is embedded otherwise than a chunk of the same text.

        By its prompt, or by the input type its request says (an endpoint with
        ``query_input_type``): then a query's vector is not a cached chunk's.
        """
        by_type = self.endpoint is not None and (
            self.endpoint.query_input_type != self.endpoint.document_input_type
        )
        return self.query_prompt != self.document_prompt or by_type

    @property
    def label(self) -> str:
        """The name, with the backend when it is not ``torch`` (for messages, records)."""
        return self.name if self.backend == "torch" else f"{self.name} ({self.backend})"
