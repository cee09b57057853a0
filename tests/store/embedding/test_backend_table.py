"""The table of embedding backends: a new backend is one module plus one entry.

Before, the backend choice was a chain of ifs over ``torch``/``onnx``/``onnx-int8`` in
the config, the fingerprint, the model description and the loader. A test-only backend
(``hash``, ``tests/fake_backend.py``: hash vectors, a model that is no local folder,
like a remote embedding endpoint's) is added through the table alone, and an ingest runs
end to end with it. The fingerprints of the real backends are pinned in
``tests/store/embedding/test_backends.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ingestd.daemon.config import ConfigError, load_config
from ingestd.store.embedding.backends import (
    BACKENDS,
    backend_names,
    backend_spec,
    check_backend,
)
from ingestd.store.embedding.embedder import BUNDLED_MODEL, load_embedder, model_info
from ingestd.store.embedding.spec import BackendSpec
from tests.fake_backend import HASH, HashEmbedder
from tests.helpers import copy_tree, fake_vectors, make_engine, state_dense_vectors

pytestmark = pytest.mark.engine("edge")  # the table itself: once


@pytest.fixture
def hash_backend() -> Iterator[str]:
    """The test-only backend ``hash`` (``tests/fake_backend.py``), in the backends' table."""
    assert "hash" not in BACKENDS
    BACKENDS["hash"] = "tests.fake_backend:HASH"
    try:
        yield "hash"
    finally:
        del BACKENDS["hash"]


def test_each_entry_is_the_spec_of_its_name() -> None:
    assert backend_names() == ("torch", "onnx", "openvino", "onnx-int8", "openai")
    for name in backend_names():
        spec = backend_spec(name)
        assert isinstance(spec, BackendSpec) and spec.name == name
    assert [backend_spec(n).cpu_only for n in backend_names()] == [False, True, True, True, False]
    assert backend_spec("onnx").requires == ("onnxruntime", "onnx", "safetensors")
    assert backend_spec("openvino").requires == ("openvino", "onnxruntime", "onnx", "safetensors")
    assert backend_spec("torch").requires == ("torch", "transformers", "sentence_transformers")
    assert backend_spec("torch").install_hint == (  # both installs: the index's and a clone's
        "the torch extra: `pip install 'ingestd[torch]'` "
        "(in a clone of the repository: `pip install '.[torch]'`)"
    )
    with pytest.raises(ValueError, match=r"unknown embedding backend 'nope'; expected one of \("):
        backend_spec("nope")


def test_the_config_takes_the_table_names_and_the_spec_rules(
    hash_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_config(None, overrides={"embedding": {"backend": "hash", "model": "hash-64"}})
    assert cfg.embedding.backend == "hash"
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides={"embedding": {"backend": "nope"}})
    assert str(err.value) == (
        "embedding.backend: Input should be 'torch', 'onnx', 'openvino', 'onnx-int8', 'openai' or "
        "'hash' "
        "(got 'nope')"
    )
    with pytest.raises(ConfigError, match="backend 'hash' runs on the CPU; set device: cpu"):
        load_config(None, overrides={"embedding": {"backend": "hash", "device": "cuda"}})
    monkeypatch.setattr(type(HASH), "requires", ("no_such_package_here",))
    with pytest.raises(ValueError, match="needs no_such_package_here, .* nothing to install"):
        check_backend("hash")


def test_the_new_backend_has_its_own_fingerprint_rule(hash_backend: str) -> None:
    info = model_info("hash-64", "hash")
    assert (info.path, info.dim, info.backend, info.files_fingerprint) == (None, 64, "hash", "")
    assert info.fingerprint == HASH.fingerprint("hash-64") != HASH.fingerprint("hash-32")
    local = {model_info(BUNDLED_MODEL, b).fingerprint for b in ("torch", "onnx", "onnx-int8")}
    assert info.fingerprint not in local and len(local) == 2  # torch and onnx: one family
    assert info.label == "hash-64 (hash)"
    embed = load_embedder(info)
    assert isinstance(embed, HashEmbedder) and not embed.loaded


def test_an_ingest_runs_end_to_end_on_the_new_backend(tmp_path: Path, hash_backend: str) -> None:
    pages = ["docs/concepts/glossary.md", "docs/collector/quick-start.md"]
    tree = copy_tree(tmp_path / "docs", pages)
    state = tmp_path / "state"
    embedding = {"backend": "hash", "model": "hash-64"}
    eng = make_engine(tree, state, None, embedding=embedding)
    try:
        name = next(iter(eng.context.sources))
        assert eng.profiles.profile.model.fingerprint == HASH.fingerprint("hash-64")
        res = eng.sync(name)
        assert res.indexed == 2 and res.failed == 0
        model = eng.profiles.profile.embed_model()
        assert isinstance(model, HashEmbedder) and model.loaded
        embedded = list(model.texts)
        assert len(embedded) == res.chunks_written
        assert eng.verify(name).clean
        p = tree / "docs/concepts/glossary.md"
        p.write_text(p.read_text() + "\n\n## Appendix\n\nOne more paragraph.\n")
        assert eng.sync(name).indexed == 1
        assert len(model.texts) - len(embedded) <= 2  # only the edited chunks
        assert eng.verify(name).clean
    finally:
        eng.close()
    vectors = state_dense_vectors(state)
    assert vectors and {v.shape for v in vectors.values()} == {(64,)}
    want = fake_vectors(model.texts, 64)
    got = np.stack(list(vectors.values()))
    assert np.abs(got @ want.T).max(axis=1).min() >= 0.999  # every point is a hash vector
