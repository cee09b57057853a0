"""The ``torch`` backend: the model run by sentence-transformers (PyTorch, float32).

The reference every other backend's vectors are checked against. It needs the ``torch``
extra (``pip install 'ingestd[torch]'``: torch, transformers, sentence-transformers),
which the default install leaves out. Its fingerprint is the model files' fingerprint
alone, as it was before backends existed, so stores made then stay valid. Its embedder,
:class:`~ingestd.store.embedding.runtimes.sentence_transformer.SentenceTransformerEmbedder`, is
imported when loaded; torch itself on the first text.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.store.embedding.graphs.bert import TORCH_EXTRA
from ingestd.store.embedding.spec import Embedder, FolderBackend

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.recipes import OnnxRecipe
    from ingestd.store.embedding.model import ModelInfo

__all__ = ["TORCH", "TorchBackend"]


class TorchBackend(FolderBackend):
    """The spec of the ``torch`` backend (see the module docstring)."""

    name = "torch"
    requires = ("torch", "transformers", "sentence_transformers")
    install_hint = TORCH_EXTRA
    cpu_only = False

    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """The model files' fingerprint itself (``recipe`` is ignored)."""
        return source

    def load(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> Embedder:
        """A sentence-transformers embedder (``SentenceTransformerEmbedder``).

        Its class: :mod:`ingestd.store.embedding.runtimes.sentence_transformer`.

        ``cache_dir`` is unused (torch runs the model folder as it is).
        """
        from ingestd.store.embedding.runtimes.sentence_transformer import (
            SentenceTransformerEmbedder,
        )

        return SentenceTransformerEmbedder(
            info, device=device, batch_size=batch_size, threads=threads
        )


#: The ``torch`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
TORCH = TorchBackend()
