"""A model's ONNX graph exported through torch: for the models the graph builder does not know.

The graph is the model's own module chain as sentence-transformers loads it
(``modules.json``: the transformer, its pooling, its normalisation), traced by
``torch.onnx.export``; its output is the sentence embedding. It needs the ``torch``
extra (torch, transformers, sentence-transformers). BERT models are built without it
(:mod:`ingestd.store.embedding.graphs.bert_graph`); this export made the bundled model's graph
before (the recipe :data:`~ingestd.store.embedding.graphs.recipes.TORCH_EXPORT`, which the
benchmarks still compare with). Nothing is downloaded. Importing this module imports
neither torch nor sentence-transformers.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingestd.store.embedding.graphs.bert import TORCH_EXTRA, unsupported
from ingestd.store.embedding.graphs.onnx_cache import PROBE_TEXTS, ExportError

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.recipes import OnnxRecipe
    from ingestd.store.embedding.model import ModelInfo

__all__ = ["export_through_torch", "load_sentence_transformer", "torch_missing"]


def torch_missing(info: ModelInfo) -> str | None:
    """Why ``info``'s graph cannot be exported here (the torch extra is missing), or ``None``.

    The line names what the graph builder does not know of the model, and the extra.
    Nothing is imported.
    """
    if all(importlib.util.find_spec(m) for m in ("torch", "sentence_transformers")):
        return None
    return (unsupported(info.path) if info.path else None) or (
        f"{info.name}'s graph is exported through torch, which needs {TORCH_EXTRA}"
    )


def load_sentence_transformer(info: ModelInfo, attention: str = "eager") -> Any:
    """The model as sentence-transformers loads it, on the CPU, offline.

    Args:
        info: a local model folder (see :func:`ingestd.store.embedding.embedder.model_info`).
        attention: the transformers attention implementation (``eager``: plain matmuls).

    Raises:
        ExportError: the ``torch`` extra is not installed (the message says why the
            model needs it and how to install it), or the model cannot be loaded.
    """
    if info.path is None:
        raise ExportError(f"{info.label} is not a local model folder")
    why = torch_missing(info)
    if why is not None:
        raise ExportError(why)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        return SentenceTransformer(
            str(info.path),
            device="cpu",
            local_files_only=True,
            model_kwargs={"attn_implementation": attention},
        ).eval()
    except Exception as exc:
        raise ExportError(f"cannot load {info.name} for the ONNX export: {exc}") from exc


def _input_names(st: Any) -> tuple[str, ...]:
    """The tokenizer outputs the transformer reads, in a fixed order."""
    import inspect

    accepts = inspect.signature(st[0].auto_model.forward).parameters
    names = ("input_ids", "attention_mask")
    return names + ("token_type_ids",) if "token_type_ids" in accepts else names


def export_through_torch(
    info: ModelInfo, recipe: OnnxRecipe, out: Path
) -> tuple[tuple[str, ...], Any]:
    """Write the float32 graph of ``info`` traced by ``torch.onnx.export`` to ``out``.

    Args:
        info: the model.
        recipe: its ``opset``, ``exporter`` (``torchscript`` or ``dynamo``) and
            ``attention`` are used; fusion is the caller's.
        out: where the graph goes (one self-contained file).

    Returns:
        The graph's input names, and sentence-transformers' unit vectors of
        :data:`~ingestd.store.embedding.graphs.onnx_cache.PROBE_TEXTS` (float32, the reference
        the caller checks the graph against).

    Raises:
        ExportError: the torch extra is missing, or the model cannot be loaded or traced.
    """
    st = load_sentence_transformer(info, recipe.attention)
    import torch

    from ingestd.store.embedding.runtimes.onnx_runtime import load_tokenizer, pad_batch

    names = _input_names(st)

    class SentenceEmbedding(torch.nn.Module):
        """The model's modules chained as sentence-transformers runs them."""

        def __init__(self) -> None:
            super().__init__()
            self.st = st

        def forward(self, *inputs: Any) -> Any:
            return self.st(dict(zip(names, inputs, strict=True)))["sentence_embedding"]

    # a padded batch, so that the traced graph keeps the attention mask
    tok = load_tokenizer(info)
    feed = pad_batch(tok.encode_batch(["Zebra", PROBE_TEXTS[0]]), names)
    args = tuple(torch.from_numpy(feed[n]) for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation notes, not problems
            torch.onnx.export(
                SentenceEmbedding().eval(),
                args,
                str(out),
                input_names=list(names),
                output_names=["sentence_embedding"],
                dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
                opset_version=recipe.opset,
                dynamo=recipe.exporter == "dynamo",
                do_constant_folding=True,
                external_data=False,  # one self-contained file (the model is < 2 GB)
            )
        with torch.inference_mode():
            want = st.encode(
                list(PROBE_TEXTS),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
    except Exception as exc:
        raise ExportError(f"exporting {info.name} to ONNX failed: {exc}") from exc
    return names, np.asarray(want, dtype=np.float32)
