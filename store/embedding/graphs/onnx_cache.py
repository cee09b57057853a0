"""The cache of ONNX graphs: one file per model and recipe, checked against its record.

Each artifact lives in ``<cache dir>/onnx/`` under a name that carries its recipe's
fingerprint, beside a ``.json`` record (sha256 and size of the ``.onnx`` file, the
recipe, the library versions, the reference's vectors of :data:`PROBE_TEXTS` and the
graph's cosine to them). An artifact counts only when its record matches its bytes: a
partial or corrupt file is rebuilt. Builds write to a temporary file and rename it into
place under an exclusive ``flock``, so two processes building at once neither corrupt
the cache nor both do the work.

How a graph is made is :mod:`ingestd.store.embedding.graphs.onnx_export`'s part. This module
imports nothing heavy.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.chunkers.errors import ModelError
from ingestd.store.embedding.graphs.recipes import RECIPES, OnnxRecipe, derived_fingerprint

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo

__all__ = [
    "MIN_FLOAT32_COSINE",
    "PROBE_TEXTS",
    "ExportError",
    "artifact_path",
    "cached_export",
    "ensure_artifact",
    "export_record",
]

logger = logging.getLogger(__name__)

#: Texts a new graph embeds to be checked against the reference (the float64 forward pass
#: of :mod:`~ingestd.store.embedding.graphs.bert_reference`, or torch for a graph exported through
#: it), and OpenVINO each time it opens one; the last is longer than max_seq_length, so
#: truncation is compared too.
PROBE_TEXTS: tuple[str, ...] = (
    "The collector receives telemetry data and exports it to one or more backends.",
    "Zebra",
    "## Configuration\n\nSet `exporters.otlp.endpoint` to the address of the collector.",
    "Ownership rules: each value has an owner; there can only be one owner at a time.",
    "A confval's :default: option gives the value used when the config leaves it out.",
    " ".join(["Sphinx builds documentation from reStructuredText sources."] * 60),
)
#: Every float32 graph must agree with the reference at least this well on every probe
#: text (the invariant's bound); OpenVINO's vectors of the graph too, in either precision.
MIN_FLOAT32_COSINE = 0.999
_RECORD_FORMAT = 1


class ExportError(ModelError, RuntimeError):
    """The model's graph could not be made, or it disagrees with the reference."""


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

    Its ``probe_vectors`` are the reference's vectors of :data:`PROBE_TEXTS` (an
    ``(len(PROBE_TEXTS), dim)`` list of lists; its ``reference`` names which), for a
    runtime that checks its own.
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
