"""The ONNX backends: ``onnx`` (float32) and ``onnx-int8`` (dynamic int8, lossy).

Both run the model's ONNX graph (made once, offline, cached:
:mod:`ingestd.store.embedding.graphs.onnx_export`): for a BERT model, the bundled one among
them, built by ingestd from the model's weights without torch; for any other, exported
through torch (the ``torch`` extra). The graph is fused by onnxruntime's transformer
optimizer and run on the CPU with onnxruntime; ``onnx-int8`` quantises it with the
settings of :data:`~ingestd.store.embedding.graphs.recipes.INT8_SETTINGS`. Their embedder,
:class:`~ingestd.store.embedding.runtimes.onnx.OnnxEmbedder`, is imported when loaded.

Fingerprints: the float32 graph is checked against a reference when it is made (an
independent float64 forward pass of the weights, or torch for a graph exported through
it: cosine at least :data:`~ingestd.store.embedding.graphs.onnx_export.MIN_BUILT_COSINE`, resp.
:data:`~ingestd.store.embedding.graphs.onnx_export.MIN_FLOAT32_COSINE` on every probe text; the
built graph measured 0.9999 or more to sentence-transformers' vectors on 2,000 chunks of
four corpora, ``bench/graph_equivalence.py``), so its vectors are torch's vectors:
``onnx`` has the model files' fingerprint, as ``torch`` has, whichever way its graph was
made. A store moves between the two without a vector embedded again, and the embedding
cache serves both. Before, ``onnx`` had a fingerprint of its own
(:meth:`OnnxBackend.aliases`): a store made so is taken over under the new one. The
int8 graph's vectors differ measurably: ``onnx-int8`` keeps a fingerprint of its own
(the files', the backend and the recipe); the one it had when its float32 graph was
exported through torch is an alias (the vectors are the same bit for bit).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ingestd.store.embedding.graphs.bert import unsupported
from ingestd.store.embedding.graphs.recipes import (
    RECIPES,
    TORCH_EXPORT,
    OnnxRecipe,
    derived_fingerprint,
)
from ingestd.store.embedding.spec import Embedder, FolderBackend

if TYPE_CHECKING:
    from ingestd.store.embedding.model import Endpoint, ModelInfo

__all__ = ["ONNX", "ONNX_INT8", "OnnxBackend", "OnnxInt8Backend"]


class OnnxBackend(FolderBackend):
    """The spec of the ``onnx`` backend (see the module docstring)."""

    name = "onnx"
    requires: ClassVar[tuple[str, ...]] = ("onnxruntime", "onnx", "safetensors")
    install_hint = "pip install onnxruntime onnx safetensors"
    cpu_only = True
    recipe = RECIPES["onnx"]
    #: ``module:class`` of the embedder :meth:`load` makes (imported then).
    embedder: ClassVar[str] = "ingestd.store.embedding.runtimes.onnx:OnnxEmbedder"

    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """The model files' fingerprint itself: the checked float32 graph makes torch's vectors.

        Args:
            source: the model files' fingerprint.
            recipe: a recipe other than the backend's own (benchmarks): a quantised one
                has the fingerprint of its own that :class:`OnnxInt8Backend` gives.
        """
        recipe = recipe or self.recipe
        if recipe is not None and recipe.quant is not None:
            return derived_fingerprint(source, "onnx-int8", recipe)
        return source

    def aliases(self, source: str, recipe: OnnxRecipe | None = None) -> tuple[str, ...]:
        """The fingerprint earlier versions gave this backend's vectors of the same files.

        It hashed the recipe of the graph exported through torch (the only one then).
        """
        return (derived_fingerprint(source, self.name, (recipe or TORCH_EXPORT).through_torch),)

    def model_info(
        self, model: str, recipe: OnnxRecipe | None = None, endpoint: Endpoint | None = None
    ) -> ModelInfo:
        """``model``'s folder read; its recipe the backend's, through torch if the builder lacks it.

        A model the graph builder does not know
        (:func:`ingestd.store.embedding.graphs.bert.unsupported`: reads the folder's JSON
        files only) gets the backend's recipe with the graph exported through torch
        (:attr:`~ingestd.store.embedding.graphs.recipes.OnnxRecipe.through_torch`); a
        ``recipe`` given is kept as it is.

        Raises:
            ingestd.store.embedding.folders.ModelNotFoundError: no such local or bundled model.
        """
        info = super().model_info(model, recipe, endpoint)
        own = info.recipe
        if recipe is None and own is not None and own.exporter == "builder" and info.path:
            if unsupported(info.path) is not None:
                return super().model_info(model, own.through_torch, endpoint)
        return info

    def load(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> Embedder:
        """The embedder :attr:`embedder` names (an ONNX graph: exported on first use).

        ``device`` is unused: the ONNX backends run on the CPU.
        """
        module, _, name = self.embedder.partition(":")
        cls = getattr(importlib.import_module(module), name)
        emb: Embedder = cls(info, cache_dir=cache_dir, batch_size=batch_size, threads=threads)
        return emb


class OnnxInt8Backend(OnnxBackend):
    """The spec of the ``onnx-int8`` backend: the ``onnx`` graph quantised to int8."""

    name = "onnx-int8"
    recipe = RECIPES["onnx-int8"]

    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """sha256 hex over the files' fingerprint, the backend's name and the recipe.

        Args:
            source: the model files' fingerprint.
            recipe: the recipe (default: the backend's own).
        """
        return derived_fingerprint(source, self.name, recipe or self.recipe or OnnxRecipe())

    def aliases(self, source: str, recipe: OnnxRecipe | None = None) -> tuple[str, ...]:
        """The fingerprint of the int8 graph quantised from the graph torch exported.

        As it was made before the builder. The built float32 graph and the one torch
        exported, each fused by onnxruntime's optimizer, make the same vectors bit for
        bit, and so do their int8 graphs (measured with the bundled model): an int8
        store made before is taken over.
        """
        recipe = recipe or self.recipe or OnnxRecipe()
        if recipe.exporter != "builder":
            return ()
        return (derived_fingerprint(source, self.name, recipe.through_torch),)


#: The ``onnx`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
ONNX = OnnxBackend()
#: The ``onnx-int8`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
ONNX_INT8 = OnnxInt8Backend()
