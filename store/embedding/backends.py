"""The table of embedding backends: which runtime computes the vectors, and its fingerprint.

``embedding.backend`` names an entry of :data:`BACKENDS`, which maps each backend's name
to the ``module:attribute`` of its spec (a :class:`~ingestd.store.embedding.spec.BackendSpec`),
imported when first asked for, as uvicorn's ``config.py`` maps a loop or protocol name to
its implementation. The backends today:

* ``torch``: the model run by sentence-transformers (PyTorch, float32), the reference;
* ``onnx``: the same model exported to ONNX, its graph fused by onnxruntime's
  transformer optimizer, run by onnxruntime (float32);
* ``openvino``: that graph run by OpenVINO, in bfloat16 where the CPU has it natively
  (:mod:`~ingestd.store.embedding.openvino_backend`);
* ``onnx-int8``: that graph with dynamic int8 quantisation
  (:data:`~ingestd.store.embedding.graphs.recipes.INT8_SETTINGS`);
* ``openai``: an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure OpenAI,
  Ollama, text-embeddings-inference, infinity): :mod:`~ingestd.store.embedding.remote_backend`.

Each spec holds its backend's fingerprint rule (:func:`backend_fingerprint`), what it
needs installed (:func:`check_backend`), whether it runs on the CPU only, what is known
about a model it runs, and how it loads. **A new backend** is one module exporting a
spec plus one entry here (``openai`` is such a one: its fingerprint comes from the
endpoint's model name, and its model is no local folder). This module imports nothing
heavy, and neither do the specs.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from ingestd.chunkers.errors import ModelError
from ingestd.store.embedding.graphs.recipes import INT8_SETTINGS, RECIPES, OnnxRecipe, QuantSettings
from ingestd.store.embedding.spec import BackendSpec

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "INT8_SETTINGS",
    "RECIPES",
    "BackendUnavailableError",
    "OnnxRecipe",
    "QuantSettings",
    "backend_fingerprint",
    "backend_names",
    "backend_spec",
    "check_backend",
    "default_cache_dir",
]

#: Backend name -> ``module:attribute`` of its :class:`BackendSpec` (light modules).
BACKENDS: dict[str, str] = {
    "torch": "ingestd.store.embedding.torch_backend:TORCH",
    "onnx": "ingestd.store.embedding.onnx_backend:ONNX",
    "openvino": "ingestd.store.embedding.openvino_backend:OPENVINO",
    "onnx-int8": "ingestd.store.embedding.onnx_backend:ONNX_INT8",
    "openai": "ingestd.store.embedding.remote_backend:OPENAI",
}
#: The backend ``model_info`` and ``load_embedder`` take when given none (the reference);
#: a config that names none gets :func:`ingestd.daemon.config.embedding.default_backend`'s.
DEFAULT_BACKEND = "torch"


class BackendUnavailableError(ModelError, ValueError):
    """The configured backend needs packages that are not installed."""


def backend_names() -> tuple[str, ...]:
    """The backends' names, in the table's order (the reference, ``torch``, first)."""
    return tuple(BACKENDS)


def backend_spec(name: str) -> BackendSpec:
    """The spec of backend ``name``, its light module imported on first use.

    Raises:
        ValueError: no backend of that name (the message lists them).
    """
    target = BACKENDS.get(name)
    if target is None:
        raise ValueError(f"unknown embedding backend {name!r}; expected one of {backend_names()}")
    module, _, attr = target.partition(":")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, BackendSpec) or spec.name != name:
        raise TypeError(f"{target} is not the BackendSpec of backend {name!r}")
    return spec


def backend_fingerprint(source: str, backend: str, recipe: OnnxRecipe | None = None) -> str:
    """The model fingerprint of ``backend``, by its spec's rule.

    Args:
        source: what identifies the model: sha256 hex over its files (local backends).
        backend: a name of :data:`BACKENDS`.
        recipe: an ONNX recipe other than the backend's own (benchmarks, tests).

    Returns:
        ``source`` itself for ``torch`` and ``onnx`` (their vectors are equal within the
        invariant's bound: one family); for ``onnx-int8`` sha256 hex over it, the
        backend name and the recipe.

    Raises:
        ValueError: unknown backend.
    """
    return backend_spec(backend).fingerprint(source, recipe)


def check_backend(backend: str) -> None:
    """Check that ``backend`` can run here, without importing anything heavy.

    Raises:
        ValueError: unknown backend.
        BackendUnavailableError: a package it needs is not installed; the message names
            the command that installs it.
    """
    spec = backend_spec(backend)
    missing = spec.missing()
    if missing:
        raise BackendUnavailableError(
            f"backend {backend!r} needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {spec.install_hint}"
        )


def default_cache_dir() -> Path:
    """Where exported models are kept when ``embedding.cache_dir`` is not set.

    ``$CACHE_DIRECTORY`` (systemd's ``CacheDirectory=``), else
    ``$XDG_CACHE_HOME/ingestd``, else ``~/.cache/ingestd``; the ONNX models go into its
    ``onnx/`` folder.
    """
    sd = os.environ.get("CACHE_DIRECTORY")
    if sd:
        return Path(sd.split(":")[0])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ingestd"
