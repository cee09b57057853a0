"""The ONNX backends: ``onnx`` (float32) and ``onnx-int8`` (dynamic int8, lossy).

Both run the model exported to ONNX with ``torch.onnx.export`` (once, offline, cached:
:mod:`ingestd.store.embedding.onnx_export`), its graph fused by onnxruntime's transformer
optimizer, on the CPU with onnxruntime; ``onnx-int8`` quantises it with the settings of
:data:`~ingestd.store.embedding.recipes.INT8_SETTINGS`. Their vectors differ from torch's
(float32 only by rounding, int8 measurably), so the backend and its recipe are part of
the fingerprint. They need the ``onnx`` extra. Their embedder,
:class:`~ingestd.store.embedding.onnx.OnnxEmbedder`, is imported when loaded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.store.embedding.recipes import RECIPES, OnnxRecipe
from ingestd.store.embedding.spec import Embedder, FolderBackend

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo

__all__ = ["ONNX", "ONNX_INT8", "OnnxBackend", "OnnxInt8Backend"]


class OnnxBackend(FolderBackend):
    """The spec of the ``onnx`` backend (see the module docstring)."""

    name = "onnx"
    requires = ("onnxruntime", "onnx")
    install_hint = "pip install 'ingestd[onnx]'"
    cpu_only = True
    recipe = RECIPES["onnx"]

    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """sha256 hex over the files' fingerprint, the backend's name and the recipe.

        Args:
            source: the model files' fingerprint.
            recipe: the recipe (default: the backend's own).
        """
        spec = {
            "model": source,
            "backend": self.name,
            "recipe": (recipe or self.recipe or OnnxRecipe()).as_dict(),
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    def load(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> Embedder:
        """An :class:`~ingestd.store.embedding.onnx.OnnxEmbedder` (exports on first use).

        ``device`` is unused: the ONNX backends run on the CPU.
        """
        from ingestd.store.embedding.onnx import OnnxEmbedder

        return OnnxEmbedder(info, cache_dir=cache_dir, batch_size=batch_size, threads=threads)


class OnnxInt8Backend(OnnxBackend):
    """The spec of the ``onnx-int8`` backend: the ``onnx`` graph quantised to int8."""

    name = "onnx-int8"
    recipe = RECIPES["onnx-int8"]


#: The ``onnx`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
ONNX = OnnxBackend()
#: The ``onnx-int8`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
ONNX_INT8 = OnnxInt8Backend()
