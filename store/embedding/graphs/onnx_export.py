"""The ONNX graph of a sentence-transformers model, made offline once, checked, cached.

A BERT model's graph is built by ingestd from the model's own files
(:mod:`~ingestd.store.embedding.graphs.bert`, :mod:`~ingestd.store.embedding.graphs.bert_graph`: the
``onnx`` package and numpy, no torch) and checked against an independent float64 numpy
forward pass of the same weights (:mod:`~ingestd.store.embedding.graphs.bert_reference`); the
graph of any other model is exported through torch
(:mod:`~ingestd.store.embedding.graphs.torch_export`, the ``torch`` extra) and checked against
sentence-transformers. Either graph is then fused by onnxruntime's transformer optimizer
(part of onnxruntime) and, for ``onnx-int8``, quantised by ``onnxruntime.quantization``.
Nothing is downloaded.

The reference's vectors of the probe texts are kept in the artifact's record
(:mod:`~ingestd.store.embedding.graphs.onnx_cache`), so that OpenVINO checks its own vectors of
the graph against them each time it opens it, torch or not.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingestd.store.embedding.graphs.onnx_cache import (
    MIN_FLOAT32_COSINE,
    PROBE_TEXTS,
    ExportError,
    artifact_path,
    cached_export,
    ensure_artifact,
    export_record,
)
from ingestd.store.embedding.graphs.recipes import RECIPES, OnnxRecipe

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.bert import BertArchitecture
    from ingestd.store.embedding.model import ModelInfo

__all__ = [
    "MIN_BUILT_COSINE",
    "MIN_FLOAT32_COSINE",
    "PROBE_TEXTS",
    "ExportError",
    "artifact_path",
    "cached_export",
    "ensure_artifact",
    "ensure_exported",
    "export_record",
]

logger = logging.getLogger(__name__)

#: A built graph must agree with the float64 reference at least this well on every probe
#: text, in a padded batch and one text at a time: the issue's bound for equal vectors
#: (measured 0.99999997 with the bundled model). A graph of the wrong activation or
#: pooling falls far below it (relu for GELU 0.47, CLS for mean 0.27), one of layer norm
#: epsilon 1e-3 for 1e-12 to 0.9989; GELU's tanh form for the exact one stays above it
#: (0.9999988): the two make equal vectors.
MIN_BUILT_COSINE = 0.9999


def ensure_exported(
    info: ModelInfo, cache_dir: Path, recipe: OnnxRecipe | None = None
) -> tuple[Path, dict[str, Any]]:
    """The ONNX file of ``info`` made with ``recipe``, made offline at first use.

    Args:
        info: the model (see :func:`ingestd.store.embedding.embedder.model_info`).
        cache_dir: the cache folder (``embedding.cache_dir`` or
            :func:`ingestd.store.embedding.backends.default_cache_dir`).
        recipe: how to make it (default: the recipe of ``info``).

    Returns:
        The ``.onnx`` path and its record.

    Raises:
        ExportError: the graph cannot be made (a model the builder does not know without
            the ``torch`` extra, a failed export), or its float32 graph disagrees with
            the reference.
    """
    recipe = recipe or info.recipe or RECIPES["onnx"]
    fp32 = artifact_path(info, cache_dir, recipe.float32)
    fp32_record = ensure_artifact(fp32, lambda tmp: _make_float32(info, recipe.float32, tmp))
    if recipe.quant is None:
        return fp32, fp32_record
    int8 = artifact_path(info, cache_dir, recipe)
    return int8, ensure_artifact(int8, lambda tmp: _quantise(info, fp32, fp32_record, recipe, tmp))


def _versions(*names: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for n in names:
        with contextlib.suppress(PackageNotFoundError):
            out[n] = version(n)
    return out


def _folder(info: ModelInfo) -> Path:
    """The model's folder.

    Raises:
        ExportError: the model is no local folder (only a folder can be exported).
    """
    if info.path is None:
        raise ExportError(f"{info.label} is not a local model folder; it cannot be exported")
    return info.path


def _build(info: ModelInfo, recipe: OnnxRecipe) -> tuple[Any, BertArchitecture, Any]:
    """The built graph (an ``onnx.ModelProto``), the architecture and the reference's probe vectors.

    Raises:
        ExportError: the builder does not know the model, or its weights do not fit.
    """
    from ingestd.store.embedding.graphs.bert import (
        UnsupportedModelError,
        load_weights,
        read_architecture,
    )
    from ingestd.store.embedding.graphs.bert_graph import OPSET, build_graph
    from ingestd.store.embedding.graphs.bert_reference import reference_vectors
    from ingestd.store.embedding.runtimes.onnx_runtime import load_tokenizer

    if recipe.opset != OPSET:
        raise ExportError(f"the graph builder writes opset {OPSET}, not {recipe.opset}")
    try:
        arch = read_architecture(_folder(info))
        weights = load_weights(arch)
    except UnsupportedModelError as exc:
        raise ExportError(str(exc)) from None
    # the reference first: its float64 copy of the weights is let go before the graph's
    encodings = load_tokenizer(info).encode_batch(list(PROBE_TEXTS))
    want = reference_vectors(arch, weights, [(e.ids, e.type_ids) for e in encodings])
    return build_graph(arch, weights), arch, want


def _make_float32(info: ModelInfo, recipe: OnnxRecipe, out: Path) -> dict[str, Any]:
    """Make the float32 graph of ``info`` into ``out``: built, or exported through torch."""
    t0 = time.monotonic()
    built = recipe.exporter == "builder"
    logger.info(
        "%s the ONNX graph of %s (once; cached in %s)",
        "building" if built else "exporting through torch",
        info.name,
        out.parent,
    )
    raw = out.with_name(out.name + ".raw.tmp")
    try:
        if built:
            graph, arch, want = _build(info, recipe)
            heads, hidden = arch.heads, arch.hidden
            names: tuple[str, ...] = tuple(i.name for i in graph.graph.input)
        else:
            from ingestd.store.embedding.graphs.torch_export import export_through_torch

            names, want = export_through_torch(info, recipe, raw)
            graph, (heads, hidden) = raw, _sizes(info)
        _fuse(info, recipe.fusion, graph, heads, hidden, out)
    except ExportError:
        raise
    except Exception as exc:
        raise ExportError(f"making the ONNX graph of {info.name} failed: {exc}") from exc
    finally:
        raw.unlink(missing_ok=True)
    cos = _probe(info, out, names, want)
    bound = MIN_BUILT_COSINE if built else MIN_FLOAT32_COSINE
    if cos.min() < bound:
        raise ExportError(
            f"the ONNX graph of {info.name} disagrees with "
            f"{'its float64 reference' if built else 'torch'} (cosine {cos.min():.6f} < "
            f"{bound} on a probe text); use backend: torch for this model"
        )
    seconds = time.monotonic() - t0
    logger.info("made the ONNX graph of %s in %.1f s", info.name, seconds)
    libraries = (
        ("onnx", "onnxruntime", "numpy", "safetensors")
        if built
        else ("torch", "transformers", "sentence-transformers", "onnxruntime")
    )
    return {
        "model": info.name,
        "files_fingerprint": info.files_fingerprint,
        "recipe": recipe.as_dict(),
        "inputs": list(names),
        "reference": "float64 forward pass" if built else "sentence-transformers",
        "probe_cosine": {"mean": float(cos.mean()), "min": float(cos.min())},
        "probe_vectors": np.asarray(want, dtype=np.float32).tolist(),
        "seconds": round(seconds, 2),
        "versions": _versions(*libraries),
    }


def _sizes(info: ModelInfo) -> tuple[int, int]:
    """``(num_attention_heads, hidden_size)`` of the model's config (0 when it lacks them)."""
    import json

    config = json.loads((_folder(info) / "config.json").read_text())
    return int(config.get("num_attention_heads") or 0), int(config.get("hidden_size") or 0)


def _fuse(
    info: ModelInfo, model_type: str | None, graph: Any, heads: int, hidden: int, out: Path
) -> None:
    """Fuse the float32 ``graph`` (a file or an ``onnx.ModelProto``) into ``out``.

    onnxruntime's transformer optimizer (``onnxruntime.transformers``, part of
    onnxruntime; no torch), offline; ``model_type`` ``None`` saves the graph as it is.
    """
    import onnx

    if model_type is None:
        onnx.save(graph if not isinstance(graph, Path) else onnx.load(str(graph)), str(out))
        return
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions(model_type)
    if not isinstance(graph, Path):
        # a built graph: its shapes are all known, and symbolic shape inference needs
        # sympy (no dependency of ingestd's); the fused graph is the same byte for byte,
        # and the fusion takes 130 MB less memory
        options.enable_shape_inference = False
    with warnings.catch_warnings(), _quiet("fusion_skiplayernorm"):
        warnings.simplefilter("ignore")
        source = str(graph) if isinstance(graph, Path) else graph
        opt = optimize_model(
            source,
            model_type=model_type,
            num_heads=heads,
            hidden_size=hidden,
            optimization_options=options,
            opt_level=0,
        )
    fused = {k: v for k, v in opt.get_fused_operator_statistics().items() if v}
    logger.info("fused operators of %s: %s", info.name, fused)
    opt.save_model_to_file(str(out))


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Logger ``name`` says only errors meanwhile.

    For the optimizer's note that symbolic shape inference is off, which is on purpose.
    """
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _quantise(
    info: ModelInfo, fp32: Path, fp32_record: dict[str, Any], recipe: OnnxRecipe, out: Path
) -> dict[str, Any]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    q = recipe.quant
    assert q is not None
    t0 = time.monotonic()
    graph = onnx.load(str(fp32), load_external_data=False)
    exclude = [n.name for n in graph.graph.node if any(re.search(p, n.name) for p in q.exclude)]
    del graph
    pre = out.with_name(out.name + ".pre.tmp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if q.pre_process:
                # onnxruntime's recommended first step: shape inference and basic graph
                # optimisation, so that every tensor quantised has a known type. A built
                # graph's shapes are known: symbolic shape inference (which needs sympy,
                # no dependency of ingestd's) is skipped; measured, the int8 vectors are
                # the same bit for bit
                skip = recipe.exporter == "builder"
                quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=skip)
            quantize_dynamic(
                str(pre if q.pre_process else fp32),
                str(out),
                op_types_to_quantize=list(q.op_types),
                per_channel=q.per_channel,
                reduce_range=q.reduce_range,
                weight_type=QuantType[q.weight_type],
                nodes_to_exclude=exclude,
                # the fused operators are com.microsoft ops shape inference cannot type
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    finally:
        pre.unlink(missing_ok=True)
    want = np.asarray(fp32_record["probe_vectors"], dtype=np.float32)
    cos = _probe(info, out, tuple(fp32_record.get("inputs", ())), want)
    probe = {"mean": float(cos.mean()), "min": float(cos.min())}
    logger.info(
        "quantised %s to int8 in %.1f s (cosine to the reference on probe texts: "
        "mean %.4f, min %.4f)",
        info.name,
        time.monotonic() - t0,
        probe["mean"],
        probe["min"],
    )
    return {
        "model": info.name,
        "files_fingerprint": info.files_fingerprint,
        "recipe": recipe.as_dict(),
        "excluded_nodes": exclude,
        "probe_cosine": probe,
        "versions": _versions("onnx", "onnxruntime"),
    }


def _probe(info: ModelInfo, path: Path, names: tuple[str, ...], want: Any) -> Any:
    """Cosine of the graph's vectors of :data:`PROBE_TEXTS` with ``want`` (the reference's).

    Each text is run alone, as the runtimes run it, and all of them once more as one
    batch padded on the right (the attention mask at work, as in OpenVINO's buckets);
    each text's lower cosine of the two counts.
    """
    import onnxruntime as ort

    from ingestd.store.embedding.runtimes.onnx_runtime import OnnxRunner, load_tokenizer, pad_batch

    want = np.asarray(want, dtype=np.float64)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    alone = OnnxRunner(info, path, batch_size=4, quiet=True)(list(PROBE_TEXTS))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = names or tuple(i.name for i in session.get_inputs())
    feed = pad_batch(load_tokenizer(info).encode_batch(list(PROBE_TEXTS)), names)
    batch = np.asarray(session.run(None, feed)[0], dtype=np.float64)
    batch /= np.maximum(np.linalg.norm(batch, axis=1, keepdims=True), 1e-12)
    return np.minimum(np.sum(alone * want, axis=1), np.sum(batch * want, axis=1))


def main(argv: list[str] | None = None) -> int:
    """Make one model's graph in a cache folder: the process the embedders start for it.

    ``python -m ingestd.store.embedding.graphs.onnx_export MODEL BACKEND CACHE_DIR [torch]``
    makes the backend's own recipe of ``MODEL`` (a bundled name or a model folder), with
    the graph exported through torch if ``torch`` is given or the builder does not know
    the model (:meth:`~ingestd.store.embedding.onnx_backend.OnnxBackend.model_info`). Run in a
    process of its own, the build's memory is returned to the system when it ends, and a
    daemon that stops meanwhile leaves no thread behind (inside torch, for an export
    through it). The last line logged gives the time and the process's peak memory.

    Returns:
        0 when the file is in the cache, 1 (with the reason on stderr) when not.
    """
    import resource
    import sys

    from ingestd.store.embedding.embedder import model_info

    model, backend, cache_dir, *how = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    for name in ("ingestd", __name__):  # __main__ under -m; the optimizer's notes stay out
        logging.getLogger(name).setLevel(logging.INFO)
    t0 = time.monotonic()
    try:
        info = model_info(model, backend)
        recipe = info.recipe.through_torch if how == ["torch"] and info.recipe else None
        path, _ = ensure_exported(info, Path(cache_dir), recipe)
    except ExportError as exc:  # the parent says this line
        print(exc, file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    logger.info(
        "%s ready in %.1f s, peak memory %.0f MB", path.name, time.monotonic() - t0, peak_mb
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
