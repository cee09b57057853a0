"""The ONNX backends at run time: the model's graph, made on first use, then run.

Importing this module imports neither torch nor onnxruntime; the session is opened on
the first text that needs a vector. Running a graph is
:class:`ingestd.store.embedding.runtimes.onnx_runtime.OnnxRunner`'s part; making it is
:mod:`ingestd.store.embedding.graphs.onnx_export`'s.

The first use on a machine makes the graph, once (the file is cached), in a process of
its own, so that its memory goes back to the system when it ends:

* a BERT model's graph (the bundled model's) is built from its weights, without torch
  (about 10 s and 0.5 GB on 2 cores: ``bench/first_run.py``); the first text waits for it;
* any other model's is exported through torch (the ``torch`` extra; about 25 s and 1.3
  GB), and that export holds nothing up: the texts that come meanwhile are embedded by
  torch (the same vectors, within the bound the export checks) and the graph takes over
  when it is ready. If the export fails, torch goes on embedding, and one warning says
  why. It is started by :meth:`OnnxEmbedder.load` (the daemon preloads its model at
  start) and by a call that embeds more than one text; a call with one text (a search's
  query) uses torch and starts nothing, so a one-shot ``ingestd search`` does not leave
  a 25-second export behind it.

A later process finds the file cached and makes nothing.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.store.embedding.backends import default_cache_dir
from ingestd.store.embedding.graphs.recipes import RECIPES
from ingestd.store.embedding.graphs.torch_export import torch_missing
from ingestd.store.embedding.runtimes.onnx_runtime import OnnxRunner

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo, Vectors

__all__ = ["OnnxEmbedder", "graph_process", "make_graph"]

logger = logging.getLogger(__name__)


def _own_recipe(info: ModelInfo) -> bool:
    """Whether ``info``'s recipe is the one ``model_info`` gives its name and backend.

    The backend's own, or the same through torch; a process of its own can make it from
    the model's name. Another (benchmarks) is made where it is asked for.
    """
    own = RECIPES.get(info.backend)
    return own is not None and info.recipe in (own, own.through_torch)


def graph_process(info: ModelInfo, cache_dir: Path, stderr: Any) -> subprocess.Popen[bytes]:
    """The process that makes ``info``'s graph into ``cache_dir`` (``onnx_export.main``).

    Args:
        info: a model whose recipe is its backend's own (see :func:`make_graph`).
        cache_dir: the cache folder.
        stderr: where the process writes its log (a file object).
    """
    env = dict(os.environ)
    # numpy's BLAS threads spin while they wait: on a busy machine one thread ran the
    # float64 reference four times as fast as two
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "ingestd.store.embedding.graphs.onnx_export"]
    # the model's name: model_info resolves it again, to the same file name
    how = ["torch"] if info.recipe is not None and info.recipe.exporter != "builder" else []
    return subprocess.Popen(
        [*cmd, info.name, info.backend, str(cache_dir), *how],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=env,
    )


def make_graph(info: ModelInfo, cache_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The ONNX file of ``info`` and its record, made into the cache first if it lacks it.

    The backend's own recipe is made by a process of its own (:func:`graph_process`),
    which this call waits for, so that the build's memory (about 0.5 GB for the bundled
    model, 1.3 GB through torch) goes back to the system when it ends; another recipe
    (benchmarks) is made in this process.

    Raises:
        ingestd.store.embedding.graphs.onnx_export.ExportError: the graph cannot be made (the
            process's last line says why).
    """
    from ingestd.store.embedding.graphs.onnx_export import (
        ExportError,
        cached_export,
        ensure_exported,
    )

    if info.recipe is not None and info.recipe.exporter != "builder":
        why = torch_missing(info)
        if why is not None:
            raise ExportError(why)
    if _own_recipe(info) and cached_export(info, cache_dir) is None:
        logger.info("making the ONNX graph of %s (once: cached in %s)", info.name, cache_dir)
        with tempfile.TemporaryFile() as err:
            code = graph_process(info, cache_dir, err).wait()
            err.seek(0)
            lines = err.read().decode(errors="replace").strip().splitlines()
        if code != 0:
            raise ExportError(lines[-1] if lines else f"exit status {code}")
        logger.info("%s", lines[-1] if lines else f"made the ONNX graph of {info.name}")
    return ensure_exported(info, cache_dir)


class OnnxEmbedder(OnnxRunner):
    """A model's ONNX graph run by onnxruntime on the CPU; same interface as the torch one.

    Args:
        info: the model with an ONNX backend (see
            :func:`ingestd.store.embedding.embedder.model_info`).
        cache_dir: where exported models are kept (default:
            :func:`ingestd.store.embedding.backends.default_cache_dir`).
        batch_size: accepted for the torch embedder's interface; each text runs
            alone (see below).
        threads: texts run at once, one thread each, or ``None`` for one per core.
        background_export: for the backend's own float32 graph of a model exported
            through torch and not exported yet, export it in a process of its own and
            embed with torch meanwhile (see the module docstring); ``False``: the first
            text waits for the export. A built graph is always waited for.

    Returns ``(n, dim)`` float32 L2-normalised vectors, like
    :class:`ingestd.store.embedding.runtimes.sentence_transformer.SentenceTransformerEmbedder`.

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
        recipe = info.recipe
        self.background_export = (
            background_export
            and _own_recipe(info)
            and recipe is not None
            and recipe.exporter != "builder"
            and recipe.quant is None
            and torch_missing(info) is None
        )
        self._fallback: Any = None  # torch's embedder while the export runs
        self._exporting: subprocess.Popen[bytes] | None = None
        self._export_err: Any = None  # the child's stderr (a temporary file)
        self._export_failed: str | None = None
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
        """The ONNX file of the model, made into the cache first if it lacks it.

        Called once, when the session is opened (:func:`make_graph`).

        Raises:
            ingestd.store.embedding.graphs.onnx_export.ExportError: the graph cannot be made.
        """
        return make_graph(self.info, self.cache_dir)[0]

    # -- the graph, or torch while it is made ---------------------------------------------

    def _graph_ready(self) -> bool:
        """Whether the session can open now without exporting (opens nothing)."""
        if self._session is not None or self.path is not None:
            return True
        from ingestd.store.embedding.graphs.onnx_export import cached_export

        found = cached_export(self.info, self.cache_dir)
        if found is not None:
            self.path = found
        return found is not None

    def _start_export(self) -> None:
        if self._exporting is not None:
            return
        logger.info(
            "exporting %s to ONNX through torch in the background (once, about 25 s); "
            "torch embeds meanwhile (the same vectors)",
            self.info.name,
        )
        self._export_err = tempfile.TemporaryFile()
        self._exporting = graph_process(self.info, self.cache_dir, self._export_err)

    @property
    def loaded_graph(self) -> bool:
        """Whether the ONNX graph's session is open (torch is not what embeds)."""
        return self._session is not None

    @property
    def exporting(self) -> bool:
        """Whether this embedder's background export process is running now."""
        proc = self._exporting
        return proc is not None and proc.poll() is None

    @property
    def export_failed(self) -> str | None:
        """Why the background export failed (its last line), or ``None``."""
        with self._switch:
            self._export_done()
        return self._export_failed

    def _export_done(self) -> bool:
        """Whether the export process has ended; a failure is logged once."""
        proc = self._exporting
        if proc is None or proc.poll() is None:
            return False
        if proc.returncode != 0 and self._export_failed is None:
            self._export_err.seek(0)
            lines = self._export_err.read().decode(errors="replace").strip().splitlines()
            self._export_failed = lines[-1] if lines else f"exit status {proc.returncode}"
            logger.warning(
                "the ONNX export of %s failed (%s); embedding with torch",
                self.info.name,
                self._export_failed,
            )
        if self._export_err is not None:
            self._export_err.close()
            self._export_err = None
        return True

    def _torch(self) -> Any:
        if self._fallback is None:
            from dataclasses import replace

            from ingestd.store.embedding.runtimes.sentence_transformer import (
                SentenceTransformerEmbedder,
            )

            torch_info = replace(self.info, backend="torch", recipe=None)
            self._fallback = SentenceTransformerEmbedder(
                torch_info, device="cpu", batch_size=self.batch_size, threads=self.threads
            )
        return self._fallback

    def _runner(self, start_export: bool) -> Any:
        """What embeds now: this graph (``None``), or torch's embedder while it is made.

        ``start_export``: start the export if the graph is not made yet (otherwise torch
        embeds and nothing is started).
        """
        if not self.background_export:
            return None
        with self._switch:
            done = self._export_done()
            if self._graph_ready():
                self._fallback = None  # the graph takes over; torch's weights are let go
                return None
            if start_export and not done and self._export_failed is None:
                self._start_export()
            return self._torch()

    def load(self) -> None:
        """Load what embeds now: the graph's session, or torch while the graph is made."""
        runner = self._runner(start_export=True)
        if runner is None:
            super().load()
        else:
            runner.load()

    def unload(self) -> bool:
        """Close the session and let torch's model go too, if it embeds meanwhile.

        Returns:
            Whether anything was loaded.
        """
        with self._switch:
            fallback = self._fallback
        was = bool(fallback is not None and fallback.unload())
        return super().unload() or was

    @property
    def loaded(self) -> bool:
        """Whether the session, or torch's model while the export runs, is loaded."""
        if self._session is not None:
            return True
        fallback = self._fallback
        return fallback is not None and bool(fallback.loaded)

    def __call__(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; returns an ``(n, dim)`` float32 array of unit vectors."""
        runner = self._runner(start_export=len(texts) > 1) if texts else None
        if runner is not None:
            out: Vectors = runner(texts)
            self.calls += 1
            return out
        return super().__call__(texts)
