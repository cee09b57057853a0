"""How the ONNX backends' graphs are made: :class:`OnnxRecipe`, and the int8 settings.

Every field of a recipe changes the graph, and so the vectors: a recipe is part of the
model fingerprint of the ``onnx`` and ``onnx-int8`` backends
(:mod:`ingestd.store.embedding.onnx_backend`). This module imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "INT8_SETTINGS",
    "RECIPES",
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
        opset: ONNX opset of the export.
        exporter: ``torchscript`` (``torch.onnx.export(..., dynamo=False)``, whose graph
            onnxruntime's optimizer fuses fully) or ``dynamo``.
        attention: the transformers attention implementation traced (``eager``: the
            plain matmul-softmax-matmul that the optimizer recognises as one op).
        fusion: ``model_type`` given to ``onnxruntime.transformers.optimizer`` (``bert``
            fuses embeddings + layer norm, attention, GELU, skip + layer norm), or
            ``None`` for the exported graph as is.
        quant: int8 quantisation, or ``None`` for float32.
    """

    opset: int = 17
    exporter: Literal["torchscript", "dynamo"] = "torchscript"
    attention: str = "eager"
    fusion: str | None = "bert"
    quant: QuantSettings | None = field(default=None)

    def as_dict(self) -> dict[str, Any]:
        """The recipe as JSON-ready data (what the fingerprint hashes)."""
        return asdict(self)

    @property
    def float32(self) -> OnnxRecipe:
        """The float32 recipe this one quantises (itself when not quantised)."""
        return OnnxRecipe(self.opset, self.exporter, self.attention, self.fusion)


#: The int8 settings of ``onnx-int8``, chosen by ``bench/ingest.py``
#: (docs/guides/backends.md): ``quant_pre_process`` first, uint8 activations per tensor,
#: per-channel signed weights, full 8-bit range, every projection matrix and the embedding table
#: quantised, no node excluded.
INT8_SETTINGS = QuantSettings()

#: The recipe of each ONNX backend.
RECIPES: dict[str, OnnxRecipe] = {
    "onnx": OnnxRecipe(),
    "openvino": OnnxRecipe(),  # the ``onnx`` graph, run by OpenVINO
    "onnx-int8": OnnxRecipe(quant=INT8_SETTINGS),
}


def derived_fingerprint(source: str, backend: str, recipe: OnnxRecipe) -> str:
    """sha256 hex over a model files' fingerprint, a backend's name and a recipe.

    The fingerprint of vectors that differ from torch's (int8), and the one ``onnx``
    had before its graph was taken for torch's.
    """
    spec = {"model": source, "backend": backend, "recipe": recipe.as_dict()}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
