"""The configuration's pydantic models: every key of the YAML file, with its default.

Every model is frozen and rejects unknown keys (``config.example.yaml`` explains each).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ingestd.chunkers.errors import InputError
from ingestd.daemon.statedir import StatePaths

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "Config",
    "ConfigError",
    "EmbeddingConfig",
    "FilesConfig",
    "GitCredentialsConfig",
    "ManifestConfig",
    "MassDeleteConfig",
    "MetricsConfig",
    "QdrantConfig",
    "RuleConfig",
    "SearchConfig",
    "SourceConfig",
    "WatchConfig",
    "default_rules",
]

#: Files a source indexes when its config says nothing (gitignore-style globs).
DEFAULT_INCLUDE: tuple[str, ...] = ("*.md", "*.markdown", "*.mdx", "*.rst", "*.txt")
#: Always excluded besides ``.git`` and the state dir (binary assets are never included).
DEFAULT_EXCLUDE: tuple[str, ...] = ()


class ConfigError(InputError, ValueError):
    """The configuration is invalid; ``str()`` is one ``key.path: problem`` line per error."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _spelled(names: Sequence[str], quote: bool = False) -> str:
    """``names`` as a sentence lists them: ``a``, ``a or b``, ``a, b or c`` (quoted)."""
    words = [f"'{n}'" if quote else n for n in names]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _not_one_of(names: Sequence[str]) -> PydanticCustomError:
    """The error of a value that is none of ``names`` (worded as pydantic's ``Literal``)."""
    return PydanticCustomError(
        "literal_error", "Input should be {expected}", {"expected": _spelled(names, True)}
    )


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GitCredentialsConfig(_Model):
    """Where a git source's credential is found: names of environment variables.

    The values are read when a fetch starts, sent as an HTTP ``Authorization`` header
    through git's environment, and never logged, shown or stored.

    Attributes:
        token_env: the variable holding the token (or the password).
        username_env: the variable holding the user name (HTTP Basic); ``None``: the
            token is sent as a bearer token.
    """

    token_env: str = Field(min_length=1)
    username_env: str | None = None


class SourceConfig(_Model):
    """One watched tree, or one git repository.

    Attributes:
        kind: what reads its documents: an entry of
            :data:`~ingestd.daemon.sources.kinds.SOURCE_KINDS` (``local``: a folder).
        name: identity of the source (payload ``source``); default: the canonical
            absolute root path.
        root: the folder; relative paths are relative to the config file.
        include: gitignore-style globs of files to index.
        exclude: gitignore-style globs of files to skip (after ``include``).
        gitignore: honour ``.gitignore`` files in the tree.
        git: the tree is a git checkout (HEAD's commit goes into ``git_commit``);
            ``None``: detect a ``.git`` folder at the root.
        collection: the Qdrant collection of its points.
        url: (``kind: git``) the repository: a local path, ``file://``, ``https://``,
            ``ssh://`` or ``git://`` URL.
        refs: (``kind: git``) the refs indexed, each a version: branch names, and tag
            names or globs (``v*``).
        max_tags: (``kind: git``) index only this many tags matched by globs, newest
            (by creation date) first; ``None``: all.
        poll_s: (``kind: git``) seconds between two fetches (``ingestd sync SOURCE``
            fetches at once).
        credentials: (``kind: git``) environment variables holding a credential.
        max_repo_bytes: (``kind: git``) a repository whose objects take more bytes is
            refused.
    """

    kind: str = "local"
    name: str = ""
    root: Path = Path()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    gitignore: bool = True
    git: bool | None = None
    collection: str = "ingestd"
    url: str | None = None
    refs: tuple[str, ...] = ()
    max_tags: int | None = Field(None, ge=1)
    poll_s: float = Field(300.0, gt=0)
    credentials: GitCredentialsConfig | None = None
    max_repo_bytes: int = Field(2 * 1024**3, ge=1)

    @model_validator(mode="after")
    def _by_kind(self) -> SourceConfig:
        if self.kind == "git":
            missing = [k for k in ("url", "name") if not getattr(self, k)]
            if missing:
                raise ValueError(f"a git source needs {' and '.join(missing)}")
            if not self.refs:
                raise ValueError("a git source needs refs (branch names, tag globs like 'v*')")
            bad = [r for r in self.refs if ":" in r or not r.strip()]
            if bad:
                raise ValueError(f"refs: not a ref name: {', '.join(map(repr, bad))}")
        elif "root" not in self.model_fields_set:
            raise ValueError("root: Field required")
        return self

    @field_validator("collection")
    @classmethod
    def _collection(cls, v: str) -> str:
        if not v or "/" in v:
            raise ValueError("must be a non-empty name without '/'")
        return v

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        from ingestd.daemon.sources.kinds import SOURCE_KINDS

        if v not in SOURCE_KINDS:
            raise ValueError(
                f"unknown source kind; expected one of: {', '.join(sorted(SOURCE_KINDS))}"
            )
        return v


class RuleConfig(_Model):
    """A per-path chunking rule: the first rule whose ``match`` globs match a path wins.

    Attributes:
        name: shown in payloads (``rule``) and ``status``; default: the chunker name
            (suffixed with the rule's index when several rules share a chunker).
        match: gitignore-style globs, relative to the source root.
        chunker: a registered strategy name (``token``, ``sentence``, ``markdown``, ...).
        params: the strategy's options; checked against its own fields.
    """

    name: str | None = None
    match: tuple[str, ...] = Field(min_length=1)
    chunker: str
    params: Mapping[str, Any] = Field(default_factory=dict)


def default_rules() -> tuple[RuleConfig, ...]:
    """The rules used when the config gives none: one strategy per file kind."""
    return (
        RuleConfig(name="markdown", match=("*.md", "*.markdown", "*.mdx"), chunker="markdown"),
        RuleConfig(name="rst", match=("*.rst",), chunker="rst"),
        RuleConfig(name="code", match=("*.py",), chunker="code"),
        RuleConfig(name="default", match=("*",), chunker="sentence"),
    )


class EmbeddingConfig(_Model):
    """The embedding model and the backend that runs it.

    Attributes:
        model: ``all-MiniLM-L6-v2`` (bundled, offline) or the path of a
            sentence-transformers model folder.
        backend: a name of the backends' table
            (:data:`ingestd.store.embedding.backends.BACKENDS`): ``torch``
            (sentence-transformers), ``onnx`` (the model exported to ONNX, float32, run
            by onnxruntime) or ``onnx-int8`` (int8 quantised, lossy: it misses the
            recall bound); see README "Choosing a backend". The ONNX backends need the
            ``onnx`` extra.
        cache_dir: where the ONNX backends keep the exported model (``None``:
            ``$CACHE_DIRECTORY``, else ``$XDG_CACHE_HOME/ingestd``, else
            ``~/.cache/ingestd``); relative paths are relative to the config file.
        device: torch device (the ONNX backends run on the CPU).
        batch_size: texts per forward pass (4-16 measured fastest on 2 cores).
        threads: torch or onnxruntime threads (``None``: one per core).
        fit_model: hold every chunk to the model's max_seq_length - 2 word pieces.
        cache_max_entries: most vectors kept in the embedding cache.
        preload: ``ingestd run`` loads the model in the background right after it is
            ready, so the first search or edit does not wait for it (CLI commands
            load it only when they embed something).
    """

    model: str = "all-MiniLM-L6-v2"
    backend: str = "torch"
    cache_dir: Path | None = None
    device: str = "cpu"
    batch_size: int = Field(16, ge=1, le=1024)
    threads: int | None = Field(None, ge=1)
    fit_model: bool = True
    cache_max_entries: int = Field(500_000, ge=0)
    preload: bool = True

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, v: Any) -> Any:
        from ingestd.store.embedding.backends import backend_names, check_backend

        names = backend_names()
        if v not in names:
            raise _not_one_of(names)
        check_backend(v)
        return v

    @model_validator(mode="after")
    def _cpu(self) -> EmbeddingConfig:
        from ingestd.store.embedding.backends import backend_spec

        if backend_spec(self.backend).cpu_only and self.device != "cpu":
            raise ValueError(f"backend {self.backend!r} runs on the CPU; set device: cpu")
        return self


def _engine_names() -> tuple[str, ...]:
    from ingestd.store.vectors.engines import engine_names

    return engine_names()


def _default_engine() -> str | None:
    """``qdrant.engine`` when the config file says nothing: ``$INGESTD_QDRANT_ENGINE``.

    Raises:
        ConfigError: the variable names no engine of the engines' table.
    """
    value = os.environ.get("INGESTD_QDRANT_ENGINE") or None
    names = _engine_names()
    if value is not None and value not in names:
        raise ConfigError([f"INGESTD_QDRANT_ENGINE: expected {_spelled(names)} (got {value!r})"])
    return value


class QdrantConfig(_Model):
    """Where vectors live: an embedded engine in the state dir, or a Qdrant server.

    Attributes:
        engine: the embedded engine, a name of the engines' table
            (:data:`ingestd.store.vectors.engines.ENGINES`): ``edge`` (Qdrant Edge,
            Qdrant's engine in-process) or ``local`` (qdrant-client's local mode);
            default ``$INGESTD_QDRANT_ENGINE``, else ``None``: ``edge`` for a new store,
            ``local`` for a store made with it. A store held by another engine moves
            to the configured one (README "Embedded engines").
        path: folder of the ``local`` store (default ``<state dir>/qdrant``).
        edge_path: folder of the ``edge`` store (default ``<state dir>/edge``).
        url: Qdrant server or cluster URL (the embedded engines are then unused).
        api_key_env: environment variable holding the API key for ``url``.
        retry_seconds: how long transient server errors are retried before a batch
            is put back on the queue.
    """

    engine: str | None = Field(default_factory=lambda: _default_engine(), validate_default=True)
    path: Path | None = None
    edge_path: Path | None = None
    url: str | None = None
    api_key_env: str = "QDRANT_API_KEY"
    retry_seconds: float = Field(60.0, gt=0)

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, v: Any) -> Any:
        names = _engine_names()
        if v is not None and v not in names:
            raise _not_one_of(names)
        return v

    def folders(self) -> dict[str, Path]:
        """The embedded engines' folders this section moves out of the state dir, by engine.

        Each engine's spec names its key here
        (:attr:`~ingestd.store.vectors.spec.EngineSpec.config_key`).
        """
        from ingestd.store.vectors.engines import engine_specs

        out = {}
        for spec in engine_specs():
            value = getattr(self, spec.config_key) if spec.config_key else None
            if value:
                out[spec.name] = Path(value)
        return out


class SearchConfig(_Model):
    """How ``ingestd search`` ranks (README "Hybrid search").

    Attributes:
        mode: ``hybrid`` (dense and BM25 rankings fused by reciprocal rank fusion in
            Qdrant), ``dense`` or ``sparse``; ``search --mode`` overrides it.
        rrf_k: the RRF constant: a hit scores ``1 / (rrf_k + rank - 1)`` per ranking
            (60: Cormack et al., SIGIR 2009).
        candidates: points each ranking gives the fusion (at least ``-k``).
    """

    mode: Literal["hybrid", "dense", "sparse"] = "hybrid"
    rrf_k: int = Field(60, ge=1)
    candidates: int = Field(50, ge=1, le=10_000)


class ManifestConfig(_Model):
    """The manifest database: any SQLAlchemy URL (default SQLite ``<state dir>/manifest.db``)."""

    url: str | None = None


class WatchConfig(_Model):
    """Watching and rescans.

    Attributes:
        debounce_ms: quiet period that closes a batch of events, in milliseconds.
        max_delay_ms: longest a change waits during continuous writes, in milliseconds.
        rescan_interval_s: periodic safety rescan (stat fast path), in seconds; 0 = off.
        unwatched_rescan_s: rescan period, in seconds, of a source with folders that
            cannot be watched (the inotify watch limit, a permission error) or whose
            root is missing; its watch is set up again at each of these rescans.
        hard_link_check_s: period, in seconds, of the stat check of the documents
            with more than one hard link (another name of such a file, outside the
            roots too, may change it without an event); 0 = off.
        max_lag_s: a change waiting longer than this, in seconds, makes the daemon
            unhealthy (``status`` exits 1, ``ingestd_up`` is 0) until it is written;
            0 = never.
    """

    debounce_ms: int = Field(300, ge=0)
    max_delay_ms: int = Field(5000, ge=1)
    rescan_interval_s: float = Field(3600.0, ge=0)
    unwatched_rescan_s: float = Field(60.0, gt=0)
    hard_link_check_s: float = Field(5.0, ge=0)
    max_lag_s: float = Field(180.0, ge=0)


class FilesConfig(_Model):
    """File policy: which files are not indexed (each one listed in ``status``).

    Attributes:
        max_bytes: files over this many bytes are skipped unread.
        max_chunks: files that would make more chunks than this are skipped (20,000
            chunks take about 10-15 minutes of embedding on two CPU cores).
        max_nonprose_chunks: files with more chunks that are not prose (base64,
            minified code: under 2.5 % whitespace) than this, and over a tenth of their
            chunks, are skipped (see :mod:`ingestd.daemon.sync.nonprose`).
        allow_secret_names: gitignore-style globs of paths exempt from the built-in
            deny-list of secret-bearing file names (``.env``, ``id_rsa``, ``.ssh/``,
            ``*.pem``, ``credentials.json``, ...: see
            :data:`ingestd.daemon.sync.secret_files.SECRET_NAMES`).
        allow_secret_content: gitignore-style globs of paths exempt from the check for
            private-key blocks and access tokens in file text.
        retry_initial_s: first delay, in seconds, before a file that could not be read
            (locked, permission denied, vanished mid-read) is tried again; each failure
            doubles it.
        retry_max_s: longest delay between two tries of such a file, in seconds.
    """

    max_bytes: int = Field(10 * 1024 * 1024, ge=1)
    max_chunks: int = Field(20_000, ge=1)
    max_nonprose_chunks: int = Field(32, ge=0)
    allow_secret_names: tuple[str, ...] = ()
    allow_secret_content: tuple[str, ...] = ()
    retry_initial_s: float = Field(1.0, gt=0)
    retry_max_s: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _retry_order(self) -> FilesConfig:
        if self.retry_max_s < self.retry_initial_s:
            raise ValueError("retry_max_s must be at least retry_initial_s")
        return self


class MassDeleteConfig(_Model):
    """Mass-deletion guard for scans: hold deletions over ``max_share`` and ``min_count``."""

    max_share: float = Field(0.2, ge=0, le=1)
    min_count: int = Field(10, ge=0)


class MetricsConfig(_Model):
    """Prometheus metrics endpoint (off unless ``port`` is set)."""

    port: int | None = Field(None, ge=1, le=65535)
    host: str = "127.0.0.1"


class Config(_Model):
    """The whole configuration (see ``config.example.yaml`` for every key)."""

    state_dir: Path | None = None
    sources: tuple[SourceConfig, ...] = ()
    rules: tuple[RuleConfig, ...] = Field(default_factory=default_rules)
    tokenizer: str = "cl100k_base"
    embedding: EmbeddingConfig = EmbeddingConfig()
    qdrant: QdrantConfig = Field(default_factory=QdrantConfig)
    search: SearchConfig = SearchConfig()
    manifest: ManifestConfig = ManifestConfig()
    watch: WatchConfig = WatchConfig()
    files: FilesConfig = FilesConfig()
    mass_delete: MassDeleteConfig = MassDeleteConfig()
    metrics: MetricsConfig = MetricsConfig()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @model_validator(mode="after")
    def _check(self) -> Config:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return self

    def paths(self, state_dir: Path) -> StatePaths:
        """The entries of ``state_dir`` under this config (``qdrant.path`` moves the store)."""
        return StatePaths(Path(state_dir), self.qdrant.folders())
