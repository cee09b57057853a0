"""The ``torch`` backend's embedder: a sentence-transformers model, loaded on first use, offline.

Importing this module imports neither torch nor sentence-transformers (importing
sentence-transformers alone takes about 5 s): the model loads on the first text that
needs a vector.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ingestd.store.embedding.backends import BackendUnavailableError
from ingestd.store.embedding.graphs.bert import TORCH_EXTRA
from ingestd.store.embedding.model import ModelInfo, Vectors

__all__ = ["ONEDNN_PRIMITIVE_CACHE_CAPACITY", "SentenceTransformerEmbedder"]

logger = logging.getLogger(__name__)

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


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded on first use, offline.

    Args:
        info: the model (see :func:`ingestd.store.embedding.embedder.model_info`).
        device: torch device (``"cpu"`` by default).
        batch_size: texts per forward pass (4-16 measured fastest on 2 cores).
        threads: torch intra-op threads, or ``None`` to leave torch's default.

    The returned vectors are float32, L2-normalised, shape ``(n, dim)``.

    Raises:
        ValueError: ``info`` is not a local model folder.
        ingestd.store.embedding.backends.BackendUnavailableError: (on the first text)
            the ``torch`` extra is not installed.
    """

    def __init__(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
    ) -> None:
        if info.path is None:
            raise ValueError(f"{info.label} is not a local model folder, which torch runs")
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
                try:
                    import torch
                    import transformers
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise BackendUnavailableError(
                        f"embedding with torch needs {TORCH_EXTRA} ({exc.name} is not installed)"
                    ) from None

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

    def unload(self) -> bool:
        """Let the model's weights go; the next text loads them again (thread-safe).

        Returns:
            Whether the model was loaded.
        """
        with self._lock:
            was = self._model is not None
            self._model = None
            return was

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
