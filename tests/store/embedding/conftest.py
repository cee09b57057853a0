"""Fixtures of the embedding tests: the ONNX graphs (made once), real chunks, torch's vectors."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config import load_config
from ingestd.store.embedding.embedder import BUNDLED_MODEL, model_info
from ingestd.store.embedding.graphs.onnx_export import ensure_exported
from tests.helpers import CORPORA, MD_DOCS


@pytest.fixture(scope="session")
def onnx_export_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bundled model's float32 and int8 graphs, built with every connection refused."""
    cache = tmp_path_factory.mktemp("onnx-cache")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the export must not reach the network")

    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket, "create_connection", refuse)
    try:
        for backend in ("onnx", "onnx-int8"):
            ensure_exported(model_info(BUNDLED_MODEL, backend), cache)
    finally:
        mp.undo()
    yield cache


def _real_chunks(tmp: Path) -> list[str]:
    """Embedded texts of real chunks from the four corpora, and two over-long texts."""
    from ingestd.daemon.engine import Engine

    texts: list[str] = []
    picks = [
        (MD_DOCS, ["docs/concepts/glossary.md"]),
        (CORPORA / "rst-docs", ["usage/extensions/todo.rst"]),
        (CORPORA / "history" / "base", ["src/ch04-01-what-is-ownership.md"]),
        (CORPORA / "mkdocs-docs", ["guide/queries.md"]),
    ]
    for root, rels in picks:
        eng = Engine(load_config(None, roots=[root]), tmp / root.name, embed_model=_no)
        try:
            for rel in rels:
                chunks = [
                    c.embed_text
                    for c in eng.preparer.prepare(next(iter(eng.context.sources)), rel).chunks
                ]
                texts.extend(chunks[:12])
        finally:
            eng.close()
    # truncation at max_seq_length must match: whole pages, far over 256 word pieces
    texts.append((MD_DOCS / "docs/collector/architecture.md").read_text())
    texts.append((CORPORA / "rst-docs" / "usage/extensions/todo.rst").read_text())
    return texts


def _no(texts: Any) -> Any:
    raise AssertionError("must not embed")


@pytest.fixture(scope="module")
def chunks_and_torch(
    real_model: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[str], Any]:
    texts = _real_chunks(tmp_path_factory.mktemp("chunk-state"))
    return texts, real_model(texts)
