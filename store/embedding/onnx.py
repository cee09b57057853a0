"""The ONNX backends at run time: the exported graph, made on first use, then run.

Importing this module imports neither torch nor onnxruntime; the session is opened on
the first text that needs a vector (exporting the model first if the cache lacks it,
which is the only time torch is imported). Running a graph is
:class:`ingestd.store.embedding.onnx_runtime.OnnxRunner`'s part; making it is
:mod:`ingestd.store.embedding.onnx_export`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.store.embedding.backends import default_cache_dir
from ingestd.store.embedding.onnx_runtime import OnnxRunner

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo

__all__ = ["OnnxEmbedder"]


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

    Returns ``(n, dim)`` float32 L2-normalised vectors, like
    :class:`ingestd.store.embedding.embedder.SentenceTransformerEmbedder`.

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
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        super().__init__(info, locate=self.export, batch_size=batch_size, threads=threads)

    @classmethod
    def from_file(
        cls, info: ModelInfo, path: Path, *, batch_size: int = 16, threads: int | None = None
    ) -> OnnxEmbedder:
        """An embedder of the ONNX file ``path`` itself (no cache, no export)."""
        emb = cls(info, cache_dir=path.parent, batch_size=batch_size, threads=threads)
        emb.path = path
        emb.quiet = True
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
