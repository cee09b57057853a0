"""A store made with torch moves to the default backend (openvino, onnx): nothing embedded again.

The float32 ONNX graph makes torch's vectors (the export checks cosine >= 0.999 on every
probe text, measured 1.0000), so ``onnx`` has torch's fingerprint: a store made with
torch is the configured profile's, its cached vectors serve, and only new text is
embedded, by the faster backend. A store made with ``onnx`` by earlier versions,
recorded under the fingerprint ``onnx`` had then, is taken over the same way, and so
is an ``onnx-int8`` store made when its graph was exported through torch.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config.models import default_backend
from ingestd.store.embedding.backends import backend_spec
from ingestd.store.embedding.embedder import BUNDLED_MODEL, model_info
from tests.helpers import CountingEmbedder, copy_tree, fake_vectors, make_engine

TORCH = {"backend": "torch"}


def _sync(root: Path, state: Path, embed: Any, **embedding: Any) -> Any:
    eng = make_engine(root, state, embed, **({"embedding": embedding} if embedding else {}))
    try:
        name = next(iter(eng.context.sources))
        res = eng.sync(name)
        assert eng.verify(name).clean
        return res, eng.profiles.profile.model
    finally:
        eng.close()


def test_a_torch_store_moves_to_the_default_backend_without_embedding_again(
    tmp_path: Path,
) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    first = CountingEmbedder(fake_vectors)
    res, torch_model = _sync(root, state, first, **TORCH)
    assert res.embedded and torch_model.backend == "torch"
    again = CountingEmbedder(fake_vectors)
    res, model = _sync(root, state, again)  # the default config: openvino or onnx
    assert model.backend == default_backend() != "torch"
    assert model.fingerprint == torch_model.fingerprint
    assert again.texts == [] and res.indexed == 0  # nothing re-chunked, nothing embedded
    page = root / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\nA paragraph the new backend embeds.\n")
    res, _ = _sync(root, state, again)
    assert 0 < len(again.texts) == res.embedded <= 3  # the edited text only


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_an_onnx_store_of_an_earlier_version_is_taken_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, backend: str
) -> None:
    """Recorded under the backend's former fingerprint (``onnx``'s own before it took
    torch's; ``onnx-int8``'s before its graph was built rather than exported through
    torch): taken over, the cache re-keyed."""
    caplog.set_level(logging.INFO, logger="ingestd")
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    _sync(root, state, CountingEmbedder(fake_vectors), backend=backend)
    info = model_info(BUNDLED_MODEL, backend)
    new = info.fingerprint
    (old,) = backend_spec(backend).aliases(info.files_fingerprint, info.recipe)
    assert old != new
    # what an earlier version left: the collection and the cache under the old fingerprint
    db = sqlite3.connect(state / "manifest.db")
    (raw,) = db.execute("SELECT settings FROM collections WHERE name = 'ingestd'").fetchone()
    settings = json.loads(raw)
    settings["model_fingerprint"] = old
    db.execute(
        "UPDATE collections SET settings = ?, model_fingerprint = ? WHERE name = 'ingestd'",
        (json.dumps(settings, sort_keys=True), old),
    )
    db.commit()
    db.close()
    cache = sqlite3.connect(state / "embeddings.db")
    n = cache.execute("UPDATE vectors SET model = ? WHERE model = ?", (old, new)).rowcount
    cache.commit()
    cache.close()
    assert n > 0
    again = CountingEmbedder(fake_vectors)
    res, model = _sync(root, state, again, backend=backend)
    assert again.texts == [], "taken over: every vector came from the cache"
    assert "taken over without embedding anything again" in caplog.text
    db = sqlite3.connect(state / "manifest.db")
    (fp,) = db.execute(
        "SELECT model_fingerprint FROM collections WHERE name = 'ingestd'"
    ).fetchone()
    db.close()
    assert fp == model.fingerprint == new
