"""The ONNX backends at run time: the exported graph, made on first use, then run.

Importing this module imports neither torch nor onnxruntime; the session is opened on
the first text that needs a vector. Running a graph is
:class:`ingestd.store.embedding.onnx_runtime.OnnxRunner`'s part; making it is
:mod:`ingestd.store.embedding.onnx_export`'s.

The first use on a machine exports the model (about 25 s and 1.3 GB of memory on 2
cores, once: the file is cached). For the float32 graph, which makes torch's vectors,
that export never holds anything up: it runs in a background thread, and the texts that
come meanwhile are embedded by torch (the same vectors, within the bound the export
checks); the graph takes over when it is ready. A later process finds the file cached
and never imports torch. If the export fails, torch goes on embedding, and one warning
says why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.store.embedding.backends import default_cache_dir
from ingestd.store.embedding.onnx_runtime import OnnxRunner

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo, Vectors

__all__ = ["OnnxEmbedder"]

logger = logging.getLogger(__name__)


class OnnxEmbedder(OnnxRunner):
    """An exported model run by onnxruntime on the CPU; same interface as the torch one.

    Args:
        info: the model with an ONNX backend (see
            :func:`ingestd.store.embedding.embedder.model_info`).
        cache_dir: where exported models are kept (default:
            :func:`ingestd.store.embedding.backends.default_cache_dir`).
        batch_size: accepted for the torch embedder's interface; each text runs
            alone (see below).
        threads: onnxruntime intra-op threads, or ``None`` for one per core.
        background_export: for a float32 graph not exported yet, export it in a
            background thread and embed with torch meanwhile (see the module
            docstring); ``False``: the first text waits for the export.

    Returns ``(n, dim)`` float32 L2-normalised vectors, like
    :class:`ingestd.store.embedding.sentence_transformer.SentenceTransformerEmbedder`.

    Each text runs alone, unpadded. An int8 graph needs it: its activations are
    quantised with one scale per tensor, so in a batch a text's vector would depend on
    the other texts (measured: cosine down to 0.985 between one text's vectors from two
    batches of 16), and a from-scratch ingest would not reproduce the vectors of an
    incremental one. The float32 graph gains from it too: no padding is computed, and on
    2 cores one text per run measured faster than batches of 4 or 16 (``bench/ingest.py``).
    """

    def __init__(
        self,
        info: ModelInfo,
        *,
        cache_dir: Path | None = None,
        batch_size: int = 16,
        threads: int | None = None,
        background_export: bool = True,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        super().__init__(info, locate=self.export, batch_size=batch_size, threads=threads)
        quantised = info.recipe is not None and info.recipe.quant is not None
        self.background_export = background_export and not quantised
        self._fallback: Any = None  # torch's embedder while the export runs
        self._exporting: threading.Thread | None = None
        self._export_failed: BaseException | None = None
        self._switch = threading.Lock()

    @classmethod
    def from_file(
        cls, info: ModelInfo, path: Path, *, batch_size: int = 16, threads: int | None = None
    ) -> OnnxEmbedder:
        """An embedder of the ONNX file ``path`` itself (no cache, no export)."""
        emb = cls(info, cache_dir=path.parent, batch_size=batch_size, threads=threads)
        emb.path = path
        emb.quiet = True
        emb.background_export = False
        return emb

    def export(self) -> Path:
        """The ONNX file of the model, exported into the cache first if it lacks it.

        Called once, when the session is opened.

        Raises:
            ingestd.store.embedding.onnx_export.ExportError: the export failed.
        """
        from ingestd.store.embedding.onnx_export import ensure_exported

        path, _ = ensure_exported(self.info, self.cache_dir)
        return path

    # -- the graph, or torch while it is made ---------------------------------------------

    def _graph_ready(self) -> bool:
        """Whether the session can open now without exporting (opens nothing)."""
        if self._session is not None or self.path is not None:
            return True
        from ingestd.store.embedding.onnx_export import cached_export

        found = cached_export(self.info, self.cache_dir)
        if found is not None:
            self.path = found
        return found is not None

    def _start_export(self) -> None:
        if self._exporting is not None:
            return
        logger.info(
            "exporting %s to ONNX in the background (once, about 25 s); torch embeds "
            "meanwhile (the same vectors)",
            self.info.name,
        )

        def run() -> None:
            try:
                self.export()
            except Exception as exc:  # reported once; torch goes on
                self._export_failed = exc
                logger.warning(
                    "the ONNX export of %s failed (%s: %s); embedding with torch",
                    self.info.name,
                    type(exc).__name__,
                    exc,
                )

        self._exporting = threading.Thread(target=run, name="ingestd-onnx-export", daemon=True)
        self._exporting.start()

    def _torch(self) -> Any:
        if self._fallback is None:
            from dataclasses import replace

            from ingestd.store.embedding.sentence_transformer import (
                SentenceTransformerEmbedder,
            )

            torch_info = replace(self.info, backend="torch", recipe=None)
            self._fallback = SentenceTransformerEmbedder(
                torch_info, device="cpu", batch_size=self.batch_size, threads=self.threads
            )
        return self._fallback

    def _runner(self) -> Any:
        """What embeds now: this graph, or torch's embedder while the graph is made."""
        if not self.background_export:
            return None
        with self._switch:
            if self._graph_ready():
                self._fallback = None  # the graph takes over; torch's weights are let go
                return None
            if self._export_failed is None:
                self._start_export()
            if self._exporting is not None and not self._exporting.is_alive():
                if self._export_failed is None and self._graph_ready():
                    self._fallback = None
                    return None
            return self._torch()

    def load(self) -> None:
        """Load what embeds now: the graph's session, or torch while the graph is made."""
        runner = self._runner()
        if runner is None:
            super().load()
        else:
            runner.load()

    @property
    def loaded(self) -> bool:
        """Whether the session, or torch's model while the export runs, is loaded."""
        if self._session is not None:
            return True
        fallback = self._fallback
        return fallback is not None and bool(fallback.loaded)

    def __call__(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; returns an ``(n, dim)`` float32 array of unit vectors."""
        runner = self._runner() if texts else None
        if runner is not None:
            out: Vectors = runner(texts)
            self.calls += 1
            return out
        return super().__call__(texts)
