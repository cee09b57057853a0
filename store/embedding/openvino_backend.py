"""The ``openvino`` backend: the ``onnx`` graph run by OpenVINO, bfloat16 where the CPU has it.

The same float32 graph as ``onnx`` (exported once, offline, fused by onnxruntime's
optimizer: :mod:`ingestd.store.embedding.graphs.onnx_export`), compiled by OpenVINO. On a CPU
with native bfloat16 (AMX or AVX512-BF16: :func:`~ingestd.store.embedding.runtimes.cpu.native_bf16`)
its matrix products run in bfloat16 with float32 accumulation: about three times
onnxruntime's float32 speed on such a CPU (``bench/ingest.py``), with vectors within
the invariant's bound of torch's (cosine >= 0.999 on every probe text, checked each
time the session opens: see :mod:`ingestd.store.embedding.runtimes.openvino`). So ``openvino``
has torch's fingerprint, as ``onnx`` has: a store moves between the three without a
vector embedded again. Elsewhere it computes in float32, 1.1 to 1.6 times
onnxruntime's speed. OpenVINO is the ``openvino`` extra (185 MB installed), and the
default backend wherever it is installed.

Its embedder, :class:`~ingestd.store.embedding.runtimes.openvino.OpenVinoEmbedder`, is imported
when loaded; this module imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingestd.store.common.extras import extra_hint
from ingestd.store.embedding.graphs.recipes import RECIPES
from ingestd.store.embedding.onnx_backend import OnnxBackend

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.recipes import OnnxRecipe

__all__ = ["OPENVINO", "OpenVinoBackend"]


class OpenVinoBackend(OnnxBackend):
    """The spec of the ``openvino`` backend (see the module docstring).

    It needs onnxruntime and onnx as well: they make and fuse the graph it runs.
    """

    name = "openvino"
    requires = ("openvino", "onnxruntime", "onnx", "safetensors")
    install_hint = extra_hint("openvino")
    recipe = RECIPES["openvino"]
    embedder = "ingestd.store.embedding.runtimes.openvino:OpenVinoEmbedder"

    def aliases(self, source: str, recipe: OnnxRecipe | None = None) -> tuple[str, ...]:
        """None: ``openvino`` never had a fingerprint of its own."""
        return ()


#: The ``openvino`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
OPENVINO = OpenVinoBackend()
