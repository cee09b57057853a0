"""Query and document prompts: read from the model, in the fingerprint, sent to the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.daemon.client.query import QueryBuilder
from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.sync.profiles.profile import Profile
from ingestd.store.embedding.backends import backend_spec
from ingestd.store.embedding.cache import EmbedStats
from ingestd.store.embedding.embedder import BUNDLED_MODEL, load_embedder, model_info
from ingestd.store.embedding.folders import read_model_folder
from ingestd.store.embedding.prompts import Prompts, model_prompts
from tests.remote_server import SECRET, SERVER_DIM, SERVER_MODEL, Gateway

pytestmark = pytest.mark.engine("edge")  # no store here: one engine is enough

E5_PROMPTS = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None}


def model_copy(tmp_path: Path, st_config: dict[str, Any] | None) -> Path:
    """The bundled model's folder copied, with ``config_sentence_transformers.json``."""
    dest = tmp_path / "model"
    shutil.copytree(read_model_folder(BUNDLED_MODEL).path, dest)
    (dest / "config_sentence_transformers.json").unlink(missing_ok=True)
    if st_config is not None:
        (dest / "config_sentence_transformers.json").write_text(json.dumps(st_config))
    return dest


def config(**embedding: Any) -> Any:
    return load_config(None, overrides={"embedding": {"backend": "onnx", **embedding}})


def test_the_prompts_default_to_the_models_sentence_transformers_config(tmp_path: Path) -> None:
    folder = model_copy(tmp_path, E5_PROMPTS)
    info = model_info(str(folder), "onnx")
    assert (info.query_prompt, info.document_prompt) == ("query: ", "passage: ")
    off = model_info(str(folder), "onnx", prompts=Prompts("", ""))
    assert (off.query_prompt, off.document_prompt) == ("", "")
    assert off.fingerprint == backend_spec("onnx").model_info(str(folder)).fingerprint
    assert info.fingerprint != off.fingerprint
    own_query = model_info(str(folder), "onnx", prompts=Prompts(document="doc: "))
    assert (own_query.query_prompt, own_query.document_prompt) == ("query: ", "doc: ")
    assert len({info.fingerprint, own_query.fingerprint}) == 2


def test_default_prompt_name_picks_the_document_prompt(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    named = {"prompts": {"query": "q: ", "document": "d: ", "web": "w: "}}
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({**named, "default_prompt_name": "web"})
    )
    assert model_prompts(folder) == Prompts("q: ", "w: ")
    (folder / "config_sentence_transformers.json").write_text(json.dumps(named))
    assert model_prompts(folder) == Prompts("q: ", "d: ")
    (folder / "config_sentence_transformers.json").write_text('{"prompts": {"query": 3}}')
    with pytest.raises(ValueError, match="must map names to strings"):
        model_prompts(folder)
    assert model_prompts(None) == Prompts("", "")


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_the_bundled_models_fingerprint_is_unchanged_without_prompts(backend: str) -> None:
    if backend_spec(backend).missing():
        pytest.skip(f"{backend} is not installed")
    raw = backend_spec(backend).model_info(BUNDLED_MODEL)
    info = model_info(BUNDLED_MODEL, backend, prompts=config().embedding.prompts)
    assert (info.query_prompt, info.document_prompt) == ("", "")
    assert info.fingerprint == raw.fingerprint  # a store made before embeds nothing again
    empty = model_info(BUNDLED_MODEL, backend, prompts=Prompts("", ""))
    assert empty.fingerprint == raw.fingerprint


def test_the_config_validates_the_prompts() -> None:
    assert config(query_prompt="query: ").embedding.prompts == Prompts("query: ", None)
    with pytest.raises(ConfigError, match="query_prompt"):
        config(query_prompt=["query: "])
    with pytest.raises(ConfigError, match="document_prompt"):
        config(document_prompt="x" * 1001)


def test_a_configured_prompt_reaches_the_model_for_queries_and_documents() -> None:
    plain = load_embedder(model_info(BUNDLED_MODEL, "onnx"))
    cfg = config(query_prompt="query: ", document_prompt="passage: ")
    q = QueryBuilder.from_config(cfg)
    assert q.model.fingerprint != model_info(BUNDLED_MODEL, "onnx").fingerprint
    got = np.array(q.dense("how do I install the collector"))
    want = plain(["query: how do I install the collector"])[0]
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert not np.allclose(got, plain(["how do I install the collector"])[0], atol=1e-3)

    profile = Profile(
        cfg, lambda p: load_embedder(p.model), lambda p, texts: p.embed_model()(texts), EmbedStats()
    )
    doc = profile.embedder.embed_texts(["The collector receives traces over OTLP."])[0]
    want_doc = plain(["passage: The collector receives traces over OTLP."])[0]
    np.testing.assert_allclose(doc, want_doc, atol=1e-6)


def test_the_openai_backend_sends_the_prompts_in_the_text(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INGESTD_TEST_KEY", SECRET)
    embedding = {
        "backend": "openai",
        "url": gateway.url,
        "model": SERVER_MODEL,
        "dimensions": SERVER_DIM,
        "api_key_env": "INGESTD_TEST_KEY",
        "query_prompt": "query: ",
        "document_prompt": "passage: ",
    }
    cfg = load_config(None, overrides={"embedding": embedding})
    assert len(QueryBuilder.from_config(cfg).dense("what is a span")) == SERVER_DIM

    profile = Profile(
        cfg, lambda p: load_embedder(p.model), lambda p, texts: p.embed_model()(texts), EmbedStats()
    )
    profile.embedder.embed_texts(["A span is one operation within a trace."])
    assert gateway.inputs == [
        ["query: what is a span"],
        ["passage: A span is one operation within a trace."],
    ]
