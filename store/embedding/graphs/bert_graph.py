"""The ONNX graph of a BERT sentence-transformers model, built from its weights with ``onnx``.

:func:`build_graph` writes, with the ``onnx`` package's helper API and numpy alone, the
computation transformers' ``BertModel`` and sentence-transformers' ``Pooling`` and
``Normalize`` modules run (the architecture read by :mod:`~ingestd.store.embedding.graphs.bert`):

* embeddings: word + position (``0 .. n-1``) + token type, then a layer norm;
* each encoder layer: multi-head self-attention (scaled dot product, the attention mask
  added as ``(1 - mask) * min(float32)`` before the softmax, as transformers' eager
  attention does), its output projection, residual and layer norm, the feed-forward
  with the config's activation, residual and layer norm;
* pooling over the attention mask (mean, CLS, max, or mean over ``sqrt(n)``) and, if the
  chain has it, L2 normalisation (``x / max(|x|, 1e-12)``, torch's ``F.normalize``).

Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, ``(batch,
sequence)``, padded on the right); output ``sentence_embedding`` (float32, ``(batch,
hidden)``): the names and shapes of the graph ``torch.onnx.export`` made, so the
runtimes run either. The operators are the ones torch's exporter writes for the same
modules, in the same patterns, so that onnxruntime's transformer optimizer fuses them
(attention, embedding + layer norm, skip + layer norm, GELU) as it fuses an exported
graph. Opset 17, the first with ``LayerNormalization``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.bert import BertArchitecture

__all__ = ["INPUTS", "OPSET", "OUTPUT", "build_graph"]

#: The graph's inputs, in order.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: The graph's output.
OUTPUT = "sentence_embedding"
#: The ONNX opset of the graph (17: ``LayerNormalization``).
OPSET = 17


class _Builder:
    """Nodes and initializers of one graph, each output named after the node that makes it."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._consts: dict[tuple[str, bytes, tuple[int, ...]], str] = {}

    def weight(self, name: str, array: Any) -> str:
        """An initializer ``name`` holding ``array`` (float32, as given)."""
        self.initializers.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        """A small constant (shared by every node that uses the same value)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.tobytes(), array.shape)
        if key not in self._consts:
            self._consts[key] = self.weight(f"const.{len(self._consts)}", array)
        return self._consts[key]

    def op(self, kind: str, inputs: list[str], name: str, **attrs: Any) -> str:
        """Add node ``name`` of operator ``kind``; returns the name of its one output."""
        self.nodes.append(self.helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name


def _linear(b: _Builder, x: str, w: dict[str, Any], prefix: str) -> str:
    """``x @ W.T + bias`` of torch's ``Linear`` ``prefix`` (the weight stored transposed)."""
    weight = b.weight(f"{prefix}.weight", w[f"{prefix}.weight"].T.copy())
    bias = b.weight(f"{prefix}.bias", w[f"{prefix}.bias"])
    return b.op("Add", [b.op("MatMul", [x, weight], f"{prefix}/MatMul"), bias], f"{prefix}/Add")


def _layer_norm(b: _Builder, x: str, w: dict[str, Any], prefix: str, eps: float) -> str:
    gamma = b.weight(f"{prefix}.weight", w[f"{prefix}.weight"])
    beta = b.weight(f"{prefix}.bias", w[f"{prefix}.bias"])
    return b.op("LayerNormalization", [x, gamma, beta], prefix, axis=-1, epsilon=eps)


def _activation(b: _Builder, x: str, kind: str, prefix: str) -> str:
    """The feed-forward's activation of ``x`` (see ``bert.ACTIVATIONS``)."""
    if kind == "gelu":  # x * 0.5 * (1 + erf(x / sqrt(2))), torch's exact GELU
        erf = b.op("Erf", [b.op("Div", [x, b.const(math.sqrt(2.0))], f"{prefix}/Div")], prefix)
        one = b.op("Add", [erf, b.const(1.0)], f"{prefix}/Add")
        return b.op("Mul", [b.op("Mul", [x, one], f"{prefix}/Mul"), b.const(0.5)], f"{prefix}/Out")
    if kind == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.op("Pow", [x, b.const(3.0)], f"{prefix}/Pow")
        inner = b.op(
            "Add", [x, b.op("Mul", [cube, b.const(0.044715)], f"{prefix}/Mul0")], f"{prefix}/Add0"
        )
        scaled = b.op("Mul", [inner, b.const(math.sqrt(2.0 / math.pi))], f"{prefix}/Mul1")
        one = b.op(
            "Add", [b.op("Tanh", [scaled], f"{prefix}/Tanh"), b.const(1.0)], f"{prefix}/Add1"
        )
        half = b.op("Mul", [x, b.const(0.5)], f"{prefix}/Mul2")
        return b.op("Mul", [half, one], f"{prefix}/Out")
    if kind == "relu":
        return b.op("Relu", [x], prefix)
    if kind in ("silu", "quick_gelu"):  # x * sigmoid(a x)
        scaled = x if kind == "silu" else b.op("Mul", [x, b.const(1.702)], f"{prefix}/Mul")
        return b.op("Mul", [x, b.op("Sigmoid", [scaled], f"{prefix}/Sigmoid")], f"{prefix}/Out")
    raise ValueError(f"no activation {kind!r}")


def _attention(
    b: _Builder, x: str, mask: str, w: dict[str, Any], arch: BertArchitecture, p: str
) -> str:
    """Multi-head self-attention of ``x`` ``(batch, n, hidden)``: the context, same shape."""
    heads = b.const([0, 0, arch.heads, arch.head_size], np.int64)
    proj = {}
    for name, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
        y = _linear(b, x, w, f"{p}.attention.self.{name}")
        y = b.op("Reshape", [y, heads], f"{p}.attention.self.{name}/Reshape")
        proj[name] = b.op("Transpose", [y], f"{p}.attention.self.{name}/Transpose", perm=perm)
    scores = b.op("MatMul", [proj["query"], proj["key"]], f"{p}.attention.self/MatMul")
    scores = b.op("Div", [scores, b.const(math.sqrt(arch.head_size))], f"{p}.attention.self/Div")
    scores = b.op("Add", [scores, mask], f"{p}.attention.self/Add")
    probs = b.op("Softmax", [scores], f"{p}.attention.self/Softmax", axis=-1)
    ctx = b.op("MatMul", [probs, proj["value"]], f"{p}.attention.self/MatMul_1")
    ctx = b.op("Transpose", [ctx], f"{p}.attention.self/Transpose", perm=[0, 2, 1, 3])
    ctx = b.op(
        "Reshape", [ctx, b.const([0, 0, arch.hidden], np.int64)], f"{p}.attention.self/Reshape"
    )
    return _linear(b, ctx, w, f"{p}.attention.output.dense")


def _layer(
    b: _Builder, x: str, mask: str, w: dict[str, Any], arch: BertArchitecture, n: int
) -> str:
    """Encoder layer ``n``: attention, residual + layer norm, feed-forward, residual + norm."""
    p = f"encoder.layer.{n}"
    attended = b.op("Add", [_attention(b, x, mask, w, arch, p), x], f"{p}.attention.output/Add")
    x = _layer_norm(b, attended, w, f"{p}.attention.output.LayerNorm", arch.eps)
    inner = _linear(b, x, w, f"{p}.intermediate.dense")
    inner = _activation(b, inner, arch.activation, f"{p}.intermediate.act")
    out = b.op("Add", [_linear(b, inner, w, f"{p}.output.dense"), x], f"{p}.output/Add")
    return _layer_norm(b, out, w, f"{p}.output.LayerNorm", arch.eps)


def _gather(b: _Builder, w: dict[str, Any], table: str, ids: str) -> str:
    """Rows ``ids`` of embedding table ``table`` (``embeddings.<table>.weight``)."""
    name = f"embeddings.{table}"
    return b.op("Gather", [b.weight(f"{name}.weight", w[f"{name}.weight"]), ids], name, axis=0)


def _embeddings(b: _Builder, w: dict[str, Any], arch: BertArchitecture) -> str:
    """Word + position + token type embeddings of the inputs, layer-normed."""
    # position ids 0 .. n-1: the first n columns of transformers' position_ids buffer,
    # the pattern onnxruntime's optimizer fuses with the embeddings
    buffer = np.arange(arch.positions, dtype=np.int64)[None, :]
    shape = b.op("Shape", ["input_ids"], "embeddings/Shape")
    n = b.op("Gather", [shape, b.const(1, np.int64)], "embeddings/Gather", axis=0)
    n = b.op("Unsqueeze", [n, b.const([0], np.int64)], "embeddings/Unsqueeze")
    zero, one = b.const([0], np.int64), b.const([1], np.int64)
    positions = b.weight("embeddings.position_ids", buffer)
    ids = b.op("Slice", [positions, zero, n, one, one], "embeddings/Slice")
    words = _gather(b, w, "word_embeddings", "input_ids")
    types = _gather(b, w, "token_type_embeddings", "token_type_ids")
    x = b.op("Add", [words, types], "embeddings/Add")
    x = b.op("Add", [x, _gather(b, w, "position_embeddings", ids)], "embeddings/Add_1")
    return _layer_norm(b, x, w, "embeddings.LayerNorm", arch.eps)


def _attention_bias(b: _Builder) -> str:
    """``(1 - mask) * min(float32)`` as ``(batch, 1, 1, n)``, added to the attention scores."""
    m = b.op("Unsqueeze", ["attention_mask", b.const([1], np.int64)], "mask/Unsqueeze")
    m = b.op("Unsqueeze", [m, b.const([2], np.int64)], "mask/Unsqueeze_1")
    m = b.op("Cast", [m], "mask/Cast", to=1)  # TensorProto.FLOAT
    m = b.op("Sub", [b.const(1.0), m], "mask/Sub")
    return b.op("Mul", [m, b.const(np.finfo(np.float32).min)], "mask/Mul")


def _pooling(b: _Builder, x: str, arch: BertArchitecture) -> str:
    """``x`` ``(batch, n, hidden)`` pooled over the attention mask: ``(batch, hidden)``."""
    if arch.pooling == "cls":  # the first token (inputs are padded on the right)
        return b.op("Gather", [x, b.const(0, np.int64)], "pooling/Gather", axis=1)
    mask = b.op("Cast", ["attention_mask"], "pooling/Cast", to=1)
    mask = b.op("Unsqueeze", [mask, b.const([-1], np.int64)], "pooling/Unsqueeze")
    if arch.pooling == "max":  # masked tokens count as -inf
        empty = b.op("Equal", [mask, b.const(0.0)], "pooling/Equal")
        x = b.op("Where", [empty, b.const(-np.inf), x], "pooling/Where")
        return b.op("ReduceMax", [x], "pooling/ReduceMax", axes=[1], keepdims=0)
    tokens = b.const([1], np.int64)  # the axis summed over
    masked = b.op("Mul", [x, mask], "pooling/Mul")
    total = b.op("ReduceSum", [masked, tokens], "pooling/ReduceSum", keepdims=0)
    count = b.op("ReduceSum", [mask, tokens], "pooling/ReduceSum_1", keepdims=0)
    count = b.op("Max", [count, b.const(1e-9)], "pooling/Clamp")
    if arch.pooling == "mean_sqrt_len_tokens":
        count = b.op("Sqrt", [count], "pooling/Sqrt")
    return b.op("Div", [total, count], "pooling/Div")


def build_graph(arch: BertArchitecture, weights: dict[str, Any]) -> Any:
    """The model's ONNX graph (see the module docstring).

    Args:
        arch: the model's architecture
            (:func:`ingestd.store.embedding.graphs.bert.read_architecture`).
        weights: its tensors (:func:`ingestd.store.embedding.graphs.bert.load_weights`).

    Returns:
        An ``onnx.ModelProto`` (opset :data:`OPSET`). It is not run through
        ``onnx.checker`` here (that copies the weights twice; the tests check it).
    """
    from onnx import TensorProto, helper

    b = _Builder()
    x = _embeddings(b, weights, arch)
    mask = _attention_bias(b)
    for n in range(arch.layers):
        x = _layer(b, x, mask, weights, arch, n)
    x = _pooling(b, x, arch)
    if arch.normalize:
        norm = b.op("ReduceL2", [x], "normalize/ReduceL2", axes=[1], keepdims=1)
        x = b.op(
            "Div", [x, b.op("Max", [norm, b.const(1e-12)], "normalize/Clamp")], "normalize/Div"
        )
    b.nodes.append(helper.make_node("Identity", [x], [OUTPUT], name="output"))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        b.nodes,
        "sentence_embedding",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", arch.hidden])],
        b.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=8,  # opset 17's: runtimes older than the onnx package still read it
        doc_string=f"{arch.layers}-layer BERT sentence encoder built by ingestd from its weights",
    )
    return model
