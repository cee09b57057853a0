"""An ONNX graph file run by onnxruntime, with the model's own ``tokenizers`` tokenizer.

Importing this module imports neither torch nor onnxruntime; the session is opened on
the first text that needs a vector. :class:`OnnxRunner` runs a graph file it is given
(the export checks a new graph with it, :mod:`ingestd.store.embedding.graphs.onnx_export`);
:class:`ingestd.store.embedding.runtimes.onnx.OnnxEmbedder` exports the graph first when the
cache lacks it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingestd.store.embedding.runtimes.cpu import usable_cores

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

    from ingestd.store.embedding.model import ModelInfo, Vectors

__all__ = ["OnnxRunner", "load_tokenizer", "longest_first", "pad_batch"]

logger = logging.getLogger(__name__)


def load_tokenizer(info: ModelInfo) -> Tokenizer:
    """The model's ``tokenizer.json``, truncating as sentence-transformers does.

    Truncation keeps the first ``info.max_seq_length`` word pieces, special tokens
    included (the file's own setting, 128 for all-MiniLM-L6-v2, is replaced); padding
    is off (:func:`pad_batch` pads each batch to its longest text).

    Raises:
        ValueError: the model folder has no ``tokenizer.json``.
    """
    from tokenizers import Tokenizer

    if info.tokenizer_json is None:
        raise ValueError(
            f"the ONNX backends need the model's tokenizer.json, which {info.path} lacks; "
            "use backend: torch for this model"
        )
    tok = Tokenizer.from_file(str(info.tokenizer_json))
    tok.enable_truncation(max_length=info.max_seq_length)
    tok.no_padding()
    return tok


def pad_batch(encodings: Sequence[Encoding], names: Sequence[str]) -> dict[str, Any]:
    """The model inputs ``names`` of ``encodings``, right-padded with zeros.

    Returns:
        ``name -> (len(encodings), longest) int64 array``; padded positions have
        attention mask 0 (and id 0, the pad id of BERT vocabularies: masked out anyway).
    """
    longest = max(len(e.ids) for e in encodings)
    out = {n: np.zeros((len(encodings), longest), dtype=np.int64) for n in names}
    fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    for row, enc in enumerate(encodings):
        for n in names:
            values = getattr(enc, fields[n])
            out[n][row, : len(values)] = values
    return out


class OnnxRunner:
    """A model's ONNX graph run by onnxruntime on the CPU, opened on first use.

    Args:
        info: the model (see :func:`ingestd.store.embedding.embedder.model_info`).
        path: the ``.onnx`` file, or ``None`` when ``locate`` gives it.
        locate: called once, on first use, when ``path`` is ``None``: returns the
            ``.onnx`` file (e.g. exporting it first).
        batch_size: accepted for the torch embedder's interface; each text runs
            alone (see :class:`ingestd.store.embedding.runtimes.onnx.OnnxEmbedder`).
        threads: how many texts run at once, one thread each (``None``: one per core
            this process may use).
        quiet: log the opening of the session at debug level, not info (a probe).

    Returns ``(n, dim)`` float32 L2-normalised vectors, like
    :class:`ingestd.store.embedding.embedder.SentenceTransformerEmbedder`.

    Each run has one thread (onnxruntime's ``intra_op_num_threads=1``), and ``threads``
    runs go at once on one session (its ``run`` is thread-safe and lets the GIL go), as
    OpenVINO's streams do (:mod:`ingestd.store.embedding.runtimes.openvino`): no thread waits for
    another inside a text, where threads that share one text meet at every operator.
    """

    def __init__(
        self,
        info: ModelInfo,
        path: Path | None = None,
        *,
        locate: Callable[[], Path] | None = None,
        batch_size: int = 16,
        threads: int | None = None,
        quiet: bool = False,
    ) -> None:
        self.info = info
        self.path = path
        self.locate = locate
        self.batch_size = batch_size
        self.threads = threads
        self.quiet = quiet
        self.calls = 0
        self._session: Any = None
        self._tokenizer: Any = None
        self._names: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def load(self) -> None:
        """Open the session now, locating the graph first if needed (thread-safe)."""
        self._load()

    def _load(self) -> tuple[Any, Any]:
        """The open session and its tokenizer, opened first when needed (thread-safe)."""
        with self._lock:
            if self._session is None:
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                t0 = time.monotonic()
                if self.path is None:
                    if self.locate is None:
                        raise ValueError(f"no ONNX file given for {self.info.name}")
                    self.path = self.locate()
                self._tokenizer = load_tokenizer(self.info)
                self._session = self.open_session(self.path, self._tokenizer)
                self._names = tuple(i.name for i in self._session.get_inputs())
                logger.log(
                    logging.DEBUG if self.quiet else logging.INFO,
                    "loaded embedding model %s (%s, %s) in %.1f s",
                    self.info.name,
                    self.info.backend,
                    self.path.name,
                    time.monotonic() - t0,
                )
            return self._session, self._tokenizer

    def open_session(self, path: Path, tokenizer: Tokenizer) -> Any:
        """An onnxruntime session of the graph ``path`` on the CPU.

        A subclass may run the graph with another runtime: it returns an object with
        onnxruntime's ``get_inputs()`` and ``run(None, feed) -> [(1, dim) array]``.
        ``tokenizer`` is the model's (for a subclass that checks its vectors).
        """
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = 1  # one thread per run: `streams` runs at once
        opts.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    @property
    def streams(self) -> int:
        """How many texts run at once: ``threads``, or one per core this process may use."""
        return self.threads or usable_cores()

    def unload(self) -> bool:
        """Close the session and let its weights go; the next text opens it again.

        A call running meanwhile finishes with the session it holds (thread-safe).

        Returns:
            Whether a session was open.
        """
        with self._lock:
            was = self._session is not None
            self._session = self._tokenizer = None
            return was

    @property
    def loaded(self) -> bool:
        """Whether the session has been opened."""
        return self._session is not None

    def __call__(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; returns an ``(n, dim)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        session, tokenizer = self._load()
        self.calls += 1
        feeds = [pad_batch([enc], self._names) for enc in tokenizer.encode_batch(list(texts))]
        out = self.run_feeds(session, feeds)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def run_feeds(self, session: Any, feeds: Sequence[dict[str, Any]]) -> Vectors:
        """The graph's output for each one-text feed, in order: ``(len(feeds), dim)`` float32.

        :attr:`streams` threads each run one text at a time, the next text going to
        the first thread free, the longest texts first: the texts last to start are
        the shortest, so no thread idles long at the end of a call (Graham's
        longest-processing-time rule; static round-robin over two streams measured
        11 % over the ideal on md-docs' chunk lengths, this order under 1 %). The
        order never changes a vector: each text runs alone.

        Raises:
            the runtime's error for the first text that failed.
        """
        out = np.empty((len(feeds), self.info.dim), dtype=np.float32)

        def run(row: int) -> None:
            out[row] = session.run(None, feeds[row])[0][0]

        order = longest_first(feeds)
        streams = min(self.streams, len(feeds))
        if streams <= 1:
            for row in order:
                run(row)
            return out
        with ThreadPoolExecutor(streams, thread_name_prefix="ingestd-embed") as pool:
            for _ in pool.map(run, order):  # raises the first run's error
                pass
        return out


def longest_first(feeds: Sequence[dict[str, Any]]) -> list[int]:
    """The indices of one-text ``feeds``, longest input first (ties in their order)."""
    return sorted(range(len(feeds)), key=lambda row: -next(iter(feeds[row].values())).shape[1])
