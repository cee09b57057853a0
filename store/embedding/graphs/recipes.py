"""How the ONNX backends' graphs are made: :class:`OnnxRecipe`, and the int8 settings.

Every field of a recipe changes the graph: a recipe names the graph's file in the cache
(:func:`ingestd.store.embedding.graphs.onnx_cache.artifact_path`) and is part of the model
fingerprint of ``onnx-int8``, whose vectors are its own. The float32 graphs make the
reference's vectors whatever their recipe, so ``onnx`` and ``openvino`` have the model
files' fingerprint (:mod:`ingestd.store.embedding.onnx_backend`). This module imports
nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "BUILDER_VERSION",
    "INT8_SETTINGS",
    "RECIPES",
    "TORCH_EXPORT",
    "OnnxRecipe",
    "QuantSettings",
    "derived_fingerprint",
]


@dataclass(frozen=True, slots=True)
class QuantSettings:
    """Dynamic int8 quantisation, as ``onnxruntime.quantization.quantize_dynamic`` does it.

    Weights are quantised once, offline; activations are quantised at run time to
    uint8 with one scale and zero point per tensor (a whole batch), computed from its
    min and max. Every field changes the graph, so every field is in the fingerprint.

    Attributes:
        pre_process: run onnxruntime's ``quant_pre_process`` first (symbolic shape
            inference, onnxruntime's basic graph optimisation, ONNX shape inference:
            the step onnxruntime's quantisation guide recommends, so that every tensor
            quantised has a known type and shape).
        activation_type: ``QUInt8``, the only activation type ``quantize_dynamic``
            supports (asymmetric, per tensor); named so that the fingerprint says it.
        weight_type: ``QInt8`` (signed weights: the u8 x s8 kernels of AVX-512 VNNI,
            AVX-VNNI and AMX) or ``QUInt8``.
        per_channel: one scale per output channel of each weight matrix instead of one
            per matrix (measured here: mean cosine to torch 0.993 instead of 0.943).
        reduce_range: 7-bit weights, for CPUs without VNNI whose 8-bit multiply-add
            saturates; measured here it costs much accuracy (mean cosine 0.81).
        op_types: operator types quantised (after fusion: ``Attention`` holds the
            query/key/value projection, ``EmbedLayerNormalization`` the embedding table).
        exclude: regular expressions of node names kept in float32 (``re.search``).
    """

    pre_process: bool = True
    activation_type: Literal["QUInt8"] = "QUInt8"
    weight_type: Literal["QInt8", "QUInt8"] = "QInt8"
    per_channel: bool = True
    reduce_range: bool = False
    op_types: tuple[str, ...] = ("Attention", "EmbedLayerNormalization", "MatMul")
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OnnxRecipe:
    """How the ONNX graph of a model is made; every field is part of the fingerprint.

    Attributes:
        opset: ONNX opset of the graph.
        exporter: ``builder`` (ingestd's own graph of a BERT model, written from its
            weights with the ``onnx`` package: :mod:`ingestd.store.embedding.graphs.bert_graph`,
            no torch), ``torchscript`` (``torch.onnx.export(..., dynamo=False)`` of the
            model's own code, whose graph onnxruntime's optimizer fuses fully; the ``torch``
            extra) or ``dynamo``.
        attention: the attention written: ``eager``, the plain matmul-softmax-matmul that
            the optimizer recognises as one op (for the torch exporters, the
            transformers attention implementation traced).
        fusion: ``model_type`` given to ``onnxruntime.transformers.optimizer`` (``bert``
            fuses embeddings + layer norm, attention, GELU, skip + layer norm), or
            ``None`` for the graph as made.
        quant: int8 quantisation, or ``None`` for float32.
        builder: the version of ingestd's graph builder (``exporter="builder"``): a new
            version is a new graph, under a new name. 0 for the torch exporters, and then
            left out of :meth:`as_dict`, so that the recipes made before the builder keep
            their fingerprints.
    """

    opset: int = 17
    exporter: Literal["builder", "torchscript", "dynamo"] = "torchscript"
    attention: str = "eager"
    fusion: str | None = "bert"
    quant: QuantSettings | None = field(default=None)
    builder: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The recipe as JSON-ready data (what the fingerprint hashes)."""
        data = asdict(self)
        if not self.builder:
            del data["builder"]
        return data

    @property
    def float32(self) -> OnnxRecipe:
        """The float32 recipe this one quantises (itself when not quantised)."""
        return replace(self, quant=None)

    @property
    def through_torch(self) -> OnnxRecipe:
        """This recipe with the graph exported through torch (for a model the builder lacks)."""
        exporter = "torchscript" if self.exporter == "builder" else self.exporter
        return replace(self, exporter=exporter, builder=0)


#: The version of the graph builder the recipes below name (see ``OnnxRecipe.builder``).
BUILDER_VERSION = 1

#: The int8 settings of ``onnx-int8``, chosen by ``bench/ingest.py``
#: (docs/guides/backends.md): ``quant_pre_process`` first, uint8 activations per tensor,
#: per-channel signed weights, full 8-bit range, every projection matrix and the embedding table
#: quantised, no node excluded.
INT8_SETTINGS = QuantSettings()

#: The recipe of each ONNX backend: the graph built by ingestd from the model's weights.
#: A model the builder does not know is exported through torch instead
#: (:attr:`OnnxRecipe.through_torch`, chosen by the backend's ``model_info``).
RECIPES: dict[str, OnnxRecipe] = {
    "onnx": OnnxRecipe(exporter="builder", builder=BUILDER_VERSION),
    "openvino": OnnxRecipe(exporter="builder", builder=BUILDER_VERSION),  # run by OpenVINO
    "onnx-int8": OnnxRecipe(exporter="builder", builder=BUILDER_VERSION, quant=INT8_SETTINGS),
}

#: The recipe every ONNX backend had before the builder: the graph exported through torch.
TORCH_EXPORT = OnnxRecipe()


def derived_fingerprint(source: str, backend: str, recipe: OnnxRecipe) -> str:
    """sha256 hex over a model files' fingerprint, a backend's name and a recipe.

    The fingerprint of vectors that differ from torch's (int8), and the one ``onnx``
    had before its graph was taken for torch's.
    """
    spec = {"model": source, "backend": backend, "recipe": recipe.as_dict()}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
