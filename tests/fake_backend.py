"""A test-only embedding backend: proof that a backend is one module plus one table entry.

``hash`` embeds a text as a deterministic unit vector drawn from its hash
(:func:`tests.helpers.fake_vectors`), of the dimension its model name ends with
(``hash-64``: 64). Like a remote embedding endpoint, its model is no local folder: the
model info comes from the name alone, and the fingerprint from the backend's and the
model's names, not from files. The ``hash_backend`` fixture
(``tests/store/embedding/test_backend_table.py``) adds it to the backends' table,
``BACKENDS["hash"] = "tests.fake_backend:HASH"``, and removes it afterwards; nothing
else in ingestd knows it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ingestd.store.embedding.graphs.recipes import OnnxRecipe
from ingestd.store.embedding.model import ModelInfo
from ingestd.store.embedding.spec import BackendSpec, Embedder
from tests.helpers import fake_vectors

__all__ = ["HASH", "HashBackend", "HashEmbedder"]


class HashEmbedder:
    """Hash vectors of ``dim`` dimensions; "loads" on the first text, counting what it embeds."""

    def __init__(self, dim: int, batch_size: int) -> None:
        self.dim = dim
        self.batch_size = batch_size
        self.calls = 0
        self.texts: list[str] = []
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        self._loaded = True

    def __call__(self, texts: Sequence[str]) -> Any:
        self.load()
        self.calls += 1
        self.texts.extend(texts)
        return fake_vectors(texts, self.dim)


class HashBackend(BackendSpec):
    """The spec of the test-only ``hash`` backend (see the module docstring)."""

    name = "hash"
    requires = ()
    install_hint = "nothing to install"
    cpu_only = True

    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """sha256 over the backend's name and the model's name (``source``)."""
        spec = {"backend": self.name, "model": source}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    def model_info(
        self, model: str, recipe: OnnxRecipe | None = None, endpoint: Any = None
    ) -> ModelInfo:
        """``hash-<dim>``: no folder, no tokenizer, 256 word pieces."""
        dim = int(model.rsplit("-", 1)[-1])
        return ModelInfo(
            name=model,
            path=None,
            fingerprint=self.fingerprint(model),
            dim=dim,
            max_seq_length=256,
            backend=self.name,
        )

    def load(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> Embedder:
        return HashEmbedder(info.dim, batch_size)


#: The spec the backends' table names (``tests.fake_backend:HASH``).
HASH = HashBackend()
