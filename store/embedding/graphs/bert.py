"""A BERT sentence-transformers model read from its own files: its architecture and weights.

What ingestd's graph builder (:mod:`~ingestd.store.embedding.graphs.bert_graph`) and its float64
reference (:mod:`~ingestd.store.embedding.graphs.bert_reference`) know of a model folder comes
from the files sentence-transformers itself reads, never from code of the model's:

* ``modules.json``: the module chain, a ``Transformer``, a ``Pooling`` and optionally a
  ``Normalize`` (a folder without it is run as sentence-transformers runs a plain
  transformers folder: mean pooling, no normalisation);
* the transformer's ``config.json``: ``model_type`` ``bert`` with absolute position
  embeddings, the sizes, ``layer_norm_eps`` and ``hidden_act``;
* the pooling module's ``config.json``: one of the modes ``cls``, ``max``, ``mean``,
  ``mean_sqrt_len_tokens`` (the ``pooling_mode`` key, or the older ``pooling_mode_*``
  booleans, read as sentence-transformers' ``Pooling.load_config`` reads them);
* ``model.safetensors``: the weights, read as numpy arrays by the ``safetensors`` package.

A model of any other shape raises :class:`UnsupportedModelError`, whose one line says
what the builder does not know and names the ``torch`` extra, whose export traces the
model's own code. This module imports nothing heavy (``safetensors`` when weights are read).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestd.chunkers.errors import ModelError
from ingestd.store.common.extras import extra_hint

__all__ = [
    "ACTIVATIONS",
    "POOLING_MODES",
    "TORCH_EXTRA",
    "BertArchitecture",
    "UnsupportedModelError",
    "load_weights",
    "read_architecture",
    "unsupported",
]

#: The command that installs the ``torch`` extra (the export through torch, the torch backend).
TORCH_EXTRA = extra_hint("torch")

#: ``hidden_act`` of a transformers config -> the function it names (transformers'
#: ``activations.ACT2FN``): ``gelu`` is the exact GELU, ``x * Phi(x)`` with the normal
#: CDF through erf; ``gelu_tanh`` its tanh approximation
#: ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``; ``quick_gelu`` ``x sigmoid(1.702 x)``.
ACTIVATIONS: dict[str, str] = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
    "quick_gelu": "quick_gelu",
}
#: The pooling modes the builder writes (sentence-transformers' names).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens")
# sentence-transformers' older boolean keys, in the order its Pooling concatenates them
_LEGACY_POOLING = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_DTYPES = ("float32", "float16")


class UnsupportedModelError(ModelError, ValueError):
    """The model is not a BERT sentence-transformers model the graph builder knows."""


@dataclass(frozen=True, slots=True)
class BertArchitecture:
    """What a BERT sentence-transformers model computes, read from its files.

    Attributes:
        layers: encoder layers (``num_hidden_layers``).
        hidden: hidden size, the width of every token's vector (``hidden_size``).
        heads: attention heads (``num_attention_heads``); ``hidden`` is a multiple.
        intermediate: width of each layer's feed-forward (``intermediate_size``).
        vocab: word pieces in the embedding table (``vocab_size``).
        positions: positions in the position table (``max_position_embeddings``).
        type_vocab: token types in the token type table (``type_vocab_size``).
        eps: the epsilon every layer norm adds to the variance (``layer_norm_eps``).
        activation: the feed-forward's function, a value of :data:`ACTIVATIONS`.
        pooling: how token vectors become one, a mode of :data:`POOLING_MODES`.
        normalize: whether the chain ends with L2 normalisation (``Normalize``).
        weights: the ``model.safetensors`` file.
    """

    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    positions: int
    type_vocab: int
    eps: float
    activation: str
    pooling: str
    normalize: bool
    weights: Path

    @property
    def head_size(self) -> int:
        """Width of one attention head: ``hidden // heads``."""
        return self.hidden // self.heads


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError:
        return None
    except ValueError as exc:
        raise UnsupportedModelError(f"{path} is not valid JSON ({exc})") from None


def _modules(folder: Path) -> list[tuple[str, Path | None]]:
    """``(kind, folder)`` of each module of the chain: kind is the class name's last part."""
    chain = _json(folder / "modules.json")
    if chain is None:  # a plain transformers folder: sentence-transformers adds mean pooling
        return [("Transformer", folder), ("Pooling", None)]
    if not isinstance(chain, list):
        raise UnsupportedModelError(f"{folder / 'modules.json'} is not a list of modules")
    out: list[tuple[str, Path | None]] = []
    for m in sorted(chain, key=lambda m: int(m.get("idx", 0))):
        kind = str(m.get("type", "")).rpartition(".")[2]
        out.append((kind, folder / str(m.get("path", ""))))
    return out


def _pooling(config: Any) -> str:
    """The one pooling mode of a Pooling module's config (``mean`` when it names none)."""
    config = config if isinstance(config, dict) else {}
    mode = config.get("pooling_mode")
    if mode is None:
        modes = [m for k, m in _LEGACY_POOLING.items() if config.get(k)] or ["mean"]
    else:
        modes = [mode] if isinstance(mode, str) else list(mode)
    if len(modes) != 1 or modes[0] not in POOLING_MODES:
        raise UnsupportedModelError(
            f"its pooling {'+'.join(map(str, modes))} is not one of {', '.join(POOLING_MODES)}"
        )
    return str(modes[0])


def _int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or value <= 0:
        raise UnsupportedModelError(f"its config.json has no positive {key}")
    return value


def _architecture(folder: Path) -> BertArchitecture:
    modules = _modules(folder)
    kinds = [k for k, _ in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedModelError(f"its module chain is {' -> '.join(kinds)}")
    transformer, pooling = modules[0][1] or folder, modules[1][1]
    config = _json(transformer / "config.json")
    if not isinstance(config, dict):
        raise UnsupportedModelError(f"it has no config.json in {transformer}")
    model_type = config.get("model_type")
    if model_type != "bert":
        raise UnsupportedModelError(f"it is a {model_type or 'model of unnamed type'}, not a bert")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise UnsupportedModelError(f"its position embeddings are {position}, not absolute")
    act = config.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise UnsupportedModelError(
            f"its activation {act!r} is not one of {', '.join(ACTIVATIONS)}"
        )
    weights = transformer / "model.safetensors"
    if not weights.is_file():
        found = sorted(p.name for p in transformer.glob("*.bin"))
        raise UnsupportedModelError(
            f"its weights are {'in ' + found[0] + ' (a torch pickle)' if found else 'missing'}, "
            "not in model.safetensors"
        )
    arch = BertArchitecture(
        layers=_int(config, "num_hidden_layers"),
        hidden=_int(config, "hidden_size"),
        heads=_int(config, "num_attention_heads"),
        intermediate=_int(config, "intermediate_size"),
        vocab=_int(config, "vocab_size"),
        positions=_int(config, "max_position_embeddings"),
        type_vocab=_int(config, "type_vocab_size"),
        eps=float(config.get("layer_norm_eps", 1e-12)),
        activation=ACTIVATIONS[act],
        pooling=_pooling(_json(pooling / "config.json") if pooling else None),
        normalize=kinds[-1] == "Normalize",
        weights=weights,
    )
    if arch.hidden % arch.heads:
        raise UnsupportedModelError(f"its hidden_size {arch.hidden} is no multiple of its heads")
    return arch


def read_architecture(folder: Path) -> BertArchitecture:
    """The architecture of the sentence-transformers model in ``folder`` (reads JSON only).

    Raises:
        UnsupportedModelError: the folder holds no BERT model of the shape the module
            docstring lists; the message names what differs and the ``torch`` extra.
    """
    try:
        return _architecture(Path(folder))
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(
            f"ingestd builds the ONNX graph of BERT sentence-transformers models only, and "
            f"{Path(folder).name}: {exc}; its graph is exported through torch, which needs "
            f"{TORCH_EXTRA}"
        ) from None


def unsupported(folder: Path) -> str | None:
    """Why the builder cannot build ``folder``'s model (the error's line), or ``None``."""
    try:
        read_architecture(folder)
    except UnsupportedModelError as exc:
        return str(exc)
    return None


def _canonical(name: str) -> str:
    """A tensor name without a head's prefix, with old layer norm names made current."""
    for prefix in ("bert.", "model."):
        name = name.removeprefix(prefix)
    return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )


def _expected(arch: BertArchitecture) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass reads, with its shape (transformers' ``BertModel`` names)."""
    h, i = arch.hidden, arch.intermediate
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (arch.vocab, h),
        "embeddings.position_embeddings.weight": (arch.positions, h),
        "embeddings.token_type_embeddings.weight": (arch.type_vocab, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for n in range(arch.layers):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"] = (h, h)
            shapes[f"{p}attention.self.{name}.bias"] = (h,)
        shapes |= {
            f"{p}attention.output.dense.weight": (h, h),
            f"{p}attention.output.dense.bias": (h,),
            f"{p}attention.output.LayerNorm.weight": (h,),
            f"{p}attention.output.LayerNorm.bias": (h,),
            f"{p}intermediate.dense.weight": (i, h),
            f"{p}intermediate.dense.bias": (i,),
            f"{p}output.dense.weight": (h, i),
            f"{p}output.dense.bias": (h,),
            f"{p}output.LayerNorm.weight": (h,),
            f"{p}output.LayerNorm.bias": (h,),
        }
    return shapes


def load_weights(arch: BertArchitecture) -> dict[str, Any]:
    """The tensors of ``arch.weights`` the forward pass reads, as float32 numpy arrays.

    Names are transformers' ``BertModel`` ones (a ``bert.`` prefix of a model with a
    head is dropped; ``LayerNorm.gamma``/``beta`` read as ``weight``/``bias``); linear
    layers keep torch's ``(out, in)`` layout. The pooler and any head are not read.

    Raises:
        UnsupportedModelError: a tensor is missing, of another shape, or not float32
            or float16.
    """
    import numpy as np
    from safetensors import safe_open

    want = _expected(arch)
    out: dict[str, Any] = {}
    with safe_open(str(arch.weights), framework="numpy") as f:
        for stored in f.keys():  # safe_open is no mapping
            name = _canonical(stored)
            if name not in want:
                continue
            tensor = f.get_tensor(stored)
            if tensor.dtype.name not in _DTYPES or tensor.shape != want[name]:
                raise UnsupportedModelError(
                    f"{arch.weights.name}: {stored} is {tensor.dtype.name} {tensor.shape}, "
                    f"expected float32 {want[name]}"
                )
            out[name] = np.ascontiguousarray(tensor, dtype=np.float32)
    missing = sorted(set(want) - set(out))
    if missing:
        raise UnsupportedModelError(
            f"{arch.weights.name} lacks {missing[0]}"
            + (f" and {len(missing) - 1} more tensors" if len(missing) > 1 else "")
        )
    return out
