"""The ``openvino`` backend's embedder: the checked float32 ONNX graph compiled by OpenVINO.

:class:`OpenVinoEmbedder` is the ``onnx`` backend's embedder
(:class:`~ingestd.store.embedding.runtimes.onnx.OnnxEmbedder`: the same graph file, exported
once in the background, each text run alone and unpadded) with OpenVINO in place of
onnxruntime as the runtime. On a CPU that multiplies bfloat16 natively (AMX or
AVX512-BF16, :func:`~ingestd.store.embedding.runtimes.cpu.native_bf16`) OpenVINO runs
the matrix products in bfloat16 with float32 accumulation
(``INFERENCE_PRECISION_HINT=bf16``, OpenVINO's documented default on such CPUs);
elsewhere in float32.

Its vectors must still be torch's: when the session opens, the graph's vectors of the
export's probe texts are compared with torch's vectors of them, kept in the export's
record. Every cosine must reach
:data:`~ingestd.store.embedding.graphs.onnx_export.MIN_FLOAT32_COSINE` (0.999, the bound the
``onnx`` graph is held to; measured 0.99996 minimum in bfloat16 with the bundled model).
Where one does not, the log says so once and onnxruntime runs the graph instead (the
``onnx`` backend: the same fingerprint, nothing in the store changes).

Importing this module imports neither OpenVINO nor onnxruntime.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingestd.store.embedding.runtimes.cpu import native_bf16
from ingestd.store.embedding.runtimes.onnx import OnnxEmbedder
from ingestd.store.embedding.runtimes.onnx_runtime import pad_batch

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["BUCKET_TOKENS", "OpenVinoEmbedder", "OpenVinoSession", "bucketed"]

logger = logging.getLogger(__name__)


#: Each text's inputs are padded to a multiple of this many word pieces (attention mask
#: 0: its vector is the same text's, up to rounding). OpenVINO compiles and keeps kernels
#: per input shape: unpadded, 1,500 md-docs passages of every length grew a process by
#: 380 MB, of which 230 MB stayed after the model was let go; in 8 lengths (the bundled
#: model's 256 word pieces) it grew by 200 MB, 50 MB of it kept, and ran 11 % faster.
BUCKET_TOKENS = 32


def bucketed(feed: dict[str, Any]) -> dict[str, Any]:
    """``feed``'s ``(1, n)`` arrays right-padded with zeros to a multiple of BUCKET_TOKENS."""
    n = next(iter(feed.values())).shape[1]
    width = -(-n // BUCKET_TOKENS) * BUCKET_TOKENS
    if width == n:
        return feed
    return {k: np.pad(v, ((0, 0), (0, width - n))) for k, v in feed.items()}


class _Input:
    """One graph input, as onnxruntime's ``get_inputs()`` describes it (its ``name``)."""

    def __init__(self, name: str) -> None:
        self.name = name


class OpenVinoSession:
    """A model compiled by OpenVINO in streams, run as an onnxruntime session is (thread-safe).

    Args:
        compiled: an ``openvino.CompiledModel`` of the graph, compiled in streams of
            one thread each.

    Each :meth:`run` takes an idle infer request (made when none is idle) and runs it
    synchronously, the GIL let go meanwhile: threads that run at once each keep one
    stream busy (:meth:`~ingestd.store.embedding.runtimes.onnx_runtime.OnnxRunner.run_feeds`).
    No Python callback runs on OpenVINO's threads (``AsyncInferQueue``'s does): a
    stream thread that needs the GIL while another thread holding it lets the compiled
    model go deadlocks both.

    The first run goes alone, the others wait for it: OpenVINO's Python binding sets up
    its numpy bridge on first use, under a C++ static guard and then the GIL, and two
    threads making that first use at once deadlock each other (seen as a one-shot
    ``ingestd resync`` or ``search`` that never answered: about one process in six with
    eight streams, four processes side by side; ``test_openvino_first_run.py``).
    """

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._inputs = [_Input(port.get_any_name()) for port in compiled.inputs]
        self._first_run = threading.Lock()
        self._ran = False

    def get_inputs(self) -> list[_Input]:
        """The graph's inputs in order, each with its ``name``."""
        return list(self._inputs)

    def _take(self) -> Any:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._compiled.create_infer_request()

    def run(self, _outputs: None, feed: dict[str, Any]) -> list[Any]:
        """The graph's first output of ``feed``: ``[array of shape (batch, dim)]``.

        ``_outputs`` must be ``None`` (all outputs, as onnxruntime's ``run`` takes it);
        only the first, the sentence embedding, is returned.

        Raises:
            RuntimeError: OpenVINO failed to run the text.
        """
        if not self._ran:
            with self._first_run:
                if not self._ran:
                    out = self._run(feed)
                    self._ran = True
                    return out
        return self._run(feed)

    def _run(self, feed: dict[str, Any]) -> list[Any]:
        request = self._take()
        try:
            request.infer(bucketed(feed))
            return [np.array(request.get_output_tensor(0).data, dtype=np.float32)]
        finally:
            self._idle.put(request)


class OpenVinoEmbedder(OnnxEmbedder):
    """The ``onnx`` embedder with OpenVINO as the runtime (see the module docstring).

    Takes :class:`~ingestd.store.embedding.runtimes.onnx.OnnxEmbedder`'s arguments; ``threads`` is
    the number of OpenVINO streams of one thread each, texts embedded at once (``None``:
    one per core this process may use). Returns ``(n, dim)`` float32 unit vectors.

    Attributes:
        precision: what the session computes in once open (``"bf16"``, ``"f32"``), or
            ``"onnxruntime"`` when OpenVINO's vectors missed the bound.
        probe_cosine: the least cosine of OpenVINO's vectors of the probe texts to
            torch's, once open.
    """

    precision: str | None = None
    probe_cosine: float | None = None
    #: Compute in bfloat16 (``True``) or float32 (``False``); ``None``: in bfloat16 where
    #: the CPU multiplies it natively (:func:`~ingestd.store.embedding.runtimes.cpu.native_bf16`).
    #: Read when the session opens.
    bf16: bool | None = None

    def open_session(self, path: Path, tokenizer: Tokenizer) -> Any:
        """The graph compiled by OpenVINO and checked on the probe texts.

        Falls back to onnxruntime's session of the same graph, logged once, when
        OpenVINO cannot compile the graph, when a probe text's vector misses the bound,
        or when the export's record lacks torch's probe vectors; once fallen back, the
        embedder does not try OpenVINO again (a reload after ``keep_alive_s`` opens
        onnxruntime's session directly).

        Raises:
            onnxruntime's errors: neither runtime can open the graph.
        """
        if self.precision == "onnxruntime":
            return super().open_session(path, tokenizer)
        import openvino as ov

        from ingestd.store.embedding.graphs.onnx_export import (
            MIN_FLOAT32_COSINE,
            PROBE_TEXTS,
            export_record,
        )

        bf16 = native_bf16() if self.bf16 is None else self.bf16
        precision = "bf16" if bf16 else "f32"
        config: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": precision,
            "NUM_STREAMS": self.streams,  # one thread per stream: one text per thread
            "INFERENCE_NUM_THREADS": self.streams,
        }
        try:
            compiled = ov.Core().compile_model(str(path), "CPU", config)
        except Exception as exc:  # any OpenVINO failure: onnxruntime runs the graph
            return self._fall_back(path, tokenizer, f"it cannot compile the graph ({exc})")
        session = OpenVinoSession(compiled)
        record = export_record(path) or {}
        want = np.asarray(record.get("probe_vectors", []), dtype=np.float32)
        if want.shape != (len(PROBE_TEXTS), self.info.dim):
            return self._fall_back(path, tokenizer, "the export's record has no probe vectors")
        names = [i.name for i in session.get_inputs()]
        feeds = [pad_batch([enc], names) for enc in tokenizer.encode_batch(list(PROBE_TEXTS))]
        got = self.run_feeds(session, feeds)
        got /= np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
        worst = float(np.min(np.sum(got * want, axis=1)))
        if worst < MIN_FLOAT32_COSINE:
            return self._fall_back(
                path,
                tokenizer,
                f"its {precision} vectors reach cosine {worst:.4f} to torch's on a probe "
                f"text (< {MIN_FLOAT32_COSINE})",
            )
        self.precision, self.probe_cosine = precision, worst
        logger.log(
            logging.DEBUG if self.quiet else logging.INFO,
            "OpenVINO runs %s in %s, %d stream(s) (cosine to torch on probe texts >= %.5f)",
            self.info.name,
            precision,
            self.streams,
            worst,
        )
        return session

    def _fall_back(self, path: Path, tokenizer: Tokenizer, why: str) -> Any:
        logger.warning(
            "OpenVINO is not used for %s: %s; onnxruntime runs the same graph",
            self.info.name,
            why,
        )
        self.precision = "onnxruntime"
        return super().open_session(path, tokenizer)
