"""Offline export of a sentence-transformers model to ONNX, cached and verified.

The graph is the model's own module chain (``modules.json``: the transformer, its
pooling as ``1_Pooling/config.json`` configures it, and its normalisation) traced by
``torch.onnx.export``; nothing is hard-coded and nothing is downloaded. Its output is
the sentence embedding. The float32 graph is then fused by onnxruntime's transformer
optimizer and, for ``onnx-int8``, quantised by ``onnxruntime.quantization``.

Each artifact lives in ``<cache dir>/onnx/`` under a name that carries its fingerprint,
beside a ``.json`` record (sha256 and size of the ``.onnx`` file, the recipe, the
library versions, the cosine to torch on a few probe texts). An artifact counts only
when its record matches its bytes: a partial or corrupt file is rebuilt. Builds write
to a temporary file and rename it into place under an exclusive ``flock``, so two
processes exporting at once neither corrupt the cache nor both do the work.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingestd.chunkers.errors import ModelError
from ingestd.store.embedding.recipes import RECIPES, OnnxRecipe, derived_fingerprint

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo

__all__ = [
    "PROBE_TEXTS",
    "export_record",
    "ExportError",
    "artifact_path",
    "cached_export",
    "ensure_artifact",
    "ensure_exported",
]

logger = logging.getLogger(__name__)

#: Texts the export embeds with torch and with the new graph to check the graph; the
#: last one is longer than max_seq_length, so truncation is compared too.
PROBE_TEXTS: tuple[str, ...] = (
    "The collector receives telemetry data and exports it to one or more backends.",
    "Zebra",
    "## Configuration\n\nSet `exporters.otlp.endpoint` to the address of the collector.",
    "Ownership rules: each value has an owner; there can only be one owner at a time.",
    "A confval's :default: option gives the value used when the config leaves it out.",
    " ".join(["Sphinx builds documentation from reStructuredText sources."] * 60),
)
#: The float32 graph must agree with torch at least this well on every probe text.
MIN_FLOAT32_COSINE = 0.999
_RECORD_FORMAT = 1


class ExportError(ModelError, RuntimeError):
    """The model could not be exported, or the exported graph disagrees with torch."""


def artifact_path(info: ModelInfo, cache_dir: Path, recipe: OnnxRecipe) -> Path:
    """Where the ONNX file of ``info`` made with ``recipe`` is kept.

    ``<cache_dir>/onnx/<model folder name>-<fp32|int8>-<fingerprint[:16]>.onnx``.
    """
    kind = "int8" if recipe.quant is not None else "fp32"
    # named by the recipe's own fingerprint (stable: a file made before keeps its name)
    fp = derived_fingerprint(
        info.files_fingerprint, "onnx-int8" if recipe.quant else "onnx", recipe
    )
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(info.name).name) or "model"
    return Path(cache_dir) / "onnx" / f"{stem}-{kind}-{fp[:16]}.onnx"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _record_path(path: Path) -> Path:
    return path.with_suffix(".json")


def _valid(path: Path) -> dict[str, Any] | None:
    """The record of ``path`` if it describes the file's current bytes, else ``None``."""
    try:
        record = json.loads(_record_path(path).read_text())
        size = path.stat().st_size
    except (OSError, ValueError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("format") != _RECORD_FORMAT
        or record.get("bytes") != size
        or record.get("sha256") != _sha256(path)
    ):
        return None
    return record


def export_record(path: Path) -> dict[str, Any] | None:
    """The JSON record beside the exported graph ``path`` (no checksum), or ``None``.

    Its ``probe_vectors`` are torch's vectors of :data:`PROBE_TEXTS` (an
    ``(len(PROBE_TEXTS), dim)`` list of lists), for a runtime that checks its own.
    """
    try:
        record = json.loads(_record_path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock; the lock file stays (no unlink race)


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def ensure_artifact(path: Path, build: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Return the record of the cached file ``path``, building it first if needed.

    Args:
        path: the artifact's final path; its folder is created.
        build: writes the artifact to the temporary path it is given and returns facts
            to record (JSON-ready). Called only when ``path`` is missing, partial or
            does not match its record; under an exclusive lock, so at most one process
            builds at a time and the others then reuse its result.

    Returns:
        The record: ``build``'s facts plus ``format``, ``bytes`` and ``sha256``.

    Raises:
        Exception: whatever ``build`` raises; the cache is left as it was.
    """
    record = _valid(path)
    if record is not None:
        return record
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        record = _valid(path)  # another process may have built it while we waited
        if record is not None:
            return record
        for stale in path.parent.glob(path.name + ".*.tmp"):  # left by a killed build
            stale.unlink(missing_ok=True)
        if path.exists():
            logger.warning("rebuilding %s: it does not match its record", path.name)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            facts = build(tmp)
            with tmp.open("rb+") as f:
                os.fsync(f.fileno())
            record = {
                **facts,
                "format": _RECORD_FORMAT,
                "bytes": tmp.stat().st_size,
                "sha256": _sha256(tmp),
            }
            _record_path(path).unlink(missing_ok=True)  # never a record over other bytes
            os.replace(tmp, path)
            _atomic_write_text(_record_path(path), json.dumps(record, indent=1, sort_keys=True))
        finally:
            tmp.unlink(missing_ok=True)
    return record


def cached_export(
    info: ModelInfo, cache_dir: Path, recipe: OnnxRecipe | None = None
) -> Path | None:
    """The ONNX file of ``info`` made with ``recipe`` if the cache holds it whole, else ``None``.

    Nothing is exported; the file is checked against its record (size and sha256).
    """
    recipe = recipe or info.recipe or RECIPES["onnx"]
    path = artifact_path(info, cache_dir, recipe)
    return path if _valid(path) is not None else None


def ensure_exported(
    info: ModelInfo, cache_dir: Path, recipe: OnnxRecipe | None = None
) -> tuple[Path, dict[str, Any]]:
    """The ONNX file of ``info`` made with ``recipe``, exported offline at first use.

    Args:
        info: the model (see :func:`ingestd.store.embedding.embedder.model_info`).
        cache_dir: the cache folder (``embedding.cache_dir`` or
            :func:`ingestd.store.embedding.backends.default_cache_dir`).
        recipe: how to make it (default: the recipe of ``info.backend``).

    Returns:
        The ``.onnx`` path and its record.

    Raises:
        ExportError: the export failed or its float32 graph disagrees with torch.
    """
    recipe = recipe or info.recipe or RECIPES["onnx"]
    fp32 = artifact_path(info, cache_dir, recipe.float32)
    fp32_record = ensure_artifact(fp32, lambda tmp: _export_float32(info, recipe.float32, tmp))
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


def _load_torch_model(info: ModelInfo, attention: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return SentenceTransformer(
        str(_folder(info)),
        device="cpu",
        local_files_only=True,
        model_kwargs={"attn_implementation": attention},
    ).eval()


def _export_float32(info: ModelInfo, recipe: OnnxRecipe, out: Path) -> dict[str, Any]:
    import torch

    t0 = time.monotonic()
    logger.info("exporting %s to ONNX (once; cached in %s)", info.name, out.parent)
    try:
        st = _load_torch_model(info, recipe.attention)
    except Exception as exc:
        raise ExportError(f"cannot load {info.name} for the ONNX export: {exc}") from exc
    names = _input_names(st)

    class SentenceEmbedding(torch.nn.Module):
        """The model's modules chained as sentence-transformers runs them."""

        def __init__(self) -> None:
            super().__init__()
            self.st = st

        def forward(self, *inputs: Any) -> Any:
            return self.st(dict(zip(names, inputs, strict=True)))["sentence_embedding"]

    # a padded batch, so that the traced graph keeps the attention mask
    feed = _tokenize(info, ["Zebra", PROBE_TEXTS[0]], names)
    args = tuple(torch.from_numpy(feed[n]) for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    raw = out.with_name(out.name + ".raw.tmp")
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation notes, not problems
            torch.onnx.export(
                SentenceEmbedding().eval(),
                args,
                str(raw),
                input_names=list(names),
                output_names=["sentence_embedding"],
                dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
                opset_version=recipe.opset,
                dynamo=recipe.exporter == "dynamo",
                do_constant_folding=True,
                external_data=False,  # one self-contained file (the model is < 2 GB)
            )
        if recipe.fusion:
            _fuse(info, recipe.fusion, raw, out)
        else:
            os.replace(raw, out)
    except ExportError:
        raise
    except Exception as exc:
        raise ExportError(f"exporting {info.name} to ONNX failed: {exc}") from exc
    finally:
        raw.unlink(missing_ok=True)
    with torch.inference_mode():
        want = st.encode(
            list(PROBE_TEXTS),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    cos = _probe(info, out, want)
    if cos.min() < MIN_FLOAT32_COSINE:
        raise ExportError(
            f"the ONNX graph of {info.name} disagrees with torch (cosine {cos.min():.4f} "
            f"< {MIN_FLOAT32_COSINE} on a probe text); use backend: torch for this model"
        )
    logger.info("exported %s in %.1f s", info.name, time.monotonic() - t0)
    return {
        "model": info.name,
        "files_fingerprint": info.files_fingerprint,
        "recipe": recipe.as_dict(),
        "inputs": list(names),
        "probe_cosine": {"mean": float(cos.mean()), "min": float(cos.min())},
        "probe_vectors": np.asarray(want, dtype=np.float32).tolist(),
        "versions": _versions("torch", "transformers", "sentence-transformers", "onnxruntime"),
    }


def _input_names(st: Any) -> tuple[str, ...]:
    """The tokenizer outputs the transformer reads, in a fixed order."""
    import inspect

    accepts = inspect.signature(st[0].auto_model.forward).parameters
    names = ("input_ids", "attention_mask")
    return names + ("token_type_ids",) if "token_type_ids" in accepts else names


def _fuse(info: ModelInfo, model_type: str, src: Path, out: Path) -> None:
    """Fuse the float32 graph with onnxruntime's transformer optimizer (offline)."""
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((_folder(info) / "config.json").read_text())
    heads = int(config.get("num_attention_heads") or 0)
    hidden = int(config.get("hidden_size") or 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimize_model(
            str(src), model_type=model_type, num_heads=heads, hidden_size=hidden, opt_level=0
        )
    fused = {k: v for k, v in opt.get_fused_operator_statistics().items() if v}
    logger.info("fused operators of %s: %s", info.name, fused)
    opt.save_model_to_file(str(out))


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
                # optimisation, so that every tensor quantised has a known type
                quant_pre_process(str(fp32), str(pre))
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
    cos = _probe(info, out, np.asarray(fp32_record["probe_vectors"], dtype=np.float32))
    probe = {"mean": float(cos.mean()), "min": float(cos.min())}
    logger.info(
        "quantised %s to int8 in %.1f s (cosine to torch on probe texts: mean %.4f, min %.4f)",
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


def _tokenize(info: ModelInfo, texts: list[str], names: tuple[str, ...]) -> dict[str, Any]:
    from ingestd.store.embedding.onnx_runtime import load_tokenizer, pad_batch

    tok = load_tokenizer(info)
    return pad_batch(tok.encode_batch(texts), names)


def _probe(info: ModelInfo, path: Path, want: Any) -> Any:
    """Cosine of the graph's vectors of :data:`PROBE_TEXTS` with ``want`` (torch's)."""
    from ingestd.store.embedding.onnx_runtime import OnnxRunner

    got = OnnxRunner(info, path, batch_size=4, quiet=True)(list(PROBE_TEXTS))
    return np.sum(got * want, axis=1)


def main(argv: list[str] | None = None) -> int:
    """Export one model into a cache folder: the background export's own process.

    ``python -m ingestd.store.embedding.onnx_export MODEL BACKEND CACHE_DIR`` exports
    the backend's own recipe of ``MODEL`` (a bundled name or a model folder). Run in a
    process of its own, the export's memory (about 1.3 GB at its peak) is returned to
    the system when it ends, and a daemon that stops meanwhile leaves no thread inside
    torch behind.

    Returns:
        0 when the file is in the cache, 1 (with the reason on stderr) when not.
    """
    import sys

    from ingestd.store.embedding.embedder import model_info

    model, backend, cache_dir = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        ensure_exported(model_info(model, backend), Path(cache_dir))
    except Exception as exc:  # the parent logs this line once and embeds with torch
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
