"""Embedding backends: which runtime computes the vectors, and how that is fingerprinted.

``embedding.backend`` selects one of :data:`BACKENDS`:

* ``torch``: the model run by sentence-transformers (PyTorch, float32), as before;
* ``onnx``: the same model exported to ONNX with ``torch.onnx.export``, its graph fused
  by onnxruntime's transformer optimizer, run by onnxruntime (float32);
* ``onnx-int8``: that graph with dynamic int8 quantisation
  (``onnxruntime.quantization.quantize_dynamic``) with the settings of
  :data:`INT8_SETTINGS`.

Their vectors differ (float32 ONNX only by rounding, int8 measurably), so the backend
and its recipe are part of the model fingerprint that keys the embedding cache and the
collection check; the ``torch`` fingerprint is the one of the model's files alone, as
it always was. This module imports nothing heavy: the export lives in
:mod:`ingestd.store.embedding.onnx_export`, the runtime in :mod:`ingestd.store.embedding.onnx`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ingestd.chunkers.errors import ModelError

__all__ = [
    "BACKENDS",
    "INT8_SETTINGS",
    "RECIPES",
    "Backend",
    "BackendUnavailableError",
    "OnnxRecipe",
    "QuantSettings",
    "backend_fingerprint",
    "check_backend",
    "default_cache_dir",
]

#: A backend name, as written in ``embedding.backend``.
Backend = Literal["torch", "onnx", "onnx-int8"]
#: Every backend, the default first.
BACKENDS: tuple[Backend, ...] = ("torch", "onnx", "onnx-int8")

#: Python packages an ONNX backend needs, and the extra that installs them.
_ONNX_PACKAGES = ("onnxruntime", "onnx")
_EXTRA = "pip install 'ingestd[onnx]'"


class BackendUnavailableError(ModelError, ValueError):
    """The configured backend needs packages that are not installed."""


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


#: The int8 settings of ``onnx-int8``, chosen by ``bench/ingest.py`` (README "Choosing
#: a backend"): ``quant_pre_process`` first, uint8 activations per tensor, per-channel
#: signed weights, full 8-bit range, every projection matrix and the embedding table
#: quantised, no node excluded.
INT8_SETTINGS = QuantSettings()

#: The recipe of each ONNX backend.
RECIPES: dict[str, OnnxRecipe] = {
    "onnx": OnnxRecipe(),
    "onnx-int8": OnnxRecipe(quant=INT8_SETTINGS),
}


def backend_fingerprint(
    files_fingerprint: str, backend: str, recipe: OnnxRecipe | None = None
) -> str:
    """The model fingerprint of ``backend``: the files' fingerprint, plus the recipe.

    Args:
        files_fingerprint: sha256 hex over the model's files.
        backend: one of :data:`BACKENDS`.
        recipe: the ONNX recipe (default: the backend's own, :data:`RECIPES`).

    Returns:
        ``files_fingerprint`` itself for ``torch`` (stores made before backends existed
        stay valid); otherwise sha256 hex over it, the backend name and the recipe.

    Raises:
        ValueError: unknown backend.
    """
    if backend == "torch":
        return files_fingerprint
    if backend not in RECIPES:
        raise ValueError(f"unknown embedding backend {backend!r}; expected one of {BACKENDS}")
    spec = {
        "model": files_fingerprint,
        "backend": backend,
        "recipe": (recipe or RECIPES[backend]).as_dict(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def check_backend(backend: str) -> None:
    """Check that ``backend`` can run here, without importing anything heavy.

    Raises:
        BackendUnavailableError: an ONNX backend without onnxruntime or onnx installed;
            the message names the extra that installs them.
    """
    if backend == "torch":
        return
    missing = [p for p in _ONNX_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        raise BackendUnavailableError(
            f"backend {backend!r} needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {_EXTRA}"
        )


def default_cache_dir() -> Path:
    """Where exported ONNX models are kept when ``embedding.cache_dir`` is not set.

    ``$CACHE_DIRECTORY`` (systemd's ``CacheDirectory=``), else
    ``$XDG_CACHE_HOME/ingestd``, else ``~/.cache/ingestd``; the models go into its
    ``onnx/`` folder.
    """
    sd = os.environ.get("CACHE_DIRECTORY")
    if sd:
        return Path(sd.split(":")[0])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ingestd"
