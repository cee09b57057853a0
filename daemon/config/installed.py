"""What a configuration needs installed on this machine, checked without loading it.

A real ``resync`` or ``run`` opens the vector store and, at its first embedding, the
model; a library or model missing here fails it there. ``resync --dry-run`` and
``status`` run :func:`install_problems` to say so first. Each check looks for files and
packages (``importlib.util.find_spec``); nothing is imported, opened or loaded. The
embedding backend's packages are already checked when the config is read
(:class:`~ingestd.daemon.config.embedding.EmbeddingConfig`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingestd.daemon.config.models import Config

__all__ = ["install_problems"]


def install_problems(cfg: Config, state_dir: Path) -> list[str]:
    """What this machine lacks to run ``cfg`` on ``state_dir``, one line each.

    Checks the vector store's library (a Qdrant server's or the embedded engine's:
    :func:`~ingestd.store.vectors.engines.missing_library`) and, for a backend that runs
    the model here, that the model's folder is found
    (:func:`~ingestd.store.embedding.folders.resolve_model_dir`).

    Returns:
        The problems (empty: nothing missing); each line says how to install what lacks.
    """
    from ingestd.daemon.config.embedding import REMOTE_BACKENDS
    from ingestd.store.embedding.folders import ModelNotFoundError, resolve_model_dir
    from ingestd.store.vectors.engines import missing_library

    problems = []
    store = missing_library(cfg.qdrant, cfg.paths(Path(state_dir)).engine_folders())
    if store is not None:
        problems.append(store)
    if cfg.embedding.backend not in REMOTE_BACKENDS:
        try:
            resolve_model_dir(cfg.embedding.model)
        except ModelNotFoundError as exc:
            problems.append(str(exc))
    return problems
